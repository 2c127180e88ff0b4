package web

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestControlsReadOnlySmallURLEncodedForms sends an operator's controls
// forms of other kinds and sizes: each is refused with its own status and
// one line, changes nothing, and leaves no temporary file behind (a
// multipart form left one the size of its file in the temp directory).
func TestControlsReadOnlySmallURLEncodedForms(t *testing.T) {
	multi := func() (string, []byte) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		mw.WriteField("concurrency", "100")
		f, _ := mw.CreateFormFile("file", "big.bin")
		f.Write(bytes.Repeat([]byte{'x'}, 12<<20)) // over net/http's 10 MiB in memory
		mw.Close()
		return mw.FormDataContentType(), b.Bytes()
	}
	mtype, mbody := multi()
	tests := []struct {
		name, ctype string
		body        []byte
		want        int
		says        string
	}{
		{"a multipart form is refused unread", mtype, mbody, http.StatusUnsupportedMediaType, "x-www-form-urlencoded"},
		{"a JSON body is refused", "application/json", []byte(`{"concurrency":100}`), http.StatusUnsupportedMediaType, "x-www-form-urlencoded"},
		{"a form over 4 KiB is refused", "application/x-www-form-urlencoded", []byte("concurrency=100&pad=" + strings.Repeat("x", 5000)), http.StatusRequestEntityTooLarge, "4 KiB"},
		{"a broken escape says so, not that the value is missing", "application/x-www-form-urlencoded", []byte("concurrency=%zz"), http.StatusBadRequest, "not url-encoded"},
		{"a good form is taken", "application/x-www-form-urlencoded", []byte("concurrency=100"), http.StatusOK, ""},
	}
	temps := func() int {
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), "multipart-*"))
		return len(m)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load := &fakeLoad{target: 60}
			s := New(load, newFakeRouter("kv"), testOptions())
			before := temps()
			r := httptest.NewRequest("POST", "/api/concurrency", bytes.NewReader(tt.body))
			r.Header.Set("Content-Type", tt.ctype)
			r.RemoteAddr = "127.0.0.1:40000" // the operator, on the booth machine
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			body := strings.TrimSpace(w.Body.String())
			if w.Code != tt.want || (tt.says != "" && (!strings.Contains(body, tt.says) || strings.Contains(body, "\n"))) {
				t.Fatalf("%d %q; want %d and one line saying %q", w.Code, body, tt.want, tt.says)
			}
			if want := map[bool]int{true: 100, false: 60}[tt.want == http.StatusOK]; load.Snapshot().Target != want {
				t.Errorf("target %d, want %d", load.Snapshot().Target, want)
			}
			if after := temps(); after > before {
				t.Errorf("%d temporary multipart files left behind", after-before)
			}
		})
	}
}

package web

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
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

// FuzzReadForm sends readForm any body under any Content-Type: it takes a
// small url-encoded form as url.ParseQuery reads it, refuses everything
// else with 400, 413 or 415 and a one-line reason, and leaves the request's
// form unset when it refuses.
func FuzzReadForm(f *testing.F) {
	f.Add("application/x-www-form-urlencoded", []byte("concurrency=100"))
	f.Add("application/x-www-form-urlencoded; charset=utf-8", []byte("a=%zz"))
	f.Add("multipart/form-data; boundary=x", []byte("--x\r\n"))
	f.Add("", []byte(strings.Repeat("a=b&", 1200)))
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/api/concurrency", bytes.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		form, status, err := readForm(httptest.NewRecorder(), r)
		if err != nil {
			if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge && status != http.StatusUnsupportedMediaType {
				t.Fatalf("refused with status %d: %v", status, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line reason: %q", err)
			}
			if r.Form != nil || r.PostForm != nil {
				t.Fatal("a refused form was set on the request")
			}
			return
		}
		if status != 0 {
			t.Fatalf("taken with status %d", status)
		}
		if len(body) > maxFormBody {
			t.Fatalf("took a form of %d bytes, over %d", len(body), maxFormBody)
		}
		want, perr := url.ParseQuery(string(body))
		if perr != nil || !reflect.DeepEqual(form, want) || !reflect.DeepEqual(r.PostForm, want) {
			t.Fatalf("took %v, want %v (%v)", form, want, perr)
		}
	})
}

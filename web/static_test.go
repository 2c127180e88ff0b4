package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorilla/websocket"
)

// TestStaticFilesAreCompressedAndRevalidated asks for the page's files as a
// browser does: gzipped when it accepts gzip, the same bytes once
// decompressed, and a 304 without a body when its copy is current, under
// either encoding.
func TestStaticFilesAreCompressedAndRevalidated(t *testing.T) {
	s := New(&fakeLoad{target: 60}, newFakeRouter("kv"), testOptions())
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	want, err := fs.ReadFile(staticFS, "charts.js")
	if err != nil {
		t.Fatal(err)
	}
	tag := staticTags["charts.js"]
	if tag == "" {
		t.Fatal("charts.js has no validator")
	}
	for _, tc := range []struct {
		name           string
		acceptEncoding string
		ifNoneMatch    string
		status         int
		encoding       string
	}{
		{"a browser that accepts gzip gets it gzipped", "gzip, deflate, br, zstd", "", http.StatusOK, "gzip"},
		{"a client that accepts nothing gets it plain", "identity", "", http.StatusOK, ""},
		{"a current gzipped copy is revalidated without a body", "gzip", tag, http.StatusNotModified, ""},
		{"a current plain copy is revalidated without a body", "identity", tag, http.StatusNotModified, ""},
		{"an old copy gets the file again", "gzip", `W/"0000000000000000"`, http.StatusOK, "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", ts.URL+"/static/charts.js", nil)
			req.Header.Set("Accept-Encoding", tc.acceptEncoding)
			if tc.ifNoneMatch != "" {
				req.Header.Set("If-None-Match", tc.ifNoneMatch)
			}
			// A transport of its own, so that Go's client neither asks for
			// gzip nor decompresses behind the test's back.
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("Content-Encoding"); got != tc.encoding {
				t.Errorf("Content-Encoding %q, want %q", got, tc.encoding)
			}
			if got := resp.Header.Get("ETag"); got != tag {
				t.Errorf("ETag %q, want %q", got, tag)
			}
			if got := resp.Header.Get("Cache-Control"); got != "no-cache" {
				t.Errorf("Cache-Control %q, want no-cache", got)
			}
			if tc.status == http.StatusNotModified {
				if len(body) != 0 {
					t.Errorf("a 304 with %d bytes of body", len(body))
				}
				return
			}
			if tc.encoding == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(body, want) {
				t.Errorf("got %d bytes, want charts.js's %d", len(body), len(want))
			}
		})
	}
}

// TestThePageIsGzippedAndItsWebsocketStillUpgrades loads the dashboard as
// a browser does, which sends Accept-Encoding with the websocket's upgrade
// too: the page comes gzipped, and the upgrade still succeeds.
func TestThePageIsGzippedAndItsWebsocketStillUpgrades(t *testing.T) {
	s := New(&fakeLoad{target: 60}, newFakeRouter("kv"), testOptions())
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	req, _ := http.NewRequest("GET", ts.URL+"/", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("the page: %d, Content-Encoding %q; want 200 gzipped", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	h := http.Header{"Accept-Encoding": {"gzip, deflate, br, zstd"}}
	c, resp, err := (&websocket.Dialer{EnableCompression: true}).Dial(wsURL(ts), h)
	if err != nil {
		t.Fatalf("the websocket with Accept-Encoding: %v (%v)", err, resp)
	}
	c.Close()
}

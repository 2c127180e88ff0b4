package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBlindnessShowsInReadyzAndHeader(t *testing.T) {
	tests := []struct {
		name       string
		blind      string
		wantReady  string
		wantBanner bool
	}{
		{"a router that sees the caches is plainly ready and shows no banner", "", "ready\n", false},
		{"a blind router stays ready, names the cause and shows the red banner", "tokenizer mismatch: sim-0", "ready, but KV routing is blind: tokenizer mismatch: sim-0\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions()
			opts.Blind = func() string { return tt.blind }
			ts := httptest.NewServer(New(&fakeLoad{target: 60}, newFakeRouter("round_robin"), opts).Handler())
			defer ts.Close()
			get := func(path string) (int, string) {
				resp, err := http.Get(ts.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if code, body := get("/readyz"); code != 200 || body != tt.wantReady {
				t.Errorf("/readyz = %d %q, want 200 %q", code, body, tt.wantReady)
			}
			_, page := get("/")
			if got := strings.Contains(page, "KV routing is blind: "+tt.blind); got != tt.wantBanner {
				t.Errorf("banner shown %v, want %v", got, tt.wantBanner)
			}
			if !strings.Contains(page, `id="blind-banner"`) {
				t.Error("the header has no blind-banner element to swap")
			}
		})
	}
}

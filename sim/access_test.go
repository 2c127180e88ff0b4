package sim

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/access"
)

// TestFaultAPIIsOperatorOnly drives PUT /admin/faults over real HTTP, from
// this machine and, through a front that rewrites the peer address as a
// proxy would, from another.
func TestFaultAPIIsOperatorOnly(t *testing.T) {
	start := func(t *testing.T, rule access.Rule) (*Server, *httptest.Server, *httptest.Server) {
		w, err := NewServer(ServerOptions{Name: "w0", Profile: fast(), Seed: 1, Access: rule})
		if err != nil {
			t.Fatal(err)
		}
		local := httptest.NewServer(w)
		remote := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			r.RemoteAddr = "192.0.2.7:50000"
			w.ServeHTTP(rw, r)
		}))
		t.Cleanup(func() { local.Close(); remote.Close(); w.Close() })
		return w, local, remote
	}
	withToken := access.Rule{Token: "s3cret"}
	tests := []struct {
		name    string
		rule    access.Rule
		remote  bool
		method  string
		headers map[string]string
		want    int
		wantMsg string
	}{
		{"a script elsewhere with the bearer token changes faults", withToken, true, "PUT", map[string]string{"Authorization": "Bearer s3cret"}, 200, "error_503"},
		{"this machine changes faults without the token", withToken, false, "PUT", nil, 200, "error_503"},
		{"a sim with no token takes changes from this machine", access.Rule{}, false, "PUT", nil, 200, "error_503"},
		{"anyone may read the faults", withToken, true, "GET", nil, 200, "error_503"},

		// Sad path.
		{"a remote change without the token is refused", withToken, true, "PUT", nil, 403, "read-only view"},
		{"a remote change with a wrong token is refused", withToken, true, "PUT", map[string]string{"Authorization": "Bearer guess"}, 403, "wrong operator token"},
		{"a sim with no token refuses remote changes", access.Rule{}, true, "PUT", map[string]string{"Authorization": "Bearer anything"}, 403, "only from this machine"},
		{"a sim with no token refuses remote changes without a header", access.Rule{}, true, "PUT", nil, 403, "only from this machine"},
		{"a cross-site page cannot change faults from this machine", withToken, false, "PUT", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross-origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, local, remote := start(t, tt.rule)
			base := local.URL
			if tt.remote {
				base = remote.URL
			}
			req, _ := http.NewRequest(tt.method, base+"/admin/faults", strings.NewReader(`{"error_503":0.5}`))
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !strings.Contains(string(body), tt.wantMsg) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, tt.want, tt.wantMsg)
			}
			changed := w.Faults().Error503 == 0.5
			if changed != (tt.method == "PUT" && tt.want == 200) {
				t.Fatalf("faults changed = %v after a %d", changed, resp.StatusCode)
			}
			// The worker keeps serving whatever it refused.
			if h, err := http.Get(base + "/health"); err != nil || h.StatusCode != 200 {
				t.Fatalf("health after: %v %v", h, err)
			} else {
				h.Body.Close()
			}
		})
	}
}

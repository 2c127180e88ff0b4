package demo

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/web"
)

// TestAdminAPIIsOperatorOnly drives the router's admin API over real HTTP,
// from this machine and, through a front that rewrites the peer address as
// a proxy would, from another.
func TestAdminAPIIsOperatorOnly(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NoStart = true
	cfg.DB, cfg.Record = "", false
	cfg.Dashboard.Access = web.Access{Token: "s3cret"}
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = "192.0.2.7:50000"
		d.srv.Handler.ServeHTTP(w, r)
	}))
	defer remote.Close()
	shed := `{"admission":"shed","busy_threshold":0.01}`
	tests := []struct {
		name    string
		remote  bool
		method  string
		path    string
		host    string
		headers map[string]string
		body    string
		want    int
		wantMsg string
	}{
		{"a script elsewhere with the bearer token switches the policy", true, "PUT", "/policy", "", map[string]string{"Authorization": "Bearer s3cret"}, `{"policy":"kv"}`, 200, `"policy": "kv"`},
		{"anyone may read the policy", true, "GET", "/policy", "", nil, "", 200, "available"},
		{"anyone may read the workers", true, "GET", "/workers", "", nil, "", 200, "counts"},
		{"this machine switches the policy without the token", false, "PUT", "/policy", "", nil, `{"policy":"round_robin"}`, 200, `"policy": "round_robin"`},

		// Sad path.
		{"a remote policy change without the token is refused", true, "PUT", "/policy", "", nil, shed, 403, "read-only view"},
		{"a remote reset without the token is refused", true, "POST", "/reset", "", nil, "", 403, "read-only view"},
		{"a remote change with a wrong token is refused", true, "PUT", "/policy", "", map[string]string{"Authorization": "Bearer guess"}, shed, 403, "wrong operator token"},
		{"a cross-site page cannot change the policy from this machine", false, "PUT", "/policy", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, shed, 403, "cross-origin"},
		{"a rebound domain cannot change the policy from this machine", false, "POST", "/reset", "evil.example:8080", map[string]string{"Sec-Fetch-Site": "same-origin"}, "", 403, "--allow-host"},
	}
	base := map[bool]string{false: d.URL, true: remote.URL}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base[tt.remote]+"/admin/router"+tt.path, strings.NewReader(tt.body))
			if tt.host != "" {
				req.Host = tt.host
			}
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
		})
	}
	if s := d.Proxy.Router().Settings(); s.Admission != "queue" || s.Policy != "round_robin" {
		t.Fatalf("settings %+v: a refused request changed the router", s)
	}

	// The embedded workers take the same token over HTTP.
	req, _ := http.NewRequest("PUT", d.fleet.URLs[0]+"/admin/faults", strings.NewReader(`{"error_503":1}`))
	req.Header.Set("Authorization", "Bearer guess")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a worker's fault API took a wrong token: %d", resp.StatusCode)
	}
}

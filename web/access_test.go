package web

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// frontDoorServer is a dashboard with an operator token, answering to the
// loopback names only, over real HTTP on this machine.
func frontDoorServer(t *testing.T) (*fakeLoad, *httptest.Server) {
	t.Helper()
	load := &fakeLoad{target: 60, stopped: true}
	opts := testOptions()
	opts.Access = Access{Token: "s3cret"}
	opts.Hosts = mustHosts()
	opts.API = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api") })
	ts := httptest.NewServer(New(load, newFakeRouter("round_robin"), opts).Handler())
	t.Cleanup(ts.Close)
	return load, ts
}

func TestFrontDoor(t *testing.T) {
	load, ts := frontDoorServer(t)
	port := ts.Listener.Addr().String()[strings.LastIndex(ts.Listener.Addr().String(), ":"):]
	evil := "evil.example" + port // a rebound domain: this server's address under an attacker's name
	form := "application/x-www-form-urlencoded"
	tests := []struct {
		name        string
		method      string
		path        string
		host        string            // Host header; "" is the server's address
		headers     map[string]string // browser headers
		contentType string
		body        string
		want        int
		wantMsg     string
	}{
		{"a same-origin POST from this machine changes the demo", "POST", "/api/concurrency", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": ts.URL}, form, "concurrency=80", 200, ""},
		{"the page answers under localhost", "GET", "/", "localhost" + port, nil, "", "", 200, "<html"},
		{"the health check answers under any name", "GET", "/healthz", evil, nil, "", "", 200, "ok"},
		{"the readiness probe answers under any name", "GET", "/readyz", evil, nil, "", "", 200, "ready"},
		{"/metrics answers under any name", "GET", "/metrics", evil, nil, "", "", 200, ""},
		{"the OpenAI API answers under any name and origin", "POST", "/v1/chat/completions", evil, map[string]string{"Sec-Fetch-Site": "cross-site"}, "application/json", "{}", 200, "api"},
		{"a script's login with the right token gets the cookie", "POST", "/api/login", "", nil, form, "token=s3cret", 204, ""},

		// Sad path: cross-site requests.
		{"a cross-site form POST is refused even from this machine", "POST", "/api/stop", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, form, "", 403, "cross-origin request refused"},
		{"an older browser's cross-site POST is refused by its Origin", "POST", "/api/start", "", map[string]string{"Origin": "http://evil.example"}, form, "", 403, "cross-origin"},
		{"a cross-site recording delete is refused", "POST", "/recordings/1/delete", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, form, "", 403, "cross-origin"},
		{"a cross-site login is refused", "POST", "/api/login", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, form, "token=s3cret", 403, "cross-origin"},

		// Sad path: DNS rebinding.
		{"the page under a rebound domain is refused, naming the flag", "GET", "/", evil, nil, "", "", 421, "--allow-host=evil.example"},
		{"a same-origin POST under a rebound domain is refused", "POST", "/api/stop", evil, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + evil}, form, "", 421, "does not answer to host"},
		{"the state under a rebound domain is refused", "GET", "/api/state", evil, nil, "", "", 421, "--allow-host"},
		{"static files under a rebound domain are refused", "GET", "/static/app.js", evil, nil, "", "", 421, "--allow-host"},

		// Sad path: login keeps nothing it is sent.
		{"a JSON login is refused", "POST", "/api/login", "", nil, "application/json", `{"token":"s3cret"}`, 415, "x-www-form-urlencoded"},
		{"a login without a content type is refused", "POST", "/api/login", "", nil, "", "token=s3cret", 415, "x-www-form-urlencoded"},
		{"a 1 MB url-encoded login is refused", "POST", "/api/login", "", nil, form, "token=" + strings.Repeat("x", 1<<20), 413, "over 4 KiB"},
		{"a wrong token is refused", "POST", "/api/login", "", nil, form, "token=guess", 403, "wrong operator token"},
		{"a malformed form is refused", "POST", "/api/login", "", nil, form, "token=%zz", 400, "not url-encoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
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
			if resp.StatusCode >= 400 && strings.Count(strings.TrimSpace(string(body)), "\n") > 0 {
				t.Fatalf("refusal %q is not one line", body)
			}
		})
	}
	if s := load.Snapshot(); s.Running || s.Target != 80 {
		t.Fatalf("load %+v: only the same-origin change (to 80) should have landed", s)
	}
	// And the server keeps serving.
	resp, err := http.Get(ts.URL + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the refusals: %v %v", resp, err)
	}
	resp.Body.Close()
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestMultipartLoginWritesNothingToDisk(t *testing.T) {
	// net/http spills multipart files over 32 MB to the temporary
	// directory; a login that parsed one would leave a file here.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, ts := frontDoorServer(t)
	head := "--b\r\nContent-Disposition: form-data; name=\"token\"; filename=\"t\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	body := io.MultiReader(strings.NewReader(head), io.LimitReader(zeros{}, 33<<20), strings.NewReader("\r\n--b--\r\n"))
	resp, err := http.Post(ts.URL+"/api/login", "multipart/form-data; boundary=b", body)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("multipart login = %d %q, want 415", resp.StatusCode, msg)
	}
	left, _ := os.ReadDir(tmp)
	if len(left) > 0 {
		t.Fatalf("the login left %d files in the temporary directory, such as %s", len(left), left[0].Name())
	}
}

func TestWebsocketRefusesRebinding(t *testing.T) {
	_, ts := frontDoorServer(t)
	u, _ := url.Parse(ts.URL)
	evil := "evil.example:" + u.Port()
	tests := []struct {
		name         string
		host, origin string
		want         int // 101 when the websocket opens
	}{
		{"the dashboard's own page opens the websocket", "", ts.URL, 101},
		{"a page under a rebound domain with a matching Origin is refused", evil, "http://" + evil, 421},
		{"a foreign page is refused", "", "http://evil.example", 403},
		{"a page whose Origin is not a URL is refused", "", "null", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.host != "" {
				h.Set("Host", tt.host)
			}
			h.Set("Origin", tt.origin)
			c, resp, err := websocket.DefaultDialer.Dial(wsURL(ts), h)
			if c != nil {
				c.Close()
			}
			if resp == nil {
				t.Fatalf("no answer: %v", err)
			}
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d (%v), want %d", resp.StatusCode, err, tt.want)
			}
		})
	}
}

func TestWebsocketOriginMustBeAnAllowedHost(t *testing.T) {
	opts := testOptions()
	opts.Hosts = mustHosts("booth.example")
	s := New(&fakeLoad{}, newFakeRouter("kv"), opts)
	tests := []struct {
		name         string
		host, origin string
		want         bool
	}{
		{"no Origin (not a browser) passes", "booth.example", "", true},
		{"an allowed Origin passes", "booth.example:8080", "http://booth.example:8080", true},
		{"an https Origin of an allowed host passes", "booth.example", "https://booth.example", true},

		// Sad path: matching the request's own Host is not enough.
		{"an Origin equal to a rebound Host is refused", "evil.example:8080", "http://evil.example:8080", false},
		{"a file page is refused", "booth.example", "file://booth.example", false},
		{"an opaque origin is refused", "booth.example", "null", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/ws", nil)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if got := s.hub.upgrader.CheckOrigin(r); got != tt.want {
				t.Fatalf("CheckOrigin = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWebsocketOriginMustBeTheRequestsOwn holds both origin checks, the
// dashboard's and a bare hub's, to the browser's idea of an origin: scheme,
// host and port. A page of another program on this host (another port) is
// another origin; a port left out is its scheme's default.
func TestWebsocketOriginMustBeTheRequestsOwn(t *testing.T) {
	opts := testOptions()
	opts.Hosts = mustHosts("booth.example")
	s := New(&fakeLoad{}, newFakeRouter("kv"), opts)
	checks := map[string]func(*http.Request) bool{"dashboard": s.hub.upgrader.CheckOrigin, "hub": sameOrigin}
	tests := []struct {
		name         string
		host, origin string
		tls          bool // the request came over TLS
		want         bool
	}{
		{"the page's own origin passes", "localhost:8080", "http://localhost:8080", false, true},
		{"no Origin (not a browser) passes", "localhost:8080", "", false, true},
		{"an Origin's default http port matches a Host without one", "localhost", "http://localhost:80", false, true},
		{"a Host's default http port matches an Origin without one", "localhost:80", "http://localhost", false, true},
		{"an https page behind an ingress that ends TLS passes", "booth.example", "https://booth.example", false, true},
		{"an https Origin's default port matches a Host's 443", "booth.example:443", "https://booth.example", false, true},
		{"an IPv6 literal matches itself", "[::1]:8080", "http://[::1]:8080", false, true},
		{"an IPv6 literal matches its other spelling", "[0:0::1]:8080", "http://[::1]:8080", false, true},
		{"the host is compared without regard to case", "LocalHost:8080", "http://localhost:8080", false, true},
		{"an https page over TLS passes", "localhost:8443", "https://localhost:8443", true, true},

		// Sad path.
		{"another port of the same host is refused", "localhost:8080", "http://localhost:9999", false, false},
		{"another port of an IPv6 literal is refused", "[::1]:8080", "http://[::1]:9999", false, false},
		{"an explicit port is not the default one", "localhost", "http://localhost:8080", false, false},
		{"an http page's port 80 is not https's 443", "booth.example:443", "http://booth.example", false, false},
		{"an http page is refused over TLS", "localhost:8443", "http://localhost:8443", true, false},
		{"another loopback name is another origin", "localhost:8080", "http://127.0.0.1:8080", false, false},
		{"a file page is refused", "localhost:8080", "file://localhost:8080", false, false},
		{"an opaque origin is refused", "localhost:8080", "null", false, false},
		{"an opaque origin is refused when the Host is empty too", "", "null", false, false},
	}
	for _, tt := range tests {
		for name, check := range checks {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				r := httptest.NewRequest("GET", "/ws", nil)
				r.Host = tt.host
				if tt.tls {
					r.TLS = &tls.ConnectionState{}
				}
				if tt.origin != "" {
					r.Header.Set("Origin", tt.origin)
				}
				if got := check(r); got != tt.want {
					t.Fatalf("Host %q, Origin %q: allowed = %v, want %v", tt.host, tt.origin, got, tt.want)
				}
			})
		}
	}
}

package access

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
)

func mustHosts(t testing.TB, names ...string) *Hosts {
	t.Helper()
	h, err := NewHosts(names...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRuleCheck(t *testing.T) {
	withToken := Rule{Token: "s3cret", Hosts: mustHosts(t, "booth.example")}
	cookie := withToken.Cookie()
	tests := []struct {
		name    string
		rule    Rule
		remote  string // RemoteAddr
		host    string // Host header
		auth    string // Authorization header
		cookie  *http.Cookie
		wantErr string // "" means allowed
	}{
		// Who is an operator.
		{"a browser on this machine is an operator", withToken, "127.0.0.1:5000", "localhost:8080", "", nil, ""},
		{"an IPv6 loopback browser is an operator", withToken, "[::1]:5000", "[::1]:8080", "", nil, ""},
		{"a remote browser with the operator cookie is an operator", withToken, "192.0.2.7:5000", "booth.example:8080", "", cookie, ""},
		{"a script anywhere with the bearer token is an operator", withToken, "192.0.2.7:5000", "kvlens.svc:8080", "Bearer s3cret", nil, ""},
		{"the bearer scheme is case-insensitive", withToken, "192.0.2.7:5000", "kvlens.svc:8080", "bearer s3cret", nil, ""},
		{"open controls let a remote browser change the demo", Rule{Open: true}, "192.0.2.7:5000", "localhost:8080", "", nil, ""},
		{"a rule with no token still lets this machine change the demo", Rule{}, "127.0.0.1:5000", "127.0.0.1:8001", "", nil, ""},
		{"open controls let a script with a leftover token through", Rule{Open: true}, "192.0.2.7:5000", "localhost:8080", "Bearer ", nil, ""},

		// Sad path.
		{"a remote browser without the cookie only watches", withToken, "192.0.2.7:5000", "booth.example:8080", "", nil, "read-only view"},
		{"a forged cookie is refused", withToken, "192.0.2.7:5000", "booth.example:8080", "", &http.Cookie{Name: CookieName, Value: "forged"}, "read-only view"},
		{"a wrong bearer token is refused, even from this machine", withToken, "127.0.0.1:5000", "localhost:8080", "Bearer guess", nil, "wrong operator token"},
		{"an empty bearer token is refused", withToken, "127.0.0.1:5000", "localhost:8080", "Bearer ", nil, "must be \"Bearer <operator token>\""},
		{"a bearer token means nothing to a rule without one", Rule{}, "192.0.2.7:5000", "localhost:8080", "Bearer x", nil, "only from this machine"},
		{"basic auth is not a bearer token", withToken, "192.0.2.7:5000", "localhost:8080", "Basic czNjcmV0", nil, "must be \"Bearer"},
		{"a loopback viewer needs the token too", Rule{Token: "s3cret", LoopbackViewer: true}, "127.0.0.1:5000", "localhost:8080", "", nil, "read-only view"},
		{"a loopback request under a rebound domain is refused", withToken, "127.0.0.1:5000", "evil.example:8080", "", nil, `host "evil.example" is not one of this server's names`},
		{"open controls refuse a rebound domain", Rule{Open: true}, "127.0.0.1:5000", "evil.example", "", nil, "--allow-host"},
		{"a cookie under a rebound domain is refused", withToken, "192.0.2.7:5000", "evil.example", "", cookie, "--allow-host"},
		{"with no token a remote request is refused", Rule{}, "192.0.2.7:5000", "localhost:8001", "", nil, "only from this machine"},
		{"an unparseable remote address is not loopback", Rule{}, "pipe", "localhost", "", nil, "only from this machine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/stop", nil)
			r.RemoteAddr, r.Host = tt.remote, tt.host
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			if tt.cookie != nil {
				r.AddCookie(tt.cookie)
			}
			err := tt.rule.Check(r)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("err %q is not one line", err)
			}
		})
	}
}

func TestCookieDoesNotCarryTheToken(t *testing.T) {
	c := Rule{Token: "s3cret"}.Cookie()
	if strings.Contains(c.Value, "s3cret") || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v: want an HMAC, HttpOnly, SameSite=Strict", c)
	}
	if (Rule{Token: "other"}).Cookie().Value == c.Value {
		t.Fatal("two tokens give the same cookie")
	}
}

// TestOperatorCookieLastsItsLife: the server honours a cookie for
// CookieLife from its issue, as the browser keeps it, and not a cookie
// whose stamp was changed, nor one of the unstamped kind before.
func TestOperatorCookieLastsItsLife(t *testing.T) {
	rule := Rule{Token: "s3cret", Hosts: mustHosts(t, "booth.example")}
	issued := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	now = func() time.Time { return issued }
	t.Cleanup(func() { now = time.Now })
	c := rule.Cookie()
	if !c.Expires.Equal(issued.Add(CookieLife)) {
		t.Fatalf("the browser keeps the cookie until %s, want %s", c.Expires, issued.Add(CookieLife))
	}
	stamp, mac, _ := strings.Cut(c.Value, ".")
	unstamped := hmac.New(sha256.New, []byte("s3cret"))
	unstamped.Write([]byte("kvlens operator"))
	tests := []struct {
		name  string
		value string
		at    time.Time
		want  bool
	}{
		{"just issued", c.Value, issued, true},
		{"a day short of its life", c.Value, issued.Add(CookieLife - 24*time.Hour), true},
		{"past its life", c.Value, issued.Add(CookieLife + time.Second), false},
		{"issued over a minute in the future", c.Value, issued.Add(-2 * time.Minute), false},
		{"its stamp moved on, its MAC kept", "9" + stamp + "." + mac, issued, false},
		{"the unstamped cookie kvlens gave before", hex.EncodeToString(unstamped.Sum(nil)), issued, false},
		{"no stamp", "." + mac, issued, false},
		{"a stamp too long to be a time", "1234567890123." + mac, issued, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = func() time.Time { return tt.at }
			r := httptest.NewRequest("POST", "/api/start", nil)
			r.Host, r.RemoteAddr = "booth.example", "203.0.113.9:5000"
			r.AddCookie(&http.Cookie{Name: CookieName, Value: tt.value})
			if got := rule.Check(r) == nil; got != tt.want {
				t.Fatalf("cookie %q at %s: operator %v, want %v", tt.value, tt.at, got, tt.want)
			}
		})
	}
}

func TestRequire(t *testing.T) {
	rule := Rule{Token: "s3cret"}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	tests := []struct {
		name    string
		guard   func(http.Handler) http.Handler
		method  string
		remote  string
		headers map[string]string
		want    int
		wantMsg string
	}{
		{"an operator's same-origin change passes", rule.Require, "POST", "127.0.0.1:1", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200, ""},
		{"a change typed into the address bar passes", rule.Require, "POST", "127.0.0.1:1", map[string]string{"Sec-Fetch-Site": "none"}, 200, ""},
		{"a script without browser headers passes", rule.Require, "PUT", "192.0.2.7:1", map[string]string{"Authorization": "Bearer s3cret"}, 200, ""},
		{"reads of an API with public reads pass", rule.RequireForChanges, "GET", "192.0.2.7:1", nil, 200, ""},

		// Sad path.
		{"a cross-site form post is refused even from this machine", rule.Require, "POST", "127.0.0.1:1", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross-origin request refused"},
		{"a same-site (other subdomain) post is refused", rule.Require, "POST", "127.0.0.1:1", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, "cross-origin"},
		{"an old browser's foreign Origin is refused", rule.Require, "POST", "127.0.0.1:1", map[string]string{"Origin": "http://evil.example"}, 403, "cross-origin"},
		{"a cross-site post with the token is still refused", rule.Require, "POST", "192.0.2.7:1", map[string]string{"Sec-Fetch-Site": "cross-site", "Authorization": "Bearer s3cret"}, 403, "cross-origin"},
		{"a remote change without the token is refused", rule.RequireForChanges, "PUT", "192.0.2.7:1", nil, 403, "read-only view"},
		{"a remote delete without the token is refused", rule.RequireForChanges, "DELETE", "192.0.2.7:1", nil, 403, "read-only view"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "http://localhost:8080/x", nil)
			r.RemoteAddr = tt.remote
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			tt.guard(ok).ServeHTTP(w, r)
			if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.wantMsg) {
				t.Fatalf("got %d %q, want %d containing %q", w.Code, w.Body.String(), tt.want, tt.wantMsg)
			}
		})
	}
}

func TestHosts(t *testing.T) {
	h := mustHosts(t, "Booth.Example.", "https://kvlens.example.com/dash", "10.1.2.3:8080", "[fd00::5]")
	tests := []struct {
		name string
		host string // Host header
		want bool
	}{
		{"localhost with a port", "localhost:8080", true},
		{"the IPv4 loopback address", "127.0.0.1", true},
		{"the IPv6 loopback address in brackets", "[::1]:8080", true},
		{"an added name, in any case", "BOOTH.example:8080", true},
		{"an added name with a trailing dot", "booth.example.:8080", true},
		{"a URL's host", "kvlens.example.com", true},
		{"an address given with a port, on another port", "10.1.2.3:9999", true},
		{"an added IPv6 address", "[fd00::5]:8080", true},

		// Sad path.
		{"a rebound domain", "evil.example:8080", false},
		{"a subdomain of an added name", "x.booth.example", false},
		{"an empty Host", "", false},
		{"a Host with a path", "booth.example/x", false},
		{"a Host with a space", "booth example", false},
		{"a name that only ends like an added one", "notbooth.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.Allows(tt.host); got != tt.want {
				t.Fatalf("Allows(%q) = %v, want %v", tt.host, got, tt.want)
			}
		})
	}
	if got := strings.Join(h.Names(), " "); got != "localhost 127.0.0.1 [::1] booth.example kvlens.example.com 10.1.2.3 [fd00::5]" {
		t.Errorf("Names() = %s", got)
	}
	var none *Hosts
	if !none.Allows("localhost:1") || none.Allows("booth.example") {
		t.Error("nil Hosts must allow the loopback names only")
	}
	if !mustHosts(t, "*").Allows("anything.example") {
		t.Error("* does not allow any host")
	}
}

func TestBadHostNamesAreRefused(t *testing.T) {
	for _, s := range []string{"a b", "evil.example/x", "ünicode.example", "http://%zz"} {
		if _, err := NewHosts(s); err == nil || !strings.HasPrefix(err.Error(), "access: host ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("NewHosts(%q) err = %v, want a one-line error", s, err)
		}
		if _, err := ParseList("ok.example," + s); err == nil {
			t.Errorf("ParseList accepted %q", s)
		}
	}
	got, err := ParseList(" a.example, ,b.example:8080,*")
	if err != nil || strings.Join(got, " ") != "a.example b.example:8080 *" {
		t.Fatalf("ParseList = %v, %v", got, err)
	}
}

func TestMachineHostsIncludeTheLoopbackNamesAndExtras(t *testing.T) {
	h, err := MachineHosts("extra.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"localhost", "127.0.0.1:8080", "[::1]", "extra.example"} {
		if !h.Allows(n) {
			t.Errorf("MachineHosts does not allow %s", n)
		}
	}
	if hn, err := os.Hostname(); err == nil && !h.Allows(hn) {
		t.Errorf("MachineHosts does not allow the machine's name %s", hn)
	}
	if h.Allows("evil.example") {
		t.Error("MachineHosts allows a foreign name")
	}
}

func TestGuardRefusesUnknownHostsNamingTheFlag(t *testing.T) {
	h := mustHosts(t)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	w := httptest.NewRecorder()
	h.Guard(ok).ServeHTTP(w, httptest.NewRequest("GET", "http://evil.example:8080/", nil))
	if w.Code != http.StatusMisdirectedRequest || !strings.Contains(w.Body.String(), "--allow-host=evil.example") {
		t.Fatalf("got %d %q", w.Code, w.Body.String())
	}
	w = httptest.NewRecorder()
	h.Guard(ok).ServeHTTP(w, httptest.NewRequest("GET", "http://localhost:8080/", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("localhost got %d", w.Code)
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("token", "from-file\n") // as kubectl create secret --from-file writes it
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == TokenEnv {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name        string
		value, path string
		env         string
		want, src   string
		wantErr     string
	}{
		{"nothing set means no token", "", "", "", "", "", ""},
		{"the environment gives the token", "", "", "from-env", "from-env", "$KVLENS_CONTROL_TOKEN", ""},
		{"a file gives the token, its newline trimmed", "", good, "", "from-file", "--control-token-file " + good, ""},
		{"a file wins over the environment", "", good, "from-env", "from-file", "--control-token-file " + good, ""},
		{"the flag wins over the environment", "from-flag", "", "from-env", "from-flag", "--control-token", ""},

		// Sad path.
		{"the flag and the file together are refused", "a", good, "", "", "", "not both"},
		{"a missing file is refused", "", filepath.Join(dir, "missing"), "", "", "", "no such file"},
		{"an empty file is refused", "", file("empty", "\n"), "", "", "", "is empty"},
		{"a token with a space is refused", "", file("spaced", "two words"), "", "", "", "contains spaces"},
		{"a large file is not a token", "", file("big", strings.Repeat("x", 5000)), "", "", "", "not a token"},
		{"a blank environment variable is refused", "", "", "  ", "", "", "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, src, err := LoadToken(tt.value, tt.path, env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "access: ") {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || tok != tt.want || src != tt.src {
				t.Fatalf("got %q from %q (%v), want %q from %q", tok, src, err, tt.want, tt.src)
			}
		})
	}
}

// FuzzHostsAllows feeds Host headers, as any client may send, to the allow
// list: it must not panic, and a Host it allows must name an allowed host.
func FuzzHostsAllows(f *testing.F) {
	for _, s := range []string{"localhost:8080", "[::1]:80", "evil.example", "", "[", "]:", "a:b:c", "booth.example.", "127.0.0.1:0", "[fe80::1%25eth0]:80", "%", "::ffff:127.0.0.1"} {
		f.Add(s)
	}
	h, err := NewHosts("booth.example")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !h.Allows(host) {
			return
		}
		n, err := normalize(hostOnly(host))
		if err != nil || !h.names[n] {
			t.Fatalf("Allows(%q) but it names %q (%v)", host, n, err)
		}
		r := httptest.NewRequest("POST", "/", nil)
		r.Host, r.RemoteAddr = host, "127.0.0.1:1"
		if err := (Rule{Hosts: h}).Check(r); err != nil {
			t.Fatalf("Check refused an allowed host %q from loopback: %v", host, err)
		}
	})
}

// FuzzCheck sends any Authorization header, operator cookie, Host and peer
// address to a rule with a token, and holds Check to who may change the
// demo: a request that neither carries the token (as a Bearer header or
// the cookie derived from it) nor comes over loopback from an allowed host
// is refused, and every refusal is one line.
func FuzzCheck(f *testing.F) {
	// A fixed clock, so that the one valid cookie the fuzzer can send is
	// the same in every run and a saved input fails the same way again.
	at := time.Unix(1_800_000_000, 0)
	now = func() time.Time { return at }
	f.Cleanup(func() { now = time.Now })
	rule := Rule{Token: "s3cret-token", Hosts: mustHosts(f, "booth.example")}
	good := rule.cookieValue(at.Unix())
	f.Add("Bearer s3cret-token", "", "evil.example", "203.0.113.9:5000")
	f.Add("bearer  s3cret-token ", "", "booth.example", "203.0.113.9:5000")
	f.Add("", good, "booth.example:8080", "203.0.113.9:5000")
	f.Add("", good, "evil.example", "203.0.113.9:5000")
	f.Add("", "", "localhost:8080", "127.0.0.1:4000")
	f.Add("", "", "localhost:8080", "[::1]:4000")
	f.Add("Basic czNjcmV0", "", "localhost", "127.0.0.1:1")
	f.Add("Bearer", "x", "", "")
	// A quote before the good value: AddCookie drops it, so the request
	// carries the good cookie (the fuzzer found this; the test's own
	// check compared what it was given, not what was sent).
	f.Add("", `"`+good, "Booth.eXAmple", "0")
	f.Fuzz(func(t *testing.T, auth, cookie, host, remote string) {
		r := httptest.NewRequest("POST", "/api/start", nil)
		r.Host, r.RemoteAddr = host, remote
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
		}
		err := rule.Check(r)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("a refusal of more than one line: %q", err)
			}
			return
		}
		tok, isBearer := bearer(r.Header.Get("Authorization"))
		hasToken := isBearer && tok == rule.Token
		// What the request carries, not what was given: AddCookie drops
		// the bytes a cookie may not hold, so a quote before the good
		// value still sends the good value.
		sent, _ := r.Cookie(CookieName)
		hasCookie := sent != nil && sent.Value == good && rule.Hosts.Allows(host)
		local := FromLoopback(r) && rule.Hosts.Allows(host)
		if !hasToken && !hasCookie && !local {
			t.Fatalf("let in a request with no token, cookie or loopback: Authorization %q, cookie %q, Host %q, from %q", auth, cookie, host, remote)
		}
	})
}

// FuzzParseList reads any --allow-host value: a list it accepts builds a
// host set, and each name in it is then allowed.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"booth.example", "a.example, 192.168.1.20 ,*", "http://kvlens.example:8080/", ",,", "[::1]", "bad name", "é.example", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ParseList(s)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("ParseList(%q): an error of more than one line: %q", s, err)
			}
			return
		}
		var plain []string
		for _, n := range names {
			if n != "*" {
				plain = append(plain, n)
			}
		}
		h, err := NewHosts(plain...)
		if err != nil {
			t.Fatalf("ParseList(%q) accepted %q, which NewHosts refuses: %v", s, names, err)
		}
		for _, n := range plain {
			norm, _ := normalize(n)
			if !h.names[norm] {
				t.Fatalf("ParseList(%q) accepted %q, which the hosts do not allow", s, n)
			}
		}
	})
}

// FuzzLoadToken reads any --control-token or $KVLENS_CONTROL_TOKEN: what it
// accepts is the value without its surrounding spaces, with no space or
// control character left in it, and lets a remote script that sends it as
// a bearer token change the demo; what it refuses it says in one line.
func FuzzLoadToken(f *testing.F) {
	for _, s := range []string{"s3cret", "  padded\n", "two words", "tab\there", "", " ", "ünïcode", "nul\x00"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, fromEnv bool) {
		value, getenv := s, func(string) string { return "" }
		if fromEnv {
			value, getenv = "", func(k string) string {
				if k == TokenEnv {
					return s
				}
				return ""
			}
		}
		token, _, err := LoadToken(value, "", getenv)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("LoadToken(%q): an error of more than one line: %q", s, err)
			}
			return
		}
		if s == "" {
			if token != "" {
				t.Fatalf("no token given, got %q", token)
			}
			return
		}
		if token != strings.TrimSpace(s) || strings.ContainsFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			t.Fatalf("LoadToken(%q) = %q", s, token)
		}
		r := httptest.NewRequest(http.MethodPost, "http://kvlens.svc:8080/api/reset", nil)
		r.RemoteAddr = "192.0.2.7:5000"
		r.Header.Set("Authorization", "Bearer "+token)
		if err := (Rule{Token: token}).Check(r); err != nil {
			t.Fatalf("token %q sent as a bearer token is refused: %v", token, err)
		}
	})
}

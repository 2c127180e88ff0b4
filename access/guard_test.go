package access

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWrongTokensAreLimitedPerAddress: an address that sends GuessBurst
// wrong tokens is held back, the right token included, until GuessEvery
// lets one more try; other addresses, and this machine, are not.
func TestWrongTokensAreLimitedPerAddress(t *testing.T) {
	rule := Rule{Token: "s3cret", Hosts: mustHosts(t, "booth.example"), LoopbackViewer: true}
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := start
	now = func() time.Time { return at }
	t.Cleanup(func() { now = time.Now; guesses.reset() })
	guesses.reset()
	send := func(remote, tok string) int {
		r := httptest.NewRequest("POST", "/api/start", nil)
		r.Host, r.RemoteAddr = "booth.example", remote
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		rule.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})).ServeHTTP(w, r)
		if w.Code == http.StatusTooManyRequests && !strings.Contains(w.Body.String(), "too many wrong operator tokens") {
			t.Errorf("a held address is told %q", w.Body.String())
		}
		return w.Code
	}
	for i := range GuessBurst {
		if code := send("203.0.113.9:4000", "guess"); code != http.StatusForbidden {
			t.Fatalf("wrong token %d: %d, want 403", i+1, code)
		}
	}
	steps := []struct {
		name   string
		after  time.Duration // since start
		remote string
		token  string
		want   int
	}{
		{"past the burst even the right token waits", 0, "203.0.113.9:4001", "s3cret", http.StatusTooManyRequests},
		{"another address is not held", 0, "198.51.100.7:4000", "s3cret", http.StatusOK},
		{"this machine is never held", 0, "127.0.0.1:4000", "guess", http.StatusForbidden},
		{"still held just before one more is allowed", GuessEvery - time.Second, "203.0.113.9:4000", "s3cret", http.StatusTooManyRequests},
		{"one more try after GuessEvery: the right token", GuessEvery, "203.0.113.9:4000", "s3cret", http.StatusOK},
		{"a right token spends nothing: a wrong one still may", GuessEvery, "203.0.113.9:4000", "guess", http.StatusForbidden},
		{"and then it is held again", GuessEvery, "203.0.113.9:4000", "s3cret", http.StatusTooManyRequests},
	}
	for _, st := range steps {
		at = start.Add(st.after)
		if got := send(st.remote, st.token); got != st.want {
			t.Fatalf("%s: %d, want %d", st.name, got, st.want)
		}
	}
}

// TestAnIPv6HostIsLimitedByItsPrefix: one host picks addresses from its
// whole /64, so they share one budget.
func TestAnIPv6HostIsLimitedByItsPrefix(t *testing.T) {
	rule := Rule{Token: "s3cret"}
	t.Cleanup(guesses.reset)
	guesses.reset()
	for i := range GuessBurst {
		r := httptest.NewRequest("POST", "/", nil)
		r.RemoteAddr = fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1)
		if err := rule.Login(r, "guess"); err == nil {
			t.Fatal("a wrong token was let in")
		}
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.RemoteAddr = "[2001:db8:1:2:ffff::1]:4000"
	var held *HeldError
	if err := rule.Login(r, "s3cret"); !errors.As(err, &held) || !strings.Contains(err.Error(), "2001:db8:1:2::/64") {
		t.Fatalf("another address of the /64: %v; want held back, naming the /64", err)
	}
	r.RemoteAddr = "[2001:db8:1:3::1]:4000"
	if err := rule.Login(r, "s3cret"); err != nil {
		t.Fatalf("the next /64: %v; want let in", err)
	}
}

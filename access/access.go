// Package access holds kvlens's one rule for who may change a running demo:
// the dashboard's controls, the router's admin API, the simulated workers'
// fault API and recordings' deletion are all checked by Rule, the same way.
//
// Anyone may watch. A change needs one of: the operator token as
// "Authorization: Bearer <token>" (scripts, sweeps, curl); the operator
// cookie a browser gets by entering the token; a request from this machine
// (unless LoopbackViewer); or open controls. The last two are ambient (a
// browser sends them whatever page asked), so they count only when the
// request names one of the server's own hosts, which defeats DNS rebinding,
// and state-changing requests from a browser must come from the page's own
// origin (CrossOrigin).
package access

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CookieName is the cookie that proves a browser entered the operator token.
const CookieName = "kvlens_operator"

// Rule decides who may change the demo.
type Rule struct {
	// Token is the operator token; empty means no token is accepted, so
	// changes come only from this machine (or from everyone when Open).
	Token string
	// Open lets every request change the demo, with no token
	// (--open-controls). Requests must still name one of Hosts.
	Open bool
	// LoopbackViewer treats requests from this machine like any other: they
	// need the token too. For a kiosk browser on the booth machine itself.
	LoopbackViewer bool
	// Hosts are the names a browser may use to reach this server; nil means
	// the loopback names only.
	Hosts *Hosts
}

// Check returns nil when r may change the demo, else why not, as one
// sentence. Forwarded-for headers are ignored: a proxy in front makes every
// request remote, which is the safe answer.
func (a Rule) Check(r *http.Request) error {
	if auth := r.Header.Get("Authorization"); auth != "" && a.Token != "" {
		// A script that sends a token gets a straight answer about it,
		// rather than falling back to where it happens to run. Without a
		// token to compare, the header means nothing and the rest decides.
		tok, ok := bearer(auth)
		if !ok {
			return errors.New("access: the Authorization header must be \"Bearer <operator token>\"")
		}
		if err := guesses.held(r); err != nil {
			return err
		}
		if !a.ValidToken(tok) {
			guesses.wrong(r)
			return errors.New("access: wrong operator token in the Authorization header")
		}
		return nil
	}
	if !a.Hosts.Allows(r.Host) {
		return fmt.Errorf("access: host %q is not one of this server's names: add it with --allow-host, or send Authorization: Bearer <operator token>", hostOnly(r.Host))
	}
	switch {
	case a.Open:
		return nil
	case !a.LoopbackViewer && FromLoopback(r):
		return nil
	case a.Token != "" && a.validCookie(r):
		return nil
	case a.Token == "":
		return errors.New("access: changes are allowed only from this machine (no operator token is set)")
	}
	return errors.New("access: read-only view: enter the operator token to change the demo (scripts send Authorization: Bearer <token>)")
}

// IsOperator reports whether r may change the demo.
func (a Rule) IsOperator(r *http.Request) bool { return a.Check(r) == nil }

// Require lets through only requests that pass Check and come from the
// page's own origin; others get 403 and the reason on one line.
func (a Rule) Require(next http.Handler) http.Handler {
	return CrossOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := a.Check(r); err != nil {
			status := http.StatusForbidden
			if held := (*HeldError)(nil); errors.As(err, &held) {
				status = http.StatusTooManyRequests
			}
			http.Error(w, err.Error(), status)
			return
		}
		next.ServeHTTP(w, r)
	}))
}

// RequireForChanges is Require for every method but GET, HEAD and OPTIONS,
// which read and pass freely: for an API whose reads are public, such as
// the router's admin API.
func (a Rule) RequireForChanges(next http.Handler) http.Handler {
	guarded := a.Require(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
		default:
			guarded.ServeHTTP(w, r)
		}
	})
}

// Login checks a token a browser entered, from r: nil when it is the
// operator token; a *HeldError when r's address has sent too many wrong
// ones of late (GuessBurst, GuessEvery), whatever this one is; else why not.
func (a Rule) Login(r *http.Request, tok string) error {
	if err := guesses.held(r); err != nil {
		return err
	}
	if !a.ValidToken(tok) {
		guesses.wrong(r)
		return errors.New("wrong operator token")
	}
	return nil
}

// ValidToken reports whether tok is the operator token. No token is valid
// when the rule has none.
func (a Rule) ValidToken(tok string) bool {
	return a.Token != "" && hmac.Equal([]byte(tok), []byte(a.Token))
}

// CookieLife is how long an operator cookie is honoured: the browser is
// told to keep it this long, and the server refuses it after, so a cookie
// copied off a booth laptop does not open the controls for good while the
// token stays (a Kubernetes Secret's, say).
const CookieLife = 30 * 24 * time.Hour

// now is the clock cookies are stamped and checked with; tests move it.
var now = time.Now

// Cookie is the operator cookie to set once a browser has entered the token.
func (a Rule) Cookie() *http.Cookie {
	at := now()
	return &http.Cookie{
		Name:     CookieName,
		Value:    a.cookieValue(at.Unix()),
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Expires:  at.Add(CookieLife),
	}
}

// cookieValue is what the operator cookie holds: the Unix second it was
// issued, a dot, and an HMAC of both under the token, so the cookie proves
// knowledge of the token without carrying it, and says its own age.
func (a Rule) cookieValue(issued int64) string {
	m := hmac.New(sha256.New, []byte(a.Token))
	fmt.Fprintf(m, "kvlens operator %d", issued)
	return strconv.FormatInt(issued, 10) + "." + hex.EncodeToString(m.Sum(nil))
}

// validCookie reports whether r carries an operator cookie made with this
// token and issued within CookieLife (and not in the future, beyond a
// minute of clock skew).
func (a Rule) validCookie(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	stamp, _, ok := strings.Cut(c.Value, ".")
	issued, err := strconv.ParseInt(stamp, 10, 64)
	if !ok || err != nil || len(stamp) > 12 {
		return false
	}
	at, t := time.Unix(issued, 0), now()
	if t.Sub(at) > CookieLife || at.Sub(t) > time.Minute {
		return false
	}
	return hmac.Equal([]byte(c.Value), []byte(a.cookieValue(issued)))
}

// bearer returns the token of an "Authorization: Bearer <token>" value; the
// scheme is case-insensitive, as RFC 9110 says.
func bearer(auth string) (string, bool) {
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// FromLoopback reports whether r came over a loopback connection.
func FromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CrossOrigin refuses state-changing browser requests that another site's
// page made (net/http's CrossOriginProtection: Sec-Fetch-Site, else Origin
// against Host) with 403 and one line saying why. Requests with neither
// header, such as curl's, pass: they carry no browser's ambient credentials.
func CrossOrigin(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "access: cross-origin request refused: changes must come from the dashboard's own page", http.StatusForbidden)
	}))
	return p.Handler(next)
}

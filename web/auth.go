package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"time"
)

// operatorCookie carries proof that a browser entered the operator token.
const operatorCookie = "kvlens_operator"

// Access decides who may change the demo. At a public booth anyone can watch;
// only the operator may start, stop, move the slider, switch modes or reset.
type Access struct {
	// Token is the operator token; empty means everyone is an operator.
	Token string
	// LoopbackViewer treats requests from this machine like any other: they
	// need the token too. For a kiosk browser on the booth machine itself,
	// and for tests that play a remote visitor from localhost.
	LoopbackViewer bool
}

// cookieValue is what the operator cookie holds: an HMAC of the token, so the
// cookie proves knowledge of the token without carrying it.
func (a Access) cookieValue() string {
	m := hmac.New(sha256.New, []byte(a.Token))
	m.Write([]byte("kvlens operator"))
	return hex.EncodeToString(m.Sum(nil))
}

// IsOperator reports whether r may change the demo: when there is no token,
// when it comes from this machine (unless LoopbackViewer), or when it
// carries the operator cookie.
// Forwarded-for headers are ignored: a proxy in front makes every request
// remote, which is the safe answer.
func (a Access) IsOperator(r *http.Request) bool {
	if a.Token == "" || (!a.LoopbackViewer && fromLoopback(r)) {
		return true
	}
	c, err := r.Cookie(operatorCookie)
	return err == nil && hmac.Equal([]byte(c.Value), []byte(a.cookieValue()))
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// requireOperator refuses changes from viewers with 403 and a one-line reason.
func (a Access) requireOperator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.IsOperator(r) {
			http.Error(w, "read-only view: enter the operator token to change the demo", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// login checks a submitted token and, if right, sets the operator cookie.
func (a Access) login(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimSpace(r.FormValue("token"))
	if a.Token == "" || !hmac.Equal([]byte(token), []byte(a.Token)) {
		http.Error(w, "wrong operator token", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     operatorCookie,
		Value:    a.cookieValue(),
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Expires:  time.Now().Add(30 * 24 * time.Hour),
	})
	// Reload so every control renders enabled.
	w.Header().Set("HX-Refresh", "true")
	w.WriteHeader(http.StatusNoContent)
}

package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/kvlens/kvlens/access"
)

// Access decides who may change the demo: the one rule package access
// holds, which the router's admin API and the simulated workers share.
type Access = access.Rule

// login checks a submitted token and, if right, sets the operator cookie.
// It reads only a small url-encoded form into memory: a multipart body, which
// net/http would spill to temporary files, is refused unread.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	form, status, err := readForm(w, r)
	if err != nil {
		http.Error(w, "login: "+err.Error(), status)
		return
	}
	if err := s.rule.Login(r, strings.TrimSpace(form.Get("token"))); err != nil {
		status := http.StatusForbidden
		if held := (*access.HeldError)(nil); errors.As(err, &held) {
			status = http.StatusTooManyRequests
		}
		http.Error(w, err.Error(), status)
		return
	}
	http.SetCookie(w, s.rule.Cookie())
	// Reload so every control renders enabled.
	w.Header().Set("HX-Refresh", "true")
	w.WriteHeader(http.StatusNoContent)
}

// wsOrigin is the websocket upgrader's origin check: a browser's Origin must
// be the request's own (sameOrigin: scheme, host and port) and name one of
// the dashboard's hosts, so neither another port of this host nor a page
// under a rebound domain can read the live figures. Requests without an
// Origin (not from a browser) pass; their Host has been checked already.
func (s *Server) wsOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && sameOrigin(r) && s.rule.Hosts.Allows(u.Host)
}

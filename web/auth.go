package web

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/kvlens/kvlens/access"
)

// Access decides who may change the demo: the one rule package access
// holds, which the router's admin API and the simulated workers share.
type Access = access.Rule

// maxLoginBody bounds a login form, in bytes: it carries one short token.
const maxLoginBody = 4 << 10

// login checks a submitted token and, if right, sets the operator cookie.
// It reads only a small url-encoded form into memory: a multipart body, which
// net/http would spill to temporary files, is refused unread.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	form, status, err := readForm(w, r)
	if err != nil {
		http.Error(w, "login: "+err.Error(), status)
		return
	}
	if !s.rule.ValidToken(strings.TrimSpace(form.Get("token"))) {
		http.Error(w, "wrong operator token", http.StatusForbidden)
		return
	}
	http.SetCookie(w, s.rule.Cookie())
	// Reload so every control renders enabled.
	w.Header().Set("HX-Refresh", "true")
	w.WriteHeader(http.StatusNoContent)
}

// readForm reads a control's url-encoded form, of at most maxLoginBody
// bytes, into r.Form and r.PostForm, and returns it. Anything else is
// refused unread, with the status to answer: net/http would parse a
// multipart form into temporary files that outlive the request (chi's copy
// of it is never cleaned up), and an 8 MiB form into some 1.16 GB.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, int, error) {
	if r.ContentLength == 0 {
		r.Form, r.PostForm = url.Values{}, url.Values{}
		return r.Form, 0, nil
	}
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/x-www-form-urlencoded" {
		return nil, http.StatusUnsupportedMediaType, errors.New("send the form as application/x-www-form-urlencoded")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLoginBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, errors.New("form over 4 KiB; a control sends a few short fields")
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read form: %s", err)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("form is not url-encoded: %s", err)
	}
	r.Form, r.PostForm = form, form
	return form, 0, nil
}

// smallForms reads every control's form with readForm before its handler
// runs, so r.FormValue reads that.
func smallForms(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, status, err := readForm(w, r); err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// wsOrigin is the websocket upgrader's origin check: a browser's Origin must
// name one of the dashboard's own hosts, so a page under a rebound domain
// cannot read the live figures. Requests without an Origin (not from a
// browser) pass; their Host has been checked already.
func (s *Server) wsOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && s.rule.Hosts.Allows(u.Host)
}

package web

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// maxFormBody bounds a control's form, login's among them, in bytes: each
// carries a few short fields.
const maxFormBody = 4 << 10

// readForm reads a control's url-encoded form, of at most maxFormBody
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBody))
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

package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzhttp"
)

//go:embed static
var staticFiles embed.FS

// staticFS is the embedded static directory, as the pages link it.
var staticFS, _ = fs.Sub(staticFiles, "static")

// staticTags holds each static file's validator, by its path under
// /static/: a hash of its content, since embedded files carry no
// modification time. The tags are weak because one file is served gzipped
// or zstd-compressed as well as plain: the same content, different bytes
// (RFC 9110, 8.8.1).
var staticTags = func() map[string]string {
	tags := map[string]string{}
	fs.WalkDir(staticFS, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(staticFS, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		tags[name] = `W/"` + hex.EncodeToString(sum[:8]) + `"`
		return nil
	})
	return tags
}()

// staticHandler serves the embedded static files, to be mounted under
// /static/ with the prefix stripped. A browser keeps its copy and asks again
// on each page load (no-cache), and the answer is a 304 without a body while
// the file is unchanged: a phone on booth Wi-Fi that reloads the page after
// an outage fetches nothing but the page itself, and a new kvlens binary's
// files are never mixed with an old page.
func staticHandler() http.Handler {
	files := http.FileServerFS(staticFS)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tag, ok := staticTags[strings.TrimPrefix(r.URL.Path, "/")]; ok {
			w.Header().Set("ETag", tag)
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	})
}

// compressed gzips what the pages and their files send when the browser
// accepts it (answers under 1 KB and images go as they are): the
// dashboard's page, scripts and styles, 197 KB, become 68 KB. zstd is left
// out: at the speed it would run here it gave 74 KB. The websocket is compressed on
// its own terms (Hub), and the OpenAI API's streams are never wrapped.
// Nothing secret shares a response with what another site could make the
// page reflect, so compression leaks nothing (BREACH needs both).
var compressed = func() func(http.Handler) http.Handler {
	wrap, err := gzhttp.NewWrapper(gzhttp.EnableZstd(false))
	if err != nil {
		panic(err) // only a bad option fails, and none is given
	}
	return func(h http.Handler) http.Handler { return wrap(h) }
}()

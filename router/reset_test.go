package router

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestResetClearsOnlyTheWorkersThatReset checks that a worker's index
// entries go only when its cache did.
func TestResetClearsOnlyTheWorkersThatReset(t *testing.T) {
	answer := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/reset_prefix_cache" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(status)
		}
	}
	serve := func(status int) string {
		srv := httptest.NewServer(answer(status))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	tests := []struct {
		name   string
		worker string
		url    string
		// wantCleared says the worker's index entries are gone; wantMsg
		// is a piece of its answer.
		wantCleared bool
		wantMsg     string
	}{
		{"a worker that reset its cache has its entries cleared", "ok", serve(200), true, "ok"},
		// Sad path: the cache is still full, and the index says so.
		{"a worker without the endpoint (404) keeps its entries, and the answer says why",
			"nf", serve(404), false, "reset nf: the worker has no POST /reset_prefix_cache (404 Not Found); its cache and index entries are kept"},
		{"a worker that refuses the method (405) keeps its entries",
			"na", serve(405), false, "no POST /reset_prefix_cache (405 Method Not Allowed)"},
		{"a worker that failed (500) keeps its entries", "ise", serve(500), false, "reset ise: 500 Internal Server Error; its cache and index entries are kept"},
		{"an unreachable worker keeps its entries", "gone", gone.URL, false, "its cache and index entries are kept"},
	}
	var specs []string
	for _, tt := range tests {
		specs = append(specs, tt.worker+"="+tt.url)
	}
	px, _ := newTestProxy(t, &RoundRobin{}, Config{BlockSize: testB}, specs...)
	for _, tt := range tests {
		px.Router().Index().Apply(tt.worker, stored(0, ids(1, 3), toks(1, 3)))
	}
	res := px.Reset(context.Background())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(res[tt.worker], tt.wantMsg) {
				t.Errorf("answer %q, want it to contain %q", res[tt.worker], tt.wantMsg)
			}
			if blocks := px.Router().Index().Blocks(tt.worker); (blocks == 0) != tt.wantCleared {
				t.Errorf("%d blocks indexed after the reset; cleared = %v wanted", blocks, tt.wantCleared)
			}
		})
	}
}

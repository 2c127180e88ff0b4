package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// AdminPrefix is where the admin API lives.
const AdminPrefix = "/admin/router"

// Admin returns the router's admin API, to mount at AdminPrefix:
//
//	GET  /admin/router/policy    the policy and its knobs
//	PUT  /admin/router/policy    change any of them: {"policy":"kv","weight":1,"temperature":0,"admission":"shed","busy_threshold":0.9}
//	GET  /admin/router/workers   per-worker state and the router's totals
//	POST /admin/router/reset     reset every worker's prefix cache, and the index entries of those that did
func (px *Proxy) Admin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+AdminPrefix+"/policy", px.getPolicy)
	mux.HandleFunc("PUT "+AdminPrefix+"/policy", px.putPolicy)
	mux.HandleFunc("GET "+AdminPrefix+"/workers", px.getWorkers)
	mux.HandleFunc("POST "+AdminPrefix+"/reset", px.reset)
	return mux
}

type policyJSON struct {
	Settings
	// Available lists the policy names PUT accepts.
	Available []string `json:"available"`
}

func (px *Proxy) getPolicy(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, policyJSON{px.rt.Settings(), Policies})
}

func (px *Proxy) putPolicy(w http.ResponseWriter, r *http.Request) {
	s := px.rt.Settings()
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	err := dec.Decode(&s)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "router: policy settings: over 64 KiB; they are a few short fields")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "router: policy settings: "+oneLine(err))
		return
	}
	if err := px.rt.Apply(s); err != nil {
		writeError(w, http.StatusBadRequest, "router: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, policyJSON{px.rt.Settings(), Policies})
}

func (px *Proxy) getWorkers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Workers []WorkerState `json:"workers"`
		Counts  Counts        `json:"counts"`
	}{px.rt.Workers(), px.rt.Counts()})
}

// reset asks every worker to drop its prefix cache and clears the index
// entries of those that did.
func (px *Proxy) reset(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"workers": px.Reset(r.Context())})
}

// Reset asks every worker to drop its prefix cache (vLLM's POST
// /reset_prefix_cache) and clears a worker's part of both indexes only when
// it said it did: a worker that has no such endpoint, or failed, still
// holds its cache, and the index keeps saying so. It returns each worker's
// answer: "ok", or what went wrong and that its entries were kept.
func (px *Proxy) Reset(ctx context.Context) map[string]string {
	ws := px.Workers()
	results := make(map[string]string, len(ws))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, wk := range ws {
		wg.Go(func() {
			msg := "ok"
			if err := px.resetWorker(ctx, wk); err != nil {
				msg = err.Error() + "; its cache and index entries are kept"
			} else {
				px.rt.index.ClearWorker(wk.Name)
				px.rt.approx.RemoveWorker(wk.Name)
			}
			mu.Lock()
			results[wk.Name] = msg
			mu.Unlock()
		})
	}
	wg.Wait()
	return results
}

func (px *Proxy) resetWorker(ctx context.Context, wk *Worker) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wk.URL.JoinPath("/reset_prefix_cache").String(), nil)
	if err != nil {
		return err
	}
	resp, err := px.client.Do(req)
	if err != nil {
		return fmt.Errorf("reset %s: %w", wk.Name, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		// vLLM registers the endpoint only in development mode
		// (VLLM_SERVER_DEV_MODE=1); SGLang and TensorRT-LLM have others.
		return fmt.Errorf("reset %s: the worker has no POST /reset_prefix_cache (%s)", wk.Name, resp.Status)
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("reset %s: %s", wk.Name, resp.Status)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

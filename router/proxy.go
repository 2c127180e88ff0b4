// Package router is kvlens's OpenAI-compatible proxy: for each request it
// picks a worker with a Policy and streams the worker's answer back.
package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Header names the proxy sets on every routed response.
const (
	// HeaderWorker carries the name of the worker that served the request.
	HeaderWorker = "X-Kvlens-Worker"
)

// maxBodyBytes bounds a proxied request body (8 MiB).
const maxBodyBytes = 8 << 20

// Worker is one inference worker behind the proxy.
type Worker struct {
	// Name identifies the worker in headers and on the dashboard.
	Name string
	// URL is the worker's base URL, without the /v1 suffix.
	URL *url.URL
}

// ParseWorkers turns base URLs into workers named w0, w1, ...
func ParseWorkers(urls []string) ([]*Worker, error) {
	var ws []*Worker
	for i, raw := range urls {
		u, err := url.Parse(strings.TrimSuffix(raw, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("worker %d: %q is not an http(s) base URL", i, raw)
		}
		ws = append(ws, &Worker{Name: fmt.Sprintf("w%d", i), URL: u})
	}
	if len(ws) == 0 {
		return nil, errors.New("no workers given")
	}
	return ws, nil
}

// Proxy routes OpenAI requests to workers.
type Proxy struct {
	workers []*Worker
	client  *http.Client
	policy  atomic.Pointer[policyBox]
}

type policyBox struct{ Policy }

// New returns a proxy over workers that starts with policy p.
func New(workers []*Worker, p Policy) *Proxy {
	px := &Proxy{
		workers: workers,
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // workers are addressed directly, never through HTTP_PROXY
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // compression would buffer the stream
		}},
	}
	px.policy.Store(&policyBox{p})
	return px
}

// Policy returns the active policy.
func (px *Proxy) Policy() Policy { return px.policy.Load().Policy }

// SetPolicy switches the active policy. Requests already routed keep their
// worker; the next decision uses p.
func (px *Proxy) SetPolicy(p Policy) {
	px.policy.Store(&policyBox{p})
}

// Workers returns the workers behind the proxy.
func (px *Proxy) Workers() []*Worker { return px.workers }

// ServeHTTP proxies /v1/chat/completions, /v1/completions and /v1/models.
func (px *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/v1/completions"):
		px.route(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		px.forward(w, r, px.workers[0], nil)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("router: no route for %s %s", r.Method, r.URL.Path))
	}
}

func (px *Proxy) route(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "router: read request body: "+err.Error())
		return
	}
	wk, err := px.Policy().Pick(&Request{Path: r.URL.Path, Body: body}, px.workers)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "router: "+err.Error())
		return
	}
	px.forward(w, r, wk, body)
}

// forward sends r to wk and streams the answer back, flushing after every
// read so that SSE chunks reach the client as the worker sends them.
func (px *Proxy) forward(w http.ResponseWriter, r *http.Request, wk *Worker, body []byte) {
	target := *wk.URL
	target.Path = strings.TrimSuffix(target.Path, "/") + r.URL.Path
	target.RawQuery = r.URL.RawQuery
	up, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "router: build upstream request: "+err.Error())
		return
	}
	for _, h := range []string{"Content-Type", "Accept", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			up.Header.Set(h, v)
		}
	}
	resp, err := px.client.Do(up)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left; nobody to answer
		}
		writeError(w, http.StatusBadGateway, fmt.Sprintf("router: worker %s unreachable: %v", wk.Name, err))
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.Header().Set(HeaderWorker, wk.Name)
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == io.EOF || r.Context().Err() != nil {
			return
		}
		if err != nil {
			// The worker's stream broke. Abort ours too, so the client sees
			// a cut stream instead of a clean but truncated answer.
			panic(http.ErrAbortHandler)
		}
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "code": status}})
}

// PolicyName returns the active policy's identifier.
func (px *Proxy) PolicyName() string { return px.Policy().Name() }

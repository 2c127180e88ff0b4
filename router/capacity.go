package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A worker's batch capacity, learned from the worker.
//
// Real engines say how many sequences they run at once over HTTP, each in
// its own way, and kvlens's simulated worker answers both ways:
//
//   - vLLM: GET /inference/v1/config answers {"scheduler":{"max_num_seqs":N,…},…}.
//   - SGLang: GET /get_server_info answers its server arguments, among them
//     "max_running_requests": N (null when SGLang sized the batch itself).
//     SGLang's own router reads the same field on its health checks.
//
// The Prometheus /metrics of vLLM carries no such number (its only config
// gauge, vllm:cache_config_info, describes the KV cache), so it is not read.

// CapacityRefresh is how often a healthy worker is asked its batch capacity
// again, so that a worker restarted with a new setting is picked up. A worker
// is also asked at its first health poll and whenever it comes back healthy.
const CapacityRefresh = 30 * time.Second

// maxReportedCapacity bounds a believable report, in requests: no engine
// batches a million sequences, so a larger number is garbage.
const maxReportedCapacity = 1 << 20

// maxCapacityBody bounds the answer read, in bytes. SGLang's server info
// lists every server argument: tens of KB.
const maxCapacityBody = 4 << 20

// capacityProbe is one endpoint that reports a batch capacity.
type capacityProbe struct {
	// path is the GET path on the worker's base URL.
	path string
	// field names the number in the JSON answer, for messages.
	field string
}

var capacityProbes = []capacityProbe{
	{"/inference/v1/config", "scheduler.max_num_seqs"},
	{"/get_server_info", "max_running_requests"},
}

// errNoCapacity is a report that holds no batch capacity at all.
var errNoCapacity = errors.New("no batch capacity in the answer")

// ParseCapacityReport reads the batch capacity, in requests, from a worker's
// answer to GET path: vLLM's /inference/v1/config (scheduler.max_num_seqs)
// or SGLang's /get_server_info (max_running_requests). Its errors are one
// line.
func ParseCapacityReport(path string, body []byte) (int, error) {
	var raw json.RawMessage
	var field string
	switch path {
	case "/inference/v1/config":
		var doc struct {
			Scheduler *struct {
				MaxNumSeqs json.RawMessage `json:"max_num_seqs"`
			} `json:"scheduler"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return 0, fmt.Errorf("answer is not the JSON object expected: %s", oneLine(err))
		}
		if doc.Scheduler != nil {
			raw = doc.Scheduler.MaxNumSeqs
		}
		field = "scheduler.max_num_seqs"
	case "/get_server_info":
		var doc struct {
			MaxRunningRequests json.RawMessage `json:"max_running_requests"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return 0, fmt.Errorf("answer is not the JSON object expected: %s", oneLine(err))
		}
		raw, field = doc.MaxRunningRequests, "max_running_requests"
	default:
		return 0, fmt.Errorf("%q is not an endpoint that reports a batch capacity", path)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fmt.Errorf("%w (%s is missing or null)", errNoCapacity, field)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	num, ok := json.Number(""), false
	if dec.Decode(&v) == nil {
		num, ok = v.(json.Number)
	}
	if !ok {
		return 0, fmt.Errorf("%s is %s, not a number", field, snippet(raw))
	}
	n, err := strconv.ParseInt(num.String(), 10, 64)
	if err != nil || n < 1 || n > maxReportedCapacity {
		return 0, fmt.Errorf("%s is %s, not a whole number from 1 to %d", field, snippet([]byte(num)), maxReportedCapacity)
	}
	return int(n), nil
}

// snippet quotes the first 40 bytes of b, for a one-line message.
func snippet(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "…"
	}
	return strconv.Quote(string(b))
}

// oneLine keeps the first line of err's text.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// learnState is what a worker has reported about its batch capacity.
type learnState struct {
	// reported is the batch capacity the worker last reported, in
	// requests; 0 before it has reported one.
	reported atomic.Int64
	// failures counts asks that got no usable batch capacity.
	failures atomic.Int64

	mu      sync.Mutex // guards the rest
	asked   bool       // the worker has been asked at least once
	at      time.Time  // when it was last asked
	wasDown bool       // it failed its previous health poll
	probe   int        // index in capacityProbes of the one that answered last
	lastErr string     // why the latest ask failed; "" after a good one
}

// due reports whether a worker whose health poll just ended with healthy
// should be asked its capacity now, and if so notes that it is: at its first
// healthy poll, when it comes back from a failed one (it may have restarted
// with another setting), and every CapacityRefresh.
func (l *learnState) due(now time.Time, healthy bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	wasDown := l.wasDown
	l.wasDown = !healthy
	if !healthy || (l.asked && !wasDown && now.Sub(l.at) < CapacityRefresh) {
		return false
	}
	l.asked, l.at = true, now
	return true
}

// learnCapacity asks w for its batch capacity, trying first the endpoint
// that answered last, and records the answer. The asks share one timeout, so
// a worker that hangs on them delays its health poll by at most that. A
// worker that reports nothing usable keeps what it reported before; the
// failure is counted, and logged once for each new reason.
func learnCapacity(ctx context.Context, client *http.Client, timeout time.Duration, w *Worker, logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w.learn.mu.Lock()
	first := w.learn.probe
	w.learn.mu.Unlock()
	var reasons []string
	for k := range capacityProbes {
		i := (first + k) % len(capacityProbes)
		n, err := askCapacity(ctx, client, w, capacityProbes[i].path)
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		w.learn.mu.Lock()
		w.learn.probe, w.learn.lastErr = i, ""
		w.learn.mu.Unlock()
		if old := w.learn.reported.Swap(int64(n)); old != int64(n) && logf != nil {
			c, src := w.BatchCapacity()
			if src == CapacityWorker {
				logf("router: worker %s reports batch capacity %d (GET %s)", w.Name, n, capacityProbes[i].path)
			} else {
				logf("router: worker %s reports batch capacity %d (GET %s); the %s capacity %d wins", w.Name, n, capacityProbes[i].path, src, c)
			}
		}
		return
	}
	w.learn.failures.Add(1)
	reason := strings.Join(reasons, "; ")
	w.learn.mu.Lock()
	changed := reason != w.learn.lastErr
	w.learn.lastErr = reason
	w.learn.mu.Unlock()
	if changed && logf != nil {
		c, src := w.BatchCapacity()
		logf("router: worker %s reports no usable batch capacity (%s); keeping %d (%s)", w.Name, reason, c, src)
	}
}

// askCapacity GETs one capacity endpoint of w and parses the answer.
func askCapacity(ctx context.Context, client *http.Client, w *Worker, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL.JoinPath(path).String(), nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %s", path, oneLine(err))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %s", path, oneLine(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCapacityBody+1))
	switch {
	case err != nil:
		return 0, fmt.Errorf("GET %s: read answer: %s", path, oneLine(err))
	case len(body) > maxCapacityBody:
		return 0, fmt.Errorf("GET %s: answer is larger than %d bytes", path, maxCapacityBody)
	}
	n, err := ParseCapacityReport(path, body)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	return n, nil
}

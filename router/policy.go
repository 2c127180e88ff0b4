package router

import (
	"errors"
	"sync/atomic"
)

// ErrNoWorker means no worker can take the request.
var ErrNoWorker = errors.New("no worker available")

// Request is what a policy may look at to pick a worker.
type Request struct {
	// Path is the OpenAI endpoint, such as /v1/chat/completions.
	Path string
	// Body is the raw JSON request body.
	Body []byte
}

// A Policy picks the worker for each request. Implementations must be safe for
// concurrent use.
type Policy interface {
	// Name is the policy's identifier, as used in flags and the admin API.
	Name() string
	// Pick chooses one of workers, which is never empty.
	Pick(r *Request, workers []*Worker) (*Worker, error)
}

// RoundRobin sends each request to the next worker in turn.
type RoundRobin struct {
	next atomic.Uint64
}

var _ Policy = (*RoundRobin)(nil)

// Name implements Policy.
func (*RoundRobin) Name() string { return "round_robin" }

// Pick implements Policy.
func (p *RoundRobin) Pick(_ *Request, workers []*Worker) (*Worker, error) {
	i := p.next.Add(1) - 1
	return workers[i%uint64(len(workers))], nil
}

// Describe gives a policy's name in plain words, for people.
func Describe(name string) string {
	switch name {
	case "round_robin":
		return "Round-robin"
	case "random":
		return "Random"
	case "least_loaded":
		return "Least-loaded"
	case "dynamo":
		return "KV-aware (Dynamo cost)"
	case "kv":
		return "KV-aware"
	case "kv_approx":
		return "KV-aware (approximate)"
	}
	return name
}

// NewPolicy returns the policy called name.
func NewPolicy(name string) (Policy, error) {
	switch name {
	case "round_robin":
		return &RoundRobin{}, nil
	}
	return nil, errors.New("unknown routing policy " + `"` + name + `"` + " (available: round_robin)")
}

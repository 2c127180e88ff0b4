package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Faults are the failures a worker injects, so that a demo can show what
// errors, a slow worker or a stalled one do to routing and to the numbers.
type Faults struct {
	// Error503 is the fraction of requests answered 503 Service Unavailable.
	Error503 float64 `json:"error_503"`
	// Error429 is the fraction of requests answered 429 Too Many Requests.
	Error429 float64 `json:"error_429"`
	// Error500 is the fraction of requests answered 500 Internal Server Error.
	Error500 float64 `json:"error_500"`
	// StreamCut is the fraction of requests whose connection is cut partway
	// through the answer.
	StreamCut float64 `json:"stream_cut"`
	// Slowdown multiplies every step's duration; 1 (or 0, unset) is the
	// profile's speed. It lies from MinSlowdown to MaxSlowdown; reading
	// faults gives the factor in force, 1 when unset.
	Slowdown float64 `json:"slowdown"`
	// Stall pauses the engine for this long from when it is set: steps in
	// flight finish, the next one waits. Reading faults gives what is left.
	// Setting faults again replaces the stall, so a stall of 0 ends one.
	Stall Duration `json:"stall"`
}

// The bounds of Faults.Slowdown. Beyond them a step's duration no longer
// fits a time.Duration, or rounds to nothing, and the worker would run
// infinitely fast; 1000 already makes a 30 ms step take 30 s.
const (
	MinSlowdown = 0.01
	MaxSlowdown = 1000
)

// Duration is a time.Duration written in JSON as a Go duration string, such as "1.5s".
type Duration time.Duration

// MarshalJSON writes d as a string such as "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a string such as "1.5s", or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("stall: %q is not a duration such as \"2s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	err := json.Unmarshal(b, &secs)
	switch {
	case err != nil && rawKind(b) != "a number":
		return fmt.Errorf("stall: expected a duration such as \"2s\" or a number of seconds, got %s", rawKind(b))
	case err != nil || math.Abs(secs) > 1e6: // JSON has no NaN or infinity
		return fmt.Errorf("stall: %s seconds is out of range (at most a million)", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Check reports faults that are out of range, naming the field.
func (f Faults) Check() error { return f.validate() }

func (f Faults) validate() error {
	rates := []struct {
		name string
		v    float64
	}{{"error_503", f.Error503}, {"error_429", f.Error429}, {"error_500", f.Error500}, {"stream_cut", f.StreamCut}}
	sum := 0.0
	for _, r := range rates {
		if r.v < 0 || r.v > 1 || math.IsNaN(r.v) {
			return fmt.Errorf("sim: fault rate %s must be between 0 and 1, got %v", r.name, r.v)
		}
		sum += r.v
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("sim: fault rates add up to %v, more than 1", sum)
	}
	if f.Slowdown != 0 && !(f.Slowdown >= MinSlowdown && f.Slowdown <= MaxSlowdown) {
		return fmt.Errorf("sim: slowdown must be 0 (the profile's speed) or from %v to %v, got %v", MinSlowdown, MaxSlowdown, f.Slowdown)
	}
	if f.Stall < 0 {
		return fmt.Errorf("sim: stall must not be negative, got %v", time.Duration(f.Stall))
	}
	return nil
}

type faultKind int

const (
	faultNone faultKind = iota
	fault503
	fault429
	fault500
	faultCut
)

// faultState holds a worker's current faults and the random source that
// picks which requests they hit.
type faultState struct {
	mu  sync.Mutex
	f   Faults
	rng *rand.Rand
}

func newFaultState(seed uint64) *faultState {
	return &faultState{rng: rand.New(rand.NewPCG(seed^0xfa17, seed))}
}

// draw picks the fault, if any, for the next request.
func (fs *faultState) draw() faultKind {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.f
	if f.Error503+f.Error429+f.Error500+f.StreamCut == 0 {
		return faultNone
	}
	u := fs.rng.Float64()
	for _, k := range []struct {
		p    float64
		kind faultKind
	}{{f.Error503, fault503}, {f.Error429, fault429}, {f.Error500, fault500}, {f.StreamCut, faultCut}} {
		if u < k.p {
			return k.kind
		}
		u -= k.p
	}
	return faultNone
}

func (fs *faultState) intN(n int) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.rng.IntN(n)
}

// applyFaults makes f the worker's faults, starting its stall now and
// ending any earlier one.
func (s *Server) applyFaults(f Faults) {
	s.faults.mu.Lock()
	s.faults.f = f
	s.faults.f.Stall = 0
	s.faults.mu.Unlock()
	s.runner.SetSlowdown(f.Slowdown)
	s.runner.Stall(time.Duration(f.Stall))
}

// Faults returns the faults in force: the slowdown factor applied (1 when
// unset) and the stall time left.
func (s *Server) Faults() Faults {
	s.faults.mu.Lock()
	f := s.faults.f
	s.faults.mu.Unlock()
	if f.Slowdown == 0 {
		f.Slowdown = 1
	}
	f.Stall = Duration(s.runner.stalled())
	return f
}

// SetFaults replaces the faults in force; a Stall starts now, and one
// already running ends unless f has its own.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.applyFaults(f)
	return nil
}

func (s *Server) getFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults())
}

// putFaults replaces the faults with the body's; fields it leaves out are 0.
func (s *Server) putFaults(w http.ResponseWriter, r *http.Request) {
	f, err := parseFaults(http.MaxBytesReader(w, r.Body, 1<<16))
	if err == nil {
		err = s.SetFaults(f)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.Faults())
}

func parseFaults(body io.Reader) (Faults, error) {
	var f Faults
	err := decodeBody(body, &f, true)
	return f, err
}

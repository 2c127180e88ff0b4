package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/components"
)

// ErrSimulating means a simulation is already running.
var ErrSimulating = errors.New("a simulation is already running")

// A Simulator runs "simulate this curve": a sweep of the live settings (the
// fleet's profile and size, the workload, the slider's levels, round-robin
// and KV-aware) in virtual time, taking seconds instead of hours.
type Simulator interface {
	// Simulate starts a simulation and returns at once; ErrSimulating when
	// one is running.
	Simulate() error
	// SimStatus says how the current or last simulation is going.
	SimStatus() SimStatus
}

// SimStatus is a simulation's progress.
type SimStatus struct {
	// Running says a simulation is under way.
	Running bool
	// Finished and Steps count the levels done and planned.
	Finished, Steps int
	// Phase and Step say what it is doing, such as "measuring KV-aware at 120".
	Phase string
	// Took is the wall time the finished simulation took.
	Took time.Duration
	// Err is why the last simulation failed; empty when it did not.
	Err string
	// Result is the finished curve set, also stored when kvlens has a store.
	Result *baselines.Set
	// Stored says the result was saved in the store under its name;
	// NotStored says why it was not.
	Stored    bool
	NotStored string
}

func (s *Server) simStatusData(operator bool) components.SimData {
	d := components.SimData{Operator: operator}
	if s.opts.Simulator == nil {
		return d
	}
	st := s.opts.Simulator.SimStatus()
	d.Available, d.Running, d.Finished, d.Steps, d.Phase, d.Err, d.Stored, d.NotStored = true, st.Running, st.Finished, st.Steps, st.Phase, st.Err, st.Stored, st.NotStored
	if st.Result != nil {
		d.Result = st.Result.Name
		d.Took = st.Took.Round(100 * time.Millisecond).String()
		d.InUse = s.base() != nil && s.base().Name == st.Result.Name
	}
	return d
}

// simulate starts "simulate this curve" and answers with its status.
func (s *Server) simulate(w http.ResponseWriter, r *http.Request) {
	if s.opts.Simulator == nil {
		http.Error(w, "simulation needs the simulated fleet's settings; it is off for real workers", http.StatusNotFound)
		return
	}
	if err := s.opts.Simulator.Simulate(); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, ErrSimulating) {
			code = http.StatusConflict
		}
		http.Error(w, err.Error(), code)
		return
	}
	render(w, r, components.SimStatus(s.simStatusData(true)))
}

// useSimulated makes the last simulated curve the one the dashboard
// compares with, and reloads the page so the overlay redraws.
func (s *Server) useSimulated(w http.ResponseWriter, r *http.Request) {
	if s.opts.Simulator == nil {
		http.Error(w, "no simulator", http.StatusNotFound)
		return
	}
	st := s.opts.Simulator.SimStatus()
	if st.Result == nil {
		http.Error(w, "no simulated curve yet: simulate one first", http.StatusConflict)
		return
	}
	s.baseline.Store(st.Result)
	s.history.mark(Mark{T: time.Now().Unix(), Kind: "baseline", Label: "baseline: simulated"})
	w.Header().Set("HX-Refresh", "true")
	w.WriteHeader(http.StatusNoContent)
}

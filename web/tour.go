package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/kvlens/kvlens/components"
	"github.com/kvlens/kvlens/tour"
)

// CheckTour checks Options.Tour against the dashboard it will play on: each
// concurrency on the slider's scale, each fault one the fleet takes (faults
// says it takes any: the simulated fleet), and a pair only in the A/B view
// (pair). The error names the script's line.
func (o Options) CheckTour(faults, pair bool) error {
	s := o.Tour
	if s == nil {
		return nil
	}
	if o.TourSpeed < 0 || math.IsNaN(o.TourSpeed) || math.IsInf(o.TourSpeed, 0) {
		return fmt.Errorf("tour speed %g: want a positive factor, such as 10", o.TourSpeed)
	}
	for _, st := range s.Steps {
		var err error
		switch st.Action {
		case tour.Concurrency:
			_, err = o.ParseConcurrency(st.Arg)
		case tour.Fault:
			if !faults {
				err = errors.New("faults can be injected only into the simulated fleet")
			} else {
				_, _, err = ParseFault(st.Arg)
			}
		case tour.Pair:
			if !pair {
				err = errors.New("a pair needs the A/B view (--ab), and the single view is on")
			}
		}
		if err != nil {
			return fmt.Errorf("tour %s line %d: %w", s.Name, st.Line, err)
		}
	}
	return nil
}

// PlayTour plays the tour until ctx ends, from the end of the warm-up when
// there is one (RunWarmUp); without a tour it returns at once.
func (s *Server) PlayTour(ctx context.Context) {
	if s.tour == nil {
		return
	}
	select {
	case <-s.warmed:
		s.tour.Run(ctx)
	case <-ctx.Done():
	}
}

// tourStep makes one step's change through the operator's own code paths,
// so that its marks, windows and names are theirs. A step that would change
// nothing (the concurrency, fault or pair already in force) leaves the
// windows alone, as they are still comparable.
func (s *Server) tourStep(st tour.Step) error {
	switch st.Action {
	case tour.Concurrency:
		n, err := s.opts.ParseConcurrency(st.Arg)
		if err != nil {
			return err
		}
		same := true
		for _, sn := range s.snapshots() {
			same = same && sn.Target == n
		}
		if same {
			return nil
		}
		return s.setConcurrency(n)
	case tour.Reset:
		// The workers answer in milliseconds; one that hangs must not hold
		// the tour.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.resetCaches(ctx); err != nil {
			return fmt.Errorf("caches reset, except: %w", err)
		}
	case tour.Fault:
		if s.opts.Faults == nil {
			return errors.New("faults can be injected only into the simulated fleet")
		}
		kind, amount, err := ParseFault(st.Arg)
		if err != nil {
			return err
		}
		if faultValue(kind, amount) == s.currentFault() {
			return nil
		}
		return s.injectFault(kind, amount)
	case tour.Pair:
		want := tour.PairOf(st)
		for i, name := range want {
			if s.pairPolicies()[i] != name {
				if err := s.setMode(i, name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// operatorTakes pauses the tour, when one plays, because an operator has
// changed the demo; it is called before the change is made, so that a step
// being applied at that moment lands first.
func (s *Server) operatorTakes() {
	if s.tour != nil && s.tour.Pause() {
		s.history.mark(Mark{T: time.Now().Unix(), Kind: "tour", Label: "tour paused"})
	}
}

func (s *Server) pauseTour(w http.ResponseWriter, r *http.Request) {
	if s.tour == nil {
		http.Error(w, "no tour is playing: start kvlens with --tour", http.StatusNotFound)
		return
	}
	s.operatorTakes()
	render(w, r, components.Tour(s.tourData(true)))
}

// resumeTour plays the tour again from the step after the one it paused
// in, starting the load first if an operator stopped it.
func (s *Server) resumeTour(w http.ResponseWriter, r *http.Request) {
	if s.tour == nil {
		http.Error(w, "no tour is playing: start kvlens with --tour", http.StatusNotFound)
		return
	}
	stopped := false
	for _, sn := range s.snapshots() {
		stopped = stopped || !sn.Running
	}
	if stopped {
		s.startLoad()
	}
	if s.tour.Resume() {
		s.history.mark(Mark{T: time.Now().Unix(), Kind: "tour", Label: "tour resumed"})
	}
	render(w, r, components.Tour(s.tourData(true)))
}

// tourData is the tour's bar: the caption and progress, or that an
// operator has taken over; Show is false without a tour.
func (s *Server) tourData(operator bool) components.TourData {
	if s.tour == nil {
		return components.TourData{}
	}
	if s.warming() {
		return components.TourData{Show: true, Step: 1, Steps: len(s.tour.Script().Steps),
			Caption: "The tour begins when the warm-up ends.", Left: fmt.Sprintf("in %d s", s.warmLeft())}
	}
	st := s.tour.Status()
	d := components.TourData{Show: true, Step: st.Step, Steps: st.Steps, Caption: st.Caption, Paused: st.Paused,
		Operator: operator, Err: st.Err}
	if !st.Paused && st.Length > 0 {
		// Whole seconds, rounded up: "0 s left" would read as stuck.
		d.Left = fmt.Sprintf("%.0f s left", math.Ceil(st.Left.Seconds()))
		d.Done = 1 - st.Left.Seconds()/st.Length.Seconds()
	}
	return d
}

// tourState is the tour in /api/state.
type tourState struct {
	// Script is where the script came from: a path, or "built-in tour".
	Script string `json:"script"`
	// Step is the step playing or paused in, from 1, of Steps.
	Step  int `json:"step"`
	Steps int `json:"steps"`
	// Caption is the step's caption.
	Caption string `json:"caption"`
	// Paused says an operator has taken over; Resume plays the next step.
	Paused bool `json:"paused"`
	// SecondsLeft is the time until the next step; 0 while paused.
	// StepSeconds is the step's length. Both are at the tour's speed.
	SecondsLeft float64 `json:"seconds_left"`
	StepSeconds float64 `json:"step_seconds"`
	// Loops counts the loops completed.
	Loops int `json:"loops"`
	// Error says why the step's change failed; absent when it did not.
	Error string `json:"error,omitempty"`
}

func (s *Server) tourState() *tourState {
	if s.tour == nil {
		return nil
	}
	st := s.tour.Status()
	return &tourState{Script: s.tour.Script().Name, Step: st.Step, Steps: st.Steps, Caption: st.Caption, Paused: st.Paused,
		SecondsLeft: st.Left.Seconds(), StepSeconds: st.Length.Seconds(), Loops: st.Loop, Error: st.Err}
}

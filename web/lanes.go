package web

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Lane is one fleet the dashboard shows: the load generator that drives it
// and the router in front of it. The single view has one lane; the A/B view
// has two, identical fleets fed the same conversation script at the same
// time, so that every figure of one has a live counterpart in the other.
type Lane struct {
	Gen    Loadgen
	Router Router
	// Gauges, when not nil, returns each worker's own queue and KV-cache
	// figures by worker name.
	Gauges func() map[string]Gauge
}

// laneID is lane i's name on the page, in the API and in marks: a, b, …
func laneID(i int) string { return string(rune('a' + i)) }

// laneIndex is the lane an API request names ("a", "b"; "" is the first).
func (s *Server) laneIndex(id string) (int, error) {
	if id == "" {
		return 0, nil
	}
	for i := range s.lanes {
		if laneID(i) == id {
			return i, nil
		}
	}
	ids := make([]string, len(s.lanes))
	for i := range s.lanes {
		ids[i] = strconv.Quote(laneID(i))
	}
	return 0, fmt.Errorf("lane %.20q is unknown: this dashboard's lanes are %s", id, strings.Join(ids, " and "))
}

// ab says whether the page compares two policies: two lanes side by side,
// or one lane alternating between them.
func (s *Server) ab() bool { return len(s.lanes) > 1 || s.alt != nil }

// seen is what the dashboard last knew of each lane's settings, so that a
// change made behind its back (the router's admin API) also begins a new
// window and a mark.
type seen struct {
	mu       sync.Mutex
	policies []string
	targets  []int
}

// change begins a new metrics window on every lane, so that no figure spans
// the change, and marks it on the charts. The handler makes its change in
// apply, under the same lock as the tick's look for changes, so that one
// change is one mark.
func (s *Server) change(m Mark, apply func() error) error {
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	if apply != nil {
		if err := apply(); err != nil {
			return err
		}
	}
	s.beginLocked(time.Now(), m)
	return nil
}

// beginLocked begins every lane's window and marks why; s.seen.mu is held.
func (s *Server) beginLocked(now time.Time, m Mark) {
	for _, l := range s.lanes {
		l.Gen.BeginWindow()
	}
	s.recordSeenLocked()
	if s.alt != nil {
		s.alt.changed(m.Kind)
	}
	m.T = now.Unix()
	s.history.mark(m)
}

func (s *Server) recordSeenLocked() {
	s.seen.policies = s.seen.policies[:0]
	s.seen.targets = s.seen.targets[:0]
	for _, l := range s.lanes {
		s.seen.policies = append(s.seen.policies, l.Router.PolicyName())
		s.seen.targets = append(s.seen.targets, l.Gen.Target())
	}
}

// watch begins a new window when a lane's policy or concurrency changed
// since the dashboard last looked, as when the router's admin API switched
// it, and says whether it did; it runs every tick.
//
// It reads each lane's target under the lock that a change holds: a
// snapshot taken before the lock could predate a change the dashboard
// itself made meanwhile (a tour's step), which would then read as made
// behind its back and pause the tour.
func (s *Server) watch(now time.Time) bool {
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	if len(s.seen.policies) != len(s.lanes) {
		s.recordSeenLocked()
		return false
	}
	for i, l := range s.lanes {
		if p := l.Router.PolicyName(); p != s.seen.policies[i] {
			s.beginLocked(now, s.laneMark(i, "mode", s.opts.Describe(p)))
			return true
		}
		if n := l.Gen.Target(); n != s.seen.targets[i] {
			s.beginLocked(now, Mark{Kind: "concurrency", Label: fmt.Sprintf("→ %d", n)})
			return true
		}
	}
	return false
}

// laneMark is a mark of kind about lane i: in the A/B view its label
// starts with the lane's letter ("A: KV-aware") and the page draws it in
// the lane's colour; with one lane it is the label alone.
func (s *Server) laneMark(i int, kind, label string) Mark {
	if len(s.lanes) < 2 {
		return Mark{Kind: kind, Label: label}
	}
	return Mark{Kind: kind, Label: fmt.Sprintf("%s: %s", upper(laneID(i)), label), Lane: laneID(i)}
}

// upper is a lane's id as the page shows it: A, B.
func upper(id string) string { return strings.ToUpper(id) }

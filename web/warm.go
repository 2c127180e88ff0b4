package web

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"
)

// A warm-up (Options.Warm) runs the simulated fleets ahead of the wall clock
// before the first frame, so that the first figures a visitor sees are
// steady traffic, not the cold start. Until it is over the page says so in
// place of the figures, no tile shows a difference or a colour, the
// controls answer 409, and the tour waits; the charts draw the warm-up as
// it plays, at its own times, in their past.

// warmState is the warm-up in /api/state.
type warmState struct {
	// SpanSeconds is the traffic played ahead, at Speed times real time:
	// the --warm asked for, and more once a host too slow for the pace has
	// slowed it.
	SpanSeconds float64 `json:"span_seconds"`
	Speed       float64 `json:"speed"`
	// SecondsLeft is the wall-clock time until it is over; 0 once it is.
	SecondsLeft float64 `json:"seconds_left"`
	// Over says the warm-up has ended and the figures are live.
	Over bool `json:"over"`
	// Behind says why the warm-up's windows were dropped at its end (the
	// fleet could not keep its pace); absent when they were kept.
	Behind string `json:"behind,omitempty"`
}

// warming says whether the warm-up is still under way. It is until
// RunWarmUp has checked it at the meeting point.
func (s *Server) warming() bool {
	if s.opts.Warm == nil {
		return false
	}
	select {
	case <-s.warmed:
		return false
	default:
		return true
	}
}

// Warming says whether the warm-up is still under way, so that a status
// line elsewhere can say its figures are the warm-up's.
func (s *Server) Warming() bool { return s.warming() }

// warmLeft is the warm-up's time left in whole seconds, rounded up and at
// least 1 while it is under way: "0 s left" would read as stuck.
func (s *Server) warmLeft() int {
	return max(1, int(math.Ceil(s.opts.Warm.Left().Seconds())))
}

// warmSentence is what the page says while warming, in place of the
// figures.
func (s *Server) warmSentence() string {
	return fmt.Sprintf("Warming up: the fleets run %s of traffic ahead, %d s left", span(s.opts.Warm.Played()), s.warmLeft())
}

// span is a warm-up's length as people say it: "2 min", "2 min 36 s",
// "45 s".
func span(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
	m, sec := int(d/time.Minute), int(d%time.Minute/time.Second)
	if sec == 0 {
		return fmt.Sprintf("%d min", m)
	}
	return fmt.Sprintf("%d min %d s", m, sec)
}

// now is the time of the lanes' clock: the warm-up's while it plays, then
// the wall clock.
func (s *Server) now() time.Time {
	if s.opts.Warm != nil {
		return s.opts.Warm.Now()
	}
	return time.Now()
}

// RunWarmUp waits for the warm-up to end, then checks it: when
// Options.WarmBehind names a reason, the windows it filled are distorted,
// and every lane begins a new one (which settles as after any change). It
// returns that reason, "" when the windows were kept or there is no
// warm-up, or when ctx ended first. The tour's first step waits for it.
func (s *Server) RunWarmUp(ctx context.Context) string {
	w := s.opts.Warm
	if w == nil {
		return ""
	}
	met := make(chan struct{})
	t := w.AtMeet(func() { close(met) })
	select {
	case <-met:
	case <-ctx.Done():
		t.Stop()
		return ""
	}
	var behind string
	if s.opts.WarmBehind != nil {
		behind = s.opts.WarmBehind()
	}
	if behind != "" {
		s.change(Mark{Kind: "warm", Label: "warm-up fell behind: new window"}, nil)
	} else {
		s.history.mark(Mark{T: time.Now().Unix(), Kind: "warm", Label: "warmed up: " + span(w.Played()) + " ahead"})
	}
	s.behind.Store(&behind)
	close(s.warmed)
	return behind
}

func (s *Server) warmState() *warmState {
	w := s.opts.Warm
	if w == nil {
		return nil
	}
	st := &warmState{SpanSeconds: w.Played().Seconds(), Speed: w.Speed(), Over: !s.warming()}
	if st.Over {
		if b := s.behind.Load(); b != nil {
			st.Behind = *b
		}
	} else {
		st.SecondsLeft = float64(s.warmLeft())
	}
	return st
}

// afterWarmUp refuses a change to the demo while the warm-up plays, with a
// one-line 409: a change would begin new windows and waste it. Reads pass.
func (s *Server) afterWarmUp(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.warming() && r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, fmt.Sprintf("warming up, %d s left", s.warmLeft()), http.StatusConflict)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// AfterWarmUp guards h, such as the router's admin API, as the dashboard's
// own controls are: changes are refused with 409 while the warm-up plays.
func (s *Server) AfterWarmUp(h http.Handler) http.Handler { return s.afterWarmUp(h) }

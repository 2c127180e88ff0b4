package tour

import (
	"context"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
)

// Player plays a script in a loop, step after step, until an operator
// takes over (Pause) and from the next step again after Resume.
type Player struct {
	script *Script
	clock  clock.Clock
	// speed divides every step's duration: 10 plays a 50 s step in 5 s.
	speed float64
	// do applies a step's change, as the operator's control would.
	do func(Step) error

	// mu is held while a step's change is applied, so that an operator's
	// change made at that moment (which first pauses the tour) lands after
	// it, and wins.
	mu      sync.Mutex
	started bool
	i       int       // the step playing, or paused in
	began   time.Time // when step i began
	paused  bool
	loop    int // loops completed
	timer   clock.Timer
	gen     int    // a timer from an earlier generation does nothing
	err     string // why the last step's change failed; "" when it did not
}

// NewPlayer returns a player of s that applies each step with do, timing
// steps on c at speed times their written duration's pace (1 for real
// time).
func NewPlayer(s *Script, c clock.Clock, speed float64, do func(Step) error) *Player {
	if speed <= 0 {
		speed = 1
	}
	return &Player{script: s, clock: c, speed: speed, do: do}
}

// Script is the script played.
func (p *Player) Script() *Script { return p.script }

// Run plays the script from its first step until ctx ends.
func (p *Player) Run(ctx context.Context) {
	p.mu.Lock()
	p.started = true
	p.playLocked(0)
	p.mu.Unlock()
	<-ctx.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	if p.timer != nil {
		p.timer.Stop()
	}
}

// playLocked applies step i and schedules the next; p.mu is held.
func (p *Player) playLocked(i int) {
	p.i, p.paused, p.err = i, false, ""
	st := p.script.Steps[i]
	if err := p.do(st); err != nil {
		p.err = err.Error()
	}
	p.began = p.clock.Now()
	p.gen++
	gen := p.gen
	p.timer = p.clock.AfterFunc(p.length(st), func() { p.next(gen) })
}

// length is how long step st lasts at the player's speed.
func (p *Player) length(st Step) time.Duration {
	return time.Duration(float64(st.For) / p.speed)
}

func (p *Player) next(gen int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen != p.gen || p.paused {
		return
	}
	i := p.i + 1
	if i == len(p.script.Steps) {
		i = 0
		p.loop++
	}
	p.playLocked(i)
}

// Pause stops the tour where it is, because an operator took over; it
// reports whether the tour was playing.
func (p *Player) Pause() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || p.paused {
		return false
	}
	p.paused = true
	p.gen++
	if p.timer != nil {
		p.timer.Stop()
	}
	return true
}

// Resume plays the step after the one paused in; it reports whether the
// tour was paused.
func (p *Player) Resume() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || !p.paused {
		return false
	}
	i := p.i + 1
	if i == len(p.script.Steps) {
		i = 0
		p.loop++
	}
	p.playLocked(i)
	return true
}

// Status is what the dashboard shows of the tour.
type Status struct {
	// Step is the step playing or paused in, from 1; Steps is how many.
	Step, Steps int
	// Caption is the step's caption.
	Caption string
	// Left is the time until the next step, at the player's speed; zero
	// while paused.
	Left time.Duration
	// Length is the step's duration at the player's speed.
	Length time.Duration
	// Paused says an operator has taken over.
	Paused bool
	// Loop counts the loops completed.
	Loop int
	// Err says why the step's change failed; "" when it did not.
	Err string
}

// Status is the tour's state now.
func (p *Player) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.script.Steps[p.i]
	s := Status{Step: p.i + 1, Steps: len(p.script.Steps), Caption: st.Caption, Length: p.length(st),
		Paused: p.paused, Loop: p.loop, Err: p.err}
	if p.started && !p.paused {
		s.Left = max(0, s.Length-p.clock.Now().Sub(p.began))
	}
	return s
}

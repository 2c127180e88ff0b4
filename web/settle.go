package web

import (
	"fmt"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

// A window is settled, and its figures compared, once it has run SettleTime
// since it began and SettleRequests requests ended in it (completed or
// failed); the figures read at an answer's end wait, besides, for
// SettleRequests answers within the span whose every request has ended
// (loadgen.Stats.Answered, about a request's length behind). Every change the dashboard makes (start, concurrency, routing
// policy or pair, cache reset, fault) begins a new window, so a settled
// window never spans one; until then each tile shows its figure with
// "settling (12 s of 30)" instead of a delta, and no colour. At the
// default 60 conversations 30 s hold over a hundred first tokens per lane,
// and are short enough for a visitor to wait for; 20 ended requests keep
// the figures read at an answer's end (TPOT, E2E, hit rate) from resting on
// a few.
const (
	SettleTime     = 30 * time.Second
	SettleRequests = 20
)

// settling says why a window's figures are not yet comparable, as a tile
// shows it, such as "settling (12 s of 30)"; "" once they are.
func settling(w loadgen.Stats) string {
	ended := w.Completed + w.Errors
	if w.Covered >= SettleTime && ended >= SettleRequests {
		return ""
	}
	need := int(SettleTime / time.Second)
	secs := min(int(w.Covered/time.Second), need)
	if w.Covered < SettleTime {
		return fmt.Sprintf("settling (%d s of %d)", secs, need)
	}
	return fmt.Sprintf("settling (%d of %d requests)", ended, SettleRequests)
}

// answering is settling for the figures read at an answer's end (TPOT,
// E2E, chunk gaps, the hit rate, the error rate): they also wait for
// SettleRequests answers from the span of the window whose every request
// has ended, which trails its age by about a request's length after a
// change, so that the short answers and failures that end first do not
// stand for all.
func answering(w loadgen.Stats) string {
	if s := settling(w); s != "" {
		return s
	}
	if w.Answers < SettleRequests {
		return fmt.Sprintf("answers (%d of %d)", w.Answers, SettleRequests)
	}
	return ""
}

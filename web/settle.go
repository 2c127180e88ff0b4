package web

import (
	"fmt"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

// A window is settled, and its TTFT and rates compared, once it has run
// SettleTime since it began and SettleRequests of its requests have had
// their first token (or, for a fleet that fails them all, ended). The
// figures read at an answer's end (TPOT, E2E, chunk gaps, the hit rate,
// the error rate) wait instead for SettleRequests answers. Both counts
// come from the window's spans whose every request has had its first
// token, or its answer (loadgen.Stats.FirstTokens, Stats.Answered), so
// that neither leans towards the requests that are quick. Every change the
// dashboard makes (start, concurrency, routing policy or pair, cache
// reset, fault) begins a new window, so a settled window never spans one;
// until then each tile shows its figure with "settling (12 s of 30)" or
// "answers (3 of 20)" instead of a delta, and no colour. At the default 60
// conversations 30 s hold over a hundred first tokens per lane, and are
// short enough for a visitor to wait for; 20 answers keep the figures read
// at an answer's end from resting on a few.
const (
	SettleTime     = 30 * time.Second
	SettleRequests = 20
)

// settling says why a window's TTFT and rates are not yet comparable, as a
// tile shows it, such as "settling (12 s of 30)"; "" once they are.
func settling(w loadgen.Stats) string {
	heard := max(w.TTFT.Count, w.Completed+w.Errors)
	if w.Covered >= SettleTime && heard >= SettleRequests {
		return ""
	}
	need := int(SettleTime / time.Second)
	secs := min(int(w.Covered/time.Second), need)
	if w.Covered < SettleTime {
		return fmt.Sprintf("settling (%d s of %d)", secs, need)
	}
	return fmt.Sprintf("settling (%d of %d requests)", heard, SettleRequests)
}

// answering is settling for the figures read at an answer's end (TPOT,
// E2E, chunk gaps, the hit rate, the error rate): they wait for
// SettleRequests answers from the span of the window whose every request
// has ended, which trails its age by about a request's length after a
// change, so that the short answers and failures that end first do not
// stand for all.
func answering(w loadgen.Stats) string {
	if w.Covered < SettleTime {
		return settling(w)
	}
	if w.Answers < SettleRequests {
		return fmt.Sprintf("answers (%d of %d)", w.Answers, SettleRequests)
	}
	return ""
}

package web

import (
	"fmt"
	"time"

	"github.com/kvlens/kvlens/loadgen"
)

// A window is settled, and its TTFT compared, once it has run SettleTime
// since it began and SettleRequests of its requests have had their first
// token (or, for a fleet that fails them all, ended). The figures read at
// an answer's end (TPOT, E2E, chunk gaps, the hit rate, the error rate)
// wait instead for SettleRequests answers, and the rates for every request
// of the window's first SettleTime to have ended (flowing). Both counts
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

// settling says why a window's TTFT is not yet comparable, as a
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

// Settling is settling for a status line outside the page: why the
// window's TTFT is not yet comparable, or "" once it is.
func Settling(w loadgen.Stats) string { return settling(w) }

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

// flowing is settling for the rates (tokens/s, requests/s, goodput). A rate
// counts the answers that ended in the window, sent before it began or
// after, so for about a request's length after a change it counts answers
// the change did not touch, and after a start, with nothing in flight, it
// counts the empty loop filling (at 60 conversations, tokens/s read 1,500
// to 1,900 for the 30 s after that against 2,300 once flowing, and B's lead
// over A swung from +2% to +19%). The rates wait, then, until every request
// sent in the window's first SettleTime has ended (Stats.Answered): about
// a request's length more than the rest.
func flowing(w loadgen.Stats) string {
	if s := answering(w); s != "" {
		return s
	}
	if w.Answered < SettleTime {
		need := int(SettleTime / time.Second)
		return fmt.Sprintf("rates: %d s of %d", int(w.Answered/time.Second), need)
	}
	return ""
}

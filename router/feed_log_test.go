package router

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/internal/lograte"
	"github.com/kvlens/kvlens/kvevents"
)

// TestAPublisherCannotFloodTheFeedsLog plays 20 of each thing a worker's
// publisher can repeat at will: the log gets 5 lines of it and, 10 s
// later, one saying how many more, while the index is cleared every time
// the stream says it is stale (a connection alone does not).
func TestAPublisherCannotFloodTheFeedsLog(t *testing.T) {
	const n = 20
	tests := []struct {
		name    string
		play    func(f *Feed, es *eventStream) // once
		line    string
		summary string
		clears  int
	}{
		// The connection drops and comes back, as a peer reconnecting in a
		// loop to a bound endpoint makes it.
		{"reconnections past the first few are summed up every 10 s", func(f *Feed, es *eventStream) { f.connected("w0", es, false); f.connected("w0", es, true) },
			"publisher reconnected", "KV events: publisher reconnections from w0: 15 more not logged in the last 10s", 0},
		// A First message that is not seq 0, as a publisher whose seq goes
		// back every message sends.
		{"joins without history", func(f *Feed, es *eventStream) {
			f.apply(es, kvevents.Update{Worker: "w0", First: true, Message: kvevents.Message{Seq: 7}})
		}, "without its history", "KV events: joins without history from w0: 15 more not logged in the last 10s", n},
		// A publisher restarting in a loop.
		{"restarts", func(f *Feed, es *eventStream) {
			f.apply(es, kvevents.Update{Worker: "w0", First: true, Reset: true, Whole: true, Message: kvevents.Message{Seq: 0}})
		}, "publisher restarted", "KV events: publisher restarts from w0: 15 more not logged in the last 10s", n},
		// A publisher reconnecting in a loop, its seq going on.
		{"reconnections told to have gone on", func(f *Feed, es *eventStream) {
			f.apply(es, kvevents.Update{Worker: "w0", Reconnected: true, Empty: true, Message: kvevents.Message{Seq: 1}})
		}, "publisher back", "KV events: publishers back from w0: 15 more not logged in the last 10s", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var lines []string
			logf := func(format string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, fmt.Sprintf(format, a...))
			}
			count := func(s string) int {
				mu.Lock()
				defer mu.Unlock()
				k := 0
				for _, l := range lines {
					if strings.Contains(l, s) {
						k++
					}
				}
				return k
			}
			f := NewFeed(NewRouter(NewPool(nil), &RoundRobin{}, Config{BlockSize: 16}), logf)
			loop := des.New(time.Time{})
			f.quiet = lograte.New(loop, func(line string) { f.logf("KV events: %s", line) })
			es := newEventStream(streamSpec{}, loop)
			f.connected("w0", es, true) // the first connection
			for range n {
				tt.play(f, es)
			}
			if es.clears != uint64(tt.clears) {
				t.Fatalf("the index was cleared %d times, want %d", es.clears, tt.clears)
			}
			if got := count(tt.line); got != lograte.Burst {
				t.Fatalf("%d lines %q, want %d: %q", got, tt.line, lograte.Burst, lines)
			}
			loop.Run(lograte.Every)
			if got := count(tt.summary); got != 1 {
				t.Fatalf("%d summaries %q, want 1: %q", got, tt.summary, lines)
			}
		})
	}
}

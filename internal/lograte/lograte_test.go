package lograte

import (
	"slices"
	"testing"
	"time"

	"github.com/kvlens/kvlens/des"
)

func TestLimiter(t *testing.T) {
	type burst struct {
		at         time.Duration // since the start
		what, from string
		n          int // lines asked for
	}
	tests := []struct {
		name      string
		bursts    []burst
		end       time.Duration // the loop runs to here, then Close
		wantLines int           // lines allowed
		want      []string      // summaries, in order
	}{
		{"a burst of 12 logs 5 and sums up the 7 others at the end of the interval",
			[]burst{{0, "malformed messages", "tcp://*:5557", 12}}, 30 * time.Second,
			5, []string{"malformed messages from tcp://*:5557: 7 more not logged in the last 10s"}},
		{"a line every 2 s, the sustained rate, is always logged",
			[]burst{{0, "a", "s", 1}, {2 * time.Second, "a", "s", 1}, {4 * time.Second, "a", "s", 1}, {6 * time.Second, "a", "s", 1},
				{8 * time.Second, "a", "s", 1}, {10 * time.Second, "a", "s", 1}, {12 * time.Second, "a", "s", 1}}, 30 * time.Second,
			7, nil},
		{"kinds and sources are limited apart",
			[]burst{{0, "a", "s1", 5}, {0, "a", "s2", 5}, {0, "b", "s1", 5}}, 30 * time.Second,
			15, nil},
		// 5 at 0 s, 4 held; 10 s later 5 tokens again: 5 more, 7 held.
		{"a flood goes on being limited after its summary",
			[]burst{{0, "a", "s", 9}, {10 * time.Second, "a", "s", 12}}, 30 * time.Second,
			10, []string{"a from s: 4 more not logged in the last 10s", "a from s: 7 more not logged in the last 10s"}},
		{"Close sums up at once what is held back",
			[]burst{{0, "a", "s", 8}}, 4 * time.Second,
			5, []string{"a from s: 3 more not logged in the last 4s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loop := des.New(time.Time{})
			var got []string
			l := New(loop, func(line string) { got = append(got, line) })
			allowed := 0
			for _, b := range tt.bursts {
				loop.RunUntil(des.Epoch.Add(b.at))
				for range b.n {
					if l.Allow(b.what, b.from) {
						allowed++
					}
				}
			}
			loop.RunUntil(des.Epoch.Add(tt.end))
			l.Close()
			if allowed != tt.wantLines {
				t.Errorf("%d lines allowed, want %d", allowed, tt.wantLines)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("summaries %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLimiterSaysNothingTwice(t *testing.T) {
	loop := des.New(time.Time{})
	var got []string
	l := New(loop, func(line string) { got = append(got, line) })
	for range 6 {
		l.Allow("a", "s")
	}
	loop.Run(Every) // the summary of the one held back
	l.Close()       // nothing is held any more
	loop.Run(Every)
	if len(got) != 1 {
		t.Fatalf("summaries %q, want one", got)
	}
}

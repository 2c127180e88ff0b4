package des

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestEventsRunInTimeThenSchedulingOrder(t *testing.T) {
	l := New(time.Time{})
	var got []string
	add := func(d time.Duration, s string) { l.AfterFunc(d, func() { got = append(got, s) }) }
	add(2*time.Second, "c")
	add(time.Second, "a")
	add(time.Second, "b") // same time as a, scheduled after it
	stopped := l.AfterFunc(time.Second, func() { got = append(got, "stopped") })
	l.AfterFunc(1500*time.Millisecond, func() {
		add(0, "now, from an event")
		add(-time.Second, "negative counts as now")
	})
	if !stopped.Stop() {
		t.Fatal("Stop of a pending event reported false")
	}
	l.Run(time.Second + 500*time.Millisecond)
	if want := []string{"a", "b", "now, from an event", "negative counts as now"}; !slices.Equal(got, want) {
		t.Fatalf("after 1.5 s ran %q, want %q", got, want)
	}
	if now := l.Now().Sub(Epoch); now != 1500*time.Millisecond {
		t.Fatalf("time is %v after Run(1.5s), want 1.5s", now)
	}
	l.Run(time.Hour)
	if got[len(got)-1] != "c" || l.Pending() != 0 {
		t.Fatalf("ran %q with %d pending", got, l.Pending())
	}
	if stopped.Stop() {
		t.Fatal("Stop of a stopped event reported true")
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	l := New(time.Time{})
	var tick func()
	n := 0
	tick = func() { n++; l.AfterFunc(time.Millisecond, tick) }
	l.AfterFunc(0, tick)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep returned %v, want context.Canceled", err)
	}
	if n != 0 {
		t.Fatalf("%d events ran under a cancelled context", n)
	}
	if err := l.Sleep(context.Background(), time.Second); err != nil || n != 1001 {
		t.Fatalf("Sleep(1s) ran %d ticks, err %v; want 1001 (at 0, 1, ... 1000 ms)", n, err)
	}
}

// BenchmarkLoop measures the cost of scheduling and running one event.
func BenchmarkLoop(b *testing.B) {
	l := New(time.Time{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		l.AfterFunc(time.Duration(i%97)*time.Microsecond, func() {})
		if i%64 == 63 {
			l.Run(time.Millisecond)
		}
	}
	l.Run(time.Hour)
}

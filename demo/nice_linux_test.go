package demo

import (
	"syscall"
	"testing"
)

// niceOf reads a thread's nice value (-20 to 19). The raw getpriority
// system call answers 20 - nice, so that it is never negative.
func niceOf(t *testing.T, tid int) int {
	t.Helper()
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatal(err)
	}
	return 20 - raw
}

func TestLowerPriorityTouchesOnlyTheSimulationsThread(t *testing.T) {
	before := niceOf(t, syscall.Gettid())
	got := make(chan int)
	go func() {
		if err := lowerPriority(); err != nil {
			t.Error(err)
		}
		got <- niceOf(t, syscall.Gettid())
	}()
	if n := <-got; n != 19 {
		t.Errorf("the simulation's thread runs at nice %d, want 19", n)
	}
	if n := niceOf(t, syscall.Gettid()); n != before {
		t.Errorf("the test's own thread went from nice %d to %d", before, n)
	}
}

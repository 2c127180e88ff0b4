package loadgen

import (
	"os"
	"runtime/debug"
)

// MeasuringGCPercent is the garbage collector's target while kvlens
// measures. GC work landing between a chunk's arrival and its timestamp
// skewed TTFT by up to 7.7 ms at p99 at 500 streams with Go's default of 100,
// and by at most 0.73 ms at 400 (BenchmarkAccuracy500Streams, 6 runs each).
// In exchange the heap may grow to five times the live data; GOMEMLIMIT caps
// it where memory is tight.
const MeasuringGCPercent = 400

// TuneGC sets the garbage collector for measuring, unless the environment
// chose with GOGC, and returns a func that restores the previous setting.
func TuneGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(MeasuringGCPercent)
	return func() { debug.SetGCPercent(old) }
}

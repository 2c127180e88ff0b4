package connlimit

// Bounds of Default's share, in connections a listener.
const (
	// Fallback is each group's share when the descriptor limit is unknown
	// (on systems without RLIMIT_NOFILE).
	Fallback = 4096
	// Floor is the least a listener gets, whatever the descriptor limit:
	// the demo's own traffic must never wait behind the cap. Two lanes at
	// the slider's top send 360 streams through the dashboard, with their
	// keep-alive pool beside them, and the router may send most of a
	// lane's to one worker. On a machine with few descriptors the cap
	// then guards less, rather than the demo stalling.
	Floor = 1024
	// Ceiling is the most a listener gets, however many descriptors the
	// process may open: the load generator's most conversations
	// (loadgen.MaxConcurrency, 10,000) and the dashboard's viewers fit, and
	// a flood of idle connections costs at most about 200 MB (net/http
	// holds a goroutine and a 4 KB read buffer for each, about 13 KB).
	Ceiling = 16384
)

// Default returns the cap for each of n listeners that serve one purpose
// (the dashboard is one; a fleet's n workers are one): together they may
// hold a quarter of the file descriptors the process may open
// (RLIMIT_NOFILE, which the Go runtime raises to the hard limit at start).
// The dashboard and the A/B demo's two fleets, all flooded at once, so
// leave a quarter to the process's own connections, files and sockets.
// Each listener gets at least Floor and at most Ceiling.
func Default(n int) int { return share(openFileLimit(), n) }

// share is Default for a process that may open nofile descriptors; 0 means
// the limit is unknown.
func share(nofile uint64, n int) int {
	n = max(n, 1)
	group := uint64(Fallback)
	if nofile > 0 {
		group = nofile / 4
	}
	return int(min(max(group/uint64(n), Floor), Ceiling))
}

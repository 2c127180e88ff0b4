package router

// LeastLoaded sends each request to the worker with the fewest active
// requests, breaking ties by fewest active blocks, then by list order.
type LeastLoaded struct{}

var _ Policy = LeastLoaded{}

// Name implements Policy.
func (LeastLoaded) Name() string { return "least_loaded" }

// Pick implements Policy.
func (LeastLoaded) Pick(_ *Request, cands []Candidate) int {
	best := 0
	for i, c := range cands[1:] {
		b := cands[best]
		if c.InFlight < b.InFlight || (c.InFlight == b.InFlight && c.ActiveBlocks < b.ActiveBlocks) {
			best = i + 1
		}
	}
	return best
}

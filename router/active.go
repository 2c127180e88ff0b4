package router

import (
	"slices"
	"time"

	"github.com/kvlens/kvlens/blockhash"
)

// DefaultStaleBooking is how long a booking may stay open before it is
// presumed lost and freed, as in Dynamo.
const DefaultStaleBooking = 300 * time.Second

// load is one worker's active sequences: the requests booked on it and not
// yet finished. The Router's lock guards it.
type load struct {
	// inflight counts booked requests' sequences (Request.Sequences),
	// the batch slots they hold.
	inflight int
	// prefillTokens sums ISL − overlap·B over requests without a first token.
	prefillTokens int
	// contextTokens sums the prompt tokens of every booked request, shared
	// prefixes counted once per request.
	contextTokens int
	// blocks reference-counts the prompt blocks of booked requests, so a
	// prefix shared by several requests counts once.
	blocks blockMap
	// freedAt holds when the latest requests ended, a ring from freedNext.
	freedAt   [8]time.Time
	freedNext int
}

// freed records that a request ended at t, freeing its n batch slots; the
// ring keeps the last 8 of them.
func (l *load) freed(t time.Time, n int) {
	for range min(n, len(l.freedAt)) {
		l.freedAt[l.freedNext] = t
		l.freedNext = (l.freedNext + 1) % len(l.freedAt)
	}
}

// freedSince counts the batch slots freed after t, up to the ring's 8.
func (l *load) freedSince(t time.Time) int {
	n := 0
	for _, at := range l.freedAt {
		if !at.IsZero() && at.After(t) {
			n++
		}
	}
	return n
}

// sequences is how many batch slots r holds on c: its Sequences, at least
// one, and at most c's batch capacity. An engine runs the sequences beyond
// its max_num_seqs in later waves, and an "n" the worker will refuse must
// not fill its books while the refusal is on its way.
func sequences(r *Request, c *Candidate) int {
	n := max(1, r.Sequences)
	if c.Capacity > 0 {
		n = min(n, c.Capacity)
	}
	return n
}

func (l *load) add(b *Booking) {
	l.inflight += b.seqs
	l.prefillTokens += b.prefill
	l.contextTokens += b.isl
	for _, h := range b.chain {
		l.blocks.set(h, l.blocks.get(h)+1)
	}
}

func (l *load) prefillDone(b *Booking) {
	l.prefillTokens -= b.prefill
}

func (l *load) remove(b *Booking) {
	l.inflight -= b.seqs
	if !b.prefilled {
		l.prefillTokens -= b.prefill
	}
	l.contextTokens -= b.isl
	for _, h := range b.chain {
		l.blocks.set(h, l.blocks.get(h)-1)
	}
}

// depth is how many leading blocks of chain are already held by requests
// active on this worker.
func (l *load) depth(chain []uint64) int {
	for i, h := range chain {
		if l.blocks.get(h) == 0 {
			return i
		}
	}
	return len(chain)
}

// Booking is one request's claim on a worker, from the routing decision to
// the end of its stream. Its methods are safe for concurrent use and
// idempotent.
type Booking struct {
	// Worker is the chosen worker.
	Worker *Worker
	// Overlap is how many leading prompt blocks the index said Worker held.
	Overlap int
	// Policy is the name of the policy that decided.
	Policy string

	r         *Router
	predicted bool // the decision was inserted in the predicted index
	chain     []uint64
	isl       int
	seqs      int // sequences, at least 1
	prefill   int
	at        time.Time
	prefilled bool
	done      bool
	// oracle is the best achievable cached prefix at decision time, in
	// tokens (see Oracle).
	oracle int
}

// OracleTokens is the request's best achievable cached prefix when it was
// routed, in tokens: the longest prefix of its prompt any worker had ever
// stored, capped as the engine caps a prompt.
func (b *Booking) OracleTokens() int {
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	return b.oracle
}

// FirstToken marks the request's prefill complete: its tokens stop counting
// as queued prefill on the worker.
func (b *Booking) FirstToken() {
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	if b.prefilled || b.done {
		return
	}
	b.prefilled = true
	b.Worker.load.prefillDone(b)
	b.r.oracle.Record(b.isl, b.oracle)
}

// Release frees the booking, at stream end, error or client disconnect.
func (b *Booking) Release() {
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	b.r.releaseLocked(b)
}

// InferParent finds the prompt in flight on worker whose blocks a store
// hanging off an unknown parent extends: first is the store's first block
// of tokens, and the answer is the chain of that prompt up to and including
// the block first follows, or nil when no booked prompt has first as a
// block. A prompt's first block has no parent, so it is never the answer's
// end. Each booking costs a hash per block of its prompt, hashed outside
// the decision lock: a booking's chain is replaced, never written in place.
func (r *Router) InferParent(worker string, first []uint32) []uint64 {
	r.mu.Lock()
	var chains [][]uint64
	for b := range r.bookings {
		if b.Worker.Name == worker && len(b.chain) > 1 {
			chains = append(chains, b.chain)
		}
	}
	r.mu.Unlock()
	local := blockhash.Local(first)
	for _, chain := range chains {
		for k := 0; k+1 < len(chain); k++ {
			if blockhash.Next(chain[k], local) == chain[k+1] {
				return slices.Clone(chain[:k+1])
			}
		}
	}
	return nil
}

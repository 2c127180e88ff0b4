package router

import (
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
)

// Approximate-index defaults, as in Dynamo (router_ttl_secs,
// router_max_tree_size, router_prune_target_ratio).
const (
	DefaultApproxTTL       = 120 * time.Second
	DefaultApproxMaxBlocks = 1 << 20
	approxPruneRatio       = 0.8
)

type approxKey struct {
	h    uint64
	slot int32
}

type approxItem struct {
	key        approxKey
	expiry     int64 // Unix nanoseconds
	prev, next int32 // neighbours in expiry order; -1 at the ends
}

// Approx is the predicted index for workers that publish no KV events: every
// routing decision is inserted as if the chosen worker had stored the
// request's blocks. Entries live for a TTL, refreshed when a decision reuses
// them; past MaxBlocks (worker, block) pairs the earliest-expiring are pruned
// down to 80%. Since every insert or refresh expires exactly TTL from now,
// a list kept in insertion order is also in expiry order, so expiry and
// pruning both pop from its head.
type Approx struct {
	mu        sync.Mutex
	clk       clock.Clock
	ttl       time.Duration
	maxPairs  int
	t         table
	slots     slots
	items     blockMap // pairKey → arena index + 1
	arena     []approxItem
	free      []int32
	head      int32
	tail      int32
	perWorker []int // pairs by slot
	pruned    uint64
}

// NewApprox returns an empty predicted index. ttl <= 0 and maxPairs <= 0
// take Dynamo's defaults.
func NewApprox(clk clock.Clock, ttl time.Duration, maxPairs int) *Approx {
	if ttl <= 0 {
		ttl = DefaultApproxTTL
	}
	if maxPairs <= 0 {
		maxPairs = DefaultApproxMaxBlocks
	}
	return &Approx{clk: clk, ttl: ttl, maxPairs: maxPairs, head: -1, tail: -1}
}

// pairKey folds a (block, worker) pair into one 64-bit key. Distinct pairs
// collide with probability about 2^-64, as two chain hashes do.
func (k approxKey) pairKey() uint64 { return k.h ^ (uint64(k.slot)+1)*0x9e3779b97f4a7c15 }

func (a *Approx) unlink(i int32) {
	it := &a.arena[i]
	if it.prev >= 0 {
		a.arena[it.prev].next = it.next
	} else {
		a.head = it.next
	}
	if it.next >= 0 {
		a.arena[it.next].prev = it.prev
	} else {
		a.tail = it.prev
	}
}

func (a *Approx) pushBack(i int32) {
	it := &a.arena[i]
	it.prev, it.next = a.tail, -1
	if a.tail >= 0 {
		a.arena[a.tail].next = i
	} else {
		a.head = i
	}
	a.tail = i
}

func (a *Approx) drop(i int32) {
	it := a.arena[i]
	a.unlink(i)
	a.items.set(it.key.pairKey(), 0)
	a.t.remove(it.key.h, int(it.key.slot))
	a.perWorker[it.key.slot]--
	a.free = append(a.free, i)
}

func (a *Approx) expireLocked(now int64) {
	for a.head >= 0 && a.arena[a.head].expiry <= now {
		a.drop(a.head)
	}
}

// Insert records that worker was sent a request whose blocks are chain.
func (a *Approx) Insert(worker string, chain []uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clk.Now().UnixNano()
	a.expireLocked(now)
	s := a.slots.take(worker)
	for len(a.perWorker) <= s {
		a.perWorker = append(a.perWorker, 0)
	}
	exp := now + int64(a.ttl)
	prevNew := false // whether the block before was new to this worker
	for j, h := range chain {
		k := approxKey{h, int32(s)}
		if v := a.items.get(k.pairKey()); v != 0 {
			i := int32(v - 1)
			a.arena[i].expiry = exp
			a.unlink(i)
			a.pushBack(i)
			if prevNew {
				a.t.link(chain[j-1], h)
			}
			prevNew = false
			continue
		}
		var i int32
		if n := len(a.free); n > 0 {
			i, a.free = a.free[n-1], a.free[:n-1]
		} else {
			i = int32(len(a.arena))
			a.arena = append(a.arena, approxItem{})
		}
		a.arena[i] = approxItem{key: k, expiry: exp}
		a.pushBack(i)
		a.items.set(k.pairKey(), uint64(i)+1)
		a.t.add(h, s)
		a.perWorker[s]++
		// Hints need linking only where a block is new: pairs refreshed
		// on both sides were linked when they were stored.
		if j > 0 {
			a.t.link(chain[j-1], h)
		}
		prevNew = true
	}
	if a.items.len() > a.maxPairs {
		target := int(float64(a.maxPairs) * approxPruneRatio)
		for a.items.len() > target {
			a.drop(a.head)
			a.pruned++
		}
	}
}

// FindMatches is Index.FindMatches on the predicted blocks that have not
// expired.
func (a *Approx) FindMatches(chain []uint64, workers []string, dst []int) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireLocked(a.clk.Now().UnixNano())
	return matchNames(&a.t, &a.slots, chain, workers, dst)
}

// Held reports whether any worker holds block h, as predicted.
func (a *Approx) Held(h uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireLocked(a.clk.Now().UnixNano())
	return a.t.held(h)
}

// Blocks returns how many predicted blocks worker holds.
func (a *Approx) Blocks(worker string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s, ok := a.slots.get(worker); ok && s < len(a.perWorker) {
		return a.perWorker[s]
	}
	return 0
}

// Len returns the number of (worker, block) pairs held.
func (a *Approx) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireLocked(a.clk.Now().UnixNano())
	return a.items.len()
}

// Pruned counts pairs dropped because the index was full.
func (a *Approx) Pruned() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pruned
}

// RemoveWorker forgets every prediction for worker.
func (a *Approx) RemoveWorker(worker string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.slots.get(worker)
	if !ok {
		return
	}
	for i := a.head; i >= 0; {
		next := a.arena[i].next
		if a.arena[i].key.slot == int32(s) {
			a.drop(i)
		}
		i = next
	}
	a.slots.release(worker)
}

// Clear forgets every prediction.
func (a *Approx) Clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.t = table{}
	a.items = blockMap{}
	a.arena, a.free = a.arena[:0], a.free[:0]
	a.head, a.tail = -1, -1
	clear(a.perWorker)
}

// Sizes sets dst[i] to how many predicted blocks workers[i] holds.
func (a *Approx) Sizes(workers []string, dst []int) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	dst = grow(dst, len(workers))
	for i, name := range workers {
		dst[i] = 0
		if s, ok := a.slots.get(name); ok && s < len(a.perWorker) {
			dst[i] = a.perWorker[s]
		}
	}
	return dst
}

package sim

import (
	"container/heap"

	"github.com/kvlens/kvlens/kvevents"
)

// kvCache is a paged KV cache with prefix caching, as vLLM and TensorRT-LLM
// keep one. Memory is a fixed pool of blocks of blockSize tokens. A full
// block whose tokens are known is registered under its blockhash sequence
// hash, so a later request with the same prefix can reuse it. A registered
// block that no request holds any more stays cached until its slot is needed;
// then the least recently released is evicted, and among blocks released
// together the deepest in its chain goes first, so leaves are evicted before
// the prefixes they hang from.
//
// It records the KV events its changes cause; the engine drains them once a
// step. Engine ids on the wire are the sequence hashes themselves.
type kvCache struct {
	blockSize int
	blocks    []block
	// free holds slots with no cached content, ready to hand out.
	free []int32
	// byHash maps a registered block's sequence hash to its slot.
	byHash map[uint64]int32
	// evictable holds registered blocks with no holder, in eviction order.
	evictable evictQueue
	// used counts blocks held by at least one request.
	used int
	// releases counts release calls; it stamps blocks for LRU order.
	releases uint64
	events   []kvevents.Event
}

type block struct {
	hash   uint64
	hashed bool  // registered in byHash
	depth  int32 // index of the block in its sequence's chain
	ref    int32 // requests holding the block
	// stamp is the release call that last dropped ref to 0.
	stamp uint64
	// qidx is the block's index in evictable, or -1.
	qidx int
}

func newKVCache(blocks, blockSize int) *kvCache {
	c := &kvCache{
		blockSize: blockSize,
		blocks:    make([]block, blocks),
		free:      make([]int32, blocks),
		byHash:    make(map[uint64]int32),
	}
	c.evictable.c = c
	for i := range c.blocks {
		c.blocks[i].qidx = -1
		c.free[i] = int32(blocks - 1 - i) // pop from the end hands out slot 0 first
	}
	return c
}

// match returns how many of hashes, from the first, name cached blocks.
func (c *kvCache) match(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := c.byHash[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// available is how many blocks allocate could hand out now, evicting.
func (c *kvCache) available() int { return len(c.free) + c.evictable.Len() }

// idleAmong counts the cached blocks among hashes that no request holds:
// taking them shrinks what allocate can hand out.
func (c *kvCache) idleAmong(hashes []uint64) int {
	n := 0
	for _, h := range hashes {
		if c.blocks[c.byHash[h]].ref == 0 {
			n++
		}
	}
	return n
}

// acquire takes a reference on the cached blocks named by hashes, which
// match must have found, and appends their slots to table.
func (c *kvCache) acquire(table []int32, hashes []uint64) []int32 {
	for _, h := range hashes {
		slot := c.byHash[h]
		b := &c.blocks[slot]
		if b.ref == 0 {
			heap.Remove(&c.evictable, b.qidx)
			c.used++
		}
		b.ref++
		table = append(table, slot)
	}
	return table
}

// allocate hands out an empty block with one reference, evicting the first
// block in eviction order when no slot is free. It reports false when every
// block is held.
func (c *kvCache) allocate() (int32, bool) {
	var slot int32
	switch {
	case len(c.free) > 0:
		slot = c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
	case c.evictable.Len() > 0:
		slot = heap.Pop(&c.evictable).(int32)
		b := &c.blocks[slot]
		delete(c.byHash, b.hash)
		c.removed(b.hash)
	default:
		return 0, false
	}
	c.blocks[slot] = block{ref: 1, qidx: -1}
	c.used++
	return slot, true
}

// register names a full, held block by its sequence hash so that later
// requests can reuse it, and records a BlockStored event. A block whose hash
// is already cached (two requests prefilled the same prefix at once) stays
// private; register then reports false.
func (c *kvCache) register(slot int32, depth int, hash, parent uint64, tokens []uint32) bool {
	if _, dup := c.byHash[hash]; dup {
		return false
	}
	b := &c.blocks[slot]
	b.hash, b.hashed, b.depth = hash, true, int32(depth)
	c.byHash[hash] = slot
	// Blocks stored one after another down one chain share one event, as
	// vLLM batches a request's new blocks.
	if n := len(c.events); n > 0 {
		if last, ok := c.events[n-1].(*kvevents.BlockStored); ok && depth > 0 && last.BlockHashes[len(last.BlockHashes)-1] == parent {
			last.BlockHashes = append(last.BlockHashes, hash)
			last.TokenIDs = append(last.TokenIDs, tokens...)
			return true
		}
	}
	ev := &kvevents.BlockStored{
		BlockHashes: []uint64{hash},
		TokenIDs:    append([]uint32(nil), tokens...),
		BlockSize:   c.blockSize,
		Medium:      "GPU",
	}
	if depth > 0 {
		ev.Parent, ev.HasParent = parent, true
	}
	c.events = append(c.events, ev)
	return true
}

// release drops one reference on each block of table. Registered blocks
// left with no holder stay cached and become evictable; private ones are
// freed at once.
func (c *kvCache) release(table []int32) {
	c.releases++
	for i := len(table) - 1; i >= 0; i-- {
		b := &c.blocks[table[i]]
		b.ref--
		if b.ref > 0 {
			continue
		}
		c.used--
		if b.hashed {
			b.stamp = c.releases
			heap.Push(&c.evictable, table[i])
		} else {
			c.free = append(c.free, table[i])
		}
	}
}

// reset forgets every cached prefix: idle cached blocks are freed, and held
// ones become private to their holders. It records AllBlocksCleared.
func (c *kvCache) reset() {
	for i := range c.blocks {
		b := &c.blocks[i]
		if !b.hashed {
			continue
		}
		b.hashed = false
		if b.ref == 0 {
			c.free = append(c.free, int32(i))
		}
		b.qidx = -1
	}
	c.evictable.slots = c.evictable.slots[:0]
	clear(c.byHash)
	c.events = append(c.events, &kvevents.AllBlocksCleared{})
}

func (c *kvCache) removed(hash uint64) {
	if n := len(c.events); n > 0 {
		if last, ok := c.events[n-1].(*kvevents.BlockRemoved); ok {
			last.BlockHashes = append(last.BlockHashes, hash)
			return
		}
	}
	c.events = append(c.events, &kvevents.BlockRemoved{BlockHashes: []uint64{hash}, Medium: "GPU"})
}

// drain returns the events recorded since the last drain.
func (c *kvCache) drain() []kvevents.Event {
	ev := c.events
	c.events = nil
	return ev
}

// cachedBlocks counts registered blocks, held or not.
func (c *kvCache) cachedBlocks() int { return len(c.byHash) }

// evictQueue orders idle cached blocks for eviction: least recently released
// first and, among blocks released together, the deepest first.
type evictQueue struct {
	c     *kvCache
	slots []int32
}

func (q *evictQueue) Len() int { return len(q.slots) }

func (q *evictQueue) Less(i, j int) bool {
	a, b := &q.c.blocks[q.slots[i]], &q.c.blocks[q.slots[j]]
	if a.stamp != b.stamp {
		return a.stamp < b.stamp
	}
	return a.depth > b.depth
}

func (q *evictQueue) Swap(i, j int) {
	q.slots[i], q.slots[j] = q.slots[j], q.slots[i]
	q.c.blocks[q.slots[i]].qidx = i
	q.c.blocks[q.slots[j]].qidx = j
}

func (q *evictQueue) Push(x any) {
	slot := x.(int32)
	q.c.blocks[slot].qidx = len(q.slots)
	q.slots = append(q.slots, slot)
}

func (q *evictQueue) Pop() any {
	slot := q.slots[len(q.slots)-1]
	q.slots = q.slots[:len(q.slots)-1]
	q.c.blocks[slot].qidx = -1
	return slot
}

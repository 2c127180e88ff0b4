package router

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/kvevents"
)

// DefaultMaxIndexBlocks bounds the event-fed index: at most this many
// (worker, block) pairs. 64 workers of 12,300 blocks each (one H200's KV
// cache at B=32) need 787,200; the default leaves room for 5× that.
// BenchmarkIndexMemory measures 68 bytes of heap per pair (1,000,000
// distinct blocks, each held by two workers: 137 MB), so the bound is about
// 290 MB: a pair costs one entry in its worker's engine-id map (about 37
// bytes) and a share of its block's 24-byte node and 16-byte hash slot.
const DefaultMaxIndexBlocks = 1 << 22

// slots numbers worker names densely, reusing freed numbers, so that the
// table's bitsets stay as small as the worker count allows.
type slots struct {
	byName map[string]int
	names  []string // by slot; "" when free
	free   []int
}

func (s *slots) get(name string) (int, bool) {
	i, ok := s.byName[name]
	return i, ok
}

func (s *slots) take(name string) int {
	if i, ok := s.byName[name]; ok {
		return i
	}
	if s.byName == nil {
		s.byName = make(map[string]int)
	}
	var i int
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
		s.names[i] = name
	} else {
		i = len(s.names)
		s.names = append(s.names, name)
	}
	s.byName[name] = i
	return i
}

func (s *slots) release(name string) {
	if i, ok := s.byName[name]; ok {
		delete(s.byName, name)
		s.names[i] = ""
		s.free = append(s.free, i)
	}
}

// Event outcomes, as counted in EventStats.
const (
	// OutcomeApplied counts blocks stored or removed as the event said.
	OutcomeApplied = "applied"
	// OutcomeUnknownParent counts blocks of stores dropped because their
	// parent block was not in that worker's index.
	OutcomeUnknownParent = "unknown_parent"
	// OutcomeUnknownBlock counts removed blocks the index did not hold.
	OutcomeUnknownBlock = "unknown_block"
	// OutcomeInvalid counts blocks of events that contradict themselves, such
	// as token ids that do not fill the blocks or a foreign block size.
	OutcomeInvalid = "invalid"
	// OutcomeFull counts blocks dropped when the index hit its bound.
	OutcomeFull = "index_full"
	// OutcomeOtherTier counts blocks of events about a tier other than the
	// GPU (an offload tier such as "CPU"), which a prefix hit cannot use
	// directly and which say nothing about the GPU's blocks.
	OutcomeOtherTier = "other_tier"
	// OutcomeOtherGroup counts blocks of events about a KV-cache group other
	// than full attention on a hybrid model (sliding window, mamba): such a
	// group holds and evicts the same block ids on its own schedule.
	OutcomeOtherGroup = "other_group"
)

// Outcome indexes, as counts holds them.
const (
	oApplied = iota
	oUnknownParent
	oUnknownBlock
	oInvalid
	oFull
	oOtherTier
	oOtherGroup
)

var eventKinds = [...]string{"BlockStored", "BlockRemoved", "AllBlocksCleared"}
var eventOutcomes = [...]string{OutcomeApplied, OutcomeUnknownParent, OutcomeUnknownBlock, OutcomeInvalid, OutcomeFull, OutcomeOtherTier, OutcomeOtherGroup}

// What a parent block hash of 0 means in a worker's BlockStored events:
// vLLM writes "no parent" as nil, some publishers (llm-d's simulator) as 0.
const (
	// Parent0Auto reads a parent of 0 as "no parent" unless the worker has
	// stored a block whose id is 0. It is the default.
	Parent0Auto = "auto"
	// Parent0None always reads a parent of 0 as "no parent".
	Parent0None = "none"
	// Parent0Hash reads 0 as a block id like any other.
	Parent0Hash = "hash"
)

// Parent0Modes lists the values a worker's parent0= option takes.
var Parent0Modes = []string{Parent0Auto, Parent0None, Parent0Hash}

// Applied is what one event did to a worker's part of the index.
type Applied struct {
	// Blocks counts blocks stored or removed as the event said (for
	// AllBlocksCleared, 1 when it cleared).
	Blocks int
	// Dropped counts blocks the event named that were not applied.
	Dropped int
	// Reason says why they were dropped: one of the Outcome constants.
	Reason string
	// Removed counts the blocks the worker evicted from its GPU tier, known
	// to the index or not.
	Removed int
	// Cleared says the event cleared the worker's GPU tier.
	Cleared bool
}

// EventStats counts block events by kind and outcome. Stores and removals
// count blocks; AllBlocksCleared counts events.
type EventStats map[string]map[string]uint64

type workerBlocks struct {
	// engine maps the engine's opaque block id to kvlens's chain hash.
	engine map[uint64]uint64
	// inferred holds the chain hashes of blocks the worker was shown to
	// hold without the index learning their engine ids (see Adopt).
	inferred map[uint64]struct{}
	// full says, by group_idx, whether a KV-cache group is full attention,
	// as the worker's stores named their kind.
	full map[int64]bool
}

// Index is the global prefix index fed by KV events: which worker holds which
// block, by chain hash. It is safe for concurrent use; lookups share a read
// lock and events take the write lock.
type Index struct {
	mu        sync.RWMutex
	blockSize int
	maxPairs  int
	t         table
	slots     slots
	workers   []*workerBlocks // by slot
	pairs     int
	scratch   []uint64
	counts    [len(eventKinds)][len(eventOutcomes)]uint64
	resets    uint64
	// adapters holds the LoRA adapter names seen in stores, so a request
	// naming one as its model is matched against that adapter's blocks.
	adapters map[string]struct{}
	salts    []uint64 // the adapters' salts
	// oracle, if set, learns every block stored, before any limit of the
	// index's own applies.
	oracle *Oracle
	// onClear, if set, learns of every worker whose blocks are cleared.
	onClear func(worker string)
}

// OnClear makes the index call f with a worker's name whenever it clears
// that worker's blocks (a sequence gap, a publisher restart, a reset, a
// worker leaving, the index's own bound). f runs under the index's lock
// and must not call the index.
func (x *Index) OnClear(f func(worker string)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.onClear = f
}

// SetOracle makes the index tell o of every block a worker stores.
func (x *Index) SetOracle(o *Oracle) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.oracle = o
}

// NewIndex returns an empty index for blocks of blockSize tokens that holds
// at most maxPairs (worker, block) pairs; maxPairs <= 0 means
// DefaultMaxIndexBlocks.
func NewIndex(blockSize, maxPairs int) *Index {
	if maxPairs <= 0 {
		maxPairs = DefaultMaxIndexBlocks
	}
	return &Index{blockSize: blockSize, maxPairs: maxPairs}
}

// BlockSize is tokens per block.
func (x *Index) BlockSize() int { return x.blockSize }

func (x *Index) worker(name string) (int, *workerBlocks) {
	s := x.slots.take(name)
	for len(x.workers) <= s {
		x.workers = append(x.workers, nil)
	}
	if x.workers[s] == nil {
		x.workers[s] = &workerBlocks{engine: make(map[uint64]uint64)}
	}
	return s, x.workers[s]
}

// Apply applies one event that worker published, reading a parent of 0 as
// Parent0Auto does. A store whose parent the index does not know is dropped
// whole, since its blocks could not be placed in any prefix; a removal skips
// blocks it does not know and applies the rest. Events about another tier
// than the GPU, or another KV-cache group than full attention, are counted
// and ignored. The error, if any, describes what was dropped; the index
// stays consistent either way.
func (x *Index) Apply(worker string, ev kvevents.Event) error {
	_, err := x.ApplyFrom(worker, ev, Parent0Auto)
	return err
}

// ApplyFrom is Apply with a worker's reading of a parent of 0 (one of
// Parent0Modes), and says what the event did.
func (x *Index) ApplyFrom(worker string, ev kvevents.Event, parent0 string) (Applied, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch e := ev.(type) {
	case *kvevents.BlockStored:
		return x.store(worker, e, parent0)
	case *kvevents.BlockRemoved:
		return x.remove(worker, e), nil
	case *kvevents.AllBlocksCleared:
		if !onGPU(e.Medium) {
			x.counts[2][oOtherTier]++
			return Applied{Dropped: 1, Reason: OutcomeOtherTier}, nil
		}
		x.clearLocked(worker)
		x.counts[2][oApplied]++
		return Applied{Blocks: 1, Cleared: true}, nil
	}
	return Applied{}, fmt.Errorf("router: index: unknown event %T from %s", ev, worker)
}

// onGPU reports whether an event's medium is the GPU tier; vLLM's default,
// and what a publisher that sends no medium means.
func onGPU(medium string) bool {
	return medium == "" || strings.EqualFold(medium, "GPU")
}

// fullAttention reports whether a KV-cache group kind, as vLLM names it, is
// full attention: the group whose blocks a prefix hit needs.
func fullAttention(kind string) bool {
	switch kind {
	case "full_attention", "mla_attention", "sink_full_attention", "cross_attention":
		return true
	}
	return false
}

// inFullGroup reports whether an event of group g is about w's
// full-attention group. A model that sends no group has one; a group the
// worker named in a store is what it said; a group never named is not full
// once the worker has named its full group, and otherwise is full only when
// it is group 0, as vLLM numbers the full-attention group first.
func (w *workerBlocks) inFullGroup(g *int64, kind string) bool {
	if g == nil {
		return true
	}
	if kind != "" {
		full := fullAttention(kind)
		if w.full == nil {
			w.full = make(map[int64]bool)
		}
		if len(w.full) < 64 { // a hostile publisher cannot grow it without end
			w.full[*g] = full
		}
		return full
	}
	if full, ok := w.full[*g]; ok {
		return full
	}
	for _, full := range w.full {
		if full {
			return false
		}
	}
	return *g == 0
}

// adapterOf names the LoRA adapter a store belongs to; empty for the base
// model. Older vLLM sends only lora_id.
func adapterOf(e *kvevents.BlockStored) string {
	switch {
	case e.LoraName != "":
		return e.LoraName
	case e.LoraID != nil:
		return "lora_id:" + strconv.FormatInt(*e.LoraID, 10)
	}
	return ""
}

// maxAdapters bounds the adapter names the index remembers.
const maxAdapters = 1024

func (x *Index) store(worker string, e *kvevents.BlockStored, parent0 string) (Applied, error) {
	n := len(e.BlockHashes)
	if !onGPU(e.Medium) {
		x.counts[0][oOtherTier] += uint64(n)
		return Applied{Dropped: n, Reason: OutcomeOtherTier}, nil
	}
	if e.BlockSize != x.blockSize || len(e.TokenIDs) != n*e.BlockSize {
		x.counts[0][oInvalid] += uint64(n)
		return Applied{Dropped: n, Reason: OutcomeInvalid}, fmt.Errorf("router: index: store from %s: %d token ids for %d blocks of %d (index block size %d)", worker, len(e.TokenIDs), n, e.BlockSize, x.blockSize)
	}
	s, w := x.worker(worker)
	if !w.inFullGroup(e.GroupIdx, e.KVCacheSpecKind) {
		x.counts[0][oOtherGroup] += uint64(n)
		return Applied{Dropped: n, Reason: OutcomeOtherGroup}, nil
	}
	adapter := adapterOf(e)
	salt := adapterSalt(adapter)
	if _, known := x.adapters[adapter]; adapter != "" && !known && len(x.adapters) < maxAdapters {
		if x.adapters == nil {
			x.adapters = make(map[string]struct{})
		}
		x.adapters[adapter] = struct{}{}
		x.salts = append(x.salts, salt)
	}
	chain := x.scratch[:0]
	if w.hasParent(e, parent0) {
		p, ok := w.engine[e.Parent]
		if !ok {
			x.counts[0][oUnknownParent] += uint64(n)
			return Applied{Dropped: n, Reason: OutcomeUnknownParent}, fmt.Errorf("router: index: store from %s: unknown parent block %#x, %d blocks dropped", worker, e.Parent, n)
		}
		chain = append(chain, p^salt) // the parent's chain hash, unsalted
	}
	base := len(chain)
	chain = blockhash.Extend(chain, e.TokenIDs, x.blockSize)
	x.scratch = chain
	// An adapter's blocks hash apart from the base model's: the same tokens
	// under another adapter are other KV.
	if salt != 0 {
		for i := range chain {
			chain[i] ^= salt
		}
	}
	if x.oracle != nil {
		x.oracle.Store(chain[base:])
	}
	if x.pairs+n > x.maxPairs {
		x.pruneLocked()
		if x.pairs+n > x.maxPairs {
			x.counts[0][oFull] += uint64(n)
			return Applied{Dropped: n, Reason: OutcomeFull}, fmt.Errorf("router: index: store from %s: index full at %d blocks, %d blocks dropped", worker, x.pairs, n)
		}
	}
	for i, eh := range e.BlockHashes {
		h := chain[base+i]
		if old, ok := w.engine[eh]; ok {
			if old == h {
				continue
			}
			// The engine reused an id for other content: forget the old block.
			if x.t.remove(old, s) {
				x.pairs--
			}
		}
		w.engine[eh] = h
		delete(w.inferred, h) // a removal can name it now
		if x.t.add(h, s) {
			x.pairs++
		}
	}
	for i := max(1, base); i < len(chain); i++ {
		x.t.link(chain[i-1], chain[i])
	}
	x.counts[0][oApplied] += uint64(n)
	return Applied{Blocks: n}, nil
}

// hasParent reports whether a store of w names a parent block, reading a
// parent of 0 as parent0 says (Parent0Modes). w may be nil: a worker the
// index has not heard from has stored no block 0.
func (w *workerBlocks) hasParent(e *kvevents.BlockStored, parent0 string) bool {
	switch {
	case !e.HasParent:
		return false
	case e.Parent != 0 || parent0 == Parent0Hash:
		return true
	case parent0 == Parent0None || w == nil:
		return false
	}
	_, stored := w.engine[0]
	return stored
}

// KnowsParent reports whether a store's parent is one the index can place
// for worker: no parent, or a block the worker stored since kvlens joined
// (or one Adopt placed).
func (x *Index) KnowsParent(worker string, e *kvevents.BlockStored, parent0 string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var w *workerBlocks
	if s, ok := x.slots.get(worker); ok {
		w = x.workers[s]
	}
	if !w.hasParent(e, parent0) {
		return true
	}
	if w == nil {
		return false
	}
	_, ok := w.engine[e.Parent]
	return ok
}

// Adopt places a parent block the worker stored before kvlens joined (or
// in a gap of its events): prefix is the chain of a prompt in flight on
// the worker, up to and including the block the worker calls parent. A
// store hanging off parent shows the worker holds it and, since an engine
// caches a block only with the blocks before it, the whole prefix. parent
// gets its engine id, so a later removal of it applies; the blocks before
// it are held as inferred, with no engine id to remove them by, until the
// worker's blocks are cleared or a store names them.
func (x *Index) Adopt(worker string, parent uint64, prefix []uint64) {
	if len(prefix) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	s, w := x.worker(worker)
	if _, ok := w.engine[parent]; ok {
		return
	}
	if x.pairs+len(prefix) > x.maxPairs {
		return // the store stays dropped, as any store past the bound is
	}
	if x.oracle != nil {
		x.oracle.Store(prefix)
	}
	last := len(prefix) - 1
	w.engine[parent] = prefix[last]
	delete(w.inferred, prefix[last]) // an earlier adoption may have inferred it
	if w.inferred == nil {
		w.inferred = make(map[uint64]struct{})
	}
	for i, h := range prefix {
		if x.t.add(h, s) {
			x.pairs++
			if i < last {
				w.inferred[h] = struct{}{}
			}
		}
		if i > 0 {
			x.t.link(prefix[i-1], h)
		}
	}
}

// DropInferred forgets the inferred blocks among chain on worker (see
// Adopt): an answer showed the worker no longer holds them, and with no
// engine id to name them no removal event ever will. Blocks with an
// engine id are left to the worker's events. It returns how many it
// dropped.
func (x *Index) DropInferred(worker string, chain []uint64) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slots.get(worker)
	if !ok || x.workers[s] == nil || len(x.workers[s].inferred) == 0 {
		return 0
	}
	w, n := x.workers[s], 0
	for _, h := range chain {
		if _, ok := w.inferred[h]; !ok {
			continue
		}
		delete(w.inferred, h)
		if x.t.remove(h, s) {
			x.pairs--
		}
		n++
	}
	return n
}

func (x *Index) remove(worker string, e *kvevents.BlockRemoved) Applied {
	n := len(e.BlockHashes)
	if !onGPU(e.Medium) {
		x.counts[1][oOtherTier] += uint64(n)
		return Applied{Dropped: n, Reason: OutcomeOtherTier}
	}
	s, ok := x.slots.get(worker)
	if !ok || x.workers[s] == nil {
		x.counts[1][oUnknownBlock] += uint64(n)
		return Applied{Dropped: n, Reason: OutcomeUnknownBlock, Removed: n}
	}
	w := x.workers[s]
	if !w.inFullGroup(e.GroupIdx, "") {
		x.counts[1][oOtherGroup] += uint64(n)
		return Applied{Dropped: n, Reason: OutcomeOtherGroup}
	}
	a := Applied{Removed: n}
	for _, eh := range e.BlockHashes {
		h, ok := w.engine[eh]
		if !ok {
			x.counts[1][oUnknownBlock]++
			a.Dropped++
			a.Reason = OutcomeUnknownBlock
			continue
		}
		delete(w.engine, eh)
		if x.t.remove(h, s) {
			x.pairs--
		}
		x.counts[1][oApplied]++
		a.Blocks++
	}
	return a
}

// HasAdapters reports whether any worker has stored blocks of a LoRA
// adapter.
func (x *Index) HasAdapters() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.adapters) > 0
}

// IsAdapter reports whether a worker has stored blocks of the adapter name.
func (x *Index) IsAdapter(name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.adapters[name]
	return ok
}

// pruneLocked frees room when the index is full by clearing the worker that
// holds the most blocks, as a sequence gap would: an index past its bound
// most likely missed that worker's removals, and it rebuilds from the events
// that follow.
func (x *Index) pruneLocked() {
	best, most := "", 0
	for s, w := range x.workers {
		if w != nil && len(w.engine) > most {
			best, most = x.slots.names[s], len(w.engine)
		}
	}
	if best != "" {
		x.clearLocked(best)
		x.resets++
	}
}

func (x *Index) clearLocked(worker string) {
	if x.onClear != nil {
		x.onClear(worker)
	}
	s, ok := x.slots.get(worker)
	if !ok {
		return
	}
	w := x.workers[s]
	for _, h := range w.engine {
		if x.t.remove(h, s) {
			x.pairs--
		}
	}
	clear(w.engine)
	for h := range w.inferred {
		if x.t.remove(h, s) {
			x.pairs--
		}
	}
	clear(w.inferred)
}

// ClearWorker drops every block of worker, for a sequence gap, a publisher
// restart or a reset; the worker's index rebuilds from later events.
func (x *Index) ClearWorker(worker string) {
	x.mu.Lock()
	x.clearLocked(worker)
	x.mu.Unlock()
}

// RemoveWorker drops worker and its blocks, for a worker that left the fleet.
func (x *Index) RemoveWorker(worker string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.clearLocked(worker)
	if s, ok := x.slots.get(worker); ok {
		x.workers[s] = nil
		x.slots.release(worker)
	}
}

// Clear empties the index.
func (x *Index) Clear() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, name := range x.slots.names {
		if name != "" {
			x.clearLocked(name)
		}
	}
}

// FindMatches sets dst[i] to how many leading blocks of chain workers[i]
// holds, and returns dst, grown to len(workers) when needed.
func (x *Index) FindMatches(chain []uint64, workers []string, dst []int) []int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return matchNames(&x.t, &x.slots, chain, workers, dst)
}

// matchNames runs table.match and reports the depths of named workers.
func matchNames(t *table, sl *slots, chain []uint64, workers []string, dst []int) []int {
	dst = grow(dst, len(workers))
	clear(dst)
	var buf [128]int
	depth := buf[:]
	if n := t.width(); n > len(depth) {
		depth = make([]int, n)
	}
	depth = depth[:t.width()]
	t.match(chain, depth)
	// Usually only a few workers match at all: find those few in workers by
	// a scan, which beats looking every name up.
	hits := 0
	for _, d := range depth {
		if d > 0 {
			hits++
		}
	}
	if hits > 8 {
		for i, name := range workers {
			if s, ok := sl.get(name); ok && s < len(depth) {
				dst[i] = depth[s]
			}
		}
		return dst
	}
	for s, d := range depth {
		if d == 0 {
			continue
		}
		for i, name := range workers {
			if name == sl.names[s] {
				dst[i] = d
				break
			}
		}
	}
	return dst
}

func grow(dst []int, n int) []int {
	if cap(dst) < n {
		return make([]int, n)
	}
	return dst[:n]
}

// Overlap returns every worker's matched depth for chain, skipping zeros.
func (x *Index) Overlap(chain []uint64) map[string]int {
	x.mu.RLock()
	names := make([]string, 0, len(x.slots.byName))
	for n := range x.slots.byName {
		names = append(names, n)
	}
	x.mu.RUnlock()
	d := x.FindMatches(chain, names, nil)
	out := make(map[string]int)
	for i, n := range names {
		if d[i] > 0 {
			out[n] = d[i]
		}
	}
	return out
}

// Held reports whether any worker holds block h, for the base model or,
// salted, for any LoRA adapter: a prompt's chain is hashed before anyone
// knows which adapter it is for.
func (x *Index) Held(h uint64) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.t.held(h) {
		return true
	}
	for _, salt := range x.salts {
		if x.t.held(h ^ salt) {
			return true
		}
	}
	return false
}

// Blocks returns how many blocks the index holds for worker, inferred
// ones (see Adopt) included.
func (x *Index) Blocks(worker string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if s, ok := x.slots.get(worker); ok && x.workers[s] != nil {
		return len(x.workers[s].engine) + len(x.workers[s].inferred)
	}
	return 0
}

// Size returns the number of (worker, block) pairs and of distinct blocks.
func (x *Index) Size() (pairs, distinct int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.pairs, x.t.distinct()
}

// Stats returns the event counts since the index was made.
func (x *Index) Stats() EventStats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make(EventStats)
	for k, kind := range eventKinds {
		out[kind] = make(map[string]uint64)
		for o, outcome := range eventOutcomes {
			if c := x.counts[k][o]; c > 0 {
				out[kind][outcome] = c
			}
		}
	}
	return out
}

// Prunes counts workers cleared because the index was full.
func (x *Index) Prunes() uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.resets
}

// Sizes sets dst[i] to how many blocks the index holds for workers[i].
func (x *Index) Sizes(workers []string, dst []int) []int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	dst = grow(dst, len(workers))
	for i, name := range workers {
		dst[i] = 0
		if s, ok := x.slots.get(name); ok && x.workers[s] != nil {
			dst[i] = len(x.workers[s].engine)
		}
	}
	return dst
}

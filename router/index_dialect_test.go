package router

import (
	"slices"
	"testing"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/kvevents"
)

func i64(v int64) *int64 { return &v }

// salted is chain as the index keys an adapter's blocks.
func salted(chain []uint64, adapter string) []uint64 {
	out := slices.Clone(chain)
	for i := range out {
		out[i] ^= adapterSalt(adapter)
	}
	return out
}

func TestIndexDialects(t *testing.T) {
	base := toks(100, 3)
	chain := blockhash.Chain(base, testB)
	root0 := func(id uint64, tokens []uint32) *kvevents.BlockStored {
		// A store whose parent is written as 0.
		return &kvevents.BlockStored{BlockHashes: []uint64{id}, Parent: 0, HasParent: true, TokenIDs: tokens, BlockSize: testB}
	}
	lora := func(ev *kvevents.BlockStored, name string) *kvevents.BlockStored { ev.LoraName = name; return ev }
	onTier := func(ev *kvevents.BlockStored, medium string) *kvevents.BlockStored { ev.Medium = medium; return ev }
	inGroup := func(ev *kvevents.BlockStored, g int64, kind string) *kvevents.BlockStored {
		ev.GroupIdx, ev.KVCacheSpecKind = i64(g), kind
		return ev
	}
	tests := []struct {
		name    string
		parent0 string
		events  []kvevents.Event
		query   []uint64 // the chain looked up
		want    int      // how many leading blocks of query worker w holds
		dropped string   // a reason some blocks were dropped for, if any
	}{
		{"under auto, a parent of 0 that was never stored means no parent", Parent0Auto,
			[]kvevents.Event{root0(7, base[:testB]), stored(7, ids(8, 2), base[testB:])}, chain, 3, ""},
		{"under none, a parent of 0 means no parent", Parent0None,
			[]kvevents.Event{root0(7, base[:testB])}, chain, 1, ""},
		{"under hash, a parent of 0 is a block id, unknown here, so the store is dropped", Parent0Hash,
			[]kvevents.Event{root0(7, base[:testB])}, chain, 0, OutcomeUnknownParent},
		{"under auto, a parent of 0 is block 0 once the worker stored a block with id 0", Parent0Auto,
			[]kvevents.Event{stored(0, []uint64{0}, base[:testB]), root0(5, base[testB:2*testB])}, chain, 2, ""},
		{"under none, a parent of 0 is no parent even when a block 0 was stored", Parent0None,
			[]kvevents.Event{stored(0, []uint64{0}, base[:testB]), root0(5, base[testB:2*testB])}, chain, 1, ""},
		{"a CPU-tier removal leaves the GPU's blocks", Parent0Auto,
			[]kvevents.Event{stored(0, ids(1, 3), base), &kvevents.BlockRemoved{BlockHashes: ids(1, 3), Medium: "CPU"}}, chain, 3, OutcomeOtherTier},
		{"a GPU removal removes", Parent0Auto,
			[]kvevents.Event{stored(0, ids(1, 3), base), &kvevents.BlockRemoved{BlockHashes: ids(2, 1), Medium: "GPU"}}, chain, 1, ""},
		{"a CPU-tier store is not a GPU hit", Parent0Auto,
			[]kvevents.Event{onTier(stored(0, ids(1, 3), base), "CPU")}, chain, 0, OutcomeOtherTier},
		{"a CPU-tier clear leaves the GPU's blocks", Parent0Auto,
			[]kvevents.Event{stored(0, ids(1, 3), base), &kvevents.AllBlocksCleared{Medium: "CPU"}}, chain, 3, OutcomeOtherTier},
		{"a clear of every tier clears", Parent0Auto,
			[]kvevents.Event{stored(0, ids(1, 3), base), &kvevents.AllBlocksCleared{}}, chain, 0, ""},
		{"a sliding-window group's eviction leaves the full-attention group's blocks", Parent0Auto,
			[]kvevents.Event{
				inGroup(stored(0, ids(1, 3), base), 0, "full_attention"),
				inGroup(stored(0, ids(1, 3), base), 1, "sliding_window"),
				&kvevents.BlockRemoved{BlockHashes: ids(1, 3), GroupIdx: i64(1)},
			}, chain, 3, OutcomeOtherGroup},
		{"the full-attention group's eviction removes", Parent0Auto,
			[]kvevents.Event{
				inGroup(stored(0, ids(1, 3), base), 0, "full_attention"),
				inGroup(stored(0, ids(1, 3), base), 1, "sliding_window"),
				&kvevents.BlockRemoved{BlockHashes: ids(3, 1), GroupIdx: i64(0)},
			}, chain, 2, OutcomeOtherGroup},
		{"a mamba group's stores are not hits", Parent0Auto,
			[]kvevents.Event{inGroup(stored(0, ids(1, 3), base), 1, "mamba")}, chain, 0, OutcomeOtherGroup},
		{"the full group may have any index when its kind is named", Parent0Auto,
			[]kvevents.Event{inGroup(stored(0, ids(1, 3), base), 2, "full_attention"),
				&kvevents.BlockRemoved{BlockHashes: ids(1, 1), GroupIdx: i64(0)}}, chain, 3, OutcomeOtherGroup},
		{"an adapter's blocks are not the base model's", Parent0Auto,
			[]kvevents.Event{lora(stored(0, ids(1, 3), base), "sql")}, chain, 0, ""},
		{"an adapter's blocks match that adapter's chain, parents included", Parent0Auto,
			[]kvevents.Event{lora(stored(0, ids(1, 1), base[:testB]), "sql"), lora(stored(1, ids(2, 2), base[testB:]), "sql")},
			salted(chain, "sql"), 3, ""},
		{"an adapter's blocks do not match another adapter's chain", Parent0Auto,
			[]kvevents.Event{lora(stored(0, ids(1, 3), base), "sql")}, salted(chain, "chat"), 0, ""},
		{"an adapter named only by lora_id is kept apart too", Parent0Auto,
			[]kvevents.Event{&kvevents.BlockStored{BlockHashes: ids(1, 3), TokenIDs: base, BlockSize: testB, LoraID: i64(4)}},
			chain, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := NewIndex(testB, 0)
			var reasons []string
			for _, ev := range tt.events {
				a, _ := x.ApplyFrom("w", ev, tt.parent0)
				if a.Dropped > 0 {
					reasons = append(reasons, a.Reason)
				}
			}
			if got := x.FindMatches(tt.query, []string{"w"}, nil)[0]; got != tt.want {
				t.Errorf("worker holds %d leading blocks of the query, want %d", got, tt.want)
			}
			if tt.dropped != "" && !slices.Contains(reasons, tt.dropped) {
				t.Errorf("drop reasons = %v, want %s among them", reasons, tt.dropped)
			}
			if tt.dropped == "" && len(reasons) > 0 {
				t.Errorf("drop reasons = %v, want none", reasons)
			}
			if x.Stats()[kvevents.Kind(tt.events[0])] == nil {
				t.Errorf("no counts for %s", kvevents.Kind(tt.events[0]))
			}
		})
	}
}

// A request naming an adapter as its model is routed by that adapter's
// blocks, and a base-model request by the base model's, though the tokens
// are the same.
func TestDecideKeepsAdaptersApart(t *testing.T) {
	ws, err := ParseWorkers([]string{"base=http://127.0.0.1:1", "sql=http://127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		w.Events = "tcp://127.0.0.1:3" // fed by events, so no prediction
	}
	kv, err := NewPolicy("kv")
	if err != nil {
		t.Fatal(err)
	}
	r := NewRouter(NewPool(ws), kv, Config{BlockSize: testB})
	prompt := toks(100, 4)
	if err := r.Index().Apply("base", stored(0, ids(1, 4), prompt)); err != nil {
		t.Fatal(err)
	}
	ev := stored(0, ids(11, 4), prompt)
	ev.LoraName = "sql-adapter"
	if err := r.Index().Apply("sql", ev); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		model, want string
	}{
		{"sql-adapter", "sql"},
		{"llama", "base"},
	} {
		req := &Request{TokenIDs: prompt, Body: []byte(`{"model":"` + tt.model + `","prompt":"x"}`)}
		b, err := r.Decide(req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if b.Worker.Name != tt.want || b.Overlap != 4 {
			t.Errorf("model %s went to %s with overlap %d, want %s with 4", tt.model, b.Worker.Name, b.Overlap, tt.want)
		}
		b.Release()
	}
}

// Held answers for an adapter's blocks from the base chain's hash, so a
// prompt is tokenized far enough for an adapter request too (Reaches).
func TestIndexHeldSeesAdapters(t *testing.T) {
	x := NewIndex(testB, 0)
	prompt := toks(100, 2)
	ev := stored(0, ids(1, 2), prompt)
	ev.LoraName = "sql"
	if err := x.Apply("w", ev); err != nil {
		t.Fatal(err)
	}
	chain := blockhash.Chain(prompt, testB)
	if !x.Held(chain[1]) {
		t.Fatal("an adapter's block is not Held by its base hash")
	}
	if x.Held(blockhash.Chain(toks(200, 1), testB)[0]) {
		t.Fatal("a block nobody stored is Held")
	}
}

package router

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/kvevents"
)

const testB = 4

// toks returns n blocks of test tokens, block i filled with base+i.
func toks(base, n int) []uint32 {
	out := make([]uint32, 0, n*testB)
	for i := range n {
		for range testB {
			out = append(out, uint32(base+i))
		}
	}
	return out
}

// stored is a BlockStored of tokens with engine ids ids, child of parent
// (0 for none).
func stored(parent uint64, ids []uint64, tokens []uint32) *kvevents.BlockStored {
	return &kvevents.BlockStored{BlockHashes: ids, Parent: parent, HasParent: parent != 0, TokenIDs: tokens, BlockSize: testB}
}

func ids(from, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(from + i)
	}
	return out
}

func TestIndexFindMatches(t *testing.T) {
	prompt := toks(100, 6) // blocks 100..105
	chain := blockhash.Chain(prompt, testB)
	other := blockhash.Chain(toks(200, 6), testB)
	tests := []struct {
		name   string
		events map[string][]kvevents.Event
		query  []uint64
		want   map[string]int
	}{
		{"an empty index matches nothing", nil, chain, map[string]int{}},
		{"a worker holding the whole prompt matches every block",
			map[string][]kvevents.Event{"a": {stored(0, ids(1, 6), prompt)}}, chain, map[string]int{"a": 6}},
		{"a store split over two events chains through the parent's engine id",
			map[string][]kvevents.Event{"a": {stored(0, ids(1, 2), prompt[:2*testB]), stored(2, ids(3, 4), prompt[2*testB:])}},
			chain, map[string]int{"a": 6}},
		{"each worker scores its own leading prefix",
			map[string][]kvevents.Event{
				"a": {stored(0, ids(1, 6), prompt)},
				"b": {stored(0, ids(1, 3), prompt[:3*testB])},
				"c": {stored(0, ids(1, 1), prompt[:testB])},
			}, chain, map[string]int{"a": 6, "b": 3, "c": 1}},
		{"a worker missing a middle block scores only up to the hole",
			map[string][]kvevents.Event{"a": {stored(0, ids(1, 6), prompt), &kvevents.BlockRemoved{BlockHashes: []uint64{3}}}},
			chain, map[string]int{"a": 2}},
		{"other content never matches, even with equal engine ids",
			map[string][]kvevents.Event{"a": {stored(0, ids(1, 6), toks(200, 6))}}, chain, map[string]int{}},
		{"the same content under another parent is another block",
			map[string][]kvevents.Event{"a": {stored(0, ids(1, 1), toks(200, 1)), stored(1, ids(2, 5), prompt[testB:])}},
			chain, map[string]int{}},
		{"a prefix query matches as far as it goes",
			map[string][]kvevents.Event{"a": {stored(0, ids(1, 6), prompt)}}, chain[:2], map[string]int{"a": 2}},
		{"AllBlocksCleared empties only that worker",
			map[string][]kvevents.Event{
				"a": {stored(0, ids(1, 6), prompt), &kvevents.AllBlocksCleared{}},
				"b": {stored(0, ids(1, 6), prompt)},
			}, chain, map[string]int{"b": 6}},
		{"an empty chain matches nothing", map[string][]kvevents.Event{"a": {stored(0, ids(1, 6), prompt)}}, nil, map[string]int{}},
		{"a second prompt does not disturb the first",
			map[string][]kvevents.Event{"a": {stored(0, ids(1, 6), prompt), stored(0, ids(10, 6), toks(200, 6))}},
			other, map[string]int{"a": 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := NewIndex(testB, 0)
			for w, evs := range tt.events {
				for _, ev := range evs {
					if err := x.Apply(w, ev); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := x.Overlap(tt.query)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("overlap = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIndexApplySadPath(t *testing.T) {
	prompt := toks(100, 4)
	chain := blockhash.Chain(prompt, testB)
	tests := []struct {
		name     string
		events   []kvevents.Event
		wantErr  string
		want     int // blocks a holds of chain afterwards
		kind     string
		outcome  string
		outcomeN uint64
	}{
		{"a store under an unknown parent is dropped whole and counted",
			[]kvevents.Event{stored(99, ids(1, 4), prompt)}, "unknown parent", 0, "BlockStored", OutcomeUnknownParent, 4},
		{"a removal skips unknown blocks and applies the rest",
			[]kvevents.Event{stored(0, ids(1, 4), prompt), &kvevents.BlockRemoved{BlockHashes: []uint64{77, 4, 78}}}, "", 3, "BlockRemoved", OutcomeUnknownBlock, 2},
		{"token ids that do not fill the blocks are refused",
			[]kvevents.Event{stored(0, ids(1, 4), prompt[:5])}, "token ids", 0, "BlockStored", OutcomeInvalid, 4},
		{"a foreign block size is refused, since its hashes could never match",
			[]kvevents.Event{&kvevents.BlockStored{BlockHashes: ids(1, 2), TokenIDs: prompt[:16], BlockSize: 8}}, "block size", 0, "BlockStored", OutcomeInvalid, 2},
		{"a removal from a worker never seen is counted, not an error",
			[]kvevents.Event{&kvevents.BlockRemoved{BlockHashes: []uint64{1}}}, "", 0, "BlockRemoved", OutcomeUnknownBlock, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := NewIndex(testB, 0)
			var err error
			for _, ev := range tt.events {
				if e := x.Apply("a", ev); e != nil {
					err = e
				}
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if got := x.Overlap(chain)["a"]; got != tt.want {
				t.Errorf("a holds %d blocks of the prompt, want %d", got, tt.want)
			}
			if got := x.Stats()[tt.kind][tt.outcome]; got != tt.outcomeN {
				t.Errorf("%s/%s = %d, want %d (stats %v)", tt.kind, tt.outcome, got, tt.outcomeN, x.Stats())
			}
		})
	}
}

func TestIndexStaysConsistent(t *testing.T) {
	x := NewIndex(testB, 0)
	p := toks(1, 8)
	x.Apply("a", stored(0, ids(1, 8), p))
	x.Apply("b", stored(0, ids(1, 8), p))
	// An engine reusing an id for other content replaces the old block.
	x.Apply("a", stored(0, []uint64{1}, toks(500, 1)))
	if pairs, distinct := x.Size(); pairs != 16 || distinct != 9 {
		t.Fatalf("size = %d pairs, %d distinct; want 16, 9", pairs, distinct)
	}
	x.ClearWorker("a")
	if pairs, distinct := x.Size(); pairs != 8 || distinct != 8 || x.Blocks("a") != 0 || x.Blocks("b") != 8 {
		t.Fatalf("after clearing a: %d pairs, %d distinct, a %d, b %d blocks", pairs, distinct, x.Blocks("a"), x.Blocks("b"))
	}
	x.RemoveWorker("b")
	if pairs, distinct := x.Size(); pairs != 0 || distinct != 0 {
		t.Fatalf("after removing b: %d pairs, %d distinct", pairs, distinct)
	}
	// A freed slot is reused by the next worker, whose index starts empty.
	x.Apply("c", stored(0, ids(1, 2), p[:2*testB]))
	if got := x.Overlap(blockhash.Chain(p, testB)); fmt.Sprint(got) != "map[c:2]" {
		t.Fatalf("overlap = %v, want map[c:2]", got)
	}
}

func TestIndexMoreThan64Workers(t *testing.T) {
	x := NewIndex(testB, 0)
	p := toks(1, 10)
	chain := blockhash.Chain(p, testB)
	for w := range 150 {
		n := w%10 + 1
		x.Apply(fmt.Sprintf("w%03d", w), stored(0, ids(1, n), p[:n*testB]))
	}
	names := make([]string, 150)
	for w := range names {
		names[w] = fmt.Sprintf("w%03d", w)
	}
	got := x.FindMatches(chain, names, nil)
	for w, d := range got {
		if d != w%10+1 {
			t.Fatalf("worker %d matched %d blocks, want %d", w, d, w%10+1)
		}
	}
}

func TestIndexBoundPrunesTheLargestWorker(t *testing.T) {
	x := NewIndex(testB, 10)
	x.Apply("small", stored(0, ids(1, 3), toks(1, 3)))
	x.Apply("big", stored(0, ids(1, 6), toks(50, 6)))
	// 9 pairs held; 3 more would pass the bound of 10, so "big" is cleared.
	if err := x.Apply("small", stored(3, ids(4, 3), toks(4, 3))); err != nil {
		t.Fatal(err)
	}
	if x.Blocks("big") != 0 || x.Blocks("small") != 6 || x.Prunes() != 1 {
		t.Fatalf("big %d, small %d blocks, %d prunes; want 0, 6, 1", x.Blocks("big"), x.Blocks("small"), x.Prunes())
	}
	// A store larger than the whole bound is refused and counted.
	err := x.Apply("big", stored(0, ids(100, 11), toks(100, 11)))
	if err == nil || x.Stats()["BlockStored"][OutcomeFull] != 11 {
		t.Fatalf("err = %v, stats %v", err, x.Stats())
	}
	if pairs, _ := x.Size(); pairs > 10 {
		t.Fatalf("%d pairs held, bound is 10", pairs)
	}
}

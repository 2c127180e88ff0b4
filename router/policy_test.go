package router

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/des"
)

// fleet returns n workers named a, b, c, ... with capacity 64.
func fleet(n int) []*Worker {
	ws, _ := ParseWorkers(func() []string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("%c=http://%c:8000", 'a'+i, 'a'+i))
		}
		return s
	}())
	return ws
}

// cands wraps workers as idle candidates.
func cands(ws []*Worker) []Candidate {
	out := make([]Candidate, len(ws))
	for i, w := range ws {
		c, _ := w.BatchCapacity()
		out[i] = Candidate{Worker: w, Capacity: c}
	}
	return out
}

func TestRoundRobinPolicy(t *testing.T) {
	ws := fleet(3)
	rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{})
	var got []string
	for i := range 7 {
		if i == 3 {
			ws[1].SetHealthy(false) // b fails its health check after 3 picks
		}
		b, err := rt.Decide(&Request{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Worker.Name)
		b.Release()
	}
	// 3 picks over a, b, c; then b is skipped and the turn goes over a and c.
	if want := "a b c b a c a"; strings.Join(got, " ") == want {
		t.Fatalf("an unhealthy worker was picked: %v", got)
	}
	if want := "a b c a c a c"; strings.Join(got, " ") != want {
		t.Fatalf("picks = %v, want %s", got, want)
	}
}

func TestRandomPolicy(t *testing.T) {
	p, _ := NewPolicyWith("random", Knobs{Seed: 7})
	cs := cands(fleet(4))
	counts := make([]int, len(cs))
	for range 4000 {
		counts[p.Pick(&Request{}, cs)]++
	}
	// 4000 uniform picks over 4 => 1000 each, give or take 4 standard deviations (~110).
	for i, n := range counts {
		if n < 890 || n > 1110 {
			t.Fatalf("worker %d picked %d times of 4000: not uniform (%v)", i, n, counts)
		}
	}
}

func TestLeastLoadedPolicy(t *testing.T) {
	tests := []struct {
		name     string
		inflight []int
		blocks   []int
		want     int
	}{
		{"the worker with the fewest requests wins", []int{3, 1, 2}, []int{0, 50, 0}, 1},
		{"equal requests are broken by fewer active blocks", []int{2, 2, 2}, []int{30, 10, 20}, 1},
		{"a full tie goes to the first worker", []int{1, 1}, []int{5, 5}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := cands(fleet(len(tt.inflight)))
			for i := range cs {
				cs[i].InFlight, cs[i].ActiveBlocks = tt.inflight[i], tt.blocks[i]
			}
			if got := (LeastLoaded{}).Pick(&Request{}, cs); got != tt.want {
				t.Fatalf("picked %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDynamoCost(t *testing.T) {
	// ISL 100 tokens at B=10 => 10 full blocks.
	r := &Request{Tokens: 100, BlockSize: 10, Chain: make([]uint64, 10)}
	tests := []struct {
		name string
		c    Candidate
		w    float64
		want float64
	}{
		// prefill 100/10 = 10; decode 0 + 10 − 0 = 10.
		{"an idle worker with nothing cached costs prefill plus decode blocks", Candidate{}, 1, 20},
		// prefill (100−60)/10 = 4; decode 10.
		{"cached blocks cut the prefill term", Candidate{Overlap: 6}, 1, 14},
		// prefill (35 + 100)/10 = 13.5 (fractions kept); decode 0 + 10.
		{"queued prefill tokens add, fractional blocks kept", Candidate{PrefillTokens: 35}, 1, 23.5},
		// prefill 10; decode 40 + 10 − 4 = 46.
		{"active blocks add and the active depth is subtracted", Candidate{ActiveBlocks: 40, ActiveDepth: 4}, 1, 56},
		// 2 × 10 + 10.
		{"W scales the prefill term only", Candidate{}, 2, 30},
		// overlap beyond the prompt never makes prefill negative: 0 + 10.
		{"an overlap longer than the prompt costs no prefill", Candidate{Overlap: 12}, 1, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DynamoCost(r, &tt.c, tt.w); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("cost = %g, want %g", got, tt.want)
			}
		})
	}
}

func TestDynamoPolicy(t *testing.T) {
	r := &Request{Tokens: 320, BlockSize: 32, Chain: make([]uint64, 10)}
	tests := []struct {
		name    string
		set     func(cs []Candidate)
		temp    float64
		allowed []int // picks the policy may make over 200 tries
		all     bool  // every allowed pick must occur
	}{
		{"temperature 0 takes the cheapest worker", func(cs []Candidate) { cs[1].Overlap = 5 }, 0, []int{1}, true},
		{"equal costs go to the smallest index among overlapping workers", func(cs []Candidate) {
			for i := range cs {
				cs[i].Overlap = 3
			}
			cs[0].IndexBlocks, cs[1].IndexBlocks, cs[2].IndexBlocks = 50, 10, 30
		}, 0, []int{1}, true},
		{"a tied worker with no overlap counts its index as 0 and wins", func(cs []Candidate) {
			// a: 5 blocks cached, 5 to prefill, 10 to decode = 15.
			// b: nothing cached, 10 to prefill, 5 of its 10 blocks already active = 15.
			cs[0].Overlap, cs[0].IndexBlocks = 5, 40
			cs[1].ActiveDepth, cs[1].IndexBlocks = 5, 900
			cs[2].ActiveBlocks = 100
		}, 0, []int{1}, true},
		{"index sizes of workers without overlap never break a tie", func(cs []Candidate) {
			cs[0].IndexBlocks, cs[1].IndexBlocks, cs[2].IndexBlocks = 50, 10, 30
		}, 0, []int{0, 1, 2}, true},
		{"equal costs and index sizes are broken at random", func(cs []Candidate) {}, 0, []int{0, 1, 2}, true},
		{"a loaded worker loses to an idle one despite a cache hit", func(cs []Candidate) {
			cs[0].Overlap, cs[0].ActiveBlocks = 10, 500
		}, 0, []int{1, 2}, true},
		{"temperature samples every worker, the cheap one most", func(cs []Candidate) { cs[1].Overlap = 10 }, 1, []int{0, 1, 2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := NewPolicyWith("dynamo", Knobs{Weight: 1, Temperature: tt.temp, Seed: 3})
			cs := cands(fleet(3))
			tt.set(cs)
			counts := map[int]int{}
			for range 200 {
				counts[p.Pick(r, cs)]++
			}
			for i := range counts {
				if !containsInt(tt.allowed, i) {
					t.Fatalf("picked %d; allowed %v (counts %v)", i, tt.allowed, counts)
				}
			}
			if tt.all && len(counts) != len(tt.allowed) {
				t.Fatalf("picks %v never covered all of %v", counts, tt.allowed)
			}
			if tt.temp > 0 && counts[1] <= counts[0] {
				t.Fatalf("sampling favoured a dearer worker: %v", counts)
			}
		})
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestKVPolicy(t *testing.T) {
	// 3200-token prompt at B=32 => 100 blocks.
	r := &Request{Tokens: 3200, BlockSize: 32, Chain: make([]uint64, 100)}
	tests := []struct {
		name string
		set  func(r *Request, cs []Candidate)
		want int
	}{
		{"the worker holding the prompt wins when loads are equal", func(_ *Request, cs []Candidate) { cs[2].Overlap = 90 }, 2},
		{"a full worker that freed no slot lately is skipped despite a full cache hit", func(_ *Request, cs []Candidate) {
			cs[0].Overlap, cs[0].InFlight, cs[0].Capacity = 100, 64, 64
			cs[1].InFlight, cs[1].ContextTokens = 60, 60*9000
			cs[2].InFlight, cs[2].Capacity = 8, 8
		}, 1},
		{"a crowded fleet's full worker freeing slots keeps a follow-up it holds", func(_ *Request, cs []Candidate) {
			// 64·32 against 3,200 + 60·32: the follow-up waits for a slot.
			// 4 free slots in all, fewer than 4 a worker.
			cs[0].Overlap, cs[0].InFlight, cs[0].Capacity, cs[0].RecentlyFreed = 100, 64, 64, 3
			cs[1].InFlight, cs[1].ContextTokens = 60, 60*9000
			cs[2].InFlight, cs[2].Capacity = 8, 8
		}, 0},
		{"a full worker freeing slots is skipped while the fleet has slots to spare", func(_ *Request, cs []Candidate) {
			// 24 + 24 free slots, more than 4 a worker: the move keeps its
			// room. Costed, 64·32 would beat 3,200 + 40·32.
			cs[0].Overlap, cs[0].InFlight, cs[0].Capacity, cs[0].RecentlyFreed = 100, 64, 64, 3
			cs[1].InFlight, cs[1].ContextTokens = 40, 40*9000
			cs[2].InFlight = 40
		}, 2},
		{"a full worker freeing a slot for each request that would wait keeps the follow-up", func(_ *Request, cs []Candidate) {
			// 65·32 against 3,200 + 60·32; 2 would wait, 3 slots freed.
			cs[0].Overlap, cs[0].InFlight, cs[0].Capacity, cs[0].RecentlyFreed = 100, 65, 64, 3
			cs[1].InFlight, cs[1].ContextTokens = 60, 60*9000
			cs[2].InFlight, cs[2].Capacity = 8, 8
		}, 0},
		{"a full worker freeing fewer slots than would wait there is skipped", func(_ *Request, cs []Candidate) {
			// Costed, 65·32 would beat 3,200 + a quarter of 8,000
			// queued + 60·32; 2 would wait, 1 slot freed.
			cs[0].Overlap, cs[0].InFlight, cs[0].Capacity, cs[0].RecentlyFreed = 100, 65, 64, 1
			cs[1].InFlight, cs[1].ContextTokens, cs[1].PrefillTokens = 60, 60*9000, 8000
			cs[2].InFlight, cs[2].Capacity = 8, 8
		}, 1},
		{"a full worker freeing slots loses a prompt it holds little of to a lighter one with room", func(_ *Request, cs []Candidate) {
			// 3,200 − 5·32 + 64·32 against 3,200 + 50·32.
			cs[0].Overlap, cs[0].InFlight, cs[0].Capacity, cs[0].RecentlyFreed = 5, 64, 64, 3
			cs[1].InFlight, cs[1].ContextTokens = 50, 50*9000
			cs[2].InFlight, cs[2].Capacity = 8, 8
		}, 1},
		{"a request for 4 choices skips a worker with room for 2 of them", func(r *Request, cs []Candidate) {
			r.Sequences = 4
			// Costed, 62·32 would beat 3,200 + 40·32, and one choice fits.
			cs[0].Overlap, cs[0].InFlight, cs[0].Capacity = 100, 62, 64
			cs[1].InFlight, cs[2].InFlight = 40, 40
		}, 1},
		{"a request for 2 choices keeps a worker with room for both", func(r *Request, cs []Candidate) {
			r.Sequences = 2
			cs[0].Overlap, cs[0].InFlight, cs[0].Capacity = 100, 62, 64
			cs[1].InFlight, cs[2].InFlight = 40, 40
		}, 0},
		{"queued prefill counts against a worker", func(_ *Request, cs []Candidate) {
			cs[0].Overlap, cs[0].PrefillTokens = 50, 40000
		}, 1},
		{"queued prefill counts a quarter: twice the prompt queued does not drive a follow-up from its cache", func(_ *Request, cs []Candidate) {
			// 0.25 × 6,400 = 1,600 tokens against the 3,200 a move would prefill.
			cs[0].Overlap, cs[0].PrefillTokens = 100, 6400
		}, 0},
		{"a cached prompt outweighs a moderate load", func(_ *Request, cs []Candidate) {
			// 3,200 tokens saved against 20 requests × 32 tokens.
			cs[0].Overlap, cs[0].InFlight = 100, 20
		}, 0},
		{"load outweighs a small saving", func(_ *Request, cs []Candidate) {
			// 320 tokens saved against 20 requests × 32 tokens.
			cs[0].Overlap, cs[0].InFlight = 10, 20
		}, 1},
		{"near-ties go to the worker with fewer requests, not to chance", func(_ *Request, cs []Candidate) {
			cs[0].InFlight, cs[0].ContextTokens = 3, 30
			cs[1].InFlight, cs[1].ContextTokens = 1, 40
			cs[2].InFlight, cs[2].ContextTokens = 2, 20
		}, 1},
		{"when every worker is full, the follow-up still goes where its cache is", func(_ *Request, cs []Candidate) {
			cs[0].InFlight, cs[0].Capacity = 70, 64
			cs[1].InFlight, cs[1].Capacity, cs[1].Overlap = 130, 128, 100
			cs[2].InFlight, cs[2].Capacity = 66, 64
		}, 1},
		{"when every worker is full and none holds the prompt, the least loaded takes it", func(_ *Request, cs []Candidate) {
			cs[0].InFlight, cs[0].Capacity = 70, 64
			cs[1].InFlight, cs[1].Capacity = 130, 128
			cs[2].InFlight, cs[2].Capacity = 66, 64
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := cands(fleet(3))
			r := *r
			tt.set(&r, cs)
			p := &KV{Weight: 1}
			for range 20 { // deterministic: the same pick every time
				if got := p.Pick(&r, cs); got != tt.want {
					t.Fatalf("picked %d, want %d", got, tt.want)
				}
			}
		})
	}
}

func TestKVApproxPolicy(t *testing.T) {
	clk := des.New(time.Unix(1_700_000_000, 0))
	ws := fleet(3)
	p, _ := NewPolicy("kv_approx")
	rt := NewRouter(NewPool(ws), p, Config{Clock: clk, BlockSize: testB})
	first, err := rt.Decide(&Request{TokenIDs: toks(1, 20)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Release()
	// No KV events at all: the prediction alone brings the follow-up back.
	follow, _ := rt.Decide(&Request{TokenIDs: toks(1, 30)}, nil)
	follow.Release()
	if follow.Worker != first.Worker || follow.Overlap != 20 {
		t.Fatalf("follow-up went to %s with overlap %d; want %s with 20", follow.Worker.Name, follow.Overlap, first.Worker.Name)
	}
	// After the TTL the prediction is gone.
	clk.Run(DefaultApproxTTL + 1)
	late, _ := rt.Decide(&Request{TokenIDs: toks(1, 30)}, nil)
	late.Release()
	if late.Overlap != 0 {
		t.Fatalf("overlap %d after the TTL, want 0", late.Overlap)
	}
}

func TestNewPolicy(t *testing.T) {
	for _, name := range Policies {
		p, err := NewPolicy(name)
		if err != nil || p.Name() != name {
			t.Fatalf("NewPolicy(%s) = %v, %v", name, p, err)
		}
		if Describe(name) == name {
			t.Errorf("Describe(%s) has no plain words", name)
		}
		if Rule(name) == "" {
			t.Errorf("Rule(%s) says nothing: the dashboard's How it works lists every policy", name)
		}
	}
	if _, err := NewPolicy("magic"); err == nil || !strings.Contains(err.Error(), "available: round_robin") {
		t.Fatalf("unknown policy error = %v, want one listing the available ones", err)
	}
	if _, err := NewPolicyWith("dynamo", Knobs{Weight: -1}); err == nil {
		t.Fatal("a negative weight was accepted")
	}
}

func TestKVMovesOnlyFirstTurnsOffAnOverloadedHolderOfASharedPrefix(t *testing.T) {
	// A 100-block starter that two conversations have continued differently
	// (so the router has seen it branch), then each request's own blocks.
	starter := make([]uint64, 100)
	for i := range starter {
		starter[i] = uint64(i + 1)
	}
	chain := func(own ...uint64) []uint64 { return append(append([]uint64(nil), starter...), own...) }
	firstTurn := &Request{Tokens: 100 * 32, BlockSize: 32, Chain: chain()}
	followUp := &Request{Tokens: 110 * 32, BlockSize: 32, Chain: chain(501, 502, 503, 504, 505, 506, 507, 508, 509, 510)}
	tests := []struct {
		name string
		r    *Request
		// in flight on worker 0, which holds the request's cache, and on
		// workers 1 and 2, which hold nothing of it
		held, others int
		want         int
	}{
		// 40 + 2 × 10 + 1 = 61 over 3: a mean of 20.3, a bound of 26.
		{"a first turn leaves a holder of its starter far over the mean", firstTurn, 40, 10, 1},
		// 20 + 2 × 10 + 1 = 41 over 3: a bound of 18.
		{"a first turn leaves a holder just over the bound", firstTurn, 20, 10, 1},
		// 16 + 2 × 10 + 1 = 37 over 3: a bound of 17, and 17 is not over it.
		{"a first turn stays with a holder under the bound", firstTurn, 16, 10, 0},
		// With few requests in flight the bound is the mean plus 4: 8 + 2 + 1 = 11
		// over 3, a bound of 8, and 9 with this request is over it.
		{"a first turn leaves a holder 4 over a small mean", firstTurn, 8, 1, 1},
		// 5 + 2 + 1 = 8 over 3: a bound of 7.
		{"a first turn stays with a holder under a small mean's bound", firstTurn, 5, 1, 0},
		{"a follow-up stays with its own history whatever the load", followUp, 40, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &KV{Weight: 1}
			p.shared.observe(chain(201, 202))
			p.shared.observe(chain(301, 302))
			cs := cands(fleet(3))
			cs[0].Overlap = len(tt.r.Chain)
			cs[0].InFlight = tt.held
			cs[1].InFlight, cs[2].InFlight = tt.others, tt.others
			if got := p.Pick(tt.r, cs); got != tt.want {
				t.Fatalf("picked %d, want %d (bound %d)", got, tt.want, SharedBound(tt.held+2*tt.others, 3))
			}
		})
	}
}

// FuzzKVPicksAWorker holds KV's rules together: whatever the loads, the
// capacities and the request's choices, some worker is always left to
// pick (the router indexes the candidates with the pick).
func FuzzKVPicksAWorker(f *testing.F) {
	f.Add(uint8(4), uint8(60), uint8(64), uint8(0), uint8(62), uint8(64), uint8(0), uint8(70), uint8(64), uint8(0), uint8(0))
	f.Add(uint8(1), uint8(64), uint8(64), uint8(3), uint8(64), uint8(64), uint8(3), uint8(64), uint8(64), uint8(3), uint8(40))
	f.Fuzz(func(t *testing.T, seqs, in0, cap0, freed0, in1, cap1, freed1, in2, cap2, freed2, overlap uint8) {
		r := &Request{Tokens: 3200, BlockSize: 32, Chain: make([]uint64, 100), Sequences: int(seqs % 9)}
		cs := cands(fleet(3))
		for i, v := range [][3]uint8{{in0, cap0, freed0}, {in1, cap1, freed1}, {in2, cap2, freed2}} {
			cs[i].InFlight, cs[i].Capacity, cs[i].RecentlyFreed = int(v[0]), max(1, int(v[1]%65)), int(v[2]%8)
		}
		cs[0].Overlap = int(overlap % 101)
		p := &KV{Weight: 1}
		for range 3 { // the shared-prefix learner changes with each request
			if got := p.Pick(r, cs); got < 0 || got >= len(cs) {
				t.Fatalf("picked %d of %d candidates: %+v", got, len(cs), cs)
			}
		}
	})
}

// pickOutside is a broken policy: it picks no candidate, or one past the
// end.
type pickOutside struct{ at int }

func (p pickOutside) Name() string                   { return "broken" }
func (p pickOutside) Pick(*Request, []Candidate) int { return p.at }

func TestAPolicyPickingNoCandidateFailsOnlyItsRequest(t *testing.T) {
	for _, at := range []int{-1, 3} {
		t.Run(fmt.Sprint("picked ", at), func(t *testing.T) {
			rt := NewRouter(NewPool(fleet(3)), pickOutside{at}, Config{BlockSize: testB})
			_, err := rt.Decide(&Request{TokenIDs: make([]uint32, 64)}, nil)
			if !errors.Is(err, ErrNoWorker) {
				t.Fatalf("Decide: %v, want ErrNoWorker", err)
			}
			// The decision lock was let go: the next request is decided.
			rt.SetPolicy(&RoundRobin{})
			if _, err := rt.Decide(&Request{TokenIDs: make([]uint32, 64)}, nil); err != nil {
				t.Fatalf("the next Decide: %v", err)
			}
		})
	}
}

// FuzzEveryPolicyPicksAWorker: whatever the candidates hold, every policy
// picks one of them.
func FuzzEveryPolicyPicksAWorker(f *testing.F) {
	f.Add(uint8(1), uint8(3), uint8(60), uint8(64), uint8(100), uint16(4000), uint8(0), uint8(0), uint8(0))
	f.Add(uint8(4), uint8(1), uint8(0), uint8(1), uint8(0), uint16(0), uint8(255), uint8(255), uint8(1))
	f.Fuzz(func(t *testing.T, seqs, workers, inflight, capacity, overlap uint8, queued uint16, blocks, temp, weight uint8) {
		n := 1 + int(workers%6)
		r := &Request{Tokens: 3200, BlockSize: 32, Chain: make([]uint64, 100), Sequences: int(seqs % 9)}
		cs := cands(fleet(n))
		for i := range cs {
			// Each worker gets its own mix of the fuzzed values.
			cs[i].InFlight = (int(inflight) * (i + 1)) % 200
			cs[i].Capacity = max(1, (int(capacity)+7*i)%129)
			cs[i].Overlap = (int(overlap) * (i + 2)) % 101
			cs[i].ActiveDepth = cs[i].Overlap / 2
			cs[i].PrefillTokens = (int(queued) * (i + 3)) % 70000
			cs[i].ContextTokens = cs[i].InFlight * 3000
			cs[i].ActiveBlocks = int(blocks) * i
			cs[i].IndexBlocks = int(blocks) * (n - i)
			cs[i].RecentlyFreed = int(seqs) % (i + 2)
		}
		k := DefaultKnobs()
		k.Seed, k.Weight, k.Temperature = 1, float64(weight%4), float64(temp%3)/2
		for _, name := range Policies {
			p, err := NewPolicyWith(name, k)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if got := p.Pick(r, cs); got < 0 || got >= len(cs) {
					t.Fatalf("%s picked %d of %d candidates: %+v", name, got, len(cs), cs)
				}
			}
		}
	})
}

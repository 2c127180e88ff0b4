package router

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/des"
	"github.com/kvlens/kvlens/kvevents"
)

func TestActiveSequences(t *testing.T) {
	ws := fleet(1)
	rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{BlockSize: testB})
	w := ws[0]
	shared := toks(1, 4)
	// The worker already caches the first 2 blocks.
	rt.Index().Apply("a", stored(0, ids(1, 2), shared[:2*testB]))

	// Two requests share 4 prefix blocks; each adds 2 of its own and 2 loose
	// tokens (ISL = 6 blocks × 4 + 2 = 26).
	req := func(base int) *Request {
		return &Request{TokenIDs: append(append(append([]uint32{}, shared...), toks(base, 2)...), 9, 9)}
	}
	one, _ := rt.Decide(req(100), nil)
	two, _ := rt.Decide(req(200), nil)
	check := func(when string, inflight, prefill, blocks int) {
		t.Helper()
		st := rt.Workers()[0]
		if st.InFlight != inflight || st.ActivePrefillTokens != prefill || st.ActiveBlocks != blocks {
			t.Fatalf("%s: in-flight %d, prefill %d tokens, %d active blocks; want %d, %d, %d",
				when, st.InFlight, st.ActivePrefillTokens, st.ActiveBlocks, inflight, prefill, blocks)
		}
	}
	// Each books ISL − overlap·B = 26 − 2·4 = 18 prefill tokens; blocks are
	// 4 shared + 2 + 2 own = 8 distinct.
	check("both booked", 2, 36, 8)
	if one.Overlap != 2 {
		t.Fatalf("overlap at selection = %d, want 2", one.Overlap)
	}
	one.FirstToken()
	one.FirstToken() // idempotent
	check("first token of one", 2, 18, 8)
	one.Release()
	one.Release() // idempotent
	check("one released", 1, 18, 6)
	two.Release() // released before its first token: its prefill goes too
	check("all released", 0, 0, 0)
	if n := w.load.blocks.len(); n != 0 {
		t.Fatalf("%d block refcounts leaked", n)
	}
}

func TestStaleBookingsExpire(t *testing.T) {
	clk := des.New(time.Unix(1_700_000_000, 0))
	rt := NewRouter(NewPool(fleet(2)), &RoundRobin{}, Config{Clock: clk})
	lost, _ := rt.Decide(&Request{}, nil) // never released: the client vanished without a trace
	clk.Run(DefaultStaleBooking - time.Second)
	fresh, _ := rt.Decide(&Request{}, nil)
	if c := rt.Counts(); c.InFlight != 2 || c.StaleFreed != 0 {
		t.Fatalf("before expiry: %+v", c)
	}
	// Sweeps run at most every tenth of the limit, so a lost booking is
	// freed within 330 s.
	clk.Run(DefaultStaleBooking / 10)
	b, _ := rt.Decide(&Request{}, nil)
	if c := rt.Counts(); c.InFlight != 2 || c.StaleFreed != 1 {
		t.Fatalf("after expiry: %+v, want the lost booking freed and 2 in flight", c)
	}
	lost.Release() // a late release of an expired booking changes nothing
	fresh.Release()
	b.Release()
	for _, st := range rt.Workers() {
		if st.InFlight != 0 {
			t.Fatalf("%s still has %d in flight", st.Name, st.InFlight)
		}
	}
}

func TestAdmission(t *testing.T) {
	tests := []struct {
		name      string
		admission string
		threshold float64
		booked    int // requests already in flight, round-robin over 2 workers of capacity 2
		wantErr   error
	}{
		{"queue never sheds, even past capacity", AdmitQueue, 1, 6, nil},
		{"shed admits while a worker has room", AdmitShed, 1, 3, nil},
		{"shed refuses when every worker is at its threshold", AdmitShed, 1, 4, ErrBusy},
		{"a lower threshold makes workers busy sooner", AdmitShed, 0.5, 2, ErrBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fleet(2)
			for _, w := range ws {
				w.Capacity = 2
			}
			rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{Admission: tt.admission, BusyThreshold: tt.threshold})
			for range tt.booked {
				if _, err := rt.Decide(&Request{}, nil); err != nil {
					t.Fatal(err)
				}
			}
			_, err := rt.Decide(&Request{}, nil)
			if !errors.Is(err, tt.wantErr) && !(err == nil && tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			wantShed := int64(0)
			if tt.wantErr != nil {
				wantShed = 1
			}
			if c := rt.Counts(); c.Shed != wantShed {
				t.Fatalf("shed = %d, want %d", c.Shed, wantShed)
			}
		})
	}
}

func TestDecideSadPath(t *testing.T) {
	ws := fleet(2)
	rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{})
	ws[0].SetHealthy(false)
	if _, err := rt.Decide(&Request{}, []*Worker{ws[1]}); !errors.Is(err, ErrNoWorker) {
		t.Fatalf("with one worker down and the other excluded: err = %v, want ErrNoWorker", err)
	}
	b, err := rt.Decide(&Request{}, nil)
	if err != nil || b.Worker != ws[1] {
		t.Fatalf("got %v, %v; want the healthy worker", b, err)
	}
}

func TestSequenceGapClearsTheWorker(t *testing.T) {
	rt := NewRouter(NewPool(fleet(2)), &RoundRobin{}, Config{BlockSize: testB})
	p := toks(1, 3)
	rt.Index().Apply("a", stored(0, ids(1, 3), p))
	rt.Index().Apply("b", stored(0, ids(1, 3), p))
	rt.SequenceGap("a")
	if got := rt.Index().Overlap(blockhash.Chain(p, testB)); len(got) != 1 || got["b"] != 3 {
		t.Fatalf("after a gap on a: overlap %v, want only b", got)
	}
	// The index rebuilds from the events after the gap.
	rt.Index().Apply("a", stored(0, ids(7, 1), p[:testB]))
	if got := rt.Index().Overlap(blockhash.Chain(p, testB))["a"]; got != 1 {
		t.Fatalf("a rebuilt %d blocks, want 1", got)
	}
	var _ kvevents.Event = &kvevents.AllBlocksCleared{}
}

func TestCandidatesCountTheSlotsFreedWithinTheWindow(t *testing.T) {
	tests := []struct {
		name      string
		admission string
		released  int           // bookings on the first worker released at the start
		after     time.Duration // time from those releases to the decision
		want      int
	}{
		{"nothing released, nothing freed", AdmitQueue, 0, 0, 0},
		{"two released just now count two", AdmitQueue, 2, 0, 2},
		{"releases inside the window still count", AdmitQueue, 3, FreedWindow - time.Millisecond, 3},
		{"releases older than the window count none", AdmitQueue, 3, FreedWindow + time.Millisecond, 0},
		{"the count stops at the ring's eight", AdmitQueue, 11, 0, 8},
		{"shed admission counts none, so nothing queues on a full worker", AdmitShed, 2, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := des.New(time.Unix(1_700_000_000, 0))
			ws := fleet(2)
			rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{Clock: clk, Admission: tt.admission, BusyThreshold: 1})
			var mine []*Booking
			for len(mine) < tt.released {
				b, err := rt.Decide(&Request{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if b.Worker == ws[0] {
					mine = append(mine, b)
				} else {
					defer b.Release()
				}
			}
			for _, b := range mine {
				b.Release()
				b.Release() // a second release frees nothing more
			}
			clk.Run(tt.after)
			b, err := rt.Decide(&Request{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Release()
			d, _ := rt.LastDecision()
			for _, c := range d.Candidates {
				if c.Worker == ws[0] && c.RecentlyFreed != tt.want {
					t.Fatalf("RecentlyFreed = %d, want %d", c.RecentlyFreed, tt.want)
				}
			}
		})
	}
}

// A request with "n" choices runs n sequences on its worker, each holding a
// batch slot until it ends; the router's books say so, and release them.
func TestParallelSamplingBooksASlotPerSequence(t *testing.T) {
	tests := []struct {
		name string
		body string
		want int // in flight on the worker while the request runs
	}{
		{"no n is one sequence", `{"prompt":"hi"}`, 1},
		{"n of 1", `{"prompt":"hi","n":1}`, 1},
		{"n of 4 holds 4 slots", `{"prompt":"hi","n":4}`, 4},
		{"a chat's n counts the same", `{"messages":[{"role":"user","content":"hi"}],"n":3}`, 3},
		{"n written as 2.0", `{"prompt":"hi","n":2.0}`, 2},
		{"n past the batch capacity holds the whole batch, not more", `{"prompt":"hi","n":1000000}`, 8},
		{"a fractional n, for the worker to refuse, books one", `{"prompt":"hi","n":2.5}`, 1},
		{"a zero n, for the worker to refuse, books one", `{"prompt":"hi","n":0}`, 1},
		{"a string n, for the worker to refuse, books one", `{"prompt":"hi","n":"4"}`, 1},
		{"null n is one", `{"prompt":"hi","n":null}`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fleet(1)
			ws[0].Capacity = 8
			rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{})
			px := NewProxy(rt)
			path := "/v1/completions"
			if strings.Contains(tt.body, "messages") {
				path = "/v1/chat/completions"
			}
			r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(tt.body))
			req, _, err := px.request(r, []byte(tt.body), 1<<16)
			if err != nil {
				t.Fatal(err)
			}
			if len(req.TokenIDs) == 0 {
				t.Fatal("the prompt was not read")
			}
			b, err := rt.Decide(req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := rt.Workers()[0].InFlight; got != tt.want {
				t.Fatalf("in flight while it runs = %d, want %d", got, tt.want)
			}
			b.Release()
			if got := rt.Workers()[0].InFlight; got != 0 {
				t.Fatalf("in flight after it ended = %d, want 0", got)
			}
			if got, want := ws[0].load.freedSince(time.Time{}), min(tt.want, 8); got != want {
				t.Fatalf("slots recorded freed = %d, want %d", got, want)
			}
		})
	}
}

// FuzzSequences: whatever a body's "n" holds, the router books at least one
// sequence and at most the worker's batch capacity, and books a whole n in
// that range as it is.
func FuzzSequences(f *testing.F) {
	for _, n := range []string{`1`, `4`, `2.0`, `2.5`, `0`, `-3`, `"4"`, `null`, `1e300`, `9223372036854775807`, `[2]`, `{}`} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n string) {
		body := []byte(`{"prompt":"hi","n":` + n + `}`)
		var pb promptBody
		if json.Unmarshal(body, &pb) != nil {
			return // not JSON: the router reads no prompt and books one
		}
		c := Candidate{Capacity: 8}
		got := sequences(&Request{Sequences: pb.sequences()}, &c)
		if got < 1 || got > c.Capacity {
			t.Fatalf("n %s books %d sequences, outside 1..%d", n, got, c.Capacity)
		}
		var whole int
		if json.Unmarshal([]byte(n), &whole) == nil && whole >= 1 && whole <= c.Capacity && got != whole {
			t.Fatalf("n %s books %d sequences, want %d", n, got, whole)
		}
	})
}

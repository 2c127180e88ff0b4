package router

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/tokenizer"
)

func TestLooksBlind(t *testing.T) {
	tests := []struct {
		name                string
		n                   int
		predicted, reported int64
		want                bool
	}{
		{"an index that predicts nothing of a large reported hit is blind", 20, 0, 10000, true},
		{"an index that predicts just under a fifth of the reported hit is blind", 20, 1999, 10000, true},
		{"an index that predicts a fifth of the reported hit sees", 20, 2000, 10000, false},
		{"an index that predicts what the worker reports sees", 20, 10000, 10000, false},
		{"an index that predicts more than the worker reports (evictions) sees", 20, 20000, 100, false},
		// sad path: too little evidence gives no verdict
		{"a window of too few answers gives no verdict", blindMinRequests - 1, 0, 10000, false},
		{"a cold fleet that reports almost no hits gives no verdict", 64, 0, blindMinCached - 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := looksBlind(tt.n, tt.predicted, tt.reported); got != tt.want {
				t.Errorf("looksBlind(%d, %d, %d) = %v, want %v", tt.n, tt.predicted, tt.reported, got, tt.want)
			}
		})
	}
}

func TestObserveCacheNamesTheCause(t *testing.T) {
	tests := []struct {
		name      string
		overlap   int // blocks the index matched, every request
		cached    int // tokens the worker reported, every request
		wantCause string
	}{
		{"a worker without events whose hits the index never predicts is blind by tokenizer mismatch", 0, 1000, CauseTokenizer},
		{"a worker whose hits the index predicts is not blind", 1000 / DefaultBlockSize, 1000, ""},
		// sad path: the worker caching nothing is never called blind
		{"a worker that reports no hits is not blind", 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fleet(2)
			rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{})
			for range blindMinRequests {
				rt.ObserveCache(&Booking{Worker: ws[0], Overlap: tt.overlap, isl: 2000}, tt.cached)
			}
			got := rt.Blind()
			if tt.wantCause == "" {
				if len(got) != 0 {
					t.Fatalf("Blind() = %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Worker != ws[0].Name || got[0].Cause != tt.wantCause {
				t.Fatalf("Blind() = %+v, want %s blind by %s", got, ws[0].Name, tt.wantCause)
			}
			if !strings.Contains(got[0].Reason, "tokenizer") {
				t.Errorf("reason %q does not name the tokenizer", got[0].Reason)
			}
			if n := testutil.ToFloat64(rt.metrics.Blind.WithLabelValues(ws[0].Name, tt.wantCause)); n != 1 {
				t.Errorf("kvlens_router_blind_total = %v, want 1 (one transition)", n)
			}
		})
	}
}

func TestObserveCacheNamesMissingEvents(t *testing.T) {
	ws, err := ParseWorkers([]string{"a=http://a:8000,events=tcp://a:5557"})
	if err != nil {
		t.Fatal(err)
	}
	rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{})
	for range blindMinRequests {
		rt.ObserveCache(&Booking{Worker: ws[0], isl: 2000}, 1000)
	}
	got := rt.Blind()
	if len(got) != 1 || got[0].Cause != CauseNoEvents {
		t.Fatalf("Blind() = %+v, want a blind by no_events", got)
	}
}

func TestParseTokenizeAnswer(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []uint32
		wantErr string
	}{
		{"vLLM's answer gives its tokens", `{"count":3,"max_model_len":8192,"tokens":[128000,9906,1917]}`, []uint32{128000, 9906, 1917}, ""},
		{"SGLang's answer gives its tokens", `{"tokens":[1,2],"count":2}`, []uint32{1, 2}, ""},
		{"an older answer with input_ids gives those", `{"input_ids":[5]}`, []uint32{5}, ""},
		{"an empty token list is an empty prompt", `{"tokens":[]}`, []uint32{}, ""},
		// sad path
		{"an answer that is not JSON is refused", `<html>`, nil, "not JSON"},
		{"an answer without tokens is refused", `{"count":3}`, nil, "no tokens"},
		{"a negative token id is refused", `{"tokens":[-1]}`, nil, "outside"},
		{"a token id past 32 bits is refused", `{"tokens":[4294967296]}`, nil, "outside"},
		{"a token id that is not a number is refused", `{"tokens":["a"]}`, nil, "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTokenizeAnswer(strings.NewReader(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func FuzzParseTokenizeAnswer(f *testing.F) {
	for _, s := range []string{`{"tokens":[1,2,3],"count":3}`, `{"input_ids":[0]}`, `{"tokens":null}`, `{"tokens":[-1]}`, `[]`, ``, `{"tokens":[1e20]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := parseTokenizeAnswer(strings.NewReader(s))
		if err != nil {
			if ids != nil {
				t.Fatalf("error %v with ids %v", err, ids)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		// What encoding/json reads as vLLM's "tokens" is what was taken.
		var plain struct {
			Tokens []int64 `json:"tokens"`
		}
		if json.Unmarshal([]byte(s), &plain) == nil && plain.Tokens != nil {
			if len(plain.Tokens) != len(ids) {
				t.Fatalf("%q: took %v, encoding/json reads %v", s, ids, plain.Tokens)
			}
			for i := range ids {
				if int64(ids[i]) != plain.Tokens[i] {
					t.Fatalf("%q: took %v, encoding/json reads %v", s, ids, plain.Tokens)
				}
			}
		}
	})
}

// engineTokenize serves /tokenize as a worker of engine eng would.
func engineTokenize(t *testing.T, eng *tokenizer.Engine) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []tokenizer.Message `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/tokenize" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		text, err := eng.Render(req.Messages)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"tokens": eng.Encode(text)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAutoChoose(t *testing.T) {
	foreign, err := tokenizer.NewEngine("o200k", "llama3")
	if err != nil {
		t.Fatal(err)
	}
	llamaTemplate, _ := tokenizer.NewEngine("cl100k", "llama3")
	tests := []struct {
		name         string
		engines      []*tokenizer.Engine
		wantEmbedded bool
		wantLine     string
	}{
		{"workers that tokenize as the embedded tokenizer keep it", []*tokenizer.Engine{tokenizer.Embedded, tokenizer.Embedded}, true, "embedded"},
		{"a worker with another BPE switches to the workers' tokenizer", []*tokenizer.Engine{foreign}, false, "worker"},
		{"a worker with the same BPE but another template switches too", []*tokenizer.Engine{llamaTemplate}, false, "worker"},
		{"one foreign worker among matching ones switches", []*tokenizer.Engine{tokenizer.Embedded, foreign}, false, "differently"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []string
			for i, eng := range tt.engines {
				specs = append(specs, string(rune('a'+i))+"="+engineTokenize(t, eng).URL)
			}
			ws, err := ParseWorkers(specs)
			if err != nil {
				t.Fatal(err)
			}
			pool := NewPool(ws)
			a := &Auto{Worker: &WorkerTokenize{Pool: pool, Client: http.DefaultClient}}
			line := a.Choose(context.Background(), pool)
			if a.IsEmbedded() != tt.wantEmbedded || !strings.Contains(line, tt.wantLine) {
				t.Errorf("Choose: embedded %v, line %q; want embedded %v and a line naming %q", a.IsEmbedded(), line, tt.wantEmbedded, tt.wantLine)
			}
		})
	}
	t.Run("a worker that cannot be asked leaves the embedded tokenizer, unverified", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		ws, _ := ParseWorkers([]string{"a=" + srv.URL})
		pool := NewPool(ws)
		a := &Auto{Worker: &WorkerTokenize{Pool: pool, Client: http.DefaultClient}}
		if line := a.Choose(context.Background(), pool); !a.IsEmbedded() || !strings.Contains(line, "unverified") {
			t.Errorf("Choose: embedded %v, line %q", a.IsEmbedded(), line)
		}
	})
}

func TestBlindSummary(t *testing.T) {
	tests := []struct {
		name string
		bs   []Blindness
		want string
	}{
		{"no blind worker says nothing", nil, ""},
		{"workers blind by one cause are named together", []Blindness{{Worker: "a", Cause: CauseTokenizer}, {Worker: "b", Cause: CauseTokenizer}}, "tokenizer mismatch on a, b: "},
		{"each cause gets its own clause", []Blindness{{Worker: "a", Cause: CauseNoEvents}, {Worker: "b", Cause: CauseUnknownParent}}, "no KV events from a; KV events from b dropped as unknown parent"},
		{"a warm cache says what to do", []Blindness{{Worker: "a", Cause: CauseWarm}}, "a cached blocks before kvlens joined that the index never saw (give replay=, or press Reset caches)"},
		{"a refilling index names the break, not the tokens", []Blindness{{Worker: "a", Cause: CauseRefilling}}, "the index of a is refilling after its KV events broke off"},
		{"an events port that is no publisher says which port to give", []Blindness{{Worker: "a", Cause: CauseWrongSocket}}, "the events= endpoint of a is no KV-event publisher (is it the replay port? give that as replay=)"},
		{"workers of two block sizes are told to agree", []Blindness{{Worker: "a", Cause: CauseBlockSize, EventBlockSize: 16, IndexBlockSize: 32}, {Worker: "b", Cause: CauseBlockSize, EventBlockSize: 64, IndexBlockSize: 32}},
			"KV events from a, b carry blocks of 16 and 64 tokens and the router indexes blocks of 32, so none applies (the workers disagree: give them one block size)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BlindSummary(tt.bs)
			if !strings.HasPrefix(got, tt.want) || (tt.want == "") != (got == "") {
				t.Errorf("BlindSummary = %q, want it to start %q", got, tt.want)
			}
		})
	}
}

// TestBlindnessWindowStartsAgain checks that what was measured before the
// router's tokens changed, or before a worker's index was cleared, no
// longer counts: the verdict needs a whole new window of evidence.
func TestBlindnessWindowStartsAgain(t *testing.T) {
	tests := []struct {
		name      string
		clear     func(rt *Router)
		wantBlind []string // workers still blind after the clear
	}{
		{"a tokenizer switch clears every worker's window", func(rt *Router) { rt.ClearBlind() }, nil},
		{"clearing one worker's index clears its window only", func(rt *Router) { rt.Index().ClearWorker("a") }, []string{"b"}},
		{"a worker leaving the index clears its window", func(rt *Router) { rt.Index().RemoveWorker("b") }, []string{"a"}},
		{"clearing the whole index clears every window", func(rt *Router) { rt.Index().Clear() }, nil},
		// sad path: nothing cleared, both stay blind
		{"without a clear both workers stay blind", func(*Router) {}, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fleet(2)
			rt := NewRouter(NewPool(ws), &RoundRobin{}, Config{})
			for _, w := range ws {
				// Each worker has stored a block, so the index knows it.
				rt.Index().Apply(w.Name, &kvevents.BlockStored{BlockHashes: []uint64{1}, TokenIDs: make([]uint32, DefaultBlockSize), BlockSize: DefaultBlockSize})
				for range blindMinRequests {
					rt.ObserveCache(&Booking{Worker: w, isl: 2000}, 1000)
				}
			}
			if len(rt.Blind()) != 2 {
				t.Fatalf("before the clear, Blind = %v; want both workers", rt.Blind())
			}
			tt.clear(rt)
			var got []string
			for _, b := range rt.Blind() {
				got = append(got, b.Worker)
			}
			if strings.Join(got, ",") != strings.Join(tt.wantBlind, ",") {
				t.Errorf("after the clear, blind workers = %v; want %v", got, tt.wantBlind)
			}
		})
	}
}

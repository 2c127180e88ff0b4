package loadgen

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/sim"
	"github.com/kvlens/kvlens/tokenizer"
)

var oneTurn = TurnRequest{Messages: []tokenizer.Message{{Role: "user", Content: "Explain prefix caching."}}, MaxTokens: 20}

func TestOpenAIClientMeasuresAStream(t *testing.T) {
	// A worker whose prefill step takes about 86 ms and decode steps 20.4
	// ms: the prompt is about 10 tokens, and the prefill pad is capped at
	// the chunk, so the prefill step computes about 20 tokens' worth. The
	// last token comes about 390 ms after the first.
	p := sim.MustProfile(sim.DefaultProfile)
	p.StepOverheadMs, p.WeightsMs, p.PerTokenMs, p.KVReadMs, p.AttentionMs = 0, 20, 4.2, 0, 0
	worker, err := sim.NewServer(sim.ServerOptions{Name: "w7", Model: "m", Profile: p})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(WorkerHeader, "w7")
		worker.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := NewOpenAIClient(srv.URL+"/v1", "m", "")
	tokenizer.Count("load the vocabulary before timing") // slow under -race
	var first time.Duration
	r := c.Chat(context.Background(), oneTurn, func(_ string, d time.Duration) { first = d })
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// TTFT is at least the prefill step and ends before the stream does;
	// how late past 86 ms depends on how loaded the machine is, so only
	// the order is checked above it.
	if r.TTFT < 80*time.Millisecond || r.TTFT >= r.E2E || first != r.TTFT {
		t.Errorf("TTFT = %v (callback %v), E2E %v: want about 86 ms, before the last token", r.TTFT, first, r.E2E)
	}
	if r.OSL != 20 || r.ISL == 0 || r.Worker != "w7" {
		t.Errorf("OSL %d, ISL %d, worker %q; want 20 tokens from usage, ISL > 0, w7", r.OSL, r.ISL, r.Worker)
	}
	// 19 gaps of 20.4 ms after the first token. The worker keeps to its
	// schedule, so TPOT may come out a little under 20.4 ms when the first
	// chunk, which goes out with the response headers, lags its step's end
	// by more than the last one does.
	if tpot, ok := r.TPOT(); !ok || tpot < 18*time.Millisecond || tpot > 28*time.Millisecond {
		t.Errorf("TPOT = %v, want about 20.4 ms", tpot)
	}
}

// TestOpenAIClientOnAWarpMeasuresTheModelsTime runs a worker and the client
// on one warp clock at 4x: the stream takes a quarter of its modelled time
// on the wall clock, and the client measures the modelled time.
func TestOpenAIClientOnAWarpMeasuresTheModelsTime(t *testing.T) {
	warp := clock.NewWarp(clock.Real, time.Hour, 4) // meets the wall clock in 15 min
	p := sim.MustProfile(sim.DefaultProfile)
	p.StepOverheadMs, p.WeightsMs, p.PerTokenMs, p.KVReadMs, p.AttentionMs = 0, 20, 4.2, 0, 0
	worker, err := sim.NewServer(sim.ServerOptions{Name: "w7", Model: "m", Profile: p, Clock: warp})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	srv := httptest.NewServer(worker)
	defer srv.Close()
	c := NewOpenAIClient(srv.URL+"/v1", "m", "")
	c.SetClock(warp)
	tokenizer.Count("load the vocabulary before timing")
	began := time.Now()
	r := c.Chat(context.Background(), oneTurn, nil)
	wall := time.Since(began)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// The modelled prefill is about 86 ms and the decode steps 20.4 ms, as
	// in TestOpenAIClientMeasuresAStream; only floors are checked, since a
	// loaded machine's lateness is magnified 4x too.
	if tpot, ok := r.TPOT(); r.TTFT < 80*time.Millisecond || !ok || tpot < 18*time.Millisecond {
		t.Errorf("TTFT %v, TPOT %v: want the modelled 86 ms and 20.4 ms or more", r.TTFT, tpot)
	}
	// Before the warp meets the wall clock, its durations are 4x the
	// wall's: E2E, measured inside the call, is about 4x the call's time.
	if r.E2E < 3*wall || r.E2E > 4*wall {
		t.Errorf("E2E %v on the warp, the call took %v on the wall clock: want 3-4x", r.E2E, wall)
	}
}

func TestOpenAIClientClassifiesFailures(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    ErrorClass
	}{
		{"a 503 is counted as http_503", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"busy"}}`, 503)
		}, ErrHTTP503},
		{"a 429 is counted as http_429", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"slow down"}}`, 429)
		}, ErrHTTP429},
		{"a 500 is counted as http_5xx", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"oops"}}`, 500)
		}, ErrHTTP5xx},
		{"a stream that stops without finish or usage is broken", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"choices":[{"delta":{"content":"half"}}]}`+"\n\n")
		}, ErrStream},
		{"a stream of only a huge chunk that never ends its line is broken", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"choices":[{"delta":{"content":"`+strings.Repeat("x", 100_000))
		}, ErrStream},
		{"a connection cut mid-stream is broken", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"choices":[{"delta":{"content":"half"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, ErrStream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			r := NewOpenAIClient(srv.URL+"/v1", "m", "").Chat(context.Background(), oneTurn, nil)
			if r.Err == nil || r.Class != tt.want {
				t.Fatalf("class %q, err %v; want %q", r.Class, r.Err, tt.want)
			}
		})
	}
}

// TestOpenAIClientTimesAReasoningModelFromItsFirstThought streams as a
// reasoning model does, thinking for a while before its answer: the first
// token is the first thought, under any of the field names engines use, and
// the conversation keeps only the answer.
func TestOpenAIClientTimesAReasoningModelFromItsFirstThought(t *testing.T) {
	const think = 600 * time.Millisecond // between the first thought and the answer
	for _, tc := range []struct {
		name, thought string // thought: the delta's fields, before their text
		usage         bool
		wantOSL       int
	}{
		{"vLLM's delta.reasoning, with usage", `"reasoning":`, true, 7},
		{"SGLang's and older vLLM's delta.reasoning_content, without usage", `"reasoning_content":`, false, 0},
		{"newer vLLM's both names at once, counted once", `"reasoning":"Hmm, ","reasoning_content":`, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				send := func(delta string) {
					io.WriteString(w, `data: {"choices":[{"delta":{`+delta+`},"finish_reason":null}]}`+"\n\n")
					w.(http.Flusher).Flush()
				}
				send(`"role":"assistant","content":""`)
				send(tc.thought + `"Hmm, "`)
				time.Sleep(think)
				send(`"content":"The answer."`)
				io.WriteString(w, `data: {"choices":[{"delta":{},"finish_reason":"stop"}]}`+"\n\n")
				if tc.usage {
					io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}`+"\n\n")
				}
				io.WriteString(w, "data: [DONE]\n\n")
			}))
			defer srv.Close()
			r := NewOpenAIClient(srv.URL+"/v1", "m", "").Chat(context.Background(), oneTurn, nil)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if r.TTFT <= 0 || r.TTFT >= think-100*time.Millisecond || r.E2E < think {
				t.Errorf("TTFT %v, E2E %v: want the first thought's time, well before the answer %v later", r.TTFT, r.E2E, think)
			}
			if r.Text != "The answer." {
				t.Errorf("the conversation keeps %q; want the answer alone", r.Text)
			}
			want := tc.wantOSL
			if !tc.usage {
				want = tokenizer.Count("Hmm, ") + tokenizer.Count("The answer.")
			}
			if r.OSL != want || r.FirstChunkTokens != tokenizer.Count("Hmm, ") || len(r.ChunkGaps) != 1 {
				t.Errorf("OSL %d, first chunk %d tokens, %d gaps; want %d, %d and 1", r.OSL, r.FirstChunkTokens, len(r.ChunkGaps), want, tokenizer.Count("Hmm, "))
			}
		})
	}
}

// TestOpenAIClientTellsAMissFromNoReport asks a simulated worker that
// reports cached tokens, as vLLM with --enable-prompt-tokens-details, and one
// that answers as vLLM's default, with prompt_tokens_details null: only the
// second leaves the request out of the hit rate.
func TestOpenAIClientTellsAMissFromNoReport(t *testing.T) {
	for _, noCached := range []bool{false, true} {
		worker, err := sim.NewServer(sim.ServerOptions{Name: "w", Model: "m", Profile: sim.MustProfile(sim.DefaultProfile), NoCachedTokens: noCached})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(worker)
		r := NewOpenAIClient(srv.URL+"/v1", "m", "").Chat(context.Background(), TurnRequest{Messages: oneTurn.Messages, MaxTokens: 2}, nil)
		srv.Close()
		worker.Close()
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.NoCacheReport != noCached {
			t.Errorf("a worker with NoCachedTokens %v: the result's NoCacheReport is %v", noCached, r.NoCacheReport)
		}
	}
}

func TestOpenAIClientReadsLinesLongerThanItsBuffer(t *testing.T) {
	long := strings.Repeat("token ", 20_000) // 120 KB in one chunk
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"delta":{"content":"`+long+`"},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":20000}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	r := NewOpenAIClient(srv.URL+"/v1", "m", "").Chat(context.Background(), oneTurn, nil)
	if r.Err != nil || r.Text != long || r.OSL != 20000 {
		t.Fatalf("err %v, %d bytes of text, OSL %d; want the whole 120 KB chunk and OSL from usage", r.Err, len(r.Text), r.OSL)
	}
}

func TestOpenAIClientConnectRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := NewOpenAIClient(url+"/v1", "m", "").Chat(context.Background(), oneTurn, nil)
	if r.Class != ErrConnect {
		t.Fatalf("class = %q (%v), want connect", r.Class, r.Err)
	}
}

func TestParseStarter(t *testing.T) {
	tests := []struct {
		name, raw          string
		wantTitle, wantErr string
	}{
		{"front matter sets title and topic", "---\ntitle: Raft\ntopic: consensus\n---\n\nBody.", "Raft", ""},
		{"a file without front matter uses its name", "Just a body.", "id", ""},
		{"unclosed front matter names line 1", "---\ntitle: x\nBody", "", "line 1"},
		{"a bad front matter line names its line", "---\ntitle: x\nnonsense\n---\nBody", "", "line 3"},
		{"an empty body is refused", "---\ntitle: x\n---\n  \n", "", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parseStarter("id", tt.raw)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || s.Title != tt.wantTitle {
				t.Fatalf("got %+v, %v", s, err)
			}
		})
	}
}

func TestBuiltinStartersLoad(t *testing.T) {
	ss := BuiltinStarters()
	if len(ss) == 0 {
		t.Fatal("no built-in starters")
	}
	for _, s := range ss {
		if s.Title == s.ID || s.Topic == "" {
			t.Errorf("%s: missing title or topic front matter", s.ID)
		}
	}
}

func TestBuiltinStartersAreTheSeedsLength(t *testing.T) {
	// Seed 003's workload: passages of about 3,900 tokens. Ours: 3,500–4,000.
	ss := BuiltinStarters()
	if len(ss) != 10 {
		t.Fatalf("%d built-in starters, want 10", len(ss))
	}
	for _, s := range ss {
		if n := tokenizer.Count(s.Text); n < 3500 || n > 4000 {
			t.Errorf("%s: %d tokens, want 3,500–4,000", s.ID, n)
		}
	}
}

// bytesTransport answers every request with body as an SSE stream.
type bytesTransport struct{ body []byte }

func (b bytesTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(b.body)), Request: r,
	}, nil
}

func FuzzOpenAIClientStream(f *testing.F) {
	f.Add([]byte(`data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"))
	f.Add([]byte(`data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3}}}` + "\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"x\\ny\"}}\n\n"))
	f.Add([]byte(": comment\r\nevent: x\r\ndata:[DONE]\r\n"))
	f.Add([]byte("data: {\"choices\":\r\ndata: [{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata:[DONE]\r\r"))
	f.Add([]byte("\xef\xbb\xbfdata: {\"choices\":[],\r: split\rdata: \"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\r\r"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c := NewOpenAIClient("http://fuzz.invalid/v1", "m", "")
		c.http = &http.Client{Transport: bytesTransport{body}}
		r := c.Chat(context.Background(), oneTurn, nil)
		if (r.Err == nil) != (r.Class == "") {
			t.Fatalf("error %v with class %q", r.Err, r.Class)
		}
		if r.Err != nil {
			if strings.Contains(r.Err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", r.Err)
			}
			return
		}
		if r.TTFT < 0 || r.E2E < r.TTFT || r.OSL < 0 || len(r.ChunkGaps) > strings.Count(string(body), "data:") {
			t.Fatalf("inconsistent result %+v", r)
		}
	})
}

package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/tokenizer"
)

// fast is a profile whose decode steps take about 1 ms and whose prefill
// costs 0.05 ms a token, so tests run in real time quickly yet see prefill.
func fast() Profile {
	p := MustProfile(DefaultProfile)
	p.StepOverheadMs, p.WeightsMs, p.PerTokenMs, p.PrefillPadTokens, p.KVReadMs, p.AttentionMs = 0, 1, 0.05, 0, 0, 0
	return p
}

// sink collects KV event batches.
type sink struct {
	mu      sync.Mutex
	batches []kvevents.Batch
}

func (s *sink) put(b kvevents.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
}

func (s *sink) kinds() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[string]int{}
	for _, b := range s.batches {
		for _, e := range b.Events {
			n[kvevents.Kind(e)]++
		}
	}
	return n
}

func newTestServer(t *testing.T, p Profile) (*Server, *httptest.Server, *sink) {
	t.Helper()
	ev := &sink{}
	w, err := NewServer(ServerOptions{Name: "w0", Profile: p, Events: ev.put, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(func() { srv.Close(); w.Close() })
	return w, srv, ev
}

func openaiClient(url string) *openai.Client {
	cfg := openai.DefaultConfig("unused")
	cfg.BaseURL = url + "/v1"
	return openai.NewClientWithConfig(cfg)
}

// streamed is what a client saw of one streamed chat completion.
type streamed struct {
	text   string
	chunks int
	usage  *openai.Usage
	ttft   time.Duration
	e2e    time.Duration
}

func streamChat(t *testing.T, url, content string, maxTokens int) (streamed, error) {
	t.Helper()
	return streamMessages(t, url, []openai.ChatCompletionMessage{{Role: "user", Content: content}}, maxTokens)
}

func streamMessages(t *testing.T, url string, msgs []openai.ChatCompletionMessage, maxTokens int) (streamed, error) {
	t.Helper()
	start := time.Now()
	stream, err := openaiClient(url).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model:         DefaultModel,
		Messages:      msgs,
		MaxTokens:     maxTokens,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		return streamed{}, err
	}
	defer stream.Close()
	var s streamed
	var text strings.Builder
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break // go-openai reports [DONE] as io.EOF
		}
		if err != nil {
			return s, err
		}
		if resp.Usage != nil {
			s.usage = resp.Usage
			continue
		}
		if len(resp.Choices) > 0 && resp.Choices[0].Delta.Content != "" {
			if s.chunks == 0 {
				s.ttft = time.Since(start)
			}
			s.chunks++
			text.WriteString(resp.Choices[0].Delta.Content)
		}
	}
	s.text = text.String()
	s.e2e = time.Since(start)
	return s, nil
}

func TestChatCompletionStreamReportsUsage(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	s, err := streamChat(t, srv.URL, "Explain the KV cache.", 50)
	if err != nil {
		t.Fatal(err)
	}
	if s.usage == nil {
		t.Fatal("no usage chunk although include_usage was set")
	}
	if s.usage.CompletionTokens != 50 || s.chunks != 50 {
		t.Errorf("completion tokens = %d over %d chunks, want 50 (max_tokens caps the drawn length)", s.usage.CompletionTokens, s.chunks)
	}
	want := tokenizer.Count(tokenizer.RenderChat([]tokenizer.Message{{Role: "user", Content: "Explain the KV cache."}}))
	if s.usage.PromptTokens != want || s.usage.PromptTokensDetails == nil {
		t.Errorf("prompt tokens = %d (details %v), want the rendered prompt's %d", s.usage.PromptTokens, s.usage.PromptTokensDetails, want)
	}
	if !strings.Contains(s.text, " the ") {
		t.Errorf("generated text %q is not prose", s.text)
	}
}

func TestNonStreamingCompletions(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	c := openaiClient(srv.URL)
	chat, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: DefaultModel, Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, MaxTokens: 12,
	})
	if err != nil {
		t.Fatal(err)
	}
	if chat.Usage.CompletionTokens != 12 || chat.Choices[0].Message.Content == "" || chat.Choices[0].FinishReason != "length" {
		t.Fatalf("chat: %d tokens, text %q, finish %q", chat.Usage.CompletionTokens, chat.Choices[0].Message.Content, chat.Choices[0].FinishReason)
	}
	cmpl, err := c.CreateCompletion(context.Background(), openai.CompletionRequest{Model: DefaultModel, Prompt: "Once upon a time", MaxTokens: 7})
	if err != nil {
		t.Fatal(err)
	}
	if cmpl.Usage.CompletionTokens != 7 || cmpl.Usage.PromptTokens != tokenizer.Count("Once upon a time") || cmpl.Choices[0].Text == "" {
		t.Fatalf("completion: %+v", cmpl)
	}
}

func TestStreamingCompletionsEndWithUsageAndDone(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	tests := []struct {
		name, path, body string
		chunks           int // chunks with text, the last of them with the finish_reason
		usage            bool
	}{
		{"chat without include_usage has no usage chunk", "/v1/chat/completions",
			`{"stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, 3, false},
		{"completions stream text chunks and usage", "/v1/completions",
			`{"stream":true,"max_tokens":4,"prompt":"hello","stream_options":{"include_usage":true}}`, 4, true},
		{"ignore_eos runs to max_tokens", "/v1/completions",
			`{"stream":true,"max_tokens":40,"ignore_eos":true,"prompt":["hello"]}`, 40, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
				t.Errorf("Content-Type = %q", got)
			}
			if !strings.HasSuffix(string(raw), "data: [DONE]\n\n") {
				t.Errorf("stream does not end with [DONE]: %q", raw)
			}
			var content, finish, usage int
			for _, line := range strings.Split(string(raw), "\n\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var c struct {
					Choices []struct {
						Text         *string         `json:"text"`
						Delta        json.RawMessage `json:"delta"`
						FinishReason *string         `json:"finish_reason"`
					} `json:"choices"`
					Usage *openai.Usage `json:"usage"`
				}
				if err := json.Unmarshal([]byte(data), &c); err != nil {
					t.Fatalf("chunk %q is not JSON: %v", data, err)
				}
				if c.Usage != nil {
					usage++
					continue
				}
				ch := c.Choices[0]
				if ch.FinishReason != nil {
					finish++
				}
				if (ch.Text != nil && *ch.Text != "") || strings.Contains(string(ch.Delta), `"content":"`) && !strings.Contains(string(ch.Delta), `"content":""`) {
					content++
				}
			}
			if content != tt.chunks || finish != 1 || (usage == 1) != tt.usage {
				t.Errorf("%d content, %d finish, %d usage chunks; want %d, 1, usage %v", content, finish, usage, tt.chunks, tt.usage)
			}
		})
	}
}

func TestBadRequestsGetOneLineErrors(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	long := strings.Repeat("word ", 17000)
	tests := []struct {
		name, method, path, body string
		want                     int
		wantMsg                  string
	}{
		{"malformed JSON is a 400", "POST", "/v1/chat/completions", `{"messages":`, 400, "not valid JSON"},
		{"no messages is a 400", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "at least one message"},
		{"unknown role is a 400", "POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400, "not a chat role"},
		{"negative max_tokens is a 400", "POST", "/v1/chat/completions", `{"max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`, 400, "max_tokens must be at least 1, got -1."},
		{"n 0 is a 400", "POST", "/v1/chat/completions", `{"n":0,"messages":[{"role":"user","content":"x"}]}`, 400, "n must be at least 1, got 0."},
		{"n 1 is served", "POST", "/v1/completions", `{"n":1,"prompt":"x","max_tokens":1}`, 200, "text_completion"},
		{"a prompt past the context length is a 400", "POST", "/v1/completions", `{"prompt":"` + long + `"}`, 400, "However, the model's context length is only"},
		{"a completion without prompt is a 400", "POST", "/v1/completions", `{"max_tokens":3}`, 400, "prompt must be"},
		{"tokenize with nothing is a 400", "POST", "/tokenize", `{}`, 400, "give a prompt or messages"},
		{"bad fault rates are a 400", "PUT", "/admin/faults", `{"error_503":2}`, 400, "between 0 and 1"},
		{"unknown fault fields are a 400", "PUT", "/admin/faults", `{"explode":1}`, 400, "unknown field"},
		{"unknown path is a 404", "GET", "/v2/nothing", "", 404, "no route"},
		{"health answers ok", "GET", "/health", "", 200, "ok"},
		{"models lists the served model", "GET", "/v1/models", "", 200, DefaultModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := call(t, srv, tt.method, tt.path, tt.body)
			if status != tt.want || !strings.Contains(string(raw), tt.wantMsg) || strings.Count(strings.TrimSpace(string(raw)), "\n") > 0 {
				t.Fatalf("got %d %s, want %d containing %q on one line", status, raw, tt.want, tt.wantMsg)
			}
		})
	}
}

// call sends one request to srv and returns the status and body.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

func TestTokenizeUsesTheChatTemplate(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	msgs := []tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is a KV cache?"}}
	body, _ := json.Marshal(map[string]any{"messages": msgs})
	resp, err := http.Post(srv.URL+"/tokenize", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Tokens      []uint32 `json:"tokens"`
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := tokenizer.Encode(tokenizer.RenderChat(msgs))
	if fmt.Sprint(got.Tokens) != fmt.Sprint(want) || got.Count != len(want) || got.MaxModelLen != 16384 {
		t.Fatalf("got %d tokens (count %d, max_model_len %d), want %d and 16384", len(got.Tokens), got.Count, got.MaxModelLen, len(want))
	}
}

func TestARepeatedPromptIsCachedAndFaster(t *testing.T) {
	_, srv, ev := newTestServer(t, fast())
	prompt := strings.Repeat("The paged KV cache stores keys and values in blocks. ", 200) // about 2,000 tokens
	first, err := streamChat(t, srv.URL, prompt, 5)
	if err != nil {
		t.Fatal(err)
	}
	second, err := streamChat(t, srv.URL, prompt, 5)
	if err != nil {
		t.Fatal(err)
	}
	if first.usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("first request had %d cached tokens, want 0", first.usage.PromptTokensDetails.CachedTokens)
	}
	if c := second.usage.PromptTokensDetails.CachedTokens; c < second.usage.PromptTokens-32 {
		t.Errorf("repeat had %d of %d prompt tokens cached, want all but the last block", c, second.usage.PromptTokens)
	}
	// About 100 ms of prefill against under 5: the repeat saves at least
	// half of it, however late a loaded machine runs both.
	if first.ttft-second.ttft < 50*time.Millisecond {
		t.Errorf("TTFT %v for the repeat, %v for the first: want the repeat 50 ms faster or more", second.ttft, first.ttft)
	}
	if ev.kinds()["BlockStored"] == 0 {
		t.Error("no BlockStored event published")
	}
}

// metricValue scrapes name's value from /metrics.
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

func TestExceedingCapacityEvictsVisibly(t *testing.T) {
	p := fast()
	p.KVBlocks, p.MaxModelLen = 80, 2560 // 2,560 tokens of cache
	_, srv, ev := newTestServer(t, p)
	// A long answer keeps the request running while /metrics is read.
	done := make(chan error, 1)
	go func() {
		_, err := streamChat(t, srv.URL, strings.Repeat("alpha beta gamma delta ", 400), 500)
		done <- err
	}()
	var usage float64
	for deadline := time.Now().Add(2 * time.Second); usage == 0 && time.Now().Before(deadline); {
		usage = metricValue(t, srv.URL, "vllm:kv_cache_usage_perc")
	}
	if usage < 0.5 {
		t.Errorf("kv_cache_usage_perc = %v while a 2,100-token sequence runs in a 2,560-token cache, want > 0.5", usage)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := ev.kinds()["BlockRemoved"]; n != 0 {
		t.Fatalf("%d evictions before the cache was full", n)
	}
	// Another long prompt needs the idle cached blocks of the first.
	if _, err := streamChat(t, srv.URL, strings.Repeat("one two three four ", 400), 5); err != nil {
		t.Fatal(err)
	}
	if ev.kinds()["BlockRemoved"] == 0 {
		t.Fatal("no BlockRemoved event after exceeding capacity")
	}
	if u := metricValue(t, srv.URL, "vllm:kv_cache_usage_perc"); u != 0 {
		t.Errorf("kv_cache_usage_perc = %v when idle, want 0", u)
	}
}

func TestServerReportsItsBatchCapacityAsRealEnginesDo(t *testing.T) {
	p := fast()
	p.MaxBatchSize, p.MaxNumTokens, p.KVBlocks, p.BlockSize, p.MaxModelLen = 8, 2048, 500, 16, 4096
	_, srv, _ := newTestServer(t, p)
	tests := []struct {
		name string
		path string
		want map[string]any // JSON path, dot-separated, to value
	}{
		{"vLLM's GET /inference/v1/config puts it in scheduler.max_num_seqs", "/inference/v1/config", map[string]any{
			"scheduler.max_num_seqs": 8.0, "scheduler.max_num_batched_tokens": 2048.0,
			"kv_cache.num_gpu_blocks": 500.0, "model.max_model_len": 4096.0,
		}},
		{"SGLang's GET /get_server_info puts it in max_running_requests", "/get_server_info", map[string]any{
			"max_running_requests": 8.0, "page_size": 16.0, "max_total_num_tokens": 8000.0, "context_length": 4096.0,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var doc map[string]any
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %s, content type %q", resp.Status, resp.Header.Get("Content-Type"))
			}
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			for path, want := range tt.want {
				var v any = doc
				for _, k := range strings.Split(path, ".") {
					m, _ := v.(map[string]any)
					v = m[k]
				}
				if v != want {
					t.Errorf("%s = %v, want %v", path, v, want)
				}
			}
		})
	}
}

func TestResetPrefixCachePublishesAllBlocksCleared(t *testing.T) {
	_, srv, ev := newTestServer(t, fast())
	if _, err := streamChat(t, srv.URL, strings.Repeat("cache me ", 100), 2); err != nil {
		t.Fatal(err)
	}
	// A web page's request, as a browser on the booth machine sends it, is
	// refused and clears nothing.
	page, _ := http.NewRequest("POST", srv.URL+"/reset_prefix_cache", nil)
	page.Header.Set("Origin", "http://evil.example")
	page.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(page)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || ev.kinds()["AllBlocksCleared"] != 0 {
		t.Fatalf("a cross-site page's reset: status %d, events %v; want 403 and nothing cleared", resp.StatusCode, ev.kinds())
	}
	resp, err = http.Post(srv.URL+"/reset_prefix_cache", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || ev.kinds()["AllBlocksCleared"] != 1 {
		t.Fatalf("status %d, events %v; want 200 and one AllBlocksCleared", resp.StatusCode, ev.kinds())
	}
	s, err := streamChat(t, srv.URL, strings.Repeat("cache me ", 100), 2)
	if err != nil {
		t.Fatal(err)
	}
	if s.usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("%d cached tokens after a reset, want 0", s.usage.PromptTokensDetails.CachedTokens)
	}
}

func TestMetricsUseVLLMNamesAndPassPromtool(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	if _, err := streamChat(t, srv.URL, "hello", 3); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{
		`vllm:num_requests_running{model_name="` + DefaultModel + `"}`,
		"vllm:num_requests_waiting{", "vllm:kv_cache_usage_perc{",
		"vllm:prefix_cache_queries_total{", "vllm:prefix_cache_hits_total{",
		"vllm:time_to_first_token_seconds_count{", "vllm:inter_token_latency_seconds_count{", "vllm:e2e_request_latency_seconds_count{",
	} {
		if !bytes.Contains(raw, []byte(name)) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if got := metricValue(t, srv.URL, "vllm:e2e_request_latency_seconds_count"); got != 1 {
		t.Errorf("e2e count = %v, want 1", got)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		// make test installs it and sets KVLENS_REQUIRE_PROMTOOL.
		if os.Getenv("KVLENS_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool is required: not on PATH (Debian package prometheus)")
		}
		t.Skip("promtool not on PATH (Debian package prometheus)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	// promtool exits 1 when it cannot parse the exposition and 3 when its
	// linter objects. vLLM's names contain ':', which the linter flags on
	// every family; any other complaint is ours to fix.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.HasSuffix(line, "metric names should not contain ':'") {
			t.Errorf("promtool: %s", line)
		}
	}
}

func putFaults(t *testing.T, url, body string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", url+"/admin/faults", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT /admin/faults %s: %d %s", body, resp.StatusCode, raw)
	}
}

func TestInjectedFaultsReachTheClient(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	tests := []struct {
		name, faults string
		status       int // 0: the stream breaks
	}{
		{"error_503 answers 503", `{"error_503":1}`, 503},
		{"error_429 answers 429", `{"error_429":1}`, 429},
		{"error_500 answers 500", `{"error_500":1}`, 500},
		{"stream_cut breaks the stream mid-answer", `{"stream_cut":1}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			putFaults(t, srv.URL, tt.faults)
			defer putFaults(t, srv.URL, `{}`)
			s, err := streamChat(t, srv.URL, "hello", 50)
			var apiErr *openai.RequestError
			var apiErr2 *openai.APIError
			switch {
			case tt.status != 0 && errors.As(err, &apiErr2) && apiErr2.HTTPStatusCode == tt.status:
			case tt.status != 0 && errors.As(err, &apiErr) && apiErr.HTTPStatusCode == tt.status:
			case tt.status == 0 && err != nil && s.usage == nil:
			default:
				t.Fatalf("got %d chunks, err %v; want status %d (0: a broken stream)", s.chunks, err, tt.status)
			}
		})
	}
}

func TestTheEngineKeepsServingOthersThroughFaults(t *testing.T) {
	w, srv, _ := newTestServer(t, fast())
	ok := make(chan streamed, 1)
	go func() {
		s, err := streamChat(t, srv.URL, "a long answer please", 400)
		if err != nil {
			t.Error(err)
		}
		ok <- s
	}()
	for w.Runner().Stats().Running == 0 {
		time.Sleep(time.Millisecond)
	}
	putFaults(t, srv.URL, `{"stream_cut":1}`)
	if _, err := streamChat(t, srv.URL, "cut me", 400); err == nil {
		t.Error("the cut stream ended cleanly")
	}
	putFaults(t, srv.URL, `{}`)
	if s := <-ok; s.usage == nil || s.usage.CompletionTokens != 400 {
		t.Fatalf("the healthy stream got %+v, want all 400 tokens", s.usage)
	}
	if st := w.Runner().Stats(); st.Running != 0 {
		t.Fatalf("%d requests still running: the cut one was not cancelled", st.Running)
	}
}

func TestSlowdownAndStallDelayTheEngine(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	base, err := streamChat(t, srv.URL, "hello", 20)
	if err != nil {
		t.Fatal(err)
	}
	putFaults(t, srv.URL, `{"slowdown":20}`)
	slow, err := streamChat(t, srv.URL, "hello", 20)
	if err != nil {
		t.Fatal(err)
	}
	putFaults(t, srv.URL, `{"stall":"300ms"}`)
	stalled, err := streamChat(t, srv.URL, "hello", 2)
	if err != nil {
		t.Fatal(err)
	}
	// 20 steps of about 1 ms each: 20 ms, or 400 ms slowed down. A slowdown
	// guarantees the lower bound; how fast the base run is depends on how
	// busy the machine is, so it is only required to be faster.
	if slow.e2e < 300*time.Millisecond || base.e2e >= slow.e2e {
		t.Errorf("20 tokens took %v with slowdown 20, %v without", slow.e2e, base.e2e)
	}
	if stalled.ttft < 250*time.Millisecond {
		t.Errorf("TTFT %v during a 300 ms stall", stalled.ttft)
	}
}

func TestClientDisconnectCancelsTheRequest(t *testing.T) {
	p := fast()
	p.WeightsMs = 50 // slow decode, so the request is still running when the client leaves
	w, srv, _ := newTestServer(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"stream":true,"max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 64))
	cancel()
	resp.Body.Close()
	for deadline := time.Now().Add(5 * time.Second); w.Runner().Stats().Running > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the engine still runs the request 5 s after its client left")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFleetServesOnItsOwnPorts(t *testing.T) {
	f, err := StartFleet(FleetConfig{Count: 2, Profile: fast()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if len(f.URLs) != 2 || f.URLs[0] == f.URLs[1] {
		t.Fatalf("URLs %v", f.URLs)
	}
	for _, u := range f.URLs {
		if _, err := streamChat(t, u, "hi", 3); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := StartFleet(FleetConfig{Count: 2, Ports: []int{1}}); err == nil {
		t.Fatal("one port for two workers was accepted")
	}
}

func FuzzParseChatRequest(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`)
	f.Add(`{"messages":[{"role":"robot"}]}`)
	f.Add(`{"max_completion_tokens":9,"messages":[{"role":"system","content":""}]}`)
	f.Add(`{"max_tokens":null,"max_completion_tokens":null,"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"stream":false,"stream_options":{},"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"n":3,"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"n":2,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"n":null,"use_beam_search":true,"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`[]`)
	f.Add(`{"messages":[{"role":"user","content":"hi"}]}xyz`)
	f.Fuzz(func(t *testing.T, body string) {
		req, err := parseChatRequest([]byte(body))
		if err != nil {
			if strings.Contains(err.Error(), "\n") || speaksGo(err.Error()) {
				t.Fatalf("error is not one line free of Go types: %q", err)
			}
			return
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("accepted a body that is not one JSON value: %q", body)
		}
		if len(req.Messages) == 0 || req.maxTokens < 0 {
			t.Fatalf("accepted request with %d messages and max_tokens %d", len(req.Messages), req.maxTokens)
		}
		if !req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			t.Fatalf("accepted stream_options without a stream: %q", body)
		}
		if req.n < 1 || req.n > maxChoices || (req.n > 1 && isZero(req.Temperature)) || req.UseBeamSearch {
			t.Fatalf("accepted %d choices (temperature %v, beam search %v): %q", req.n, req.Temperature, req.UseBeamSearch, body)
		}
		// Only a chat that sets no cap runs to the end of the context.
		if unset := req.MaxTokens == nil && req.MaxCompletionTokens == nil; unset != (req.maxTokens == restOfContext) {
			t.Fatalf("max_tokens %v, max_completion_tokens %v: cap %d", req.MaxTokens, req.MaxCompletionTokens, req.maxTokens)
		}
	})
}

func FuzzParseCompletionRequest(f *testing.F) {
	f.Add(`{"prompt":"hi","max_tokens":3,"stream":true}`)
	f.Add(`{"prompt":["a"]}`)
	f.Add(`{"prompt":["a","b"]}`)
	f.Add(`{"prompt":[1,2,3]}`)
	f.Add(`{"prompt":[[4,5]]}`)
	f.Add(`{"prompt":[[1],[2]]}`)
	f.Add(`{"prompt":[-1]}`)
	f.Add(`{"prompt":"x"} {}`)
	f.Add(`{"prompt":"x","stream_options":{"include_usage":true}}`)
	f.Add(`{"prompt":"x","stream":null,"stream_options":null}`)
	f.Add(`{"prompt":"x","n":0}`)
	f.Add(`{"prompt":"x","n":129,"use_beam_search":false}`)
	f.Fuzz(func(t *testing.T, body string) {
		req, err := parseCompletionRequest([]byte(body))
		if err != nil {
			if strings.Contains(err.Error(), "\n") || speaksGo(err.Error()) {
				t.Fatalf("error is not one line free of Go types: %q", err)
			}
			return
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("accepted a body that is not one JSON value: %q", body)
		}
		if !req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			t.Fatalf("accepted stream_options without a stream: %q", body)
		}
		if req.n < 1 || req.n > maxChoices || (req.n > 1 && isZero(req.Temperature)) || req.UseBeamSearch {
			t.Fatalf("accepted %d choices (temperature %v, beam search %v): %q", req.n, req.Temperature, req.UseBeamSearch, body)
		}
		// One prompt, text or ids, never both nor neither.
		if (req.text == "") == (len(req.ids) == 0) || req.maxTokens <= 0 {
			t.Fatalf("accepted request with prompt %q, ids %v and max_tokens %d", req.text, req.ids, req.maxTokens)
		}
	})
}

func FuzzParseTokenizeRequest(f *testing.F) {
	f.Add(`{"prompt":"hi"}`)
	f.Add(`{"messages":[{"role":"user","content":"x"}]}`)
	f.Add(`{"prompt":"","messages":[{"role":"user"}]}`)
	f.Add(`{"prompt":"x"}]`)
	f.Add(`{"prompt":"x","add_special_tokens":false}`)
	f.Add(`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false,"add_special_tokens":true}`)
	llama3, err := tokenizer.LoadFiles("../tokenizer/testdata/llama3")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		// The server parses with its engine's template: the embedded one,
		// or a model's own (here Llama 3's).
		for _, eng := range []*tokenizer.Engine{tokenizer.Embedded, llama3} {
			text, special, err := parseTokenizeRequestWith([]byte(body), eng)
			if err != nil {
				if strings.Contains(err.Error(), "\n") || speaksGo(err.Error()) {
					t.Fatalf("error is not one line free of Go types: %q", err)
				}
				continue
			}
			if !json.Valid([]byte(body)) {
				t.Fatalf("accepted a body that is not one JSON value: %q", body)
			}
			var req tokenizeRequest
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
			}
			// A prompt is tokenized as sent, with the BOS unless told not to;
			// messages through the template, which writes its own.
			wantSpecial := req.Prompt != nil
			if req.AddSpecialTokens != nil {
				wantSpecial = *req.AddSpecialTokens
			}
			if req.Prompt != nil && text != *req.Prompt || special != wantSpecial {
				t.Fatalf("%q gave text %q and special %v, want the prompt and %v", body, text, special, wantSpecial)
			}
		}
	})
}

func FuzzParseFaults(f *testing.F) {
	f.Add(`{"error_503":0.1,"stall":"2s"}`)
	f.Add(`{"stall":1.5,"slowdown":3}`)
	f.Add(`{"stream_cut":0.7,"error_500":0.7}`)
	f.Add(`{"slowdown":2}{"slowdown":3}`)
	f.Fuzz(func(t *testing.T, body string) {
		fs, err := parseFaults(strings.NewReader(body))
		if err == nil && !json.Valid([]byte(body)) {
			t.Fatalf("accepted a body that is not one JSON value: %q", body)
		}
		if err == nil {
			err = fs.validate()
		}
		if err != nil {
			if strings.Contains(err.Error(), "\n") || speaksGo(err.Error()) {
				t.Fatalf("error is not one line free of Go types: %q", err)
			}
			return
		}
		if fs.Error503+fs.Error429+fs.Error500+fs.StreamCut > 1+1e-9 || fs.Slowdown < 0 || fs.Stall < 0 {
			t.Fatalf("accepted faults %+v", fs)
		}
	})
}

func TestTemperatureZeroAnswersAPromptTheSameWayEveryTime(t *testing.T) {
	_, srv, _ := newTestServer(t, fast())
	ask := func(content string) string {
		t.Helper()
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":24,"temperature":0}`, DefaultModel, content)
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out openai.ChatCompletionResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
			t.Fatalf("status %d, %d choices", resp.StatusCode, len(out.Choices))
		}
		return out.Choices[0].Message.Content
	}
	first, again := ask("Why does prefix caching help?"), ask("Why does prefix caching help?")
	if first != again {
		t.Fatalf("one prompt at temperature 0 got two answers:\n%q\n%q", first, again)
	}
	if other := ask("What is a KV block?"); other == first {
		t.Fatalf("two prompts at temperature 0 got one answer %q", first)
	}
}

func TestOversizedRequestsAreRefusedAndTheWorkerKeepsServing(t *testing.T) {
	p := fast()
	p.MaxModelLen = 1024
	_, srv, _ := newTestServer(t, p)
	limit := tokenizer.BodyLimit(p.MaxModelLen)
	chat := func(content string, maxTokens int) string {
		b, _ := json.Marshal(map[string]any{"max_tokens": maxTokens, "messages": []tokenizer.Message{{Role: "user", Content: content}}})
		return string(b)
	}
	// fits is a prompt of about 1,000 tokens: with the template and one
	// output token it stays within 1,024.
	fits := strings.Repeat("cache ", 1000)
	tests := []struct {
		name    string
		path    string
		body    string
		want    int
		wantMsg string
	}{
		{"a prompt within the context length is served", "/v1/chat/completions", chat(fits, 1), 200, `"finish_reason"`},
		{"a /tokenize prompt within the context length is tokenized", "/tokenize", `{"prompt":"` + fits + `"}`, 200, `"count"`},
		// sad path
		{"a chat prompt too long by its bytes alone is a 400 before tokenizing", "/v1/chat/completions",
			chat(strings.Repeat("a", 1024*tokenizer.MaxTokenBytes+1), 1), 400, "You passed 131097 input characters and requested 1 output tokens. However, the model's context length is only 1024 tokens, resulting in a maximum input length of 1023 tokens (at most 130944 characters). Please reduce the length of the input prompt. (parameter=input_text, value=131097)"},
		{"a chat prompt too long by its tokens is a 400 once tokenizing passes the limit", "/v1/chat/completions",
			chat(strings.Repeat("cache ", 3000), 1), 400, "You passed 1024 input tokens and requested 1 output tokens."},
		{"a completion prompt too long by its tokens is a 400, its default 16 tokens counted", "/v1/completions",
			`{"prompt":"` + strings.Repeat("cache ", 3000) + `"}`, 400, "You passed 1009 input tokens and requested 16 output tokens. However, the model's context length is only 1024 tokens, resulting in a maximum input length of 1008 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=1009)"},
		{"a /tokenize prompt too long by its tokens is a 400, as a generation of no output tokens", "/tokenize",
			`{"prompt":"` + strings.Repeat("cache ", 3000) + `"}`, 400, "You passed 1025 input tokens and requested 0 output tokens. However, the model's context length is only 1024 tokens, resulting in a maximum input length of 1024 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=1025)"},
		{"a body over the cap is a 413", "/v1/chat/completions",
			chat(strings.Repeat("a", int(limit)), 1), 413, fmt.Sprintf("larger than %d bytes", limit)},
		{"a /tokenize body over the cap is a 413", "/tokenize",
			`{"prompt":"` + strings.Repeat("a", int(limit)) + `"}`, 413, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !strings.Contains(string(raw), tt.wantMsg) || strings.Count(strings.TrimSpace(string(raw)), "\n") > 0 {
				t.Fatalf("got %d %.300s, want %d containing %q on one line", resp.StatusCode, raw, tt.want, tt.wantMsg)
			}
			// The worker keeps serving.
			resp, err = http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chat("hi", 2)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("a small request after it got %d", resp.StatusCode)
			}
		})
	}
}

func TestModelsReportsMaxModelLen(t *testing.T) {
	p := fast()
	p.MaxModelLen = 4096
	_, srv, _ := newTestServer(t, p)
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 1 || got.Data[0].ID != DefaultModel || got.Data[0].MaxModelLen != 4096 {
		t.Fatalf("/v1/models = %+v, want %s with max_model_len 4096", got.Data, DefaultModel)
	}
}

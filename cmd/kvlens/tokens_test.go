package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvlens/kvlens/internal/testport"
	"github.com/kvlens/kvlens/tokenizer"
)

// foreignFleet is three `kvlens sim` processes tokenizing with o200k and
// Llama 3's chat template, unlike the router's embedded cl100k: a publishes
// KV events on a socket it binds (the router dials), b dials a socket the
// router binds, and c binds and serves vLLM's replay socket, and is warm
// before the router starts.
type foreignFleet struct {
	specs []string
	urls  map[string]string // worker name -> base URL
	procs []*exec.Cmd
}

func startForeignFleet(t *testing.T) *foreignFleet {
	return startFleetOf(t, "--tokenizer", "o200k", "--chat-template", "llama3")
}

// startFleetOf starts the three workers of foreignFleet, each a `kvlens
// sim` with the tokenizer flags engine.
func startFleetOf(t *testing.T, engine ...string) *foreignFleet {
	t.Helper()
	f := &foreignFleet{urls: map[string]string{}}
	http1, ev := testport.Free(t, 3), testport.Free(t, 4)
	url := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", http1+i) }
	ep := func(i int) string { return fmt.Sprintf("tcp://127.0.0.1:%d", ev+i) }
	foreign := append([]string{"--count", "1", "--slowdown", "0.01"}, engine...)
	args := [][]string{
		{"--ports", strconv.Itoa(http1), "--events-bind", ep(0)},
		{"--ports", strconv.Itoa(http1 + 1), "--events-connect", ep(1)},
		{"--ports", strconv.Itoa(http1 + 2), "--events-bind", ep(2), "--events-replay", ep(3)},
	}
	for _, a := range args {
		cmd := kvlens(append(append([]string{"sim"}, foreign...), a...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.procs = append(f.procs, cmd)
	}
	t.Cleanup(func() {
		for _, c := range f.procs {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			c.Wait()
		}
	})
	f.specs = []string{
		"a=" + url(0) + ",events=" + ep(0),
		"b=" + url(1) + ",bind=" + ep(1),
		"c=" + url(2) + ",events=" + ep(2) + ",replay=" + ep(3),
	}
	for i, n := range []string{"a", "b", "c"} {
		f.urls[n] = url(i)
		waitOK(t, url(i)+"/health")
	}
	return f
}

// waitOK polls url until it answers 200, for at most 30 s.
func waitOK(t testing.TB, url string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within 30 s", url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startServe runs `kvlens serve` over the fleet with the given tokenizer
// flags and the kv policy, and returns its URL and its output so far.
func startServe(t *testing.T, f *foreignFleet, tok ...string) (string, func() string) {
	t.Helper()
	port := testport.Free(t, 1)
	args := append([]string{"serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--workers", strings.Join(f.specs, ","),
		"--policy", "kv", "--no-start", "--record=false", "--db", "", "--open-controls", "--tokenizer"}, tok...)
	cmd := kvlens(args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var mu sync.Mutex
	var out bytes.Buffer
	pipe, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("serve's output:\n%s", out.String())
			mu.Unlock()
		}
	})
	waitOK(t, base+"/v1/models")
	// Every worker's event stream must be up before the run is measured.
	for deadline := time.Now().Add(20 * time.Second); ; {
		var st struct {
			Workers []struct {
				EventStream *struct {
					State string `json:"state"`
				} `json:"event_stream"`
			} `json:"workers"`
		}
		if resp, err := http.Get(base + "/admin/router/workers"); err == nil {
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		connected := 0
		for _, w := range st.Workers {
			if w.EventStream != nil && w.EventStream.State == "connected" {
				connected++
			}
		}
		if connected == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s, %d of 3 event streams are connected", connected)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return base, func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
}

// answer is what one chat request told: who served it, what the index
// predicted it held, and what it reported.
type answer struct {
	worker         string
	overlap        int // blocks
	prompt, cached int // tokens
	content        string
}

func chat(t *testing.T, url string, msgs []tokenizer.Message) answer {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 24, "temperature": 0})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: HTTP %d: %s", resp.StatusCode, raw)
	}
	var r struct {
		Choices []struct {
			Message tokenizer.Message `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Choices) == 0 {
		t.Fatalf("chat: answer %s: %v", raw, err)
	}
	a := answer{worker: resp.Header.Get("X-Kvlens-Worker"), prompt: r.Usage.PromptTokens,
		cached: r.Usage.PromptTokensDetails.CachedTokens, content: r.Choices[0].Message.Content}
	a.overlap, _ = strconv.Atoi(resp.Header.Get("X-Kvlens-Overlap-Blocks"))
	return a
}

// opening is conversation i's first message: distinct, and several blocks
// long, so each conversation has a prefix of its own.
func opening(i int) []tokenizer.Message {
	return []tokenizer.Message{
		{Role: "system", Content: fmt.Sprintf("You are assistant number %d. Answer in a calm, precise voice, citing the manual where you can.", i)},
		{Role: "user", Content: fmt.Sprintf("Conversation %d: explain how a paged KV cache reuses the blocks of a prompt's prefix between turns, and why a router that sends each follow-up to the same worker saves prefill time on long chats.", i)},
	}
}

// TestForeignEngineAuto is issue 16's end-to-end check: against workers
// that tokenize as a real Llama deployment does (another BPE, another chat
// template), --tokenizer auto finds that the embedded tokenizer does not
// match, tokenizes on the workers, and the index then predicts what the
// workers report cached, within 2%, with kv sending every follow-up to
// its conversation's worker.
func TestForeignEngineAuto(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes")
	}
	f := startForeignFleet(t)
	// Worker c is warm before the router starts: its events for this
	// conversation reach the router only through the replay socket.
	warm := opening(99)
	first := chat(t, f.urls["c"], warm)
	warm = append(warm, tokenizer.Message{Role: "assistant", Content: first.content})

	base, out := startServe(t, f, "auto")
	if !strings.Contains(out(), "tokenizer auto: worker") {
		t.Fatalf("serve did not choose the workers' tokenizer; its output:\n%s", out())
	}
	predicted, reported, followUps := playConversations(t, base, 0)
	warm = append(warm, tokenizer.Message{Role: "user", Content: "And the warm one?"})
	if a := chat(t, base, warm); a.worker != "c" || a.overlap == 0 {
		t.Errorf("the warm conversation's follow-up went to %s with %d blocks matched; want c, matched through replay", a.worker, a.overlap)
	} else {
		predicted, reported = predicted+min(a.prompt, a.overlap*32), reported+a.cached
	}
	t.Logf("%d follow-ups: predicted %d cached tokens, workers reported %d", followUps+1, predicted, reported)
	within2(t, predicted, reported)
}

// playConversations plays 6 conversations of 4 turns through base, the
// first numbered first, and returns the cached tokens the index predicted
// and the workers reported over the follow-ups, and how many there were.
// It fails the test when kv sends a follow-up away from its
// conversation's worker.
func playConversations(t *testing.T, base string, first int) (predicted, reported, followUps int) {
	t.Helper()
	const convs, turns = 6, 4
	histories := make([][]tokenizer.Message, convs)
	owner := make([]string, convs)
	for i := range convs {
		histories[i] = opening(first + i)
	}
	for turn := range turns {
		for i := range convs {
			a := chat(t, base, histories[i])
			histories[i] = append(histories[i], tokenizer.Message{Role: "assistant", Content: a.content},
				tokenizer.Message{Role: "user", Content: fmt.Sprintf("Turn %d: say more about step %d.", turn+2, turn+1)})
			if turn == 0 {
				owner[i] = a.worker
				continue
			}
			followUps++
			if a.worker != owner[i] {
				t.Errorf("conversation %d turn %d went to %s, its first turn to %s", first+i, turn+1, a.worker, owner[i])
			}
			predicted += min(a.prompt, a.overlap*32)
			reported += a.cached
		}
		// The follow-up comes after the events of this turn have landed,
		// as a person's next message would.
		time.Sleep(300 * time.Millisecond)
	}
	return predicted, reported, followUps
}

// within2 fails the test unless predicted is within 2% of reported.
func within2(t *testing.T, predicted, reported int) {
	t.Helper()
	if reported == 0 {
		t.Fatal("the workers reported no cached tokens at all")
	}
	if diff := float64(predicted-reported) / float64(reported); diff < -0.02 || diff > 0.02 {
		t.Errorf("predicted %d cached tokens, reported %d: %.1f%% apart, want within 2%%", predicted, reported, 100*diff)
	}
}

// modelDir is the fixture model: a small byte-level BPE laid out as Llama
// 3's tokenizer.json, with Llama 3.1's chat template.
const modelDir = "../../tokenizer/testdata/llama3"

// TestModelFilesEngine runs the simulated workers on a model's own
// tokenizer and chat template, read from its files (kvlens sim
// --tokenizer DIR), and the router on the same files, given outright or
// found by auto: the index predicts what the workers report cached,
// within 2%, with kv sending every follow-up to its conversation's worker.
func TestModelFilesEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	tests := []struct {
		name     string
		flags    []string
		wantLine string
	}{
		{"serve --tokenizer DIR", []string{modelDir}, "tokenizer files: the model's tokenizer.json and chat template (tokenizer_config.json)"},
		{"serve --tokenizer auto --tokenizer-dir DIR", []string{"auto", "--tokenizer-dir", modelDir}, "tokenizer auto: files (the model's tokenizer.json and chat template in " + modelDir + "): a, b, c tokenize a sample chat exactly as it does"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFleetOf(t, "--tokenizer", modelDir)
			base, out := startServe(t, f, tt.flags...)
			if !strings.Contains(out(), tt.wantLine) {
				t.Fatalf("serve did not say %q; its output:\n%s", tt.wantLine, out())
			}
			predicted, reported, n := playConversations(t, base, 100)
			t.Logf("%d follow-ups: predicted %d cached tokens, workers reported %d", n, predicted, reported)
			within2(t, predicted, reported)
		})
	}
}

// TestForeignEngineEmbeddedIsBlind forces the embedded tokenizer on the
// same fleet: every decision matches nothing while the workers report large
// hits, and within 10 s of load the dashboard shows the blindness banner
// and /readyz names the tokenizer.
func TestForeignEngineEmbeddedIsBlind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes")
	}
	f := startForeignFleet(t)
	base, _ := startServe(t, f, "embedded")
	start := time.Now()
	histories := make([][]tokenizer.Message, 3)
	for i := range histories {
		histories[i] = opening(i)
	}
	var overlap, cached int // over every follow-up, in blocks and tokens
	for turn := 0; ; turn++ {
		for i := range histories {
			a := chat(t, base, histories[i])
			if turn > 0 {
				overlap, cached = overlap+a.overlap, cached+a.cached
			}
			histories[i] = append(histories[i], tokenizer.Message{Role: "assistant", Content: a.content},
				tokenizer.Message{Role: "user", Content: fmt.Sprintf("Turn %d, go on.", turn+2)})
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		ready, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ready), "blind") {
			elapsed := time.Since(start)
			t.Logf("blind after %v and %d turns: %s", elapsed.Round(time.Millisecond), turn+1, bytes.TrimSpace(ready))
			if !strings.Contains(string(ready), "tokenizer") {
				t.Errorf("/readyz = %q, want it to name the tokenizer", ready)
			}
			if elapsed > 10*time.Second {
				t.Errorf("blindness took %v to show, want at most 10 s", elapsed)
			}
			if overlap != 0 || cached == 0 {
				t.Errorf("follow-ups matched %d blocks in the index while the workers reported %d cached tokens; want none matched and many cached", overlap, cached)
			}
			page, err := http.Get(base + "/")
			if err != nil {
				t.Fatal(err)
			}
			html, err := io.ReadAll(page.Body)
			page.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(html), "KV routing is blind: tokenizer mismatch") {
				t.Error("the dashboard shows no blindness banner naming the tokenizer")
			}
			return
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("after 20 s of load /readyz says %q, with no blindness", ready)
		}
	}
}

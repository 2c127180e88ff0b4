package tokenizer

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// threeTurns is the golden chat: a system prompt (with the spaces Llama 3's
// template trims and Qwen's keeps), three user turns and two answers, with
// accents (NFC matters to Qwen) and digits.
var threeTurns = []Message{
	{Role: "system", Content: "  You are a terse assistant.\n"},
	{Role: "user", Content: "What is a KV cache?"},
	{Role: "assistant", Content: "It stores attention keys and values, so a prefix is computed once."},
	{Role: "user", Content: "And prefix caching? Ünïcödé café, 1234 tokens."},
	{Role: "assistant", Content: "A worker that holds a prompt's prefix skips its prefill."},
	{Role: "user", Content: "Thanks! Say it again, in simpler words."},
}

// The fixture models: a small byte-level BPE (testdata/mkbpe) laid out as
// each model's tokenizer.json, with each model's published chat template.
var fixtures = []string{"llama3", "qwen2.5"}

func loadFixture(t testing.TB, name string) *Engine {
	t.Helper()
	e, err := LoadFiles(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestLoadFilesGolden renders the three-turn chat with each model's
// template and tokenizes it as vLLM does (no special tokens added), and
// holds both against testdata/golden. The goldens were checked against
// the reference implementations (Python Jinja2 as transformers sets it up,
// and Hugging Face's tokenizers): see docs/routing.md.
func TestLoadFilesGolden(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			e := loadFixture(t, name)
			text, err := e.Render(threeTurns)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := e.EncodeLimit(text, 4096)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%s\n---- %d tokens\n%v\n", text, len(ids), ids)
			path := filepath.Join("testdata", "golden", name+".txt")
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./tokenizer -run Golden -update)", err)
			}
			if got != string(want) {
				t.Errorf("rendered and tokenized:\n%s\nwant (%s):\n%s", got, path, want)
			}
		})
	}
}

func TestLoadFilesSpecialTokens(t *testing.T) {
	llama, qwen := loadFixture(t, "llama3"), loadFixture(t, "qwen2.5")
	bos, _ := llama.files.bpe.idOf("<|begin_of_text|>")
	imStart, _ := qwen.files.bpe.idOf("<|im_start|>")
	tests := []struct {
		name string
		e    *Engine
		text string
		want []uint32
	}{
		// The special tokens in a rendered chat are each one id, not their
		// characters' BPE.
		{"<|begin_of_text|> is one id", llama, "<|begin_of_text|>", []uint32{bos}},
		{"<|im_start|> is one id", qwen, "<|im_start|>", []uint32{imStart}},
		// Another model's special token is plain text.
		{"Qwen's <|im_start|> is text to Llama 3", llama, "<|im_start|>", llama.Encode("<|im_")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.e.Encode(tt.text)
			if tt.name == "Qwen's <|im_start|> is text to Llama 3" {
				if len(got) < 3 || !slices.Equal(got[:len(tt.want)], tt.want) {
					t.Errorf("Encode(%q) = %v, want it spelt out in BPE", tt.text, got)
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q) = %v, want %v", tt.text, got, tt.want)
			}
		})
	}
}

// TestRenderedChatHasOneBOS checks vLLM's rule: the template writes the
// BOS, and the rendered chat is encoded without adding another.
func TestRenderedChatHasOneBOS(t *testing.T) {
	e := loadFixture(t, "llama3")
	bos, _ := e.files.bpe.idOf("<|begin_of_text|>")
	text, _ := e.Render(threeTurns[:2])
	ids, _ := e.EncodeLimit(text, 1000)
	n := 0
	for _, id := range ids {
		if id == bos {
			n++
		}
	}
	if ids[0] != bos || n != 1 {
		t.Errorf("the chat's ids start with %d and hold %d BOS; want one BOS (%d), first", ids[0], n, bos)
	}
}

func TestEncodePromptAddsTheModelsSpecialTokens(t *testing.T) {
	llama, qwen := loadFixture(t, "llama3"), loadFixture(t, "qwen2.5")
	bos, _ := llama.files.bpe.idOf("<|begin_of_text|>")
	tests := []struct {
		name   string
		e      *Engine
		prefix []uint32
	}{
		{"Llama 3's post-processor puts <|begin_of_text|> first", llama, []uint32{bos}},
		{"Qwen 2.5 adds nothing", qwen, nil},
		{"the built-in engines add nothing", Embedded, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.e.EncodePrompt("Once upon a time", 100)
			if err != nil {
				t.Fatal(err)
			}
			if want := append(slices.Clone(tt.prefix), tt.e.Encode("Once upon a time")...); !slices.Equal(got, want) {
				t.Errorf("EncodePrompt = %v, want %v", got, want)
			}
		})
	}
}

// TestEncodeLimitStopsEarly checks that a model's own tokenizer refuses a
// text past the limit, and stops tokenizing there.
func TestEncodeLimitStopsEarly(t *testing.T) {
	e := loadFixture(t, "qwen2.5")
	long := strings.Repeat("<|im_start|>user\nhello there<|im_end|>\n", 200)
	if _, err := e.EncodeLimit(long, 50); err == nil {
		t.Error("a 1000-token text passed a 50-token limit")
	}
	if ids, err := e.EncodeLimit("hello there", 50); err != nil || len(ids) == 0 {
		t.Errorf("EncodeLimit = %v, %v", ids, err)
	}
}

// writeModel writes a model directory from a tokenizer.json and a config.
func writeModel(t *testing.T, tokenizerJSON, config string) string {
	t.Helper()
	dir := t.TempDir()
	if tokenizerJSON != "" {
		os.WriteFile(filepath.Join(dir, TokenizerJSON), []byte(tokenizerJSON), 0o644)
	}
	if config != "" {
		os.WriteFile(filepath.Join(dir, TokenizerConfig), []byte(config), 0o644)
	}
	return dir
}

// tinyBPE is a tokenizer.json whose merges list does not follow its ids:
// "ab" has a lower id than "bc" but a later merge, so "abc" must become
// "a" + "bc", as the merges list says, not "ab" + "c", as ranking by id
// (tiktoken's rule) would.
const tinyBPE = `{
  "added_tokens": [{"id": 9, "content": "<s>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "post_processor": null,
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "Ġ": 5},
    "merges": ["b c", "a b"]}
}`

func TestBPEFollowsTheMergesList(t *testing.T) {
	e, err := LoadFiles(writeModel(t, tinyBPE, `{"chat_template": "{{ messages[0].content }}"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Encode("abc"); !slices.Equal(got, []uint32{0, 4}) {
		t.Errorf("Encode(abc) = %v, want [0 4]: a + bc, the first merge first", got)
	}
	if got := e.Encode("ab<s>ab"); !slices.Equal(got, []uint32{3, 9, 3}) {
		t.Errorf("Encode(ab<s>ab) = %v, want [3 9 3]", got)
	}
}

func TestChatTemplateFeatures(t *testing.T) {
	clock := func() time.Time { return time.Date(2025, 3, 7, 12, 0, 0, 0, time.UTC) }
	tests := []struct {
		name, config, jinjaFile string
		gen                     bool
		want, wantErr           string
	}{
		{"strftime_now prints the engine's date, as Llama 3.2's template does",
			`{"chat_template": "{{ strftime_now('%d %b %Y') }}"}`, "", true, "07 Mar 2025", ""},
		{"raise_exception is the template's error",
			`{"chat_template": "{{ raise_exception('Conversation roles must alternate user/assistant') }}"}`, "", true, "", "Conversation roles must alternate user/assistant"},
		{"add_generation_prompt false leaves the reply closed",
			`{"chat_template": "{{ messages[0].content }}{% if add_generation_prompt %}>{% endif %}"}`, "", false, "abc", ""},
		{"add_generation_prompt true opens the reply",
			`{"chat_template": "{{ messages[0].content }}{% if add_generation_prompt %}>{% endif %}"}`, "", true, "abc>", ""},
		{"bos_token given as an AddedToken object is its content",
			`{"bos_token": {"__type": "AddedToken", "content": "<s>"}, "chat_template": "{{ bos_token }}"}`, "", true, "<s>", ""},
		{"a null bos_token is undefined, as in transformers",
			`{"bos_token": null, "chat_template": "{{ 'none' if bos_token is not defined else bos_token }}"}`, "", true, "none", ""},
		{"a list of named templates uses default",
			`{"chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "chat"}]}`, "", true, "chat", ""},
		{"chat_template.jinja beside the config wins",
			`{"chat_template": "config"}`, "file", true, "file", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeModel(t, tinyBPE, tt.config)
			if tt.jinjaFile != "" {
				os.WriteFile(filepath.Join(dir, ChatTemplateFile), []byte(tt.jinjaFile), 0o644)
			}
			e, err := LoadFiles(dir)
			if err != nil {
				t.Fatal(err)
			}
			e.files.tmpl.now = clock
			got, err := e.Apply([]Message{{Role: "user", Content: "abc"}}, tt.gen)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one line naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Apply = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLoadFilesRefusesBrokenFiles(t *testing.T) {
	okConfig := `{"chat_template": "{{ messages }}"}`
	tests := []struct {
		name, tokenizerJSON, config string
		sentencePiece               bool
		wantFile, wantErr           string
	}{
		{"a missing directory", "", "", false, "nowhere", "no such file"},
		{"no tokenizer.json", "", okConfig, false, TokenizerJSON, "no such file"},
		{"only tokenizer.model", "", okConfig, true, SentencePieceFile, "supply the model's tokenizer.json"},
		{"tokenizer.json is not JSON", "{", okConfig, false, TokenizerJSON, "not a tokenizer.json"},
		{"a WordPiece model", `{"model": {"type": "WordPiece", "vocab": {"a": 0}}}`, okConfig, false, TokenizerJSON, "model type WordPiece is not supported"},
		{"a SentencePiece-style BPE", `{"pre_tokenizer": {"type": "Metaspace"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`, okConfig, false, TokenizerJSON, "pre-tokenizer Metaspace is not supported"},
		{"an unknown normalizer", `{"normalizer": {"type": "Lowercase"}, "model": {"type": "BPE", "vocab": {"a": 0}}}`, okConfig, false, TokenizerJSON, "normalizer Lowercase is not supported"},
		{"a merge of unknown tokens", `{"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a z"]}}`, okConfig, false, TokenizerJSON, "names a token not in the vocabulary"},
		{"a split pattern that does not compile", `{"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"}, {"type": "ByteLevel"}]}, "model": {"type": "BPE", "vocab": {"a": 0}}}`, okConfig, false, TokenizerJSON, "pattern"},
		{"no tokenizer_config.json", tinyBPE, "", false, TokenizerConfig, "no such file"},
		{"a config with no chat template", tinyBPE, `{"bos_token": "<s>"}`, false, TokenizerConfig, "has no chat_template"},
		{"a template that does not compile", tinyBPE, `{"chat_template": "{% for %}"}`, false, TokenizerConfig, "does not compile"},
		{"add_bos_token naming no token", tinyBPE, `{"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": true, "bos_token": "<bos>", "chat_template": "x"}`, false, TokenizerConfig, "is not a token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeModel(t, tt.tokenizerJSON, tt.config)
			if tt.sentencePiece {
				os.WriteFile(filepath.Join(dir, SentencePieceFile), []byte{0x0a, 0x01}, 0o644)
			}
			if tt.name == "a missing directory" {
				dir = filepath.Join(dir, "nowhere")
			}
			_, err := LoadFiles(dir)
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantFile) || !strings.Contains(msg, tt.wantErr) || strings.Contains(msg, "\n") {
				t.Errorf("err = %q, want one line naming %s and %q", msg, tt.wantFile, tt.wantErr)
			}
		})
	}
}

// FuzzParseBPE feeds tokenizer.json's parser anything: a broken file is an
// error, never a panic, and a file it accepts encodes any text.
func FuzzParseBPE(f *testing.F) {
	for _, name := range fixtures {
		b, _ := os.ReadFile(filepath.Join("testdata", name, TokenizerJSON))
		f.Add(b, "Hello <|im_start|>world<|eot_id|> 12345")
	}
	f.Add([]byte(tinyBPE), "abc<s>")
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","a"]]},"pre_tokenizer":{"type":"ByteLevel"}}`), "aaaa")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		b, err := parseBPE(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("a two-line error: %q", err)
			}
			return
		}
		b.encode(text, nil, 0)
	})
}

// FuzzParseConfig feeds tokenizer_config.json's parser and the chat
// template anything: a one-line error, never a panic, and a template that
// renders a chat the same way each time.
func FuzzParseConfig(f *testing.F) {
	for _, name := range fixtures {
		b, _ := os.ReadFile(filepath.Join("testdata", name, TokenizerConfig))
		f.Add(b)
	}
	f.Add([]byte(`{"chat_template": [{"name": "default", "template": "{{ raise_exception('x') }}"}]}`))
	f.Add([]byte(`{"bos_token": {"content": 3}, "chat_template": "{% for m in messages %}{{ m.content[1:] }}{% endfor %}"}`))
	oneLine := func(t *testing.T, what string, err error) {
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: a two-line error: %q", what, err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, src, vars, err := parseConfig(data)
		oneLine(t, "parseConfig", err)
		if err != nil || src == "" {
			return
		}
		tmpl, err := compileTemplate(src, vars)
		oneLine(t, "compileTemplate", err)
		if err != nil {
			return
		}
		// A template renders the same chat the same way every time: the
		// router hashes what it renders, so a template that varied would
		// never match the workers' caches.
		a, errA := tmpl.render(threeTurns, true)
		b, errB := tmpl.render(threeTurns, true)
		if a != b || (errA == nil) != (errB == nil) {
			t.Fatalf("two renders of the same chat differ: %q (%v) and %q (%v)", a, errA, b, errB)
		}
	})
}

// BenchmarkFilesEncode measures a model's own tokenizer on new text, which
// misses the segment cache: prose between two special tokens.
func BenchmarkFilesEncode(b *testing.B) {
	e := loadFixture(b, "llama3")
	corpus, _ := os.ReadFile(filepath.Join("testdata", "corpus.txt"))
	b.SetBytes(int64(len(corpus)))
	for i := 0; b.Loop(); i++ {
		// A new prefix each time, so that the segment is new.
		e.Encode(fmt.Sprintf("<|eot_id|>%d %s", i, corpus))
	}
}

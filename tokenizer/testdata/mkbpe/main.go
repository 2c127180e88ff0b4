// Command mkbpe writes the test fixtures of a model's tokenizer: a small
// byte-level BPE trained on corpus.txt, as Llama 3's tokenizer.json and as
// Qwen 2.5's lay it out, beside their tokenizer_config.json. Run it from
// the tokenizer directory:
//
//	go run ./testdata/mkbpe
//
// It is deterministic: the same corpus gives the same files.
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dlclark/regexp2/v2"
)

// merges is how many merges to learn: enough that common words are one
// token, few enough that the file stays small.
const merges = 400

// The models' published split patterns.
const (
	llama3Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwenSplit   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

func main() {
	corpus, err := os.ReadFile("testdata/corpus.txt")
	if err != nil {
		log.Fatal(err)
	}
	vocab, pairs := train(string(corpus), llama3Split, merges)
	write("testdata/llama3", llama3(vocab, pairs))
	write("testdata/qwen2.5", qwen(vocab, pairs))
}

// byteChars is GPT-2's table of the character standing for each byte.
func byteChars() [256]string {
	var out [256]string
	n := 0
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		out[b] = string(r)
	}
	return out
}

// train learns n merges from text: the most frequent adjacent pair of
// tokens over the words of the split pattern, ties broken by the pair's
// text, so that the result never depends on map order.
func train(text, pattern string, n int) (map[string]int, [][2]string) {
	bc := byteChars()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[bc[b]] = b
	}
	re := regexp2.MustCompile(pattern, regexp2.None)
	counts := map[string]int{}
	for m, _ := re.FindStringMatch(text); m != nil; m, _ = re.FindNextMatch(m) {
		counts[m.String()]++
	}
	type word struct {
		syms  []string
		count int
	}
	var words []word
	for w, c := range counts {
		var syms []string
		for i := 0; i < len(w); i++ {
			syms = append(syms, bc[w[i]])
		}
		words = append(words, word{syms, c})
	}
	var out [][2]string
	for len(out) < n {
		freq := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				freq[[2]string{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		var best [2]string
		bestN := 0
		for p, c := range freq {
			if c > bestN || c == bestN && p[0]+" "+p[1] < best[0]+" "+best[1] {
				best, bestN = p, c
			}
		}
		if bestN == 0 {
			break
		}
		out = append(out, best)
		vocab[best[0]+best[1]] = len(vocab)
		for i := range words {
			s := words[i].syms
			for j := 0; j+1 < len(s); j++ {
				if s[j] == best[0] && s[j+1] == best[1] {
					s = slices.Replace(s, j, j+2, best[0]+best[1])
				}
			}
			words[i].syms = s
		}
	}
	return vocab, out
}

type added struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

func specials(first int, names ...string) []added {
	out := make([]added, len(names))
	for i, n := range names {
		out[i] = added{ID: first + i, Content: n, Special: true}
	}
	return out
}

func split(pattern string) map[string]any {
	return map[string]any{"type": "Split", "pattern": map[string]string{"Regex": pattern}, "behavior": "Isolated", "invert": false}
}

func model(vocab map[string]int, merges any, ignoreMerges bool) map[string]any {
	return map[string]any{
		"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
		"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false,
		"ignore_merges": ignoreMerges, "vocab": vocab, "merges": merges,
	}
}

// llama3 lays the BPE out as Llama 3's tokenizer.json: no normalizer, its
// split then ByteLevel, merges as "a b", and a post-processor that puts
// <|begin_of_text|> before a text encoded with special tokens.
func llama3(vocab map[string]int, pairs [][2]string) map[string]any {
	ms := make([]string, len(pairs))
	for i, p := range pairs {
		ms[i] = p[0] + " " + p[1]
	}
	first := len(vocab)
	return map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": specials(first, "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"),
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			split(llama3Split),
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "Sequence", "processors": []any{
			map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
			map[string]any{
				"type": "TemplateProcessing",
				"single": []any{
					map[string]any{"SpecialToken": map[string]any{"id": "<|begin_of_text|>", "type_id": 0}},
					map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				},
				"pair": []any{
					map[string]any{"SpecialToken": map[string]any{"id": "<|begin_of_text|>", "type_id": 0}},
					map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
					map[string]any{"SpecialToken": map[string]any{"id": "<|begin_of_text|>", "type_id": 1}},
					map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}},
				},
				"special_tokens": map[string]any{"<|begin_of_text|>": map[string]any{"id": "<|begin_of_text|>", "ids": []int{first}, "tokens": []string{"<|begin_of_text|>"}}},
			},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":   model(vocab, ms, true),
	}
}

// qwen lays the BPE out as Qwen 2.5's tokenizer.json: NFC, its split then
// ByteLevel, merges as ["a","b"] pairs (newer files write them so), and no
// BOS.
func qwen(vocab map[string]int, pairs [][2]string) map[string]any {
	return map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": specials(len(vocab), "<|endoftext|>", "<|im_start|>", "<|im_end|>"),
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			split(qwenSplit),
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model":          model(vocab, pairs, false),
	}
}

func write(dir string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	// encoding/json escapes <, > and & for HTML; the tokenizers library
	// writes them plain, and so does this.
	s := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(s+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", filepath.Join(dir, "tokenizer.json"))
}

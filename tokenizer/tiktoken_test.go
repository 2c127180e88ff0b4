package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEncodeIsTiktokensCl100k holds the embedded tokenizer to an
// implementation kvlens did not write: OpenAI's cl100k_base as js-tiktoken
// (tiktoken's JavaScript port, installed by make test's npm ci) encodes
// it with encode_ordinary. Every other test of Encode compares it with
// itself; this one catches another vocabulary or a changed pre-tokenizer.
func TestEncodeIsTiktokensCl100k(t *testing.T) {
	node := tiktokenNode(t)
	starters, err := filepath.Glob("../loadgen/starters/*.md")
	if err != nil || len(starters) == 0 {
		t.Fatalf("no starters to tokenize: %v", err)
	}
	cases := []struct {
		name string
		text string
	}{
		{"prose matches tiktoken", "Why is the sky blue? Explain it in two sentences."},
		{"contractions and punctuation", "It's what they'd've said: \"don't\" -- isn't it?!"},
		{"runs of spaces, tabs and newlines", "a  b   c\t\td\n\n\ne \r\n  \n"},
		{"digits split in threes", "1234567890 3.14159 2026-11-28 0x1F"},
		{"code with tabs and braces matches tiktoken", "func main() {\n\tfmt.Println(\"hi\")\n}\n"},
		{"CJK, accents and emoji", "日本語のテキスト, café naïve, 🎉👩‍💻"},
		{"a special token's text is ordinary text", "before<|endoftext|>after"},
		{"kvlens's chat template is text to cl100k", RenderChat([]Message{
			{Role: "system", Content: "Be terse."}, {Role: "user", Content: "Hello?"}})},
		{"empty text is no tokens", ""},
	}
	for _, f := range starters {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, text string }{"starter " + filepath.Base(f), string(b)})
	}
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.text
	}
	in, _ := json.Marshal(texts)
	cmd := exec.Command(node, filepath.Join("testdata", "tiktoken.mjs"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("js-tiktoken: %v: %s", err, stderr.String())
	}
	var want [][]uint32
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("js-tiktoken answered %d texts of %d (%v)", len(want), len(cases), err)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Encode(c.text); !slices.Equal(got, want[i]) {
				t.Errorf("Encode gives %d ids, tiktoken %d\n got %v\nwant %v", len(got), len(want[i]), head(got), head(want[i]))
			}
		})
	}
}

// head is the first ids of a long list, for a readable failure.
func head(ids []uint32) []uint32 { return ids[:min(len(ids), 24)] }

// tiktokenNode returns node's path, or skips the test when node or
// js-tiktoken is missing; with KVLENS_REQUIRE_NODE_SDK set, as make test
// sets it, it fails instead.
func tiktokenNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("..", "node_modules", "js-tiktoken", "package.json"))
	}
	if err != nil {
		if os.Getenv("KVLENS_REQUIRE_NODE_SDK") != "" {
			t.Fatalf("js-tiktoken is required: %v (run npm ci at the repository's root)", err)
		}
		t.Skipf("js-tiktoken is not installed: %v", err)
	}
	return node
}

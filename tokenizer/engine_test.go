package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

func TestNewEngine(t *testing.T) {
	chat := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello there, how are you?"}}
	tests := []struct {
		name, encoding, template string
		wantSame                 bool // tokenizes the chat as the embedded engine
		wantErr                  string
	}{
		{"no names give the embedded engine", "", "", true, ""},
		{"cl100k with kvlens's template is the embedded engine", "cl100k", "kvlens", true, ""},
		{"o200k tokenizes the same chat differently", "o200k", "kvlens", false, ""},
		{"Llama 3's template renders the same chat differently", "cl100k", "llama3", false, ""},
		{"o200k with Llama 3's template differs too", "o200k", "llama3", false, ""},
		// sad path
		{"an unknown encoding is refused", "sentencepiece", "", false, `unknown encoding "sentencepiece"`},
		{"an unknown template is refused", "", "chatml", false, `unknown chat template "chatml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewEngine(tt.encoding, tt.template)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			text, err := e.Render(chat)
			if err != nil {
				t.Fatal(err)
			}
			got := e.Encode(text)
			same := slices.Equal(got, Encode(RenderChat(chat)))
			if same != tt.wantSame || e.IsEmbedded() != tt.wantSame {
				t.Errorf("%s: same tokens %v, IsEmbedded %v; want %v", e, same, e.IsEmbedded(), tt.wantSame)
			}
			if n := len(text); n > e.RenderBytes(chat) {
				t.Errorf("RenderBytes = %d, under the rendering's %d bytes", e.RenderBytes(chat), n)
			}
		})
	}
}

func TestEngineRenderKeepsEachTurnAPrefixOfTheNext(t *testing.T) {
	e, _ := NewEngine("o200k", "llama3")
	turn := []Message{{Role: "user", Content: "Hi"}}
	next := append(slices.Clone(turn), Message{Role: "assistant", Content: "Hello!"}, Message{Role: "user", Content: "More"})
	a, _ := e.Render(next)
	b, _ := e.Render(turn)
	if !strings.HasPrefix(a, b) {
		t.Errorf("the next turn's prompt %q does not start with this turn's %q", a, b)
	}
}

func TestEngineEncodeLimitRefusesLongPrompts(t *testing.T) {
	e, _ := NewEngine("o200k", "llama3")
	if _, err := e.EncodeLimit(strings.Repeat("word ", 100), 10); err == nil {
		t.Error("a 100-word prompt passed a 10-token limit")
	}
	if ids, err := e.EncodeLimit("a few words", 10); err != nil || len(ids) == 0 {
		t.Errorf("EncodeLimit = %v, %v", ids, err)
	}
}

func TestMaxTokenID(t *testing.T) {
	o200k, err := NewEngine("o200k", "llama3")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		e    *Engine
		want uint32
	}{
		// cl100k's ordinary tokens end at 100255; its last special token,
		// <|endofprompt|>, is 100276.
		{"the embedded engine ends at cl100k's last special token", Embedded, 100276},
		// o200k's ordinary tokens end at 199997; <|endofprompt|> is 200018.
		{"an o200k engine ends at o200k's last special token", o200k, 200018},
		// The fixture's vocabulary ends at 655, its added tokens at 662.
		{"a model's own tokenizer ends at its last added token", loadFixture(t, "llama3"), 662},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.MaxTokenID(); got != tt.want {
				t.Fatalf("MaxTokenID = %d, want %d", got, tt.want)
			}
		})
	}
}

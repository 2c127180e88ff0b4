package router

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvlens/kvlens/tokenizer"
)

func TestChatTokensMatchEncode(t *testing.T) {
	starters, _ := filepath.Glob("../loadgen/starters/*.md")
	var long []string
	for _, f := range starters {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		long = append(long, string(b))
	}
	tests := []struct {
		name string
		msgs []tokenizer.Message
	}{
		{"an empty chat is the assistant opening alone", nil},
		{"plain prose", []tokenizer.Message{{Role: "user", Content: "Hello there."}}},
		{"messages ending in spaces, newlines and punctuation", []tokenizer.Message{
			{Role: "system", Content: "Be terse.  "}, {Role: "user", Content: "Why?\n\n"}, {Role: "assistant", Content: "Because...\r\n"}, {Role: "user", Content: "'s"}}},
		{"messages that start with spaces, digits and brackets", []tokenizer.Message{
			{Role: "user", Content: "   indented"}, {Role: "assistant", Content: "123456 <|user|> 7"}, {Role: "user", Content: "<|endoftext|> special"}}},
		{"empty contents and odd roles", []tokenizer.Message{{Role: "", Content: ""}, {Role: "tool", Content: ""}}},
		{"invalid UTF-8 is replaced the same way", []tokenizer.Message{{Role: "user", Content: "bad \xff\xfe bytes"}}},
		{"the load generator's long starters", func() []tokenizer.Message {
			var m []tokenizer.Message
			for i, s := range long {
				m = append(m, tokenizer.Message{Role: []string{"user", "assistant"}[i%2], Content: s})
			}
			return m
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tokenizer.Encode(tokenizer.RenderChat(tt.msgs))
			c := newTokenCache()
			for range 2 { // cold, then from the cache
				if got := c.chat(tt.msgs); !slices.Equal(got, want) {
					t.Fatalf("per-message tokens differ from Encode(RenderChat):\n got %v\nwant %v", got, want)
				}
			}
		})
	}
}

func FuzzChatTokens(f *testing.F) {
	f.Add("system", "You are terse.", "user", "Why is the sky blue?\n")
	f.Add("user", " \n\t", "assistant", "<|x|>\n<|y")
	f.Fuzz(func(t *testing.T, r1, c1, r2, c2 string) {
		msgs := []tokenizer.Message{{Role: r1, Content: c1}, {Role: r2, Content: c2}}
		want := tokenizer.Encode(tokenizer.RenderChat(msgs))
		if got := newTokenCache().chat(msgs); !slices.Equal(got, want) {
			t.Fatalf("%q: per-message %v, whole %v", msgs, got, want)
		}
	})
}

package tokenizer

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestMessageUnmarshal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Message
	}{
		{
			"a string content is read as is",
			`{"role":"user","content":"hi"}`,
			Message{Role: "user", Content: "hi"},
		},
		{
			"one text part reads as its text",
			`{"role":"user","content":[{"type":"text","text":"hi"}]}`,
			Message{Role: "user", Content: "hi"},
		},
		{
			"several text parts are joined with newlines, as vLLM joins them",
			`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`,
			Message{Role: "user", Content: "a\nb"},
		},
		{
			"a null content (an assistant turn that only called tools) is empty",
			`{"role":"assistant","content":null}`,
			Message{Role: "assistant"},
		},
		{
			"a missing content is empty",
			`{"role":"assistant"}`,
			Message{Role: "assistant"},
		},
		{
			"an empty parts array is empty",
			`{"role":"user","content":[]}`,
			Message{Role: "user"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Message
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// goTerms matches what a Go error says of Go's types, which a client of an
// OpenAI API cannot act on: "Go struct field", "map[string]interface {}",
// "float64", a package-qualified type name such as tokenizer.Message.
var goTerms = regexp.MustCompile(`Go (value|struct)|interface \{|map\[|\[\]|\b(float|u?int)(8|16|32|64)\b|<nil>|\b(tokenizer|sim|router|json|openai|http)\.[A-Za-z]`)

func TestMessageUnmarshalSadPath(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// want is a piece of the error.
		want string
	}{
		{"an image part is refused by name", `{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}`, `content[0] has type "image_url"; only text parts are supported`},
		{"a text part without text is refused", `{"role":"user","content":[{"type":"text"}]}`, "content[0] is a text part with no text"},
		{"a part without a type is refused, saying so", `{"role":"user","content":[{"text":"a"}]}`, `content[0] has no type; only text parts, of type "text", are supported`},
		{"a part whose type is not a string is refused", `{"role":"user","content":[{"type":7,"text":"a"}]}`, "content[0].type: expected a string, got a number"},
		{"a text part whose text is not a string is refused", `{"role":"user","content":[{"type":"text","text":["a"]}]}`, "content[0].text: expected a string, got a list"},
		{"a number content is refused", `{"role":"user","content":3}`, "content: expected a string or a list of content parts, got a number"},
		{"an object content is refused", `{"role":"user","content":{"text":"a"}}`, "content: expected a string or a list of content parts, got an object"},
		{"an array of strings is refused", `{"role":"user","content":["a"]}`, "content[0]: expected a content part, an object such as"},
		{"a role of the wrong type is refused", `{"role":1,"content":"a"}`, "role: expected a string, got a number"},
		{"a message that is not an object is refused", `"hi"`, "expected a message, an object such as"},
		{"a list for a message is refused, naming what it got", `[{"role":"user"}]`, "got a list"},
		{"a number too large for any type is out of range", `{"role":"user","content":1E1000}`, "content: 1E1000 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Message
			err := json.Unmarshal([]byte(tt.in), &got)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			if goTerms.MatchString(err.Error()) {
				t.Fatalf("err = %v speaks of Go types", err)
			}
		})
	}
}

// TestMessageRoundTrip proves a message still encodes with a string content.
func TestMessageRoundTrip(t *testing.T) {
	b, err := json.Marshal(Message{Role: "user", Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"role":"user","content":"hi"}` {
		t.Fatalf("got %s", b)
	}
}

func FuzzMessageUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`,
		`{"role":"assistant","content":null}`,
		`{"role":"user","content":[{"type":"image_url"}]}`,
		`{"content":[{"type":"text","text":null}]}`,
		`{"role":1}`,
		`[{"role":"user"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Message
		if err := json.Unmarshal(b, &m); err != nil {
			if goTerms.MatchString(err.Error()) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %q: not one line free of Go types", err)
			}
			return
		}
		// What was read re-encodes, and reads back the same.
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Message
		if err := json.Unmarshal(out, &back); err != nil || back != m {
			t.Fatalf("round trip of %q: %+v, %v", b, back, err)
		}
	})
}

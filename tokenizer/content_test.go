package tokenizer

import (
	"encoding/json"
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

func TestMessageUnmarshalSadPath(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// want is a piece of the error.
		want string
	}{
		{"an image part is refused by name", `{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}`, `content[0] has type "image_url"`},
		{"a text part without text is refused", `{"role":"user","content":[{"type":"text"}]}`, "content[0] is a text part with no text"},
		{"a number content is refused", `{"role":"user","content":3}`, "content must be a string or an array of text parts"},
		{"an array of strings is refused", `{"role":"user","content":["a"]}`, "content[0] must be an object"},
		{"a role of the wrong type is refused", `{"role":1,"content":"a"}`, "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Message
			err := json.Unmarshal([]byte(tt.in), &got)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
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
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Message
		if json.Unmarshal(b, &m) != nil {
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

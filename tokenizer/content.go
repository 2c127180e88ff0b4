package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// UnmarshalJSON reads a chat message whose content is a string, null (an
// assistant turn that only called tools) or an array of content parts,
// [{"type":"text","text":"…"}], as OpenAI clients send it. The text parts
// are joined with newlines, as vLLM joins them before applying a chat
// template that takes a string. A part of any other type (an image, audio)
// is an error: kvlens's workers read text only.
func (m *Message) UnmarshalJSON(b []byte) error {
	// plain has Message's fields but not this method; the outer Content,
	// being shallower, takes the "content" key from it.
	type plain Message
	var v struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	text, err := contentText(v.Content)
	if err != nil {
		return err
	}
	*m = Message(v.plain)
	m.Content = text
	return nil
}

// contentPart is one element of an array content.
type contentPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] != '[' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("content must be a string or an array of text parts: %w", err)
		}
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or an array of text parts: %w", err)
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content[%d] has type %q; only text parts are supported", i, p.Type)
		}
		if p.Text == nil {
			return "", fmt.Errorf("content[%d] is a text part with no text", i)
		}
		texts[i] = *p.Text
	}
	return strings.Join(texts, "\n"), nil
}

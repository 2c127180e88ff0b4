package tokenizer

import (
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
	// being shallower, takes the "content" key from it. Decoding it as any
	// reads a long string content once, not twice.
	type plain Message
	var v struct {
		plain
		Content any `json:"content"`
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

func contentText(c any) (string, error) {
	switch c := c.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		texts := make([]string, len(c))
		for i, p := range c {
			part, ok := p.(map[string]any)
			if !ok {
				return "", fmt.Errorf("content[%d] must be an object, as {\"type\":\"text\",\"text\":\"…\"}", i)
			}
			if typ, _ := part["type"].(string); typ != "text" {
				return "", fmt.Errorf("content[%d] has type %q; only text parts are supported", i, fmt.Sprint(part["type"]))
			}
			text, ok := part["text"].(string)
			if !ok {
				return "", fmt.Errorf("content[%d] is a text part with no text", i)
			}
			texts[i] = text
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", fmt.Errorf("content must be a string or an array of text parts, not %T", c)
}

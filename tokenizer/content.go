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

// TooManyPiecesError is a chat refused before it was decoded because it
// holds more messages and content parts than a limit.
type TooManyPiecesError struct {
	// AtLeast is how many it counted before it stopped.
	AtLeast int
	// Limit is the most allowed: the model's maximum context length.
	Limit int
}

func (e *TooManyPiecesError) Error() string {
	return fmt.Sprintf("the chat has more than %d messages and content parts, but this model's maximum context length is %d tokens", e.Limit, e.Limit)
}

// CheckPieces counts the messages of a chat request body, and the parts of
// their contents, and refuses the body with a *TooManyPiecesError as soon
// as there are more than limit (a model's maximum context length in tokens).
// Decoding a message or a part costs a few hundred bytes however short it
// is, so 2 MB of empty messages would cost some 280 MB to decode; this walk
// costs next to nothing, and no real chat has more pieces than its model
// has tokens (each message's header alone takes one). A body it cannot
// read passes: the decoder will judge it.
func CheckPieces(body []byte, limit int) error {
	// Every message and part that costs a decode is an object: a body with
	// no more '{' than limit passes without the walk (a chat's 20 KB in
	// about a microsecond, against 140 µs walked: it is on the way to the
	// first token).
	if bytes.Count(body, []byte{'{'}) <= limit {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	n := 0
	count := func() error {
		if n++; n > limit {
			return &TooManyPiecesError{AtLeast: n, Limit: limit}
		}
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		// encoding/json matches field names regardless of case.
		if k, _ := key.(string); !strings.EqualFold(k, "messages") {
			if skipValue(dec) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil // not an array: the decoder will say so
		}
		for dec.More() {
			if err := count(); err != nil {
				return err
			}
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				return nil
			}
			for dec.More() {
				field, err := dec.Token()
				if err != nil {
					return nil
				}
				if f, _ := field.(string); strings.EqualFold(f, "content") {
					if err := countParts(dec, count); err != nil {
						return err
					}
					continue
				}
				if skipValue(dec) != nil {
					return nil
				}
			}
			if _, err := dec.Token(); err != nil { // the message's '}'
				return nil
			}
		}
		if _, err := dec.Token(); err != nil { // the array's ']'
			return nil
		}
	}
	return nil
}

// countParts reads a content value, calling count for each element when it
// is an array. A malformed one ends the walk without an error.
func countParts(dec *json.Decoder, count func() error) error {
	t, err := dec.Token()
	if err != nil || t != json.Delim('[') {
		if d, ok := t.(json.Delim); ok && err == nil {
			return skipRest(dec, d)
		}
		return nil
	}
	for dec.More() {
		if err := count(); err != nil {
			return err
		}
		if skipValue(dec) != nil {
			return nil
		}
	}
	_, _ = dec.Token() // the ']'
	return nil
}

// skipValue reads one whole value.
func skipValue(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); ok {
		return skipRest(dec, d)
	}
	return nil
}

// skipRest reads the rest of an object or array whose opening d was read.
func skipRest(dec *json.Decoder, d json.Delim) error {
	if d != '{' && d != '[' {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

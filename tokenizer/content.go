package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// UnmarshalJSON reads a chat message whose content is a string, null (an
// assistant turn that only called tools) or an array of content parts,
// [{"type":"text","text":"…"}], as OpenAI clients send it. The text parts
// are joined with newlines, as vLLM joins them before applying a chat
// template that takes a string. A part of any other type (an image, audio)
// is an error: kvlens's workers read text only.
//
// Its errors are one line fit to show a client, naming the field at fault
// from the message down, as "content[1].text: expected a string, got a
// number", and never a Go type: a caller that holds messages in a list
// prefixes the message's place.
func (m *Message) UnmarshalJSON(b []byte) error {
	// Both fields are decoded as any, so that a value of the wrong type is
	// described here rather than by encoding/json in Go's terms; a long
	// string content is read once, not twice.
	var v struct {
		Role    any `json:"role"`
		Content any `json:"content"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field == "":
			return fmt.Errorf("expected a message, an object such as {\"role\":\"user\",\"content\":\"…\"}, got %s", JSONKind(te.Value))
		case errors.As(err, &te):
			// Only a number too large for a float64 fails to decode as any.
			return fmt.Errorf("%s: %s is out of range", te.Field, strings.TrimPrefix(te.Value, "number "))
		}
		return err // bad JSON, which the caller's decoder reports first
	}
	role, ok := v.Role.(string)
	if !ok && v.Role != nil {
		return fmt.Errorf("role: expected a string, got %s", kindOf(v.Role))
	}
	text, err := contentText(v.Content)
	if err != nil {
		return err
	}
	*m = Message{Role: role, Content: text}
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
				return "", fmt.Errorf("content[%d]: expected a content part, an object such as {\"type\":\"text\",\"text\":\"…\"}, got %s", i, kindOf(p))
			}
			switch typ, ok := part["type"].(string); {
			case part["type"] == nil:
				return "", fmt.Errorf("content[%d] has no type; only text parts, of type \"text\", are supported", i)
			case !ok:
				return "", fmt.Errorf("content[%d].type: expected a string, got %s", i, kindOf(part["type"]))
			case typ != "text":
				return "", fmt.Errorf("content[%d] has type %q; only text parts are supported", i, typ)
			}
			text, ok := part["text"].(string)
			switch {
			case part["text"] == nil:
				return "", fmt.Errorf("content[%d] is a text part with no text", i)
			case !ok:
				return "", fmt.Errorf("content[%d].text: expected a string, got %s", i, kindOf(part["text"]))
			}
			texts[i] = text
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", fmt.Errorf("content: expected a string or a list of content parts, got %s", kindOf(c))
}

// JSONKind names the JSON type of a json.UnmarshalTypeError's Value
// ("string", "number 1.5", "array", …), for a client's eyes: "a string",
// "a list", "null".
func JSONKind(v string) string {
	switch v {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "null":
		return "null"
	}
	return "a number"
}

// kindOf names the JSON type of a decoded value, for a client's eyes.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	}
	return "an object"
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

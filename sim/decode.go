package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/kvlens/kvlens/tokenizer"
)

// decodeBody decodes a request body, one JSON value, into v, with an
// error of one line fit to show a client. Like vLLM, which parses the
// whole body as one JSON document, it refuses a body with anything but
// white space after its value: json.Decoder alone would read the first
// value and leave the rest unread. strict refuses fields v does not have.
func decodeBody(body io.Reader, v any, strict bool) error {
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("request body is not valid JSON: it goes on after its JSON value ends, at byte %d", end)
	}
	return nil
}

// decodeError says what was wrong with a request body in a client's
// terms, never Go's: the JSON itself, or the field that does not hold
// what it must, by its path in the body ("stream_options.include_usage:
// expected a boolean, got a string").
func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("request body is empty: want a JSON object")
	case errors.As(err, &syntax):
		return fmt.Errorf("request body is not valid JSON: %s, at byte %d", strings.TrimPrefix(syntax.Error(), "json: "), syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("request body is not valid JSON: it ends before its JSON value does")
	case errors.As(err, &tooLarge):
		return fmt.Errorf("request body is larger than %d bytes", tooLarge.Limit)
	case errors.As(err, &typ):
		got := valueKind(typ.Value)
		if n, ok := strings.CutPrefix(typ.Value, "number "); ok {
			got = n
		}
		if typ.Field == "" {
			return fmt.Errorf("request body must be a JSON object, not %s", got)
		}
		return fmt.Errorf("%s: expected %s, got %s", typ.Field, typeName(typ.Type), got)
	}
	msg := oneLine(err)
	if field, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", field)
	}
	if strings.HasPrefix(msg, "json: ") {
		// No other error of encoding/json is a client's doing; say no more
		// than that the body was refused rather than speak of Go.
		return errors.New("request body is not a valid request")
	}
	return errors.New(msg) // a field's own reader, such as messageList's
}

// valueKind names the JSON type of a json.UnmarshalTypeError's Value
// ("string", "number", "array", …).
func valueKind(v string) string {
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

// typeName names the JSON a field of Go type t takes.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON type"
}

// messageList is a chat's messages, decoded one at a time so that an error
// names the message at fault, as "messages[2].content: expected a string
// or a list of content parts, got a number".
type messageList []tokenizer.Message

// UnmarshalJSON implements json.Unmarshaler.
func (l *messageList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	if b = bytes.TrimSpace(b); b[0] != '[' {
		return fmt.Errorf("messages: expected a list of messages, got %s", rawKind(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.Token() // the '[': b is an array the caller's decoder checked
	msgs := []tokenizer.Message{}
	for i := 0; dec.More(); i++ {
		var m tokenizer.Message
		if err := dec.Decode(&m); err != nil {
			msg := oneLine(err)
			if strings.HasPrefix(msg, "expected") {
				return fmt.Errorf("messages[%d]: %s", i, msg)
			}
			return fmt.Errorf("messages[%d].%s", i, msg)
		}
		msgs = append(msgs, m)
	}
	*l = msgs
	return nil
}

// rawKind names the JSON type of a value, which the caller's decoder
// checked, by its first byte: it need not be decoded to be named.
func rawKind(b []byte) string {
	switch b[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

package sim

import (
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
		got := tokenizer.JSONKind(typ.Value)
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
	return &fieldError{msg}
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

// fieldError is what a field's own reader refused it with (a chat
// message's, a stall's): it is in a client's words already.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

// placeMessageError gives err, a chat message's own refusal, the message's
// place in body, as "messages[2].content: expected a string or a list of
// content parts, got a number": tokenizer.Message cannot know its place.
// Learning it decodes the messages again, one at a time, which only a
// refused body pays; any other error is returned as it is.
func placeMessageError(body []byte, err error) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return err
	}
	var raw struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &raw) != nil {
		return err
	}
	for i, r := range raw.Messages {
		var m tokenizer.Message
		e := json.Unmarshal(r, &m)
		if e == nil {
			continue
		}
		if msg := oneLine(e); !strings.HasPrefix(msg, "expected") {
			return fmt.Errorf("messages[%d].%s", i, msg) // msg names the message's field
		}
		return fmt.Errorf("messages[%d]: %s", i, oneLine(e))
	}
	return err
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

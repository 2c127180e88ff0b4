package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// decodeError says what was wrong with a request body: its JSON, or a
// field that does not hold what it must.
func decodeError(err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("request body is not valid JSON: %s", oneLine(err))
	}
	return fmt.Errorf("request body is not a valid request: %s", oneLine(err))
}

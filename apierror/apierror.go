// Package apierror writes errors in the shape OpenAI-compatible servers
// answer with, so that every OpenAI client (the openai Python and Go SDKs,
// go-openai) shows the message instead of a decoding failure.
//
// The shape is vLLM's current one:
//
//	{"error":{"message":"…","type":"NotFoundError","param":null,"code":404}}
//
// code is the HTTP status, as vLLM sets it, and type is the name the openai
// SDKs give the exception for that status.
package apierror

import (
	"encoding/json"
	"net/http"
)

// Info is the body of an error.
type Info struct {
	// Message is one line, fit to show a person.
	Message string `json:"message"`
	// Type names the kind of error, such as NotFoundError.
	Type string `json:"type"`
	// Param names the request field at fault; nil when none is.
	Param *string `json:"param"`
	// Code is the HTTP status.
	Code int `json:"code"`
}

// Response is an error answer: {"error":{…}}.
type Response struct {
	Error Info `json:"error"`
}

// New returns the error answer for status.
func New(status int, msg string) Response {
	return Response{Info{Message: msg, Type: Type(status), Code: status}}
}

// Type is the error type for an HTTP status, named as vLLM and the openai
// SDKs name them.
func Type(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusUnauthorized:
		return "AuthenticationError"
	case http.StatusForbidden:
		return "PermissionDeniedError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusConflict:
		return "ConflictError"
	case http.StatusRequestEntityTooLarge:
		return "RequestTooLargeError"
	case http.StatusUnprocessableEntity:
		return "UnprocessableEntityError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return "ServiceUnavailableError"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return "BadRequestError"
}

// Write answers status with msg in the error shape. A 429 or 503 also
// says when to retry (Retry-After: 1, in seconds, unless the caller set
// one), which the openai SDKs honour before their own backoff.
func Write(w http.ResponseWriter, status int, msg string) {
	write(w, status, New(status, msg))
}

// WriteParam is Write for an error that names the request field at
// fault, as vLLM's validation errors do ("max_tokens"); an empty param
// is null.
func WriteParam(w http.ResponseWriter, status int, msg, param string) {
	r := New(status, msg)
	if param != "" {
		r.Error.Param = &param
	}
	write(w, status, r)
}

func write(w http.ResponseWriter, status int, r Response) {
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(r)
}

// Event is an SSE event carrying the error, for a stream that fails after
// it started: the openai SDKs raise an error on a data line whose JSON has
// an "error" field, where a bare end of stream would read as a complete but
// short answer. It ends with the blank line that closes an event.
func Event(status int, msg string) []byte {
	b, _ := json.Marshal(New(status, msg))
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

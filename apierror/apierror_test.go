package apierror

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name   string
		status int
		// want is the whole body, byte for byte.
		want string
	}{
		{
			"an unknown model is a 404 NotFoundError, as vLLM answers it",
			http.StatusNotFound,
			`{"error":{"message":"m","type":"NotFoundError","param":null,"code":404}}`,
		},
		{
			"a bad request is a BadRequestError",
			http.StatusBadRequest,
			`{"error":{"message":"m","type":"BadRequestError","param":null,"code":400}}`,
		},
		{
			"an overloaded worker is a ServiceUnavailableError",
			http.StatusServiceUnavailable,
			`{"error":{"message":"m","type":"ServiceUnavailableError","param":null,"code":503}}`,
		},
		{
			"a status with no name of its own in 5xx is an InternalServerError",
			http.StatusInternalServerError,
			`{"error":{"message":"m","type":"InternalServerError","param":null,"code":500}}`,
		},
		// Sad path: statuses the table does not name still get a type.
		{
			"an unlisted 4xx is a BadRequestError, never an empty type",
			http.StatusTeapot,
			`{"error":{"message":"m","type":"BadRequestError","param":null,"code":418}}`,
		},
		{
			"an unlisted 5xx is an InternalServerError, never an empty type",
			http.StatusNotImplemented,
			`{"error":{"message":"m","type":"InternalServerError","param":null,"code":501}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Write(rec, tt.status, "m")
			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d", rec.Code, tt.status)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if got := strings.TrimSpace(rec.Body.String()); got != tt.want {
				t.Errorf("body = %s\nwant   %s", got, tt.want)
			}
		})
	}
}

// TestWriteReadByGoOpenAI proves an OpenAI client library reads the
// message, type and code out of the body.
func TestWriteReadByGoOpenAI(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, http.StatusNotFound, "The model `x` does not exist.")
	var got openai.ErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Error == nil || got.Error.Message != "The model `x` does not exist." || got.Error.Type != "NotFoundError" {
		t.Fatalf("go-openai read %+v", got.Error)
	}
}

func TestWriteSaysWhenToRetry(t *testing.T) {
	tests := []struct {
		name   string
		status int
		preset string
		want   string
	}{
		{"an overloaded server asks for a retry after a second", http.StatusServiceUnavailable, "", "1"},
		{"a rate limit asks for a retry after a second", http.StatusTooManyRequests, "", "1"},
		{"a caller's own Retry-After is kept", http.StatusServiceUnavailable, "7", "7"},
		// Sad path: a refusal that retrying cannot fix says nothing of it.
		{"a bad request does not invite a retry", http.StatusBadRequest, "", ""},
		{"a server error does not promise one", http.StatusInternalServerError, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if tt.preset != "" {
				rec.Header().Set("Retry-After", tt.preset)
			}
			Write(rec, tt.status, "m")
			if got := rec.Header().Get("Retry-After"); got != tt.want {
				t.Fatalf("Retry-After = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEvent(t *testing.T) {
	got := string(Event(http.StatusBadGateway, "worker w: stream cut"))
	want := `data: {"error":{"message":"worker w: stream cut","type":"ServiceUnavailableError","param":null,"code":502}}` + "\n\n"
	if got != want {
		t.Fatalf("Event = %q\nwant    %q", got, want)
	}
}

func TestWriteParam(t *testing.T) {
	tests := []struct {
		name, param string
		// want is the whole body, byte for byte.
		want string
	}{
		{"a field at fault is named in param, as vLLM's validation errors name it", "max_tokens",
			`{"error":{"message":"m","type":"BadRequestError","param":"max_tokens","code":400}}`},
		{"no field at fault is a null param, as Write writes", "",
			`{"error":{"message":"m","type":"BadRequestError","param":null,"code":400}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteParam(rec, http.StatusBadRequest, "m", tt.param)
			if got := strings.TrimSpace(rec.Body.String()); got != tt.want {
				t.Errorf("body = %s, want %s", got, tt.want)
			}
		})
	}
}

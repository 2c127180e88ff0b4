package router

import (
	"slices"
	"strings"
	"testing"
)

func TestParseModelIDs(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []string
		wantErr string
	}{
		{"vLLM's answer gives its model", `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","max_model_len":32768}]}`, []string{"Qwen/Qwen3-8B"}, ""},
		{"a base model and its adapter keep their order", `{"data":[{"id":"base"},{"id":"lora-1","parent":"base"}]}`, []string{"base", "lora-1"}, ""},
		{"no model listed", `{"data":[]}`, nil, "lists no model"},
		{"a model without a name", `{"data":[{"object":"model"}]}`, nil, `data[0].id "" is not a model's name`},
		{"a name across two lines", `{"data":[{"id":"a\nb"}]}`, nil, "is not a model's name"},
		{"not JSON", `<html>`, nil, "not the JSON object expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseModelIDs([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func FuzzParseModelIDs(f *testing.F) {
	f.Add([]byte(`{"object":"list","data":[{"id":"m","max_model_len":16384}]}`))
	f.Add([]byte(`{"data":[{"id":"a"},{"id":"b"}]}`))
	f.Add([]byte(`{"data":[{"id":""}]}`))
	f.Add([]byte(`{"data":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ids, err := ParseModelIDs(body)
		if err != nil {
			if ids != nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q with %q: want none and one line", err, ids)
			}
			return
		}
		if len(ids) == 0 || len(ids) > maxModelIDs {
			t.Fatalf("accepted %d models", len(ids))
		}
		for _, id := range ids {
			if id == "" || strings.ContainsAny(id, "\n\r\x00") {
				t.Fatalf("accepted model name %q", id)
			}
		}
	})
}

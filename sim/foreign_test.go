package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/tokenizer"
)

// TestForeignEngineTokenizesItsOwnWay checks that a worker given another
// tokenizer answers /tokenize with that tokenizer's ids, and that its KV
// events carry the same ids, so that a router must use them to match.
func TestForeignEngineTokenizesItsOwnWay(t *testing.T) {
	foreign, err := tokenizer.NewEngine("o200k", "llama3")
	if err != nil {
		t.Fatal(err)
	}
	ev := &sink{}
	w, err := NewServer(ServerOptions{Name: "w0", Profile: fast(), Events: ev.put, Seed: 1, Tokenizer: foreign})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	defer func() { srv.Close(); w.Close() }()

	msgs := []tokenizer.Message{{Role: "user", Content: strings.Repeat("The paged KV cache stores keys and values in blocks. ", 40)}}
	body, _ := json.Marshal(map[string]any{"messages": msgs})
	resp, err := http.Post(srv.URL+"/tokenize", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tokens []uint32 `json:"tokens"`
	}
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	text, _ := foreign.Render(msgs)
	want := foreign.Encode(text)
	if !slices.Equal(got.Tokens, want) {
		t.Fatalf("/tokenize gave %d tokens, want the foreign engine's %d", len(got.Tokens), len(want))
	}
	if slices.Equal(got.Tokens, tokenizer.Encode(tokenizer.RenderChat(msgs))) {
		t.Fatal("the foreign engine tokenizes as the embedded one")
	}

	body, _ = json.Marshal(map[string]any{"messages": msgs, "max_tokens": 2})
	resp, err = http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var stored []uint32
	ev.mu.Lock()
	for _, b := range ev.batches {
		for _, e := range b.Events {
			if s, ok := e.(*kvevents.BlockStored); ok {
				stored = append(stored, s.TokenIDs...)
			}
		}
	}
	ev.mu.Unlock()
	if len(stored) == 0 || !slices.Equal(stored, want[:len(stored)]) {
		t.Errorf("KV events stored %d token ids, not a prefix of the foreign engine's %d", len(stored), len(want))
	}
}

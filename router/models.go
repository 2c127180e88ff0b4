package router

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
)

// A request names its model, and an OpenAI server refuses one it does not
// serve (vLLM: 404 "The model `…` does not exist"), so a load sent under
// the wrong name fails whole. GET /v1/models lists what a server serves;
// kvlens asks it at start, to take the model when none is given and to
// warn when the one given is not served.

// maxModelIDs bounds the models read from one answer: a server lists one,
// or a few LoRA adapters beside its base model.
const maxModelIDs = 256

// ParseModelIDs reads the ids of the models a server serves from its
// answer to GET /v1/models: {"data":[{"id":…},…]}, in its order. Its
// errors are one line.
func ParseModelIDs(body []byte) ([]string, error) {
	var doc struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("answer is not the JSON object expected: %s", oneLine(err))
	}
	if len(doc.Data) > maxModelIDs {
		return nil, fmt.Errorf("the answer lists %d models; at most %d are read", len(doc.Data), maxModelIDs)
	}
	var ids []string
	for i, m := range doc.Data {
		if m.ID == "" || len(m.ID) > 4096 || strings.IndexFunc(m.ID, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf("data[%d].id %s is not a model's name", i, snippet([]byte(m.ID)))
		}
		ids = append(ids, m.ID)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the answer lists no model")
	}
	return ids, nil
}

// ServedModels asks modelsURL (a server's /v1/models) which models it
// serves.
func ServedModels(ctx context.Context, client *http.Client, modelsURL string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, modelsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", modelsURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCapacityBody+1))
	if err != nil || len(body) > maxCapacityBody {
		return nil, fmt.Errorf("GET %s: answer unreadable or larger than %d bytes", modelsURL, maxCapacityBody)
	}
	ids, err := ParseModelIDs(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", modelsURL, err)
	}
	return ids, nil
}

package router

import (
	"bytes"
	"encoding/json"
	"strings"
)

// PromptText is a request's prompt as text, as routers that read no
// tokens match it (llm-d's prefix-cache scorer): a chat's messages as
// compact JSON, a completion's prompt (several prompts joined by
// newlines); nil for a body that is neither. It reads r.Messages when the
// caller gave them, else the body.
func PromptText(r *Request) []byte {
	if r.Messages != nil {
		b, err := json.Marshal(r.Messages)
		if err != nil {
			return nil
		}
		return b
	}
	var body struct {
		Messages json.RawMessage `json:"messages"`
		Prompt   json.RawMessage `json:"prompt"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil
	}
	if strings.HasSuffix(r.Path, "/chat/completions") {
		var out bytes.Buffer
		if len(body.Messages) == 0 || json.Compact(&out, body.Messages) != nil || out.Bytes()[0] != '[' {
			return nil
		}
		return out.Bytes()
	}
	if strings.HasSuffix(r.Path, "/completions") && len(body.Prompt) > 0 {
		var one string
		if json.Unmarshal(body.Prompt, &one) == nil {
			return []byte(one)
		}
		var many []string
		if json.Unmarshal(body.Prompt, &many) == nil {
			return []byte(strings.Join(many, "\n"))
		}
	}
	return nil
}

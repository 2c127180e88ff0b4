package tokenizer

import (
	"encoding/json"
	"fmt"
)

// CompletionPrompt reads a completion request's prompt in the shapes the
// OpenAI API allows for one prompt, all of which vLLM serves: a string,
// token ids, or an array holding one of either. ids is nil for a text
// prompt. ok is false for anything else (a batch of several prompts, ids
// that are not whole numbers from 0 to 2³²-1, another JSON type) and for
// ids that are none at all; a string prompt may be empty.
func CompletionPrompt(raw json.RawMessage) (text string, ids []uint32, ok bool) {
	if json.Unmarshal(raw, &text) == nil {
		return text, nil, true
	}
	if json.Unmarshal(raw, &ids) == nil {
		return "", ids, len(ids) > 0
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) == 1 {
		return texts[0], nil, true
	}
	var batch [][]uint32
	if json.Unmarshal(raw, &batch) == nil && len(batch) == 1 {
		return "", batch[0], len(batch[0]) > 0
	}
	return "", nil, false
}

// CheckIDs refuses a prompt given as more token ids than limit with a
// *TooLongError: no tokenizer is asked, so the count is exact.
func CheckIDs(ids []uint32, limit int) error {
	if len(ids) > limit {
		return &TooLongError{AtLeast: len(ids), Limit: limit, Counted: true}
	}
	return nil
}

// tooLongCounted is TooLongError's message for a prompt whose length is
// exact.
func tooLongCounted(n, limit int) string {
	return fmt.Sprintf("the prompt has %d tokens, but this model's maximum context length is %d tokens", n, limit)
}

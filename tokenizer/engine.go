package tokenizer

import (
	"fmt"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// An Engine is a tokenizer and chat template pair, as an inference engine
// applies them to a chat request. The package-level functions are the
// embedded engine (cl100k and kvlens's template); another Engine stands for
// a worker that tokenizes differently, as every real Llama deployment does,
// so that the router's failure to match it can be tested with real
// processes.
type Engine struct {
	// Encoding is the BPE: "cl100k" or "o200k".
	Encoding string
	// Template is the chat template: "kvlens" or "llama3".
	Template string

	once  sync.Once
	codec tokenizer.Codec
	err   error
}

// Embedded is the engine kvlens's router and simulated workers share by
// default.
var Embedded = &Engine{Encoding: "cl100k", Template: "kvlens"}

// NewEngine returns the engine of the named encoding and chat template; an
// empty name means the embedded one's.
func NewEngine(encoding, template string) (*Engine, error) {
	if encoding == "" {
		encoding = "cl100k"
	}
	if template == "" {
		template = "kvlens"
	}
	switch encoding {
	case "cl100k", "o200k":
	default:
		return nil, fmt.Errorf("tokenizer: unknown encoding %q: want cl100k or o200k", encoding)
	}
	switch template {
	case "kvlens", "llama3":
	default:
		return nil, fmt.Errorf("tokenizer: unknown chat template %q: want kvlens or llama3", template)
	}
	if encoding == "cl100k" && template == "kvlens" {
		return Embedded, nil
	}
	return &Engine{Encoding: encoding, Template: template}, nil
}

// String names the engine, as "o200k/llama3".
func (e *Engine) String() string { return e.Encoding + "/" + e.Template }

// IsEmbedded reports whether e tokenizes exactly as the package-level
// functions do.
func (e *Engine) IsEmbedded() bool {
	return e == nil || (e.Encoding == "cl100k" && e.Template == "kvlens")
}

func (e *Engine) get() tokenizer.Codec {
	if e.IsEmbedded() {
		return get()
	}
	e.once.Do(func() { e.codec, e.err = tokenizer.Get(tokenizer.O200kBase) })
	if e.err != nil {
		panic(fmt.Sprintf("tokenizer: load embedded o200k vocabulary: %v", e.err))
	}
	return e.codec
}

// Render renders msgs with the engine's chat template, leaving the prompt
// open for the assistant's reply.
func (e *Engine) Render(msgs []Message) string {
	if e.IsEmbedded() || e.Template == "kvlens" {
		return RenderChat(msgs)
	}
	// Llama 3's template, as its tokenizer_config.json writes it in Jinja,
	// without tools or a date line: the headers are special tokens there,
	// plain text here, which changes the ids but not that they differ from
	// the embedded engine's.
	var b strings.Builder
	b.WriteString("<|begin_of_text|>")
	for _, m := range msgs {
		b.WriteString("<|start_header_id|>")
		b.WriteString(m.Role)
		b.WriteString("<|end_header_id|>\n\n")
		b.WriteString(strings.TrimSpace(m.Content))
		b.WriteString("<|eot_id|>")
	}
	b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	return b.String()
}

// RenderBytes bounds len(Render(msgs)) from above without rendering.
func (e *Engine) RenderBytes(msgs []Message) int {
	if e.IsEmbedded() || e.Template == "kvlens" {
		return ChatBytes(msgs)
	}
	n := len("<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n")
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + len("<|start_header_id|><|end_header_id|>\n\n<|eot_id|>")
	}
	return n
}

// Encode returns the token ids of text.
func (e *Engine) Encode(text string) []uint32 {
	if e.IsEmbedded() {
		return Encode(text)
	}
	return encodeWith(e.get(), text, nil)
}

// EncodeLimit is the package's EncodeLimit for this engine.
func (e *Engine) EncodeLimit(text string, limit int) ([]uint32, error) {
	if e.IsEmbedded() {
		return EncodeLimit(text, limit)
	}
	if err := CheckBytes(len(text), limit); err != nil {
		return nil, err
	}
	ids := encodeWith(e.get(), text, nil)
	if len(ids) > limit {
		return nil, &TooLongError{AtLeast: len(ids), Limit: limit}
	}
	return ids, nil
}

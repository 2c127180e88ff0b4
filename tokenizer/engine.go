package tokenizer

import (
	"fmt"
	"slices"
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
	// Encoding is the BPE: "cl100k" or "o200k", or "tokenizer.json" for a
	// model's own (see LoadFiles).
	Encoding string
	// Template is the chat template: "kvlens" or "llama3", or the file a
	// model's own came from.
	Template string

	files *modelFiles // a model's own tokenizer and template (LoadFiles)

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

// String names the engine, as "o200k/llama3", or the directory of a
// model's own files.
func (e *Engine) String() string {
	if e.files != nil {
		return e.files.dir
	}
	return e.Encoding + "/" + e.Template
}

// IsEmbedded reports whether e tokenizes exactly as the package-level
// functions do.
func (e *Engine) IsEmbedded() bool {
	return e == nil || (e.files == nil && e.Encoding == "cl100k" && e.Template == "kvlens")
}

// FromFiles reports whether e is a model's own tokenizer, read by LoadFiles.
func (e *Engine) FromFiles() bool { return e != nil && e.files != nil }

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

// The largest ids of the built-in encodings: their last special tokens
// (<|endofprompt|>), as tiktoken defines cl100k_base and o200k_base.
const (
	cl100kMaxID = 100276
	o200kMaxID  = 200018
)

// MaxTokenID is the largest token id of the engine's vocabulary, special
// tokens included: what vLLM calls the tokenizer's max_token_id. vLLM
// refuses a prompt of token ids holding a larger one as out of vocabulary.
func (e *Engine) MaxTokenID() uint32 {
	switch {
	case e.FromFiles():
		return e.files.bpe.maxID
	case e.IsEmbedded() || e.Encoding == "cl100k":
		return cl100kMaxID
	}
	return o200kMaxID
}

// Render renders msgs with the engine's chat template, leaving the prompt
// open for the assistant's reply, as vLLM does for /v1/chat/completions.
// Only a model's own template can fail (raise_exception, say).
func (e *Engine) Render(msgs []Message) (string, error) { return e.Apply(msgs, true) }

// Apply is transformers' apply_chat_template(msgs, add_generation_prompt=
// gen, tokenize=False).
func (e *Engine) Apply(msgs []Message, gen bool) (string, error) {
	if e.FromFiles() {
		return e.files.tmpl.render(msgs, gen)
	}
	s := e.render(msgs)
	if !gen {
		s = strings.TrimSuffix(s, e.generationPrompt())
	}
	return s, nil
}

// generationPrompt is what a built-in template adds for the reply.
func (e *Engine) generationPrompt() string {
	if e.IsEmbedded() || e.Template == "kvlens" {
		return assistantOpen
	}
	return llama3Open
}

const llama3Open = "<|start_header_id|>assistant<|end_header_id|>\n\n"

// render is Render for the built-in templates.
func (e *Engine) render(msgs []Message) string {
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
	b.WriteString(llama3Open)
	return b.String()
}

// RenderBytes is len(Render(msgs)) without rendering, for the built-in
// templates; for a model's own it is 0, a bound that refuses nothing, as
// only rendering tells what such a template makes of the messages.
func (e *Engine) RenderBytes(msgs []Message) int {
	if e.FromFiles() {
		return 0
	}
	if e.IsEmbedded() || e.Template == "kvlens" {
		return ChatBytes(msgs)
	}
	n := len("<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n")
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + len("<|start_header_id|><|end_header_id|>\n\n<|eot_id|>")
	}
	return n
}

// Encode returns the token ids of text, as vLLM encodes a rendered chat:
// special tokens in the text map to their ids, and none are added.
func (e *Engine) Encode(text string) []uint32 {
	if e.IsEmbedded() {
		return Encode(text)
	}
	if e.FromFiles() {
		ids, _ := e.files.bpe.encode(text, nil, 0)
		return ids
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
	var ids []uint32
	if e.FromFiles() {
		var err error
		if ids, err = e.files.bpe.encode(text, nil, limit); err != nil {
			return nil, err
		}
	} else {
		ids = encodeWith(e.get(), text, nil)
	}
	if len(ids) > limit {
		return nil, &TooLongError{AtLeast: len(ids), Limit: limit}
	}
	return ids, nil
}

// EncodePrompt is EncodeLimit for a completion's prompt, which vLLM encodes
// with special tokens added: a model's own tokenizer puts its BOS (and
// whatever else its post-processor or add_bos_token says) around the text.
// The built-in engines add none.
func (e *Engine) EncodePrompt(text string, limit int) ([]uint32, error) {
	if !e.FromFiles() {
		return e.EncodeLimit(text, limit)
	}
	b := e.files.bpe
	if err := CheckBytes(len(text), limit); err != nil {
		return nil, err
	}
	ids, err := b.encode(text, slices.Clone(b.bos), limit)
	if err != nil {
		return nil, err
	}
	ids = append(ids, b.eos...)
	if len(ids) > limit {
		return nil, &TooLongError{AtLeast: len(ids), Limit: limit}
	}
	return ids, nil
}

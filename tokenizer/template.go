package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
	"github.com/ncruces/go-strftime"
)

// chatTemplate is a model's chat template, rendered as transformers'
// apply_chat_template renders it for vLLM: Jinja with trim_blocks and
// lstrip_blocks (github.com/ardanlabs/jinja, which sets both as
// transformers does), the messages, add_generation_prompt, the special
// tokens by name (bos_token, eos_token, …), raise_exception and
// strftime_now.
type chatTemplate struct {
	tmpl *jinja.Template
	// vars are the special tokens the config names, as strings.
	vars map[string]string
	// now is the clock of strftime_now; nil means time.Now.
	now func() time.Time
}

// tokenizerConfig is what kvlens reads of tokenizer_config.json.
type tokenizerConfig struct {
	// ChatTemplate is a string, or a list of {name, template} of which
	// "default" is the chat template.
	ChatTemplate   json.RawMessage `json:"chat_template"`
	AddBOSToken    *bool           `json:"add_bos_token"`
	AddEOSToken    *bool           `json:"add_eos_token"`
	TokenizerClass string          `json:"tokenizer_class"`
	// Special tokens: a string, null, or an AddedToken object with its
	// content.
	BOSToken  json.RawMessage `json:"bos_token"`
	EOSToken  json.RawMessage `json:"eos_token"`
	UNKToken  json.RawMessage `json:"unk_token"`
	PADToken  json.RawMessage `json:"pad_token"`
	SEPToken  json.RawMessage `json:"sep_token"`
	CLSToken  json.RawMessage `json:"cls_token"`
	MaskToken json.RawMessage `json:"mask_token"`
}

// parseConfig reads tokenizer_config.json. Its template, when it has
// one, is only returned: see compileTemplate.
func parseConfig(data []byte) (tokenizerConfig, string, map[string]string, error) {
	var c tokenizerConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return c, "", nil, fmt.Errorf("not a tokenizer_config.json: %s", oneLine(err))
	}
	vars := map[string]string{}
	for name, raw := range map[string]json.RawMessage{
		"bos_token": c.BOSToken, "eos_token": c.EOSToken, "unk_token": c.UNKToken, "pad_token": c.PADToken,
		"sep_token": c.SEPToken, "cls_token": c.CLSToken, "mask_token": c.MaskToken,
	} {
		s, ok, err := tokenText(raw)
		if err != nil {
			return c, "", nil, fmt.Errorf("%s: %w", name, err)
		}
		if ok {
			vars[name] = s
		}
	}
	src, err := templateText(c.ChatTemplate)
	return c, src, vars, err
}

// tokenText reads a special token: "…", null (absent), or {"content": "…"}.
func tokenText(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
		return *obj.Content, true, nil
	}
	return "", false, errors.New("want a string or an object with its content")
}

// templateText reads chat_template: a string, or a list of named templates
// of which "default" renders chats; "" when there is none.
func templateText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", errors.New("chat_template: want a string or a list of {name, template}")
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", errors.New("chat_template: the list has no template named default")
}

// compileTemplate compiles a chat template's source; a library panic on a
// strange template is an error too.
func compileTemplate(src string, vars map[string]string) (t *chatTemplate, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("chat_template does not compile: %v", p)
		}
	}()
	tmpl, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat_template does not compile: %s", oneLine(err))
	}
	return &chatTemplate{tmpl: tmpl, vars: vars}, nil
}

// render renders msgs; gen is add_generation_prompt. Its error is the
// template's own (raise_exception) or the engine's, in one line.
func (c *chatTemplate) render(msgs []Message, gen bool) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("chat template: %v", p)
		}
	}()
	data := make(map[string]jinja.Value, len(c.vars)+4)
	for k, v := range c.vars {
		data[k] = jinja.NewString(v)
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		list[i] = d
	}
	data["messages"] = jinja.NewList(list)
	data["add_generation_prompt"] = jinja.NewBool(gen)
	now := c.now
	if now == nil {
		now = time.Now
	}
	// Templates that print today's date (Llama 3.2's) read the clock, as
	// transformers' strftime_now does: the engine renders the date it runs
	// on, and so must the router.
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now takes one format string")
		}
		return jinja.NewString(strftime.Format(args[0].AsString(), now())), nil
	})
	out, err = c.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chat template: %s", strings.TrimPrefix(oneLine(err), "jinja: "))
	}
	return out, nil
}

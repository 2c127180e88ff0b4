package tokenizer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// The files of a model's tokenizer, as Hugging Face repositories ship them.
const (
	TokenizerJSON   = "tokenizer.json"
	TokenizerConfig = "tokenizer_config.json"
	// ChatTemplateFile is the chat template newer models ship beside the
	// config instead of its chat_template; transformers prefers it.
	ChatTemplateFile = "chat_template.jinja"
	// SentencePieceFile is the SentencePiece model older ones ship.
	SentencePieceFile = "tokenizer.model"
)

// maxFileBytes bounds a tokenizer file: Llama 3's tokenizer.json is 9 MB,
// Qwen 2.5's 7 MB; a file much larger is not one.
const maxFileBytes = 256 << 20

// modelFiles is a model's own tokenizer and chat template, read from files.
type modelFiles struct {
	dir  string
	bpe  *bpe
	tmpl *chatTemplate
}

// LoadFiles returns the engine of a model's own tokenizer and chat
// template. path is a directory holding tokenizer.json and
// tokenizer_config.json (and chat_template.jinja, if the model ships its
// template so), or the path of tokenizer.json with the others beside it.
// Its error is one line naming the file at fault.
func LoadFiles(path string) (*Engine, error) {
	dir, tokFile := path, filepath.Join(path, TokenizerJSON)
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("tokenizer: %s: %s", path, oneLine(unwrapPath(err)))
	case !st.IsDir():
		dir, tokFile = filepath.Dir(path), path
		if filepath.Base(path) == SentencePieceFile {
			return nil, sentencePieceError(path)
		}
	}
	raw, err := readFile(tokFile)
	if errors.Is(err, fs.ErrNotExist) {
		if sp := filepath.Join(dir, SentencePieceFile); exists(sp) {
			return nil, sentencePieceError(sp)
		}
	}
	if err != nil {
		return nil, err
	}
	b, err := parseBPE(raw)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %s", tokFile, err)
	}
	cfgFile := filepath.Join(dir, TokenizerConfig)
	raw, err = readFile(cfgFile)
	if err != nil {
		return nil, err
	}
	cfg, src, vars, err := parseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %s", cfgFile, err)
	}
	srcFile := cfgFile
	if jf := filepath.Join(dir, ChatTemplateFile); exists(jf) {
		raw, err := readFile(jf)
		if err != nil {
			return nil, err
		}
		src, srcFile = string(raw), jf
	}
	if src == "" {
		return nil, fmt.Errorf("tokenizer: %s has no chat_template (a base model?), and there is no %s beside it: kvlens renders chats with the model's template", cfgFile, ChatTemplateFile)
	}
	tmpl, err := compileTemplate(src, vars)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %s", srcFile, err)
	}
	if err := applyConfig(b, cfg, vars); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %s", cfgFile, err)
	}
	return &Engine{Encoding: TokenizerJSON, Template: filepath.Base(srcFile), files: &modelFiles{dir: dir, bpe: b, tmpl: tmpl}}, nil
}

// llamaClasses are the tokenizer classes whose add_bos_token and
// add_eos_token rebuild the post-processor in transformers; for the others
// tokenizer.json's post-processor alone decides.
var llamaClasses = []string{"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"}

// applyConfig sets the special tokens a completion's prompt gets from the
// config's add_bos_token and add_eos_token, where transformers honours
// them.
func applyConfig(b *bpe, cfg tokenizerConfig, vars map[string]string) error {
	if !slices.Contains(llamaClasses, cfg.TokenizerClass) {
		return nil
	}
	set := func(flag *bool, name string, dst *[]uint32) error {
		if flag == nil {
			return nil
		}
		*dst = nil
		if !*flag {
			return nil
		}
		id, ok := b.idOf(vars[name])
		if !ok {
			return fmt.Errorf("add_%s is true but %s %q is not a token", name, name, vars[name])
		}
		*dst = []uint32{id}
		return nil
	}
	if err := set(cfg.AddBOSToken, "bos_token", &b.bos); err != nil {
		return err
	}
	return set(cfg.AddEOSToken, "eos_token", &b.eos)
}

// idOf returns the id of a whole token, added or in the vocabulary.
func (t *bpe) idOf(tok string) (uint32, bool) {
	for _, a := range t.added {
		if a.Content == tok {
			return a.ID, true
		}
	}
	id, ok := t.vocab[byteLevel(tok)]
	return id, ok
}

func sentencePieceError(path string) error {
	return fmt.Errorf("tokenizer: %s is a SentencePiece model, which kvlens cannot read: supply the model's %s (Hugging Face repositories ship one beside it)", path, TokenizerJSON)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readFile reads a tokenizer file of at most maxFileBytes; its error names
// the file in one line.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, unwrapPath(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxFileBytes {
		return nil, fmt.Errorf("tokenizer: %s: %d bytes, more than any tokenizer file (%d)", path, st.Size(), maxFileBytes)
	}
	// The size checked above is 0 for a device or a pipe, such as
	// /dev/zero: the read itself stops past the bound.
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, unwrapPath(err))
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("tokenizer: %s: more than any tokenizer file (%d bytes)", path, maxFileBytes)
	}
	return b, nil
}

// unwrapPath drops the path an *fs.PathError repeats, as the caller names
// the file itself.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Open returns the engine a --tokenizer flag names: a built-in encoding
// (cl100k, o200k) with a built-in template ("" is kvlens's), or a model's
// own files (see LoadFiles), which bring their own template, so template
// must then be "".
func Open(name, template string) (*Engine, error) {
	switch name {
	case "", "cl100k", "o200k":
		return NewEngine(name, template)
	}
	if template != "" {
		return nil, fmt.Errorf("tokenizer: %s brings its own chat template; drop the built-in one (%s)", name, template)
	}
	return LoadFiles(name)
}

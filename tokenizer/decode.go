package tokenizer

import (
	"strings"
	"sync"
)

// Decode returns the text of ids as the engine's detokenizer writes it,
// special tokens included. Ids outside the vocabulary are skipped.
func (e *Engine) Decode(ids []uint32) string {
	if e.FromFiles() {
		return e.files.bpe.decode(ids)
	}
	if e.IsEmbedded() {
		return Decode(ids)
	}
	u := make([]uint, len(ids))
	for i, id := range ids {
		u[i] = uint(id)
	}
	s, err := e.get().Decode(u)
	if err != nil {
		return ""
	}
	return s
}

// texts maps each id of a model's vocabulary to its bytes, built on first
// use: only simulated workers decode, and only they need the table.
type texts struct {
	once sync.Once
	byID map[uint32]string
}

// decode spells ids back into text: a byte-level token's characters stand
// for bytes (byteUnicode), an added token is its content.
func (t *bpe) decode(ids []uint32) string {
	t.texts.once.Do(func() {
		t.texts.byID = make(map[uint32]string, len(t.vocab)+len(t.added))
		for tok, id := range t.vocab {
			var b strings.Builder
			for _, r := range tok {
				if c, ok := unicodeByte[r]; ok {
					b.WriteByte(c)
				} else {
					b.WriteRune(r)
				}
			}
			t.texts.byID[id] = b.String()
		}
		for _, a := range t.added {
			t.texts.byID[a.ID] = a.Content
		}
	})
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(t.texts.byID[id])
	}
	return b.String()
}

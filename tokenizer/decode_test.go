package tokenizer

import "testing"

func TestDecodeSpellsBackWhatEncodeRead(t *testing.T) {
	o200k, err := NewEngine("o200k", "llama3")
	if err != nil {
		t.Fatal(err)
	}
	engines := []struct {
		name string
		e    *Engine
	}{
		{"embedded cl100k", Embedded},
		{"o200k, a foreign engine", o200k},
		{"Llama 3's own files", loadFixture(t, "llama3")},
		{"Qwen 2.5's own files", loadFixture(t, "qwen2.5")},
	}
	texts := []struct{ name, text string }{
		{"prose over paragraphs", "A cache-aware router keeps an index.\n\nIt sends each request where the prefix lives: 42 blocks, 3.5 ms."},
		{"leading space and code", "  x := map[string]int{\"a\": 1} // why\n\tif x == nil {}"},
		{"accents and CJK, bytes split across tokens", "café naïve — 缓存 🙂"},
	}
	for _, en := range engines {
		for _, tx := range texts {
			t.Run(en.name+"/"+tx.name, func(t *testing.T) {
				ids := en.e.Encode(tx.text)
				if got := en.e.Decode(ids); got != tx.text {
					t.Fatalf("Decode(Encode(%q)) = %q", tx.text, got)
				}
				// Token by token, the pieces join into the text: a worker
				// streams them so.
				var joined string
				for _, id := range ids {
					joined += en.e.Decode([]uint32{id})
				}
				if joined != tx.text {
					t.Fatalf("pieces join into %q, want %q", joined, tx.text)
				}
			})
		}
	}
	t.Run("a model's special token decodes to its content", func(t *testing.T) {
		e := loadFixture(t, "llama3")
		ids := e.Encode("<|eot_id|>")
		if len(ids) != 1 || e.Decode(ids) != "<|eot_id|>" {
			t.Fatalf("<|eot_id|> encodes to %v, decodes to %q", ids, e.Decode(ids))
		}
	})
}

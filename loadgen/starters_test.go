package loadgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLoadStartersRefusesWhatIsNotText(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" // the start of a PNG image
	tests := []struct {
		name string
		// file is written under a directory of starters (a .md or .txt
		// name) or alone (any other name, read as JSONL).
		file, content string
		// wantErr is in the one-line error; empty means accepted.
		wantErr string
	}{
		{"a Markdown starter with accents and a replacement character is text", "a.md", "Café, naïve, \uFFFD and 日本語.", ""},
		{"a JSONL starter with accents is text", "s.jsonl", `{"id":"a","topic":"t","text":"Café"}`, ""},

		// Sad path.
		{"an image renamed .md is refused with its name", "image.md", png, "image.md: not text: a NUL byte at offset 8"},
		{"a Latin-1 .txt file is refused as invalid UTF-8", "latin.txt", "caf\xe9 au lait", "latin.txt: not text: invalid UTF-8 at offset 3"},
		{"a binary file given as JSONL is refused with its name and line", "blob.bin", png, "blob.bin line 1: not text"},
		{"a JSONL line of invalid UTF-8 is refused", "s.jsonl", `{"id":"a","topic":"t","text":"caf` + "\xe9" + `"}`, "s.jsonl line 1: not text: invalid UTF-8"},
		{"a JSONL text with an escaped NUL is refused", "s.jsonl", `{"id":"a","topic":"t","text":"x\u0000y"}`, "s.jsonl line 1: not text: a NUL character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tt.file)
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			load := path
			if ext := filepath.Ext(tt.file); ext == ".md" || ext == ".txt" {
				load = dir
			}
			ss, err := LoadStarters(load)
			if tt.wantErr == "" {
				if err != nil || len(ss) != 1 {
					t.Fatalf("got %d starters, %v; want 1", len(ss), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParseStarter(f *testing.F) {
	f.Add("Plain text starter.")
	f.Add("---\ntitle: A\ntopic: alpha\n---\nBody of A.")
	f.Add("---\nno colon\n---\nbody")
	f.Add("\x89PNG\r\n\x1a\n\x00\x00")
	f.Add("caf\xe9")
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := parseStarter("id", raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if s.Text == "" || !utf8.ValidString(s.Text+s.Title+s.Topic) || strings.ContainsRune(s.Text+s.Title+s.Topic, 0) {
			t.Fatalf("accepted a starter that is empty or not text: %+q", s)
		}
	})
}

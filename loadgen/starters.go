package loadgen

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Starter is a long text that opens a conversation.
type Starter struct {
	// ID is the file name without extension, or the JSONL record's id.
	ID string `json:"id"`
	// Title is a human title.
	Title string `json:"title"`
	// Topic is a few words naming the subject, used in follow-up questions.
	Topic string `json:"topic"`
	// Text is the body the user asks about.
	Text string `json:"text"`
}

//go:embed starters/*.md
var builtinStarters embed.FS

// BuiltinStarters returns the starters compiled into the binary.
func BuiltinStarters() []Starter {
	ss, err := loadStarterFS(builtinStarters, "starters", "starters")
	if err != nil {
		panic(err) // the embedded files are checked by a test
	}
	return ss
}

// loadStarterFS reads every .md or .txt file under dir in fsys; errors name
// files under display.
func loadStarterFS(fsys fs.FS, dir, display string) ([]Starter, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ss []Starter
	for _, e := range entries {
		ext := path.Ext(e.Name())
		if e.IsDir() || (ext != ".md" && ext != ".txt") {
			continue
		}
		raw, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		s, err := parseStarter(strings.TrimSuffix(e.Name(), ext), string(raw))
		if err != nil {
			return nil, fmt.Errorf("starters: %s: %w", filepath.Join(display, e.Name()), err)
		}
		ss = append(ss, s)
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
	if len(ss) == 0 {
		return nil, fmt.Errorf("starters: no .md or .txt files in %s", display)
	}
	return ss, nil
}

// checkText refuses what is not text: bytes that are not UTF-8, or a NUL,
// which no text file holds and most binary files do.
func checkText(s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("not text: a NUL byte at offset %d (a binary file?)", i)
	}
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			return fmt.Errorf("not text: invalid UTF-8 at offset %d (a binary file, or another encoding?)", i)
		}
	}
	return nil
}

// parseStarter reads an optional front-matter block (title:, topic:) and the
// body that follows it; raw must be UTF-8 text.
func parseStarter(id, raw string) (Starter, error) {
	s := Starter{ID: id, Title: id, Topic: strings.ReplaceAll(id, "-", " ")}
	if err := checkText(raw); err != nil {
		return s, err
	}
	body := raw
	if rest, ok := strings.CutPrefix(raw, "---\n"); ok {
		head, after, ok := strings.Cut(rest, "\n---\n")
		if !ok {
			return s, fmt.Errorf("line 1: front matter opened with --- is never closed")
		}
		sc := bufio.NewScanner(strings.NewReader(head))
		for line := 2; sc.Scan(); line++ {
			key, val, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				return s, fmt.Errorf("line %d: front matter line %q is not key: value", line, sc.Text())
			}
			switch strings.TrimSpace(key) {
			case "title":
				s.Title = strings.TrimSpace(val)
			case "topic":
				s.Topic = strings.TrimSpace(val)
			}
		}
		body = after
	}
	s.Text = strings.TrimSpace(body)
	if s.Text == "" {
		return s, fmt.Errorf("the text is empty")
	}
	return s, nil
}

// LoadStarters reads conversation starters from p: a directory of .md or .txt
// files (each with optional title:/topic: front matter), or a JSONL file of
// records with fields id, topic, text (and optionally title).
func LoadStarters(p string) ([]Starter, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("starters: %w", err)
	}
	if info.IsDir() {
		return loadStarterFS(os.DirFS(p), ".", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("starters: %w", err)
	}
	defer f.Close()
	return parseStarterJSONL(f, filepath.Base(p))
}

// maxLineBytes bounds one JSONL line: a starter of 4,000 tokens is about
// 16 KB, a long trace record's hash_ids a few hundred KB.
const maxLineBytes = 4 << 20

// parseStarterJSONL reads one starter per line; blank lines are skipped.
// Errors name the file and line.
func parseStarterJSONL(r io.Reader, name string) ([]Starter, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	var ss []Starter
	seen := map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if err := checkText(string(raw)); err != nil {
			return nil, fmt.Errorf("starters: %s line %d: %w", name, line, err)
		}
		var s Starter
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("starters: %s line %d: %w", name, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("starters: %s line %d: more than one JSON value", name, line)
		}
		s.ID, s.Topic, s.Title = strings.TrimSpace(s.ID), strings.TrimSpace(s.Topic), strings.TrimSpace(s.Title)
		s.Text = strings.TrimSpace(s.Text)
		switch {
		case s.ID == "":
			return nil, fmt.Errorf("starters: %s line %d: missing id", name, line)
		case s.Topic == "":
			return nil, fmt.Errorf("starters: %s line %d: missing topic", name, line)
		case s.Text == "":
			return nil, fmt.Errorf("starters: %s line %d: missing text", name, line)
		case strings.ContainsRune(s.ID+s.Topic+s.Title+s.Text, 0):
			return nil, fmt.Errorf("starters: %s line %d: not text: a NUL character (\\u0000)", name, line)
		}
		if prev, dup := seen[s.ID]; dup {
			return nil, fmt.Errorf("starters: %s line %d: id %q already used on line %d", name, line, s.ID, prev)
		}
		seen[s.ID] = line
		if s.Title == "" {
			s.Title = s.ID
		}
		ss = append(ss, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("starters: %s line %d: %w", name, line+1, err)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("starters: %s: no starters", name)
	}
	return ss, nil
}

package main

import (
	"bufio"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	shexpand "mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/kvlens/kvlens/demo"
)

// docCommand is one kvlens command line found in a document's shell block.
type docCommand struct {
	where string   // file:line
	args  []string // after "kvlens" (or "go run ./cmd/kvlens")
}

// docCommands returns every kvlens command line in the fenced code blocks of
// the files, parsed as shell: quotes, line continuations, comments and
// redirections are the shell's business, not kvlens's.
func docCommands(t *testing.T, files []string) []docCommand {
	t.Helper()
	var out []docCommand
	for _, f := range files {
		blocks, err := fencedBlocks(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			prog, err := syntax.NewParser().Parse(strings.NewReader(b.text), f)
			if err != nil {
				// Not shell (a JSON or text block): nothing to run.
				continue
			}
			syntax.Walk(prog, func(n syntax.Node) bool {
				call, ok := n.(*syntax.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				if first := call.Args[0].Lit(); first != "kvlens" && first != "go" {
					return true // other tools' lines may hold what only a shell expands
				}
				var words []string
				for _, w := range call.Args {
					s, err := shexpand.Literal(nil, w)
					if err != nil {
						t.Fatalf("%s:%d: %v", f, b.line+int(w.Pos().Line())-1, err)
					}
					words = append(words, s)
				}
				where := filepath.Base(filepath.Dir(f)) + "/" + filepath.Base(f) + ":" + strconv.Itoa(b.line+int(call.Pos().Line())-1)
				switch {
				case words[0] == "kvlens":
					out = append(out, docCommand{where, words[1:]})
				case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/kvlens":
					out = append(out, docCommand{where, words[3:]})
				}
				return true
			})
		}
	}
	return out
}

type block struct {
	line int // of the block's first line in its file
	text string
}

func fencedBlocks(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out  []block
		cur  *block
		line int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line++
		l := sc.Text()
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "```") && cur == nil:
			cur = &block{line: line + 1}
		case strings.HasPrefix(strings.TrimSpace(l), "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	return out, sc.Err()
}

// quick are the subcommands that finish in well under a minute on a fresh
// store, so the docs' lines for them are run, not only parsed.
var quick = map[string]bool{"baselines list": true, "baselines show": true, "recordings list": true}

// TestEveryCommandLineInTheDocsParses holds every kvlens command line in the
// README and docs/ against kvlens's own flag parsers, so that none can rot
// silently when a flag is renamed; the quick ones are run as well.
func TestEveryCommandLineInTheDocsParses(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"../../README.md"}, docs...)
	for i, f := range files {
		if files[i], err = filepath.Abs(f); err != nil {
			t.Fatal(err)
		}
	}
	fixtureModel, err := filepath.Abs(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	cmds := docCommands(t, files)
	if len(cmds) < 20 {
		t.Fatalf("found %d kvlens command lines in %d documents; the extraction is broken", len(cmds), len(files))
	}
	// Flags that read a file read it while parsing: give the docs' example
	// files something to read.
	t.Chdir(t.TempDir())
	if err := os.WriteFile("my-gpu.json", []byte(`{"name":"my-gpu"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("booth.tour", []byte("50s concurrency 120 \"watch TTFT p95\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The docs' model directory is the fixture model.
	os.Mkdir("Llama-3.1-70B-Instruct", 0o755)
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(fixtureModel, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join("Llama-3.1-70B-Instruct", f), b, 0o644)
	}

	checkOnly = true
	defer func() { checkOnly = false }()
	for _, c := range cmds {
		t.Run(c.where, func(t *testing.T) {
			if status := run(c.args); status != 0 {
				t.Errorf("kvlens %s: exit status %d, want the line to parse", strings.Join(c.args, " "), status)
			}
		})
	}

	ran := 0
	for _, c := range cmds {
		if len(c.args) < 2 || !quick[c.args[0]+" "+c.args[1]] {
			continue
		}
		ran++
		t.Run("run "+c.where, func(t *testing.T) {
			out, err := kvlens(c.args...).CombinedOutput()
			if err != nil {
				t.Errorf("kvlens %s: %v\n%s", strings.Join(c.args, " "), err, out)
			}
		})
	}
	if ran == 0 {
		t.Error("no quick command line was run")
	}
}

// TestEveryServeFlagIsInTheDashboardDocs: the table "Flags of kvlens
// serve" in docs/dashboard.md has a row for each flag serve takes, so a new
// flag cannot go undocumented.
func TestEveryServeFlagIsInTheDashboardDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/dashboard.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "## Flags of `kvlens serve`")
	table, _, _ = strings.Cut(table, "\n## ")
	var cfg demo.Config
	var acc accessFlags
	serveFlags(&cfg, &acc, io.Discard).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(table, "\n| `--"+f.Name+"` |") {
			t.Errorf("docs/dashboard.md's table of serve's flags has no row for --%s", f.Name)
		}
	})
}

// TestEverySweepFlagIsInTheBaselinesDocs holds docs/baselines.md's table of
// sweep's flags to the flags kvlens sweep takes.
func TestEverySweepFlagIsInTheBaselinesDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/baselines.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "| flag | default | meaning |")
	table, _, _ = strings.Cut(table, "\n\n")
	o := sweepOptions{serve: demo.DefaultConfig()}
	sweepFlags(&o, io.Discard).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(table, "`--"+f.Name+"`") {
			t.Errorf("docs/baselines.md's table of sweep's flags does not name --%s", f.Name)
		}
	})
}

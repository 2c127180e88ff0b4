package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/demo"
	"github.com/kvlens/kvlens/sim"
)

// argLists returns every container's args in a rendered manifest
// (kustomize's output, as in deploy/testdata): the "- item" lines under an
// "args:" key, which kustomize writes at the key's own column.
func argLists(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lists [][]string
	var cur []string
	indent := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		depth := len(line) - len(trimmed)
		if indent >= 0 {
			if item, ok := strings.CutPrefix(trimmed, "- "); ok && depth == indent {
				cur = append(cur, strings.Trim(item, `'"`))
				continue
			}
			lists = append(lists, cur)
			cur, indent = nil, -1
		}
		if strings.TrimPrefix(trimmed, "- ") == "args:" {
			indent = depth
			if strings.HasPrefix(trimmed, "- ") {
				indent += 2
			}
		}
	}
	return lists
}

// expand replaces the $(VAR) references Kubernetes expands from env with
// the values the base ConfigMap gives them, and mounted paths with
// the files the manifests mount there.
func expand(arg string) string {
	return strings.NewReplacer(
		"$(KVLENS_SLO_TTFT)", "600ms", "$(KVLENS_SLO_TPOT)", "60ms", "$(KVLENS_ALLOW_HOST)", "kvlens.example.com",
		"=/config/starters", "=../../deploy/k8s/components/custom-starters/starters",
		// The fixture model stands in for the model volume.
		"=/models/Llama-3.1-70B-Instruct-FP8", "="+modelDir,
	).Replace(arg)
}

// TestManifestArgsParse checks that every kvlens command line in the
// rendered Kubernetes manifests is accepted by kvlens's own flag parsers, so
// the manifests cannot drift from the flags.
func TestManifestArgsParse(t *testing.T) {
	files, _ := filepath.Glob("../../deploy/testdata/*.yaml")
	if len(files) < 5 {
		t.Fatalf("found %d rendered overlays, want 5", len(files))
	}
	seen := map[string]int{}
	for _, file := range files {
		for _, args := range argLists(t, file) {
			if len(args) == 0 || (args[0] != "serve" && args[0] != "sim") {
				continue // another engine's container
			}
			for i := range args {
				args[i] = expand(args[i])
			}
			name := filepath.Base(file) + ": kvlens " + strings.Join(args, " ")
			t.Run(name, func(t *testing.T) {
				seen[args[0]]++
				switch args[0] {
				case "serve":
					cfg := demo.DefaultConfig()
					var acc accessFlags
					fs := serveFlags(&cfg, &acc, io.Discard)
					if err := fs.Parse(args[1:]); err != nil {
						t.Fatal(err)
					}
					if err := checkServe(cfg); err != nil {
						t.Fatal(err)
					}
				case "sim":
					cfg := sim.FleetConfig{}
					profile := sim.DefaultProfile
					var acc accessFlags
					fs := simFlags(&cfg, &profile, &acc)
					fs.SetOutput(io.Discard)
					if err := fs.Parse(args[1:]); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
	if seen["serve"] != 5 || seen["sim"] != 2 {
		t.Fatalf("checked %v; want kvlens serve in all 5 overlays and kvlens sim in the 2 simulated ones", seen)
	}
}

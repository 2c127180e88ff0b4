//go:build !race

// A policy's curve is minutes of virtual time, which the race detector
// slows tenfold; the sweeps are deterministic, so make unit runs this file
// without it.

package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/simulate"
)

var updateCurves = flag.Bool("update-curves", false, "measure every policy's stored curve again and write policycurves.json")

// TestPolicyCurvesComeFromTheSimulator holds policycurves.json to the
// simulator: it has every policy a lane can run at every slider level, and
// kv's curve, measured again alone, is the stored one to the last figure
// (a virtual-time sweep is deterministic). Measuring every policy again
// would take minutes, so the other policies' curves are held to their code
// instead: policycurves.sum is a fingerprint of the router's policy files,
// and a change to one of them fails here until the curves are measured
// again. With -update-curves it measures every policy and writes both
// files.
func TestPolicyCurvesComeFromTheSimulator(t *testing.T) {
	ctx := context.Background()
	stored, err := PolicyCurves()
	if *updateCurves {
		// The embedded file is the one this binary was built with: check
		// the new one instead.
		set, err := measurePolicyCurves(ctx, router.Policies)
		if err != nil {
			t.Fatal(err)
		}
		data, err := baselines.Encode(&set, baselines.FormatKvlens)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("policycurves.json", data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("policycurves.sum", []byte(policyCode(t)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		written, _, err := baselines.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		stored = &written
	}
	if err != nil && !*updateCurves {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("policycurves.sum")
	if err != nil {
		t.Fatal(err)
	}
	if got := policyCode(t); strings.TrimSpace(string(sum)) != got {
		t.Fatalf("the router's policy code changed since policycurves.json was measured (fingerprint %s, stored %s): measure the curves again with go test ./demo -run TestPolicyCurvesComeFromTheSimulator -update-curves", got, strings.TrimSpace(string(sum)))
	}
	sw, sc := policySweep("kv")
	for _, p := range router.Policies {
		if got := len(stored.Curve(p)); got != len(sw.Levels) {
			t.Errorf("%s: %d stored levels, want the slider's %d", p, got, len(sw.Levels))
		}
	}
	runs, err := simulate.Sweep(ctx, sw, sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Through the file's format, as the stored figures went.
	measured := sw.Result("", runs)
	data, err := baselines.Encode(&measured, baselines.FormatKvlens)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := baselines.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if want := stored.Curve("kv"); !reflect.DeepEqual(again.Curve("kv"), want) {
		t.Fatalf("kv's curve measured again differs from the stored one (run with -update-curves after a change to the simulator, the router or the load):\n%+v\nstored:\n%+v", again.Curve("kv"), want)
	}
}

// policyCode fingerprints what decides the policies' routes apart from what
// kv shares with them: the router's policy files and the helpers only
// policies use, as Go code without comments, so that a comment's edit
// asks for no new measurement.
func policyCode(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("../router/policy_*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../router/cost.go", "../router/sent.go", "../router/text.go")
	h := sha256.New()
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, f); err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(filepath.Base(name) + "\n"))
		h.Write(b.Bytes())
	}
	return hex.EncodeToString(h.Sum(nil))
}

package main

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullDisk fails every write after its first ok bytes, as a file on a full
// disk does: with the error os.File gives.
type fullDisk struct{ ok int }

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) <= d.ok {
		d.ok -= len(p)
		return len(p), nil
	}
	n := d.ok
	d.ok = 0
	return n, &fs.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.ENOSPC}
}

const noSpace = "kvlens: write standard output: no space left on device\n"

func TestFailedWriteToStdoutIsReportedAndExits1(t *testing.T) {
	db := filepath.Join(t.TempDir(), "kvlens.db")
	tests := []struct {
		name string
		args []string
		// ok is how many bytes standard output takes before it fails;
		// -1 never fails.
		ok         int
		wantStatus int
		wantStderr string
	}{
		// Each wrote its text to a full disk and exited 0.
		{"version on a full disk exits 1", []string{"version"}, 0, 1, noSpace},
		{"help on a full disk exits 1", []string{"help"}, 0, 1, noSpace},
		{"--help on a full disk exits 1", []string{"--help"}, 0, 1, noSpace},
		{"help version on a full disk exits 1", []string{"help", "version"}, 0, 1, noSpace},
		{"workloads on a full disk exits 1", []string{"workloads"}, 0, 1, noSpace},
		{"serve --workload help, which lists the suite, exits 1", []string{"serve", "--workload", "help"}, 0, 1, noSpace},
		{"sweep --workload help exits 1", []string{"sweep", "--workload", "help"}, 0, 1, noSpace},
		{"sim bench -h exits 1", []string{"sim", "bench", "-h"}, 0, 1, noSpace},
		// The first lines got out, the rest did not: still a failure.
		{"workloads cut off half-way exits 1", []string{"workloads"}, 200, 1, noSpace},
		// baselines list said "kvlens baselines list: write /dev/stdout: …";
		// now main says it, once, as for every command.
		{"baselines list says it once, as every command does", []string{"baselines", "list", "--db", db}, 0, 1, noSpace},
		// The sad path is not everything.
		{"version with room to write exits 0 and says nothing", []string{"version"}, -1, 0, ""},
		// A usage mistake keeps its status 2; standard output was never
		// written.
		{"a usage mistake keeps status 2", []string{"workloads", "extra"}, 0, 2, ""},
	}
	keep := stdout
	defer func() { stdout = keep }()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w bytes.Buffer
			stdout = &stdoutWriter{w: &w}
			if tt.ok >= 0 {
				stdout = &stdoutWriter{w: &fullDisk{ok: tt.ok}}
			}
			var stderr strings.Builder
			if got := finish(run(tt.args), stdout, &stderr); got != tt.wantStatus {
				t.Errorf("status %d, want %d", got, tt.wantStatus)
			}
			if stderr.String() != tt.wantStderr {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestStdoutWriterFailsEveryWriteAfterTheFirstFailure: a report is never
// written with its middle missing.
func TestStdoutWriterFailsEveryWriteAfterTheFirstFailure(t *testing.T) {
	var buf bytes.Buffer
	fails := true
	w := &stdoutWriter{w: writerFunc(func(p []byte) (int, error) {
		if fails {
			return 0, syscall.ENOSPC
		}
		return buf.Write(p)
	})}
	if _, err := w.Write([]byte("first")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("first write: %v, want ENOSPC", err)
	}
	fails = false
	if _, err := w.Write([]byte("second")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("second write, after room was made: %v, want the first error still", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("%q was written after the failure", buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestRealFullDiskExits1 runs kvlens with standard output on /dev/full,
// the device every write to fails with ENOSPC.
func TestRealFullDiskExits1(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer full.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "kvlens.db")
	const sixSweeps = "3×H200 · Llama 3.1 70B FP8 · TRT-LLM · Dynamo 0.9 (averaged, 6 sweeps)" // built in
	tests := []struct {
		name string
		args []string
	}{
		{"version", []string{"version"}},
		{"workloads", []string{"workloads"}},
		{"baselines show, a table of a built-in set", []string{"baselines", "show", "--db", db, sixSweeps}},
		{"baselines export to standard output", []string{"baselines", "export", "--db", db, sixSweeps}},
		{"trace gen to standard output", []string{"trace", "gen", "--sessions", "3"}},
		{"sim bench offline's table", []string{"sim", "bench", "offline", "--cases", "100/10", "--requests", "20"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := kvlens(tt.args...)
			cmd.Stdout = full
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
				t.Fatalf("exit %v, want status 1; stderr:\n%s", err, stderr.String())
			}
			if n := strings.Count(stderr.String(), noSpace); n != 1 {
				t.Fatalf("stderr says %q %d times, want once:\n%s", noSpace, n, stderr.String())
			}
			if strings.Contains(stderr.String(), "/dev/stdout") {
				t.Fatalf("stderr names /dev/stdout, which the operator never wrote:\n%s", stderr.String())
			}
		})
	}
}

// TestCommandsWriteStdoutOnlyThroughStdout holds package main's code to
// writing standard output through stdout, the writer whose failure main
// reports: fmt.Print* or os.Stdout would write past it, and a failed write
// would end in status 0 again.
func TestCommandsWriteStdoutOnlyThroughStdout(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			at := fset.Position(sel.Pos())
			switch {
			case pkg.Name == "fmt" && (sel.Sel.Name == "Print" || sel.Sel.Name == "Printf" || sel.Sel.Name == "Println"):
				t.Errorf("%s: fmt.%s writes to os.Stdout directly: use fmt.F%s(stdout, …)", at, sel.Sel.Name, strings.ToLower(sel.Sel.Name[:1])+sel.Sel.Name[1:])
			case pkg.Name == "os" && sel.Sel.Name == "Stdout" && !(name == "out.go" && isStdoutDecl(f, sel)):
				t.Errorf("%s: os.Stdout directly: use stdout, whose failed writes main reports", at)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no file of package main checked")
	}
}

// isStdoutDecl says that sel is in the declaration of stdout itself.
func isStdoutDecl(f *ast.File, sel *ast.SelectorExpr) bool {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if len(v.Names) == 1 && v.Names[0].Name == "stdout" && v.Pos() <= sel.Pos() && sel.End() <= v.End() {
				return true
			}
		}
	}
	return false
}

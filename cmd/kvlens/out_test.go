package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWritableLeavesNoTrace(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.md")
	if err := os.WriteFile(kept, []byte("an earlier report"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "new", "report.json")
	if err := writable(kept, fresh); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(kept); string(b) != "an earlier report" {
		t.Fatalf("an existing report reads %q after the check, want it untouched", b)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("the check left %s behind (%v)", fresh, err)
	}
	if err := writable(filepath.Join(kept, "under-a-file.png")); err == nil {
		t.Fatal("a path under a file passed the check")
	}
}

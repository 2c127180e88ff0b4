package deploy

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildLine returns the Dockerfile's `RUN CGO_ENABLED=0 go build ...` step,
// without RUN, so the test runs exactly what the image build runs.
func buildLine(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "RUN "); ok && strings.HasPrefix(line, "CGO_ENABLED=0 go build ") {
			return line
		}
	}
	t.Fatal("the Dockerfile has no `RUN CGO_ENABLED=0 go build` step")
	return ""
}

func TestDockerfileBuildsAStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary")
	}
	line := buildLine(t)
	out := filepath.Join(t.TempDir(), "kvlens")
	if !strings.Contains(line, " -o /out/kvlens ") {
		t.Fatalf("build step %q does not write /out/kvlens", line)
	}
	cmd := exec.Command("sh", "-c", strings.Replace(line, " -o /out/kvlens ", " -o "+out+" ", 1))
	cmd.Dir = ".."
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, msg)
	}
	bin, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary asks for a dynamic loader (PT_INTERP): it is not static")
		}
	}
	if libs, _ := bin.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary links shared libraries: %v", libs)
	}
}

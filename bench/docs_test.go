package bench

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/sim"
)

// TestTheREADMEsWinnersComeFromTheFullGrid holds the README's table of
// winners to docs/routing-bench-full.json, the full grid: each cell must
// name the policy with the lowest mean TTFT p95 at that workload and
// level, so the table cannot drift from the runs it claims to show, and
// the grid must have run the default engine profile, so that a change to
// the simulator cannot leave the table describing another one.
func TestTheREADMEsWinnersComeFromTheFullGrid(t *testing.T) {
	f, err := os.Open("../docs/routing-bench-full.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := sim.MustProfile(sim.DefaultProfile); !reflect.DeepEqual(res.Grid.Profile, want) {
		t.Fatalf("docs/routing-bench-full.json ran profile %+v, not the default %+v: run the full grid again", res.Grid.Profile, want)
	}
	winner := map[string]string{} // "workload level" -> policy
	for _, rw := range res.rows() {
		winner[rw.workload+" "+strconv.Itoa(rw.level)] = rw.cells[rw.winnerTTFT()].Policy
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var levels []string
	checked := 0
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		switch {
		case len(cells) < 2:
			continue
		case cells[0] == "workload":
			levels = cells[1:]
			continue
		case levels == nil || strings.HasPrefix(cells[0], ":--"):
			continue
		}
		if _, ok := winner[cells[0]+" "+levels[0]]; !ok {
			levels = nil // the table has ended
			continue
		}
		for i, got := range cells[1:] {
			key := cells[0] + " " + levels[i]
			if want := winner[key]; got != want {
				t.Errorf("README: %s is won by %s, but the full grid's lowest TTFT p95 is %s's", key, got, want)
			}
			checked++
		}
	}
	if checked != 40 {
		t.Fatalf("checked %d of the README's 40 winner cells: its table was not found whole", checked)
	}
}

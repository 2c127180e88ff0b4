package store

import (
	"context"
	"slices"
	"testing"
)

func TestUnfinishedRunsListsResumableRunsNewestFirst(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	statuses := []string{RunRunning, RunDone, RunFailed, RunRunning} // runs 1 to 4
	for i, st := range statuses {
		id, err := db.CreateRun(ctx, []byte(`{}`), 2)
		if err != nil {
			t.Fatal(err)
		}
		if id != int64(i+1) {
			t.Fatalf("run %d got id %d", i+1, id)
		}
		if st != RunRunning {
			if err := db.FinishRun(ctx, id, st, "", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	runs, err := db.UnfinishedRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"running and failed runs are listed, newest first", slices.Equal(ids, []int64{4, 3, 1})},
		{"a done run is not listed", !slices.Contains(ids, 2)},
		{"each run carries its status", len(runs) == 3 && runs[1].Status == RunFailed && runs[0].Status == RunRunning},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("not so that %s: %v", tt.name, ids)
		}
	}

	// Sad path: an empty store lists none, without an error.
	empty, _ := open(t)
	if runs, err := empty.UnfinishedRuns(ctx); err != nil || len(runs) != 0 {
		t.Fatalf("empty store: %v, %v", runs, err)
	}
}

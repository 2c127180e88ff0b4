package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kvlens/kvlens/baselines"
	"github.com/kvlens/kvlens/store"
)

// chooseBaseline returns the set the dashboard compares with: name from db,
// the store the demo opened at --db, or from the built-in sets when there
// is none (openStore has warned why, when one was asked for). An empty
// name is the seeds' 6-sweep average, the first built-in set.
func chooseBaseline(db *store.DB, name string) (*baselines.Set, error) {
	builtin, err := baselines.Builtin()
	if err != nil {
		return nil, err
	}
	if name == "" && len(builtin) > 0 {
		name = builtin[0].Name
	}
	if db != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		set, err := db.Set(ctx, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("--baseline %q: no such set in %s (list them with kvlens baselines list)", name, db.Path())
		case err != nil:
			fmt.Fprintf(os.Stderr, "kvlens: warning: read the baseline set %q from %s: %v; using the built-in baselines\n", name, db.Path(), err)
		default:
			set.Sort()
			return &set, nil
		}
	}
	for i := range builtin {
		if builtin[i].Name == name {
			builtin[i].Sort()
			return &builtin[i], nil
		}
	}
	return nil, fmt.Errorf("--baseline %q: no such built-in set", name)
}

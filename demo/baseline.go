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

// chooseBaseline returns the set the dashboard compares with: name from the
// store at dbPath, or from the built-in sets when dbPath is empty or the
// store fails to open (with a one-line warning). An empty name is the
// seeds' 6-sweep average, the first built-in set. imported names the
// built-in sets that opening the store added to it.
func chooseBaseline(dbPath, name string) (set *baselines.Set, imported []string, err error) {
	builtin, err := baselines.Builtin()
	if err != nil {
		return nil, nil, err
	}
	if name == "" && len(builtin) > 0 {
		name = builtin[0].Name
	}
	if dbPath != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		db, err := store.Open(ctx, dbPath)
		if err == nil {
			defer db.Close()
			imported = db.Imported()
			set, err := db.Set(ctx, name)
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil, fmt.Errorf("--baseline %q: no such set in %s (list them with kvlens baselines list)", name, dbPath)
			}
			if err == nil {
				set.Sort()
				return &set, imported, nil
			}
		}
		fmt.Fprintf(os.Stderr, "kvlens: warning: %v; using the built-in baselines\n", err)
	}
	for i := range builtin {
		if builtin[i].Name == name {
			builtin[i].Sort()
			return &builtin[i], imported, nil
		}
	}
	return nil, nil, fmt.Errorf("--baseline %q: no such built-in set", name)
}

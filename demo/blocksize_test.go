package demo

import (
	"context"
	"testing"

	"github.com/kvlens/kvlens/router"
	"github.com/kvlens/kvlens/sim"
)

// TestRoutersIndexTheSimulatedFleetsBlocks: serve --sim-profile
// a100-qwen3-8b (64-token blocks) under the router's default 32 dropped
// every block its workers stored as invalid, and kv routed blind; so did a
// sweep over it, which has no --block-size.
func TestRoutersIndexTheSimulatedFleetsBlocks(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		ab      []string
	}{
		{"one view over 64-token blocks", "a100-qwen3-8b", nil},
		{"both A/B lanes over 64-token blocks", "a100-qwen3-8b", []string{"round_robin", "kv"}},
		{"the default profile's 32-token blocks", sim.DefaultProfile, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Addr = "127.0.0.1:0"
			cfg.NoStart = true
			cfg.DB, cfg.Record = "", false
			cfg.SimProfile = sim.MustProfile(tt.profile)
			cfg.Router.BlockSize = router.DefaultBlockSize
			cfg.AB = tt.ab
			d, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			if len(d.lanes) != max(1, len(tt.ab)) {
				t.Fatalf("%d lanes, want %d", len(d.lanes), max(1, len(tt.ab)))
			}
			for i, l := range d.lanes {
				if got, want := l.proxy.Router().BlockSize(), cfg.SimProfile.BlockSize; got != want {
					t.Errorf("lane %d indexes blocks of %d tokens, its workers store %d", i, got, want)
				}
			}
		})
	}
}

package demo

import (
	"testing"

	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

func TestPolicyCurvesAreDrawnOnlyForTheFleetAndLoadTheyDescribe(t *testing.T) {
	think, err := loadgen.LookupWorkload("think")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want bool
	}{
		{"the default demo", func(*Config) {}, true},
		{"another seed plays the same load", func(c *Config) { c.Load.Seed = 7 }, true},
		{"another concurrency is on the curve", func(c *Config) { c.Load.Concurrency = 140 }, true},
		{"real workers are not the simulated fleet", func(c *Config) { c.Workers = []string{"http://10.0.0.1:8000"} }, false},
		{"a target measures someone else's router", func(c *Config) { c.Target = "http://frontend:8000/v1" }, false},
		{"another workload is another load", func(c *Config) { think.Apply(&c.Load) }, false},
		{"more workers are another fleet", func(c *Config) { c.SimWorkers = 8 }, false},
		{"another engine profile is another fleet", func(c *Config) {
			c.SimProfile = sim.MustProfile(sim.DefaultProfile)
			c.SimProfile.MaxBatchSize = 32
		}, false},
		{"custom starters are another load", func(c *Config) { c.Load.Starters = loadgen.BuiltinStarters()[:2] }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.edit(&cfg)
			if got := PolicyCurvesFit(cfg); got != tt.want {
				t.Fatalf("the stored policy curves fit: %v, want %v", got, tt.want)
			}
		})
	}
}

package demo

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesName matches kvlens's own series names in a PromQL expression.
var seriesName = regexp.MustCompile(`\b(loadgen|kvlens)_[a-z_]+\b`)

// family strips the suffixes Prometheus adds to histogram and summary series.
func family(name string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, suf); ok {
			return f
		}
	}
	return name
}

// TestGrafanaDashboardQueriesExistingSeries checks every series the Grafana
// dashboard in deploy/grafana queries is registered by a running kvlens, so
// a renamed metric cannot leave a panel silently empty. A name is
// registered when registering another collector under it fails.
func TestGrafanaDashboardQueriesExistingSeries(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana/kvlens.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/kvlens.json: %v", err)
	}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NoStart = true
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.Close(ctx)
	}()

	checked := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			names := seriesName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %q queries no kvlens series", p.Title, tg.Expr)
			}
			for _, n := range names {
				probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: family(n), Help: "probe"})
				if err := d.Metrics.Register(probe); err == nil {
					d.Metrics.Unregister(probe)
					t.Errorf("panel %q queries %s, which kvlens does not export", p.Title, n)
				}
				checked++
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d series checked", checked)
	}
}

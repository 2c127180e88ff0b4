package components

import (
	"strings"
	"testing"
)

func TestWorkersPanelShowsEachEventStream(t *testing.T) {
	workers := WorkersData{Lanes: []WorkerLane{{Rows: []WorkerRow{
		{Name: "connected", Healthy: true, Queued: -1, KVUsage: -1, HitRate: -1, Share: -1,
			Events: &EventsData{State: "connected", LastEventAge: 2.4, Endpoint: "tcp://a:5557"}},
		{Name: "warming", Healthy: true, Queued: -1, KVUsage: -1, HitRate: -1, Share: -1,
			Events: &EventsData{State: "connected", Warming: true, LastEventAge: 300, Endpoint: "tcp://b:5557"}},
		{Name: "listening", Healthy: true, Queued: -1, KVUsage: -1, HitRate: -1, Share: -1,
			Events: &EventsData{State: "listening", LastEventAge: -1, Endpoint: "tcp://*:5557"}},
		{Name: "dropping", Healthy: true, Queued: -1, KVUsage: -1, HitRate: -1, Share: -1,
			Events: &EventsData{State: "connected", LastEventAge: 0.2, Endpoint: "tcp://d:5557",
				Dropped: map[string]uint64{"unknown_parent": 40, "index_full": 2, "other_tier": 0}}},
		{Name: "none", Healthy: true, Queued: -1, KVUsage: -1, HitRate: -1, Share: -1},
	}}}}
	doc := render(t, Workers(workers))
	row := func(i int) string { return `[data-testid=worker-row]:nth-child(` + itoa(i) + `) ` }
	tests := []struct {
		name string
		sel  string
		// want is the selection's text, spaces ignored; "" means absent.
		want string
	}{
		{"a connected stream shows its state and the age of its last event", row(1) + `[data-testid=worker-events]`, "connected · 2 s ago"},
		{"a warming stream says so", row(2) + `[data-testid=worker-events-state]`, "connected, warming"},
		{"an old last event is given in minutes", row(2) + `[data-testid=worker-events-age]`, "5 min ago"},
		{"a bound socket with no publisher yet is listening, with no events yet", row(3) + `[data-testid=worker-events]`, "listening · no events yet"},
		{"dropped blocks are counted over every reason", row(4) + `[data-testid=worker-events-dropped]`, "42 dropped"},
		{"a stream that dropped nothing shows no drop count", row(1) + `[data-testid=worker-events-dropped]`, ""},
		{"a worker without events says the index predicts it", row(5) + `[data-testid=worker-events]`, "none (predicted)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := doc.Find(tt.sel)
			if tt.want == "" {
				if sel.Length() != 0 {
					t.Fatalf("%s is present: %q", tt.sel, sel.Text())
				}
				return
			}
			if got := strings.Join(strings.Fields(sel.Text()), ""); got != strings.Join(strings.Fields(tt.want), "") {
				t.Fatalf("%s = %q, want %q", tt.sel, sel.Text(), tt.want)
			}
		})
	}
	// The tooltip names the endpoint and the reasons, in order.
	if title, _ := doc.Find(row(4) + `[data-testid=worker-events]`).Attr("title"); title != "KV events from tcp://d:5557; dropped blocks: index_full 2, unknown_parent 40" {
		t.Fatalf("title = %q", title)
	}
	// Only a connected, caught-up stream is shown without a warning.
	for i, want := range []bool{false, true, true, false, false} {
		cls, _ := doc.Find(row(i+1) + `[data-testid=worker-events]`).Attr("class")
		if strings.Contains(cls, "notice") != want {
			t.Errorf("row %d class %q, warning wanted %v", i+1, cls, want)
		}
	}
}

func TestEventAge(t *testing.T) {
	tests := []struct {
		name string
		sec  float64
		want string
	}{
		{"before the first event there is no age", -1, "no events yet"},
		{"under two minutes is in seconds", 119.4, "119 s ago"},
		{"under two hours is in minutes", 7000, "117 min ago"},
		{"longer is in hours", 7200, "2 h ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eventAge(tt.sec); got != tt.want {
				t.Fatalf("eventAge(%v) = %q, want %q", tt.sec, got, tt.want)
			}
		})
	}
}

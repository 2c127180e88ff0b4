package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/kvlens/kvlens/router"
)

// TestWorkersPanelShowsTheRoutersEventStreams checks the panel is fed from
// each WorkerState's EventStream.
func TestWorkersPanelShowsTheRoutersEventStreams(t *testing.T) {
	rt := newFakeRouter("kv")
	rt.workers = []router.WorkerState{
		{Name: "a", Healthy: true, EventStream: &router.StreamState{State: "connected", LastEventAgeSeconds: 3,
			DroppedBlocks: map[string]uint64{"unknown_parent": 7}}},
		{Name: "b", Healthy: true},
	}
	s := New(&fakeLoad{target: 60}, rt, testOptions())
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	cells := doc.Find(`[data-testid=worker-events]`)
	tests := []struct {
		name string
		i    int
		want string
	}{
		{"a worker with a stream shows its state, age and drops", 0, "connected · 3 s ago · 7 dropped"},
		{"a worker without one shows the index predicts it", 1, "none (predicted)"},
	}
	if cells.Length() != len(tests) {
		t.Fatalf("%d event cells, want %d", cells.Length(), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(strings.Fields(cells.Eq(tt.i).Text()), " "); got != tt.want {
				t.Fatalf("cell = %q, want %q", got, tt.want)
			}
		})
	}
}

package recording

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/store"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// frames is a short session as the dashboard records it: the baseline it
// compares with, then three seconds of snapshots, the first before any
// request finished, the third carrying the mode switch made since the
// second and followed by the tiles shown at that second; then a second of
// the A/B view, whose lane B is kv.
var frames = []store.Frame{
	{T: time.Unix(1_700_000_000, 0), Kind: "baseline", Body: []byte(`{"name":"seed 3xH200","curves":{"kv":[{"c":60,"ttft_p95_ms":372}]},"names":{"kv":"Dynamo 0.9 KV router"},"slo_ttft_ms":600,"slo_tpot_ms":60}`)},
	{T: time.Unix(1_700_000_000, 0), Kind: "snapshot", Body: []byte(`{"type":"snapshot","mode":"round_robin","points":[{"t":1700000000,"ttft_p50":null,"ttft_p95":null,"tpot_p50":null,"tpot_p95":null,"tops":null,"rps":null,"error_pct":null,"target":60,"live":12}]}`)},
	{T: time.Unix(1_700_000_001, 0), Kind: "snapshot", Body: []byte(`{"type":"snapshot","mode":"round_robin","points":[{"t":1700000001,"ttft_p50":231.4,"ttft_p95":402.9,"tpot_p50":25.1,"tpot_p95":27.3,"tops":1520.5,"rps":1.875,"error_pct":0.5,"target":60,"live":60}]}`)},
	{T: time.Unix(1_700_000_002, 0), Kind: "snapshot", Body: []byte(`{"type":"snapshot","mode":"kv","points":[{"t":1700000002,"ttft_p50":228.0,"ttft_p95":398.5,"tpot_p50":25.0,"tpot_p95":27.1,"tops":1533.0,"rps":1.9,"error_pct":0,"target":60,"live":60}],"marks":[{"t":1700000001,"kind":"mode","label":"KV-aware"}]}`)},
	{T: time.Unix(1_700_000_002, 0), Kind: "panels", Body: []byte(`{"t":1700000002,"tiles":{"tiles":[{"id":"ttft-p95","label":"TTFT p95","value":"399 ms","baseline":"base 372 ms","delta":"+7%","level":"ok"}],"compare":"Live KV-aware · baseline"}}`)},
	{T: time.Unix(1_700_000_003, 0), Kind: "snapshot", Body: []byte(`{"type":"snapshot","mode":"round_robin","points":[{"t":1700000003,"ttft_p50":301.0,"ttft_p95":561.0,"tpot_p50":28.0,"tpot_p95":30.0,"tops":2098.0,"rps":2.55,"error_pct":0,"target":60,"live":60}],"lanes":[{"mode":"kv","points":[{"t":1700000003,"ttft_p50":239.0,"ttft_p95":372.0,"tpot_p50":25.0,"tpot_p95":26.0,"tops":2306.0,"rps":2.8,"error_pct":0,"target":60,"live":60}]}]}`)},
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n%s", path, got)
	}
}

func TestExports(t *testing.T) {
	rec := store.Recording{ID: 7, Name: "booth", Config: []byte(`{"policy":"round_robin"}`), Started: time.Unix(1_700_000_000, 0), Ended: time.Unix(1_700_000_002, 0)}
	var js, csv bytes.Buffer
	if err := WriteJSON(&js, rec, frames); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&csv, frames); err != nil {
		t.Fatal(err)
	}
	golden(t, "export.golden.json", js.Bytes())
	golden(t, "export.golden.csv", csv.Bytes())
}

func TestWriteCSVNamesABadFrame(t *testing.T) {
	bad := []store.Frame{{T: time.Unix(1_700_000_000, 0), Kind: "snapshot", Body: []byte(`{"points":`)}}
	err := WriteCSV(&bytes.Buffer{}, bad)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("frame 0 (snapshot at 2023-11-14T22:13:20Z)")) {
		t.Fatalf("err = %v", err)
	}
}

func TestRecorderWritesFramesAndEnds(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	old, _ := db.CreateRecording(ctx, "last week", []byte(`{}`))
	r, err := Start(ctx, db, clock.Real, "now", []byte(`{}`), time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Recording(ctx, old); err == nil {
		t.Error("a recording older than the retention survived Start")
	}
	before := time.Now()
	for _, f := range frames {
		r.Add(f.Kind, f.Body)
	}
	after := time.Now()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(runCtx); close(done) }()
	cancel() // ending the session flushes what is buffered and ends it
	<-done
	got, err := db.RecordingFrames(ctx, r.ID())
	if err != nil || len(got) != len(frames) {
		t.Fatalf("%d frames, %v; want %d", len(got), err, len(frames))
	}
	for i, f := range got {
		// Frames are stamped when added, to the store's precision.
		if f.Kind != frames[i].Kind || !bytes.Equal(f.Body, frames[i].Body) ||
			f.T.Before(before.Truncate(time.Millisecond)) || f.T.After(after) || (i > 0 && f.T.Before(got[i-1].T)) {
			t.Errorf("frame %d: %s at %v %s; want %s between %v and %v, in order: %s", i, f.Kind, f.T, f.Body, frames[i].Kind, before, after, frames[i].Body)
		}
	}
	if rec, _ := db.Recording(ctx, r.ID()); rec.Ended.IsZero() {
		t.Fatal("the recording was not marked ended")
	}
}

func TestLengthTellsACutOffRecordingFromALiveOne(t *testing.T) {
	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	now := start.Add(2 * time.Hour)
	for _, tt := range []struct {
		name    string
		rec     store.Recording
		current bool
		want    string
	}{
		{"an ended recording gives its length", store.Recording{Started: start, Ended: start.Add(90 * time.Second), Frames: 180, LastFrame: start.Add(89 * time.Second)}, false, "1m30s"},
		{"an ended recording whose clock was set back reads 0s, not a negative length", store.Recording{Started: start, Ended: start.Add(-time.Hour), Frames: 3, LastFrame: start}, false, "0s"},
		{"this process's recording is recording now", store.Recording{Started: start, LastFrame: now}, true, "recording now"},
		{"a recording with a fresh frame is another kvlens's", store.Recording{Started: start, Frames: 14000, LastFrame: now.Add(-15 * time.Second)}, false, "recording (another kvlens)"},
		{"a recording silent past Quiet was cut off at its last frame", store.Recording{Started: start, Frames: 1500, LastFrame: start.Add(12*time.Minute + 30*time.Second)}, false, "cut off after 12m30s (no end recorded)"},
		{"an ended recording with no frame has nothing, whatever its session's length", store.Recording{Started: start, Ended: start.Add(12 * time.Second)}, false, "nothing recorded"},
		{"a recording with no frame, started long ago, was cut off with nothing", store.Recording{Started: start}, false, "nothing recorded (cut off: no end recorded)"},
		{"a recording with no frame, started a moment ago, is going on", store.Recording{Started: now.Add(-5 * time.Second)}, false, "recording (another kvlens)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Length(tt.rec, tt.current, now); got != tt.want {
				t.Errorf("Length = %q, want %q", got, tt.want)
			}
		})
	}
}

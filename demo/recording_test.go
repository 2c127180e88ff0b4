package demo

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/store"
)

func TestSessionIsRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvlens.db")
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB, cfg.Record = path, true
	cfg.Load.MaxTokens = 20
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Recording == 0 {
		t.Fatal("the session is not being recorded")
	}
	time.Sleep(3500 * time.Millisecond) // three 1 Hz frames
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}

	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec, err := db.Recording(context.Background(), d.Recording)
	if err != nil {
		t.Fatal(err)
	}
	frames, _ := db.RecordingFrames(context.Background(), d.Recording)
	if len(frames) < 3 || rec.Ended.IsZero() {
		t.Fatalf("recording %+v with %d frames; want at least 3 and an end", rec, len(frames))
	}
	if !strings.Contains(string(frames[0].Body), `"type":"snapshot"`) || !strings.Contains(string(rec.Config), `"policy":"round_robin"`) {
		t.Fatalf("first frame %.120s, config %s", frames[0].Body, rec.Config)
	}
}

func TestUnwritableStoreDoesNotStopTheDemo(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB, cfg.Record = "/proc/kvlens/cannot/be/here.db", true
	cfg.NoStart = true
	d, err := Start(cfg)
	if err != nil {
		t.Fatalf("the demo refused to start over an unusable store: %v", err)
	}
	defer d.Close(context.Background())
	if d.Recording != 0 {
		t.Fatal("claims to record into a store that cannot be opened")
	}
}

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	// The baseline compared with, then each second's chart frame and tiles.
	if frames[0].Kind != "baseline" || !strings.Contains(string(frames[0].Body), `"curves":{`) {
		t.Fatalf("first frame is %s %.120s; want the baseline", frames[0].Kind, frames[0].Body)
	}
	if frames[1].Kind != "snapshot" || !strings.Contains(string(frames[1].Body), `"type":"snapshot"`) || !strings.Contains(string(rec.Config), `"policy":"round_robin"`) {
		t.Fatalf("second frame %s %.120s, config %s", frames[1].Kind, frames[1].Body, rec.Config)
	}
	if frames[2].Kind != "panels" || !strings.Contains(string(frames[2].Body), `"id":"ttft-p95"`) {
		t.Fatalf("third frame %s %.120s; want the first second's tiles", frames[2].Kind, frames[2].Body)
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

func TestFlushRecordingMakesFramesReplayable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB, cfg.Record = filepath.Join(t.TempDir(), "kvlens.db"), true
	cfg.Load.MaxTokens = 20
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	time.Sleep(2500 * time.Millisecond) // two 1 Hz frames, well before the 10 s flush
	if err := d.FlushRecording(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(fmt.Sprintf("%s/recordings/%d/frames", d.URL, d.Recording))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Frames []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET frames = %d (%v)", resp.StatusCode, err)
	}
	if len(got.Frames) < 2 {
		t.Fatalf("the dashboard replays %d frames after a flush; want at least 2", len(got.Frames))
	}
}

func TestRecordingsPageSaysWhyItIsOff(t *testing.T) {
	tests := []struct {
		name   string
		db     string
		record bool
		want   string
	}{
		{"without a store it names --db", "", true, "Recordings are off: kvlens runs without a store (--db)"},
		{"with recording turned off it names --record=false", "kvlens.db", false, "This session is not recorded: it was started with --record=false."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Addr = "127.0.0.1:0"
			cfg.NoStart = true
			cfg.Record = tt.record
			if tt.db != "" {
				cfg.DB = filepath.Join(t.TempDir(), tt.db)
			}
			d, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			resp, err := http.Get(d.URL + "/recordings")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), tt.want) {
				t.Fatalf("the Recordings page does not say %q:\n%s", tt.want, body)
			}
		})
	}
}

// TestEarlierRecordingsStayOpenUnderRecordFalse records a session, then
// starts again on the same store with --record=false: the Recordings page
// lists the first session beside the note, and its frames replay.
func TestEarlierRecordingsStayOpenUnderRecordFalse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvlens.db")
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DB, cfg.Record, cfg.NoStart = path, true, true
	first, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a 1 Hz frame
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if first.Recording == 0 {
		t.Fatal("the first session was not recorded")
	}

	cfg.Record = false
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if d.Recording != 0 {
		t.Fatalf("--record=false, yet the session is recording %d", d.Recording)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(d.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, page := get("/recordings")
	row := fmt.Sprintf(`data-id="%d"`, first.Recording)
	if code != 200 || !strings.Contains(page, "This session is not recorded: it was started with --record=false. Earlier sessions are listed below.") || !strings.Contains(page, row) {
		t.Fatalf("GET /recordings = %d; want the note and the row %s:\n%s", code, row, page)
	}
	if code, frames := get(fmt.Sprintf("/recordings/%d/frames", first.Recording)); code != 200 || !strings.Contains(frames, `"snapshot"`) {
		t.Fatalf("GET the first session's frames = %d %.200s; want its snapshots", code, frames)
	}
}

// TestAColdStartSettlesLikeAnyChange starts the demo cold (no warm-up, as
// against real workers): the first window waits for the requests in
// flight, as after any change, instead of reporting its first answers, the
// quickest ones, as steady figures.
func TestAColdStartSettlesLikeAnyChange(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	time.Sleep(2 * time.Second) // an answer of 640 tokens or more takes well over 10 s
	w := d.Gen.Snapshot().Window
	if w.Covered < time.Second || w.Answered != 0 {
		t.Fatalf("2 s after a cold start the window covers %v and its answers' figures %v; want them held back (0) until the first requests end", w.Covered, w.Answered)
	}
}

// TestReadyzFailsWithoutAHealthyWorker: /readyz is 503, naming why, while
// no worker of the fleet is healthy, and 200 for the simulated fleet.
func TestReadyzFailsWithoutAHealthyWorker(t *testing.T) {
	tests := []struct {
		name     string
		workers  []string
		wantCode int
		want     string
	}{
		{"a worker nobody answers at", []string{"a=http://127.0.0.1:1"}, 503, "not ready: no worker is healthy (0 of 1)"},
		{"the simulated fleet", nil, 200, "ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Addr, cfg.NoStart, cfg.Workers = "127.0.0.1:0", true, tt.workers
			d, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			var code int
			var body []byte
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				resp, err := http.Get(d.URL + "/readyz")
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if code = resp.StatusCode; code == tt.wantCode {
					break
				}
			}
			if code != tt.wantCode || !strings.HasPrefix(string(body), tt.want) {
				t.Fatalf("/readyz = %d %q, want %d %q", code, body, tt.wantCode, tt.want)
			}
		})
	}
}

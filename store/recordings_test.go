package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestRecordingsRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	id, err := db.CreateRecording(ctx, "booth day 1", []byte(`{"policy":"kv"}`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000)
	batch := func(from, n int) []Frame {
		var fs []Frame
		for i := from; i < from+n; i++ {
			fs = append(fs, Frame{T: t0.Add(time.Duration(i) * time.Second), Kind: "snapshot", Body: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		}
		return fs
	}
	if err := db.AppendFrames(ctx, id, batch(0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendFrames(ctx, id, append(batch(3, 2), Frame{T: t0.Add(5 * time.Second), Kind: "mode", Body: []byte(`{"to":"kv"}`)})); err != nil {
		t.Fatal(err)
	}
	if err := db.EndRecording(ctx, id, t0.Add(6*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := db.RecordingFrames(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"every frame of both batches is kept", len(got) == 6},
		{"frames come back in the order they were appended", len(got) == 6 && string(got[4].Body) == `{"i":4}` && got[5].Kind == "mode"},
		{"times survive at millisecond precision", len(got) == 6 && got[2].T.Equal(t0.Add(2*time.Second))},
		{"one frame read by its number is the one at that place in the list", func() bool {
			f, err := db.RecordingFrame(ctx, id, 4)
			return err == nil && string(f.Body) == `{"i":4}` && f.Kind == "snapshot" && f.T.Equal(t0.Add(4*time.Second))
		}()},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("not so that %s: %+v", tt.name, got)
		}
	}
	r, err := db.Recording(ctx, id)
	if err != nil || r.Frames != 6 || r.Name != "booth day 1" || r.Ended.IsZero() || r.Bytes == 0 {
		t.Fatalf("summary = %+v, %v", r, err)
	}
}

func TestRecordingsSadPaths(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	if _, err := db.RecordingFrames(ctx, 42); !errors.Is(err, ErrNoRecording) {
		t.Errorf("frames of a missing recording: %v", err)
	}
	if err := db.DeleteRecording(ctx, 42); !errors.Is(err, ErrNoRecording) {
		t.Errorf("deleting a missing recording: %v", err)
	}
	id, _ := db.CreateRecording(ctx, "short", nil)
	db.AppendFrames(ctx, id, []Frame{{T: time.Now(), Kind: "snapshot", Body: []byte(`{}`)}})
	for _, seq := range []int64{1, -1} {
		if _, err := db.RecordingFrame(ctx, id, seq); !errors.Is(err, ErrNoFrame) {
			t.Errorf("frame %d of a one-frame recording: %v", seq, err)
		}
	}
}

func TestPruneRecordingsKeepsRecentAndCurrent(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	var ids []int64
	for i := range 3 {
		id, _ := db.CreateRecording(ctx, fmt.Sprint("r", i), []byte(`{}`))
		db.AppendFrames(ctx, id, []Frame{{T: time.Now(), Kind: "snapshot", Body: []byte(`{}`)}})
		ids = append(ids, id)
	}
	// Everything started before now+1h: all are old, but ids[2] is the one
	// being recorded and must stay.
	n, err := db.PruneRecordings(ctx, time.Now().Add(time.Hour), ids[2])
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	left, _ := db.Recordings(ctx)
	if len(left) != 1 || left[0].ID != ids[2] {
		t.Fatalf("left %+v, want only the current recording", left)
	}
	if n, _ := db.PruneRecordings(ctx, time.Now().Add(-time.Hour), 0); n != 0 {
		t.Fatalf("a cutoff in the past pruned %d", n)
	}
}

// recorder is the crash test's child: it appends batches of 10 frames to a
// new recording, as the live recorder does, and reports each commit.
func recorder(path string) int {
	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	id, err := db.CreateRecording(ctx, "crash", []byte(`{}`))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("recording", id)
	for b := 1; ; b++ {
		var fs []Frame
		for i := range 10 {
			fs = append(fs, Frame{T: time.Now(), Kind: "snapshot", Body: []byte(fmt.Sprintf(`{"batch":%d,"i":%d}`, b, i))})
		}
		if err := db.AppendFrames(ctx, id, fs); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("appended", b)
		time.Sleep(time.Millisecond)
	}
}

func TestKillDuringRecordingKeepsEveryFinishedBatch(t *testing.T) {
	_, path := open(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KVLENS_STORE_RECORDER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	var id int64
	batches := 0
	for lines.Scan() {
		line := lines.Text()
		if _, err := fmt.Sscanf(line, "recording %d", &id); err == nil {
			continue
		}
		if _, err := fmt.Sscanf(line, "appended %d", &batches); err != nil {
			t.Fatalf("child said %q", line)
		}
		if batches == 25 {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopening after kill -9: %v", err)
	}
	defer db.Close()
	if v, err := db.Check(ctx); err != nil || v != "ok" {
		t.Fatalf("integrity check: %q, %v", v, err)
	}
	frames, err := db.RecordingFrames(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// Every batch the child reported is there; a batch in flight at the kill
	// is either whole or absent, never torn.
	if len(frames) < 10*batches || len(frames)%10 != 0 {
		t.Fatalf("%d frames after the child reported %d batches of 10", len(frames), batches)
	}
	r, _ := db.Recording(ctx, id)
	if !r.Ended.IsZero() {
		t.Fatal("a killed recording claims to have ended")
	}
}

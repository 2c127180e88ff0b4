package sim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/blockhash"
	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/kvevents"
	"github.com/kvlens/kvlens/tokenizer"
)

func TestFleetPublishesKVEventsOverZMQ(t *testing.T) {
	f, err := StartFleet(FleetConfig{Count: 2, Profile: fast(), EventsBind: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if len(f.EventEndpoints) != 2 || f.EventEndpoints[0] == f.EventEndpoints[1] {
		t.Fatalf("event endpoints = %v, want one per worker", f.EventEndpoints)
	}

	stored := make(chan kvevents.Update, 64)
	var eps []kvevents.Endpoint
	for i, ep := range f.EventEndpoints {
		eps = append(eps, kvevents.Endpoint{Worker: f.Workers[i].name, Addr: ep})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := kvevents.NewSubscriber(ctx, kvevents.SubscriberConfig{Endpoints: eps}, func(u kvevents.Update) { stored <- u })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	time.Sleep(200 * time.Millisecond) // a SUB socket misses what is published before it connects

	prompt := "Explain, in detail, how a paged KV cache lets an inference server reuse the prefix of a long conversation."
	if _, err := streamChat(t, f.URLs[1], prompt, 4); err != nil {
		t.Fatal(err)
	}
	// The worker's prompt blocks must arrive from worker 1, and the router
	// must be able to recompute their chain hashes from the token ids.
	want := blockhash.Chain(tokenizer.Encode(tokenizer.RenderChat([]tokenizer.Message{{Role: "user", Content: prompt}})), fast().BlockSize)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case u := <-stored:
			for _, ev := range u.Batch.Events {
				bs, ok := ev.(*kvevents.BlockStored)
				if !ok || u.Worker != f.Workers[1].name {
					continue
				}
				got := blockhash.Chain(bs.TokenIDs, bs.BlockSize)
				if len(want) > 0 && len(got) > 0 && slices.Equal(got[:1], want[:1]) {
					return
				}
			}
		case <-deadline:
			t.Fatalf("no BlockStored for the prompt's first block (%d blocks) arrived from %s", len(want), f.Workers[1].name)
		}
	}
}

func TestOffsetPort(t *testing.T) {
	tests := []struct {
		name, in string
		i        int
		want     string
		wantErr  bool
	}{
		{"worker i binds the port plus i, as vLLM offsets by DP rank", "tcp://*:5557", 2, "tcp://*:5559", false},
		{"port 0 stays 0 so each worker gets a free port", "tcp://127.0.0.1:0", 3, "tcp://127.0.0.1:0", false},
		{"a non-tcp endpoint is refused", "ipc:///tmp/x", 0, "", true},
		{"a missing port is refused", "tcp://host", 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := offsetPort(tt.in, tt.i)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("offsetPort(%q, %d) = %q, %v", tt.in, tt.i, got, err)
			}
		})
	}
}

// A worker that serves a replay socket lets a subscriber that joins late
// catch up on everything it published from seq 0: the first update is
// replayed, and the history is whole.
func TestFleetServesReplay(t *testing.T) {
	f, err := StartFleet(FleetConfig{Count: 1, Profile: fast(), EventsBind: "tcp://127.0.0.1:0", EventsReplay: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if len(f.ReplayEndpoints) != 1 || f.ReplayEndpoints[0] == "" {
		t.Fatalf("replay endpoints = %v, want one", f.ReplayEndpoints)
	}
	prompt := "Explain, in detail, how a paged KV cache lets an inference server reuse the prefix of a long conversation."
	if _, err := streamChat(t, f.URLs[0], prompt, 4); err != nil { // published to nobody
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); f.Publishers[0].Stats().Published == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the worker published nothing")
		}
		time.Sleep(time.Millisecond) // sent before the subscriber exists, or it could arrive live
	}
	got := make(chan kvevents.Update, 64)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := kvevents.NewSubscriber(ctx, kvevents.SubscriberConfig{Endpoints: []kvevents.Endpoint{
		{Worker: "w", Addr: f.EventEndpoints[0], Replay: f.ReplayEndpoints[0]},
	}}, func(u kvevents.Update) { got <- u })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	deadline := time.After(5 * time.Second)
	for {
		// Something new must be published for the subscriber to notice the
		// worker at all; then it asks for what came before.
		if _, err := streamChat(t, f.URLs[0], prompt+" Again.", 1); err != nil {
			t.Fatal(err)
		}
		select {
		case u := <-got:
			if !u.First || !u.Whole || !u.Replayed || u.Seq != 0 {
				t.Fatalf("first update = seq %d first %v whole %v replayed %v; want seq 0, replayed, whole", u.Seq, u.First, u.Whole, u.Replayed)
			}
			return
		case <-deadline:
			t.Fatal("nothing arrived")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// behind is the wall clock a fixed time in the past.
type behind time.Duration

func (b behind) Now() time.Time { return time.Now().Add(-time.Duration(b)) }

func (b behind) AfterFunc(d time.Duration, f func()) clock.Timer { return time.AfterFunc(d, f) }

func TestFleetRunsEveryWorkerOnItsClock(t *testing.T) {
	f, err := StartFleet(FleetConfig{Count: 2, Profile: fast(), Clock: behind(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	for i, w := range f.Workers {
		st, err := w.Runner().Submit(Request{Prompt: seqTokens(1, 8), MaxTokens: 2, OutputTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		if ago := time.Since(st.Submitted); ago < 59*time.Minute || ago > 61*time.Minute {
			t.Errorf("worker %d stamped a request %v before the wall clock, want the fleet's clock's hour", i, ago.Round(time.Second))
		}
	}
}

func TestAFleetTooLargeToBuildIsRefusedInOneLine(t *testing.T) {
	h200 := MustProfile(DefaultProfile)
	big := h200
	big.KVBlocks = 1 << 22
	tests := []struct {
		name    string
		workers int
		p       Profile
		wantErr string
	}{
		{"three H200 workers are built", 3, h200, ""},
		{"1,024 H200 workers fit the block budget", MaxWorkers, h200, ""},
		{"no workers is refused", 0, h200, "at least 1 worker"},
		{"more than 1,024 workers is refused", MaxWorkers + 1, h200, "a fleet of 1025 workers: at most 1024"},
		{"five workers of 4 million blocks would allocate over 800 MB", 5, big, "5 workers of 4194304 KV blocks each hold 20971520 blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckFleet(tt.workers, tt.p)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := StartFleet(FleetConfig{Count: MaxWorkers + 1}); err == nil || !strings.Contains(err.Error(), "at most 1024") {
		t.Fatalf("StartFleet of %d workers: err %v, want the bound", MaxWorkers+1, err)
	}
}

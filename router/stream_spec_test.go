package router

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseWorkerEventOptions(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		want    string // events bind replay parent0
		wantErr string
	}{
		{"a host in events= means kvlens dials the worker's publisher",
			"a=http://x:1,events=tcp://10.0.0.5:5557", "tcp://10.0.0.5:5557 false  ", ""},
		{"a * host in events= means kvlens binds and the publisher connects, as vLLM's tcp://*:5557",
			"a=http://x:1,events=tcp://*:5557", "tcp://*:5557 true  ", ""},
		{"bind= binds the address given",
			"a=http://x:1,bind=tcp://10.0.0.9:6000", "tcp://10.0.0.9:6000 true  ", ""},
		{"replay= and parent0= are kept",
			"a=http://x:1,events=tcp://h:5557,replay=tcp://h:5558,parent0=none", "tcp://h:5557 false tcp://h:5558 none", ""},
		{"parent0=hash is accepted", "a=http://x:1,events=tcp://h:5557,parent0=hash", "tcp://h:5557 false  hash", ""},
		// Sad path.
		{"events= and bind= together are refused", "a=http://x:1,events=tcp://h:1,bind=tcp://h:2", "", "more than one"},
		{"replay= without events is refused", "a=http://x:1,replay=tcp://h:5558", "", "without events="},
		{"a replay endpoint on * is refused, since kvlens dials it", "a=http://x:1,events=tcp://h:1,replay=tcp://*:5558", "", "needs the worker's host"},
		{"an unknown parent0 mode is refused", "a=http://x:1,events=tcp://h:1,parent0=zero", "", "not one of auto, none, hash"},
		{"a port out of range is refused", "a=http://x:1,events=tcp://h:70000", "", "from 1 to 65535"},
		{"an events endpoint without a port is refused", "a=http://x:1,events=tcp://h", "", "not a tcp://host:port"},
		{"a non-tcp bind is refused", "a=http://x:1,bind=ipc:///tmp/x", "", "not a tcp://host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := ParseWorkers(SplitWorkerList(tt.spec))
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			w := ws[0]
			if got := fmt.Sprintf("%s %v %s %s", w.Events, w.EventsBind, w.Replay, w.Parent0); got != tt.want {
				t.Fatalf("worker = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSplitWorkerListKeepsEventOptionsWithTheirWorker(t *testing.T) {
	got := SplitWorkerList("a=http://x:1,events=tcp://*:5557,replay=tcp://x:5558,parent0=none,b=http://y:1,bind=tcp://0.0.0.0:6000")
	want := []string{"a=http://x:1,events=tcp://*:5557,replay=tcp://x:5558,parent0=none", "b=http://y:1,bind=tcp://0.0.0.0:6000"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("SplitWorkerList = %q, want %q", got, want)
	}
}

func TestParseFleetDNSReplayPort(t *testing.T) {
	f, err := ParseFleet([]string{"dns://workers:8000?events=5557&replay=5558"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.DNS[0]; got.EventsPort != "5557" || got.ReplayPort != "5558" {
		t.Fatalf("DNS source = %+v, want events 5557, replay 5558", got)
	}
	if _, err := ParseFleet([]string{"dns://workers:8000?events=5557&replay=x"}); err == nil {
		t.Fatal("a replay port that is not a number was accepted")
	}
}

// FuzzParseWorkerList checks that any --workers value is parsed or refused
// with a one-line error, never a panic, and that what is accepted is usable:
// every worker has a name, a URL with a host and a batch capacity of at
// least 1, an events endpoint is tcp://host:port, replay comes with events,
// and parent0 is a known mode.
func FuzzParseWorkerList(f *testing.F) {
	f.Add("a=http://x:1,events=tcp://10.0.0.5:5557")
	f.Add("a=http://x:1,events=tcp://*:5557,replay=tcp://x:5558,parent0=none,capacity=8")
	f.Add("b=http://y:1,bind=tcp://0.0.0.0:6000,parent0=hash")
	f.Add("dns://workers:8000?events=5557&replay=5558")
	f.Add("http://x:1,events=tcp://[::1]:5557")
	f.Add("http://a:1,b=http://b:1,events=tcp://b:2,capacity=8,dns://svc:80?events=5557")
	f.Add("=,events=,capacity=-1,dns://:")
	f.Fuzz(func(t *testing.T, list string) {
		fleet, err := ParseFleet(SplitWorkerList(list))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		for _, w := range fleet.Static {
			if c, _ := w.BatchCapacity(); w.Name == "" || w.URL == nil || w.URL.Host == "" || c < 1 {
				t.Fatalf("accepted a worker it cannot use: %+v", w)
			}
			if w.Events != "" {
				if _, err := tcpEndpoint("events", w.Events); err != nil {
					t.Fatalf("accepted events %q: %v", w.Events, err)
				}
			}
			if w.Replay != "" && w.Events == "" {
				t.Fatalf("accepted replay %q without events", w.Replay)
			}
			if w.Parent0 != "" && !slices.Contains(Parent0Modes, w.Parent0) {
				t.Fatalf("accepted parent0 %q", w.Parent0)
			}
		}
	})
}

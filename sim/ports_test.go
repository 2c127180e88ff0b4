package sim

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/kvlens/kvlens/internal/testport"
)

func TestParsePortPlan(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    PortPlan
		wantErr string
	}{
		{"one port starts the HTTP ports, the event ports follow", "9001", PortPlan{HTTP: 9001}, ""},
		{"two ports start the HTTP and the event ranges", "9001,9101", PortPlan{HTTP: 9001, Events: 9101}, ""},
		{"spaces around the ports are allowed", " 9001 , 9101 ", PortPlan{HTTP: 9001, Events: 9101}, ""},
		{"the highest port is a port", "65535", PortPlan{HTTP: 65535}, ""},

		// Sad path.
		{"an empty value is refused", "", PortPlan{}, `port "" is not a number from 1 to 65535`},
		{"port 0 is refused: leave the flag out for free ports", "0", PortPlan{}, `port "0" is not`},
		{"a port past 65535 is refused", "65536", PortPlan{}, `port "65536" is not`},
		{"a word is refused", "high", PortPlan{}, `port "high" is not`},
		{"a missing events port is refused", "9001,", PortPlan{}, `port "" is not`},
		{"three ports are refused", "9001,9101,9201", PortPlan{}, `port "9101,9201" is not`},
		{"a negative port is refused", "-9001", PortPlan{}, `port "-9001" is not`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePortPlan(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
			if back, err := ParsePortPlan(got.String()); err != nil || back != got {
				t.Fatalf("%q reads back as %+v, %v", got.String(), back, err)
			}
		})
	}
}

func TestPortPlanCheck(t *testing.T) {
	tests := []struct {
		name    string
		plan    PortPlan
		count   int
		wantErr string
	}{
		{"no plan is always fine", PortPlan{}, 3, ""},
		{"event ports follow 3 workers' HTTP ports", PortPlan{HTTP: 9001}, 3, ""},
		{"separate ranges that do not overlap are fine", PortPlan{HTTP: 9001, Events: 9004}, 3, ""},
		{"the last port of the range may be 65535", PortPlan{HTTP: 65530}, 3, ""},

		// Sad path.
		{"HTTP ports that run past 65535 are refused", PortPlan{HTTP: 65535, Events: 9000}, 3, "3 workers' HTTP ports from 65535 run past 65535"},
		{"event ports that run past 65535 are refused", PortPlan{HTTP: 65532}, 3, "event ports from 65535 run past 65535"},
		{"event ports inside the HTTP range are refused", PortPlan{HTTP: 9001, Events: 9003}, 3, "HTTP ports 9001-9003 and event ports 9003-9005 overlap"},
		{"event ports just below the HTTP range but reaching into it are refused", PortPlan{HTTP: 9001, Events: 8999}, 3, "overlap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.plan.Check(tt.count)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestFleetOnPinnedPorts(t *testing.T) {
	base := testport.Free(t, 4)
	plan := PortPlan{HTTP: base}
	tests := []struct {
		name string
		// taken is a port another program holds; 0 for none.
		taken   int
		wantErr string
	}{
		{"two workers serve on the pinned ports and publish on the next two", 0, ""},

		// Sad path.
		{"a worker's HTTP port in use is named", base + 1, fmt.Sprintf("sim: port %d for worker 1 is already in use", base+1)},
		{"a worker's event port in use is named", base + 2, fmt.Sprintf("sim: event port %d for worker 0 is already in use", base+2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.taken > 0 {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", tt.taken))
				if err != nil {
					t.Fatalf("port %d, free a moment ago: %v", tt.taken, err)
				}
				defer ln.Close()
			}
			f, err := StartFleet(FleetConfig{Count: 2, Profile: fast(), BasePort: plan.HTTP, EventsBind: fmt.Sprintf("tcp://127.0.0.1:%d", plan.EventsFrom(2))})
			if tt.wantErr != "" {
				if err == nil {
					f.Close(context.Background())
					t.Fatal("started on a port in use")
				}
				if !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one line containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close(context.Background())
			for i := range 2 {
				if want := fmt.Sprintf("http://127.0.0.1:%d", base+i); f.URLs[i] != want {
					t.Errorf("worker %d on %s, want %s", i, f.URLs[i], want)
				}
				if want := fmt.Sprintf("tcp://127.0.0.1:%d", base+2+i); f.EventEndpoints[i] != want {
					t.Errorf("worker %d publishes on %s, want %s", i, f.EventEndpoints[i], want)
				}
			}
			if _, err := streamChat(t, f.URLs[1], "hi", 2); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func FuzzParsePortPlan(f *testing.F) {
	f.Add("9001")
	f.Add("9001,9101")
	f.Add(" 1 , 65535 ")
	f.Add("65536")
	f.Add("9001,")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePortPlan(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if p.HTTP < 1 || p.HTTP > 65535 || p.Events < 0 || p.Events > 65535 {
			t.Fatalf("accepted %q as %+v", s, p)
		}
		if back, err := ParsePortPlan(p.String()); err != nil || back != p {
			t.Fatalf("%+v writes as %q, which reads back as %+v, %v", p, p.String(), back, err)
		}
	})
}

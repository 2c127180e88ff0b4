package sim

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/des"
)

func TestSettingFaultsAgainReplacesAStall(t *testing.T) {
	tests := []struct {
		name string
		// first is the stall set before the request arrives; second is
		// the faults set while the request's first step waits it out.
		first  time.Duration
		second Faults
		// idle is virtual time after the second setting with no token yet
		// (0: not checked); by is the time by which the first token came.
		idle, by time.Duration
	}{
		{"a stall of 0 ends the stall at once", 10 * time.Second, Faults{}, 0, 100 * time.Millisecond},
		{"faults with only a slowdown end the stall too, as faults are replaced and not merged", 10 * time.Second, Faults{Slowdown: 2}, 0, 100 * time.Millisecond},
		{"a shorter stall replaces a longer one", 10 * time.Second, Faults{Stall: Duration(2 * time.Second)}, 1900 * time.Millisecond, 2100 * time.Millisecond},
		{"a longer stall extends a shorter one", time.Second, Faults{Stall: Duration(5 * time.Second)}, 4900 * time.Millisecond, 5100 * time.Millisecond},
		{"the same stall set again starts again from now", time.Second, Faults{Stall: Duration(time.Second)}, 900 * time.Millisecond, 1100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loop := des.New(time.Time{})
			w, err := NewServer(ServerOptions{Name: "w0", Profile: fast(), Clock: loop, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := w.SetFaults(Faults{Stall: Duration(tt.first)}); err != nil {
				t.Fatal(err)
			}
			st, err := w.Runner().Submit(Request{Prompt: seqTokens(1, 8), MaxTokens: 1, OutputTokens: 1})
			if err != nil {
				t.Fatal(err)
			}
			loop.Run(tt.first / 2) // the first step is held by the stall
			if toks, _ := st.Take(nil); len(toks) != 0 {
				t.Fatalf("a token arrived %v into a %v stall", tt.first/2, tt.first)
			}
			if err := w.SetFaults(tt.second); err != nil {
				t.Fatal(err)
			}
			if got, want := time.Duration(w.Faults().Stall), time.Duration(tt.second.Stall); got != want {
				t.Errorf("faults show a stall of %v left, want %v", got, want)
			}
			if tt.idle > 0 {
				loop.Run(tt.idle)
				if toks, _ := st.Take(nil); len(toks) != 0 {
					t.Fatalf("a token arrived %v after setting %+v", tt.idle, tt.second)
				}
			}
			loop.Run(tt.by - tt.idle)
			if toks, _ := st.Take(nil); len(toks) != 1 {
				t.Fatalf("%d tokens %v after setting %+v, want the first", len(toks), tt.by, tt.second)
			}
		})
	}
}

func TestSlowdownMustLieInItsRange(t *testing.T) {
	tests := []struct {
		name     string
		slowdown float64
		ok       bool
	}{
		{"0 means the profile's speed", 0, true},
		{"1 is the profile's speed", 1, true},
		{"the smallest factor is allowed", MinSlowdown, true},
		{"the largest factor is allowed", MaxSlowdown, true},

		// Sad path.
		{"1e12 would overflow a step's duration into an infinitely fast worker", 1e12, false},
		{"just above the largest factor is refused", MaxSlowdown + 1, false},
		{"a factor that rounds steps to nothing is refused", 1e-300, false},
		{"a negative factor is refused", -1, false},
		{"NaN is refused", math.NaN(), false},
		{"infinity is refused", math.Inf(1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Faults{Slowdown: tt.slowdown}.validate()
			if (err == nil) != tt.ok {
				t.Fatalf("slowdown %v: error %v, want ok=%v", tt.slowdown, err, tt.ok)
			}
			if err != nil && (!strings.Contains(err.Error(), "from 0.01 to 1000") || strings.Contains(err.Error(), "\n")) {
				t.Errorf("error %q does not name the allowed range on one line", err)
			}
		})
	}
}

func TestFaultsShowTheSlowdownInForce(t *testing.T) {
	tests := []struct {
		name string
		put  string
		code int
		want float64
	}{
		{"an unset slowdown shows as 1, the profile's speed", `{}`, 200, 1},
		{"a slowdown of 0 shows as 1", `{"slowdown":0}`, 200, 1},
		{"a slowdown set shows as set", `{"slowdown":3}`, 200, 3},

		// Sad path: the worker refuses, keeps its faults and keeps serving.
		{"an overflowing slowdown is refused and the last one stays", `{"slowdown":1e12}`, 400, 3},
	}
	_, srv, _ := newTestServer(t, fast())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("PUT", srv.URL+"/admin/faults", strings.NewReader(tt.put))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("PUT %s: %d %s, want %d", tt.put, resp.StatusCode, body, tt.code)
			}
			resp, err = http.Get(srv.URL + "/admin/faults")
			if err != nil {
				t.Fatal(err)
			}
			var f Faults
			err = json.NewDecoder(resp.Body).Decode(&f)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if f.Slowdown != tt.want {
				t.Errorf("GET /admin/faults shows slowdown %v, want %v", f.Slowdown, tt.want)
			}
			if _, err := streamChat(t, srv.URL, "still serving?", 2); err != nil {
				t.Errorf("the worker stopped serving: %v", err)
			}
		})
	}
}

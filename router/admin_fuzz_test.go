package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzPutPolicy sends any body to PUT /admin/router/policy: a body it
// refuses gets 400 and one line and changes nothing; one it takes becomes
// the router's settings, and the router still decides under them, whatever
// the knobs it takes (a temperature of 1e-300, a weight of 100).
func FuzzPutPolicy(f *testing.F) {
	for _, s := range []string{
		`{"policy":"kv","weight":1,"temperature":0}`,
		`{"policy":"dynamo","temperature":1e-300,"weight":1e308}`,
		`{"policy":"dynamo","temperature":100,"weight":100}`,
		`{"policy":"dynamo_tuned","temperature":1e300}`,
		`{"policy":"kv","admission":"shed","busy_threshold":1e-9}`,
		`{"policy":"llmd"}`, `{"policy":"fastest"}`, `{"weight":-1}`, `{"busy_threshold":0}`,
		`{"nope":1}`, `{"policy":"kv"}{"policy":"rr"}`, `[]`, `null`, ``, "{\"policy\":\"kv\n\"}",
	} {
		f.Add([]byte(s))
	}
	ws, err := ParseWorkers([]string{"a=http://127.0.0.1:9", "b=http://127.0.0.1:9", "c=http://127.0.0.1:9"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		px := NewProxy(NewRouter(NewPool(ws), &KV{Weight: 1}, Config{}))
		before := px.Router().Settings()
		w := httptest.NewRecorder()
		px.Admin().ServeHTTP(w, httptest.NewRequest("PUT", AdminPrefix+"/policy", bytes.NewReader(body)))
		after := px.Router().Settings()
		if w.Code != 200 {
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if (w.Code != 400 && w.Code != 413) || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Message == "" || strings.ContainsAny(e.Error.Message, "\r\n") {
				t.Fatalf("refused with %d %q; want 400 or 413 and a one-line message", w.Code, w.Body)
			}
			if after != before {
				t.Fatalf("a refused body changed the settings from %+v to %+v", before, after)
			}
			return
		}
		var got policyJSON
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Settings != after {
			t.Fatalf("answered %s, the router holds %+v", w.Body, after)
		}
		for i := range 20 {
			req := &Request{TokenIDs: make([]uint32, 64+i*16)}
			b, err := px.Router().Decide(req, nil)
			if errors.Is(err, ErrBusy) {
				continue
			}
			if err != nil || b == nil {
				t.Fatalf("under %+v, Decide: %v", after, err)
			}
			defer b.Release()
		}
	})
}

func TestPutPolicyRefusals(t *testing.T) {
	tests := []struct {
		name string
		body string
		want int
		says string
	}{
		{"a body over 64 KiB is too large", `{"policy":"kv","x":"` + strings.Repeat("y", 70<<10) + `"}`, 413, "over 64 KiB"},
		{"trailing garbage is refused", `{"policy":"kv"} garbage`, 400, "more than one JSON value"},
		{"a second object is refused", `{"policy":"kv"}{"policy":"random"}`, 400, "more than one JSON value"},
		{"a weight of 1e308 is refused", `{"policy":"random","weight":1e308}`, 400, "want each from 0 to 100"},
		{"a temperature over 100 is refused", `{"policy":"random","temperature":101}`, 400, "want each from 0 to 100"},
		{"one object is taken", `{"policy":"random"}`, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px := NewProxy(NewRouter(NewPool(nil), &KV{Weight: 1}, Config{}))
			w := httptest.NewRecorder()
			px.Admin().ServeHTTP(w, httptest.NewRequest("PUT", AdminPrefix+"/policy", strings.NewReader(tt.body)))
			if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.says) {
				t.Fatalf("%d %s; want %d saying %q", w.Code, w.Body, tt.want, tt.says)
			}
			if got := px.Router().Settings().Policy; (tt.want == 200) != (got == "random") {
				t.Fatalf("policy %q after %d", got, w.Code)
			}
		})
	}
}

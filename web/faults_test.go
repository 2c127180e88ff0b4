package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

type fakeFaults struct {
	kind   string
	amount float64
}

func (f *fakeFaults) InjectFault(kind string, amount float64) error {
	f.kind, f.amount = kind, amount
	return nil
}

func TestParseFault(t *testing.T) {
	tests := []struct {
		name, in, kind string
		amount         float64
		wantErr        string
	}{
		{"a percentage of 503s", "503:10", "503", 10, ""},
		{"a slow-down factor", "slow:2", "slow", 2, ""},
		{"none turns faults off", "none", "none", 0, ""},
		{"an unknown kind is named with the choices", "404:10", "", 0, "want none, 503:PCT"},
		{"a percentage over 100 is refused", "cut:150", "", 0, "from 0 to 100"},
		{"a slow-down under 1 is refused", "slow:0.5", "", 0, "from 1 to 100"},
		{"a missing amount is refused", "500", "", 0, "is not a number"},
		{"NaN is refused, which no range check would catch", "503:NaN", "", 0, "is not a number"},
		{"an infinite slow-down is refused", "slow:+Inf", "", 0, "from 1 to 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, amount, err := ParseFault(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || kind != tt.kind || amount != tt.amount {
				t.Fatalf("got %q %v %v", kind, amount, err)
			}
		})
	}
}

// FuzzParseFault checks that a fault ParseFault accepts is one the simulated
// workers take (a finite percentage 0..100, or a slow-down 1..100), that it
// reads back from faultValue as itself, and that a refusal is one line.
func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"none", "503:10", "slow:2", "cut:0", "429:NaN", "slow:Inf", "500:1e308", "cut:-0", " 503:5 ", "503:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		kind, amount, err := ParseFault(in)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		lo := 0.0
		if kind == "slow" {
			lo = 1
		}
		if kind != "none" && !(amount >= lo && amount <= 100) {
			t.Fatalf("ParseFault(%q) accepted %s at %v", in, kind, amount)
		}
		k2, a2, err := ParseFault(faultValue(kind, amount))
		if err != nil || k2 != kind || a2 != amount {
			t.Fatalf("ParseFault(%q) = %s %v, which reads back as %s %v, %v", in, kind, amount, k2, a2, err)
		}
	})
}

func TestInjectedFaultsAreMarkedAndOperatorOnly(t *testing.T) {
	faults := &fakeFaults{}
	opts := testOptions()
	opts.Access = Access{Token: "s3cret"}
	opts.Faults = faults
	srv := New(&fakeLoad{}, newFakeRouter("kv"), opts)
	post := func(value string, remote bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/fault", strings.NewReader(url.Values{"fault": {value}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = "127.0.0.1:4000"
		if remote {
			r.RemoteAddr = "192.0.2.9:4000"
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		return w
	}
	if w := post("503:10", true); w.Code != http.StatusForbidden || faults.kind != "" {
		t.Fatalf("a viewer injected a fault: %d", w.Code)
	}
	if w := post("503:bad", false); w.Code != http.StatusBadRequest || faults.kind != "" {
		t.Fatalf("a bad value: %d, injected %q", w.Code, faults.kind)
	}
	if w := post("cut:10", false); w.Code != 200 || faults.kind != "cut" || faults.amount != 10 {
		t.Fatalf("operator: %d, injected %q %v", w.Code, faults.kind, faults.amount)
	}
	// The injection is a mark on the charts, and so in the recording.
	if frame := string(srv.frames()[0]); !strings.Contains(frame, `"kind":"fault","label":"fault: 10% cut streams"`) {
		t.Fatalf("no fault mark in %s", frame)
	}
}

func TestTheFaultInForceSurvivesAPageLoad(t *testing.T) {
	opts := testOptions()
	opts.Faults = &fakeFaults{}
	srv := New(&fakeLoad{}, newFakeRouter("kv"), opts)
	for _, tt := range []struct {
		name      string
		inject    string // "" injects nothing
		state     string // /api/state's fault
		selected  string // the page's selected option
		wantLabel string
	}{
		{"a fresh dashboard has no fault", "", "none", "none", "no faults"},
		{"a preset is selected on the next page load", "503:10", "503:10", "503:10", "10% HTTP 503"},
		{"a fault that is no preset gets an option of its own", "slow:3", "slow:3", "slow:3", "fault: 3× slower"},
		{"turning faults off shows none again", "none", "none", "none", "no faults"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.inject != "" {
				r := httptest.NewRequest("POST", "/api/fault", strings.NewReader(url.Values{"fault": {tt.inject}}.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				r.RemoteAddr = "127.0.0.1:4000"
				w := httptest.NewRecorder()
				srv.Handler().ServeHTTP(w, r)
				if w.Code != 200 {
					t.Fatalf("inject %s: %d %s", tt.inject, w.Code, w.Body)
				}
			}
			// Every open page learns the fault from the next frame, to show
			// it in its select whoever chose it (another browser, the tour).
			var frame struct{ Fault string }
			if err := json.Unmarshal(srv.frames()[0], &frame); err != nil || frame.Fault != tt.state {
				t.Errorf("the frame's fault = %q (%v), want %q", frame.Fault, err, tt.state)
			}
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/api/state", nil))
			var st struct{ Fault string }
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Fault != tt.state {
				t.Errorf("/api/state fault = %q (%v), want %q", st.Fault, err, tt.state)
			}
			w = httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			doc, _ := goquery.NewDocumentFromReader(w.Body)
			sel := doc.Find(`[data-testid=fault] option[selected]`)
			if sel.Length() != 1 || sel.AttrOr("value", "") != tt.selected || sel.Text() != tt.wantLabel {
				t.Errorf("selected options: %d, value %q, label %q; want one, %q, %q", sel.Length(), sel.AttrOr("value", ""), sel.Text(), tt.selected, tt.wantLabel)
			}
			notice := doc.Find(`[data-testid=fault-on]`).Text()
			if tt.state == "none" && notice != "" || tt.state != "none" && !strings.Contains(notice, tt.wantLabel) {
				t.Errorf("the workers panel says %q; want a notice naming %q only while a fault is in force", notice, tt.wantLabel)
			}
		})
	}
}

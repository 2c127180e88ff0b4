package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/kvlens/kvlens/tour"
)

func mustTour(t *testing.T, text string) *tour.Script {
	t.Helper()
	s, err := tour.Parse("test.tour", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tourServer is the A/B dashboard over two fake lanes, with faults and
// the tour given, played until the test ends.
func tourServer(t *testing.T, script string) (*Server, *fakeLoad, *fakeLoad, *fakeRouter, *fakeRouter, *fakeFaults) {
	t.Helper()
	la, lb := &fakeLoad{target: 60}, &fakeLoad{target: 60}
	ra, rb := newFakeRouter("round_robin"), newFakeRouter("kv")
	ra.workers, rb.workers = fakeWorkers("sim-0", "sim-1"), fakeWorkers("sim-2", "sim-3")
	faults := &fakeFaults{}
	opts := testOptions()
	opts.Source = "simulated"
	opts.Lanes = []Lane{{Gen: lb, Router: rb}}
	opts.Faults = faults
	opts.Access = Access{Token: "s3cret"}
	opts.Tour = mustTour(t, script)
	return New(la, ra, opts), la, lb, ra, rb, faults
}

// playing starts s's tour and waits for its first step to begin.
func playing(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.PlayTour(ctx)
	eventually(t, "the tour's first step", func() bool { return s.tourState().SecondsLeft > 0 })
}

func TestTourStepsGoThroughTheOperatorsControls(t *testing.T) {
	s, la, lb, ra, rb, faults := tourServer(t, "1h watch \"x\"\n")
	tests := []struct {
		// step is a tour line; check what it changed, and wantMarks the
		// marks the operator's controls would have made (none for none).
		name, step string
		check      func() bool
		wantMarks  []string
	}{
		{"concurrency sets both lanes", `5s concurrency 120 "c"`,
			func() bool { return la.target == 120 && lb.target == 120 }, []string{"→ 120"}},
		{"the concurrency in force changes nothing, and keeps the windows", `5s concurrency 120 "c"`,
			func() bool { return la.target == 120 }, nil},
		{"reset reaches both lanes' routers", `5s reset "r"`,
			func() bool { return ra.resets == 1 && rb.resets == 1 }, []string{"reset"}},
		{"a fault goes to the fleet and is in force", `5s fault 503:10 "f"`,
			func() bool { return faults.kind == "503" && s.currentFault() == "503:10" }, []string{"fault: 10% HTTP 503"}},
		{"the fault in force changes nothing", `5s fault 503:10 "f"`,
			func() bool { return faults.kind == "503" }, nil},
		{"a pair sets each lane", `5s pair least_loaded,dynamo "p"`,
			func() bool { return ra.policy == "least_loaded" && rb.policy == "dynamo" }, []string{"A: Plain least_loaded", "B: Plain dynamo"}},
		{"a pair sets only the lane that differs", `5s pair least_loaded,kv "p"`,
			func() bool { return ra.policy == "least_loaded" && rb.policy == "kv" }, []string{"B: Plain kv"}},
		{"watch changes nothing", `5s watch "w"`, func() bool { return true }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.history.takeFresh()
			before := la.resets
			st := mustTour(t, tt.step).Steps[0]
			if err := s.tourStep(st); err != nil {
				t.Fatal(err)
			}
			if !tt.check() {
				t.Fatalf("the step did not make its change")
			}
			var labels []string
			for _, m := range s.history.takeFresh() {
				labels = append(labels, m.Label)
			}
			// Each change begins a new window in every lane, as the
			// control does.
			n := len(tt.wantMarks)
			if !slices.Equal(labels, tt.wantMarks) || la.resets != before+n || lb.resets != before+n {
				t.Fatalf("marks %q, new windows A %d B %d; want marks %q and %d windows each", labels, la.resets-before, lb.resets-before, tt.wantMarks, n)
			}
		})
	}
}

func TestOperatorActionsPauseTheTour(t *testing.T) {
	tests := []struct {
		name string
		act  func(s *Server, ra *fakeRouter) int // returns the HTTP status, 0 for none
	}{
		{"the slider pauses it", func(s *Server, _ *fakeRouter) int {
			return post(s, "/api/concurrency", url.Values{"concurrency": {"100"}}, true)
		}},
		{"a lane's policy pauses it", func(s *Server, _ *fakeRouter) int {
			return post(s, "/api/mode", url.Values{"mode": {"random"}, "lane": {"a"}}, true)
		}},
		{"a reset pauses it", func(s *Server, _ *fakeRouter) int { return post(s, "/api/reset", nil, true) }},
		{"a fault pauses it", func(s *Server, _ *fakeRouter) int {
			return post(s, "/api/fault", url.Values{"fault": {"slow:2"}}, true)
		}},
		{"stop pauses it", func(s *Server, _ *fakeRouter) int { return post(s, "/api/stop", nil, true) }},
		{"start pauses it", func(s *Server, _ *fakeRouter) int { return post(s, "/api/start", nil, true) }},
		{"the pause button pauses it", func(s *Server, _ *fakeRouter) int { return post(s, "/api/tour/pause", nil, true) }},
		// The router's admin API changed a policy: the next tick sees it.
		{"a change behind the dashboard's back pauses it", func(s *Server, ra *fakeRouter) int {
			ra.SwitchPolicy("random")
			s.frames()
			return 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _, ra, _, _ := tourServer(t, "1h concurrency 60 \"one\"\n1h reset \"two\"\n")
			playing(t, s)
			s.frames() // the dashboard has looked at the lanes once
			s.history.takeFresh()
			if code := tt.act(s, ra); code != 0 && code != http.StatusOK {
				t.Fatalf("the action got %d", code)
			}
			st := s.tourState()
			if !st.Paused || st.Step != 1 || st.SecondsLeft != 0 {
				t.Fatalf("tour state %+v; want paused in step 1", st)
			}
			marks := s.history.allMarks()
			if len(marks) == 0 || !slices.ContainsFunc(marks, func(m Mark) bool { return m.Kind == "tour" && m.Label == "tour paused" }) {
				t.Fatalf("marks %+v; want the tour's pause marked", marks)
			}
			d := s.tourData(false)
			if !d.Paused || d.Left != "" {
				t.Fatalf("the bar: %+v", d)
			}
		})
	}
}

func TestARefusedValueDoesNotPauseTheTour(t *testing.T) {
	s, _, _, _, _, _ := tourServer(t, "1h watch \"one\"\n")
	playing(t, s)
	if code := post(s, "/api/concurrency", url.Values{"concurrency": {"75"}}, true); code != http.StatusBadRequest {
		t.Fatalf("concurrency 75 got %d", code)
	}
	// A viewer is refused before anything happens.
	if code := post(s, "/api/reset", nil, false); code != http.StatusForbidden {
		t.Fatalf("a viewer's reset got %d", code)
	}
	if s.tourState().Paused {
		t.Fatal("the tour paused")
	}
}

func TestOnlyAnOperatorResumesTheTourFromTheNextStep(t *testing.T) {
	s, la, lb, _, _, _ := tourServer(t, "1h watch \"one\"\n1h concurrency 120 \"two\"\n")
	playing(t, s)
	if code := post(s, "/api/tour/pause", nil, false); code != http.StatusForbidden || s.tourState().Paused {
		t.Fatalf("a viewer's pause got %d", code)
	}
	post(s, "/api/stop", nil, true)
	if code := post(s, "/api/tour/resume", nil, false); code != http.StatusForbidden || !s.tourState().Paused {
		t.Fatalf("a viewer's resume got %d", code)
	}
	if code := post(s, "/api/tour/resume", nil, true); code != http.StatusOK {
		t.Fatalf("the operator's resume got %d", code)
	}
	st := s.tourState()
	if st.Paused || st.Step != 2 || st.Caption != "two" || la.target != 120 {
		t.Fatalf("after resume: %+v, target %d; want step 2 playing at 120", st, la.target)
	}
	// The operator had stopped the load: the tour plays over running load.
	if !la.Snapshot().Running || !lb.Snapshot().Running {
		t.Fatal("resume left the load stopped")
	}
}

func TestTourEndpointsWithoutATour(t *testing.T) {
	s := New(&fakeLoad{}, newFakeRouter("kv"), testOptions())
	for _, path := range []string{"/api/tour/pause", "/api/tour/resume"} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", path, nil)
		r.RemoteAddr = "127.0.0.1:4000"
		s.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "--tour") {
			t.Errorf("%s: %d %q; want 404 naming --tour", path, w.Code, w.Body)
		}
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/api/state", nil))
	if strings.Contains(w.Body.String(), `"tour"`) {
		t.Errorf("/api/state without a tour mentions one: %s", w.Body)
	}
	w = httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if strings.Contains(w.Body.String(), `data-testid="tour"`) {
		t.Error("the page without a tour shows its bar")
	}
}

func TestTheTourShowsInThePageStateAndFrames(t *testing.T) {
	s, _, _, _, _, _ := tourServer(t, "50s watch \"Watch the headline\"\n40s reset \"two\"\n")
	playing(t, s)

	// A fresh load renders the bar, Pause enabled for an operator only.
	for _, operator := range []bool{true, false} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:4000"
		if operator {
			r.AddCookie(s.rule.Cookie())
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		doc, err := goquery.NewDocumentFromReader(w.Body)
		if err != nil {
			t.Fatal(err)
		}
		bar := doc.Find(`[data-testid=tour]`)
		if got := bar.Find(`[data-testid=tour-caption]`).Text(); got != "Watch the headline" {
			t.Errorf("caption %q", got)
		}
		if got := bar.Find(`[data-testid=tour-position]`).Text(); !strings.HasPrefix(got, "step 1 of 2 · ") || !strings.HasSuffix(got, " s left") {
			t.Errorf("position %q; want step 1 of 2 · N s left", got)
		}
		_, disabled := bar.Find(`[data-testid=tour-pause]`).Attr("disabled")
		if disabled == operator {
			t.Errorf("operator %v: Pause disabled %v", operator, disabled)
		}
	}

	// /api/state carries it, for scripts and tests.
	var st struct{ Tour tourState }
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/api/state", nil))
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Tour.Script != "test.tour" || st.Tour.Step != 1 || st.Tour.Steps != 2 || st.Tour.Caption != "Watch the headline" ||
		st.Tour.Paused || st.Tour.StepSeconds != 50 || st.Tour.SecondsLeft <= 45 {
		t.Errorf("/api/state tour = %+v", st.Tour)
	}

	// Every tick pushes it, rendered as for a viewer.
	html := string(s.frames()[1])
	if !strings.Contains(html, `id="tour"`) || !strings.Contains(html, "Watch the headline") || !strings.Contains(html, `data-operator-only="true" disabled`) {
		t.Errorf("the tick's fragment lacks the tour's bar: %s", html)
	}

	// Paused, it says so, and offers Resume.
	post(s, "/api/tour/pause", nil, true)
	html = string(s.frames()[1])
	if !strings.Contains(html, "Tour paused — operator in control") || !strings.Contains(html, `data-testid="tour-resume"`) {
		t.Errorf("the paused bar: %s", html)
	}
}

func TestCheckTour(t *testing.T) {
	tests := []struct {
		name         string
		script       string
		faults, pair bool
		speed        float64
		want         string // "" for none
	}{
		{"the built-in tour fits the default demo", "", true, true, 1, ""},
		{"a concurrency off the slider names its line", "# c\n5s concurrency 200 \"x\"", true, true, 1, "tour test.tour line 2: concurrency 200 is outside 60..180"},
		{"a concurrency between the slider's steps", "5s concurrency 70 \"x\"", true, true, 1, "line 1: concurrency 70 is not on the slider's steps"},
		{"a fault needs the simulated fleet", "5s watch \"x\"\n5s fault 503:10 \"x\"", false, true, 1, "line 2: faults can be injected only into the simulated fleet"},
		{"a fault must be one the fleet takes", "5s fault 404:10 \"x\"", true, true, 1, `line 1: fault "404:10": want none, 503:PCT`},
		{"a pair needs the A/B view", "5s pair rr,kv \"x\"", true, false, 1, "line 1: a pair needs the A/B view"},
		{"the single view takes concurrency, reset and faults", "5s concurrency 120 \"x\"\n5s reset \"x\"\n5s fault none \"x\"", true, false, 1, ""},
		{"a negative speed", "5s watch \"x\"", true, true, -2, "tour speed -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			o.Tour, o.TourSpeed = tour.Builtin(), tt.speed
			if tt.script != "" {
				o.Tour = mustTour(t, tt.script)
			}
			err := o.CheckTour(tt.faults, tt.pair)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v; want %q", err, tt.want)
			}
		})
	}
}

// post sends a form to path as an operator (the operator's cookie) or a
// visitor, and returns the status.
func post(s *Server, path string, form url.Values, operator bool) int {
	r := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "192.0.2.7:40000"
	if operator {
		r.AddCookie(s.rule.Cookie())
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	return w.Code
}

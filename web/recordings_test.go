package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/kvlens/kvlens/recording"
	"github.com/kvlens/kvlens/store"
)

// recordedFrame is a snapshot frame as the dashboard records it.
func recordedFrame(t testing.TB, at int64, mode string, marks ...Mark) []byte {
	t.Helper()
	p50, p95, tops := 250.0, 580.0, 1500.0
	b, err := json.Marshal(Frame{Type: "snapshot", Mode: mode, ModeText: "Plain " + mode, Marks: marks,
		Points: []Point{{T: at, TTFTp50: &p50, TTFTp95: &p95, OutputTokensPerSec: &tops, Target: 60, Live: 60}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordingServer is a dashboard over a store holding two finished
// recordings (ids 1 and 2, of 3 and 2 frames) and the current one (3).
func recordingServer(t testing.TB) (*Server, *store.DB) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "kvlens.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	start := time.Unix(1_700_000_000, 0)
	for i, spec := range []struct {
		name   string
		frames int
	}{{"booth morning", 3}, {"booth afternoon", 2}, {"now", 1}} {
		id, err := db.CreateRecording(ctx, spec.name, []byte(`{"policy":"round_robin"}`))
		if err != nil {
			t.Fatal(err)
		}
		var frames []store.Frame
		for j := range spec.frames {
			at := start.Add(time.Duration(i*100+j) * time.Second)
			mode := "round_robin"
			var marks []Mark
			if j == 1 {
				mode, marks = "kv", []Mark{{T: at.Unix(), Kind: "mode", Label: "Plain kv"}}
			}
			frames = append(frames, store.Frame{T: at, Kind: "snapshot", Body: recordedFrame(t, at.Unix(), mode, marks...)})
		}
		if err := db.AppendFrames(ctx, id, frames); err != nil {
			t.Fatal(err)
		}
		if spec.name != "now" {
			rec, err := db.Recording(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			// The store stamps the start with the real clock.
			if err := db.EndRecording(ctx, id, rec.Started.Add(time.Duration(spec.frames)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := testOptions()
	opts.Access = Access{Token: "secret", LoopbackViewer: true}
	opts.Recordings, opts.CurrentRecording = db, 3
	return New(&fakeLoad{target: 60}, newFakeRouter("round_robin"), opts), db
}

func serve(s *Server, method, path string, operator bool) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.7:40000" // a visitor's phone, not this machine
	if operator {
		r.AddCookie(s.rule.Cookie())
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	return w
}

func TestRecordingRoutes(t *testing.T) {
	s, _ := recordingServer(t)
	tests := []struct {
		name  string
		path  string
		code  int
		check func(t *testing.T, w *httptest.ResponseRecorder)
	}{
		{"the list shows every recording with its frames and links, newest first", "/recordings", 200, func(t *testing.T, w *httptest.ResponseRecorder) {
			doc, _ := goquery.NewDocumentFromReader(w.Body)
			rows := doc.Find(`[data-testid=recording-row]`)
			if rows.Length() != 3 {
				t.Fatalf("%d rows, want 3", rows.Length())
			}
			first := rows.Eq(2)
			if got := first.Find(`[data-testid=recording-open]`).Text(); got != "booth morning" {
				t.Fatalf("oldest row is %q", got)
			}
			for sel, want := range map[string]string{"recording-open": "/recordings/1", "export-csv": "/recordings/1/export.csv", "export-json": "/recordings/1/export.json"} {
				if href, _ := first.Find(`[data-testid=` + sel + `]`).Attr("href"); href != want {
					t.Errorf("%s links to %q, want %q", sel, href, want)
				}
			}
			if got := first.Find(`[data-testid=recording-frames]`).Text(); got != "3" {
				t.Errorf("frames = %q, want 3", got)
			}
			if got := first.Find(`[data-testid=recording-length]`).Text(); got != "3s" {
				t.Errorf("length = %q, want 3s", got)
			}
			if got := rows.Eq(0).Find(`[data-testid=recording-length]`).Text(); got != "recording now" {
				t.Errorf("the current session's length = %q", got)
			}
			if _, disabled := first.Find(`[data-testid=recording-delete]`).Attr("disabled"); !disabled {
				t.Error("a viewer's delete button is enabled")
			}
		}},
		{"the replay page names the recording and has the player, the four charts, the tiles and the baseline chart", "/recordings/2", 200, func(t *testing.T, w *httptest.ResponseRecorder) {
			doc, _ := goquery.NewDocumentFromReader(w.Body)
			if got := doc.Find(`[data-testid=replay-name]`).Text(); !strings.Contains(got, "booth afternoon") {
				t.Errorf("header = %q", got)
			}
			for _, id := range []string{"timeline", "play", "speed-1", "speed-4", "speed-16", "playhead", "ttft-chart", "tpot-chart", "tops-chart", "errors-chart",
				"ttft-p95", "kv-hit", "errors", "headline", "baseline-chart", "baseline-field", "baseline-name"} {
				if doc.Find(`[data-testid=`+id+`]`).Length() != 1 {
					t.Errorf("no %s", id)
				}
			}
			if src, _ := doc.Find(`body`).Attr("data-frames"); src != "/recordings/2/frames" {
				t.Errorf("the player reads %q", src)
			}
		}},
		{"the frames JSON holds every frame in order with its dashboard body", "/recordings/1/frames", 200, func(t *testing.T, w *httptest.ResponseRecorder) {
			var got struct {
				Name   string `json:"name"`
				Frames []struct {
					T    int64 `json:"t"`
					Kind string
					Body Frame
				}
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Name != "booth morning" || len(got.Frames) != 3 {
				t.Fatalf("%q with %d frames", got.Name, len(got.Frames))
			}
			f := got.Frames[1]
			if f.T != 1_700_000_001_000 || f.Kind != "snapshot" || f.Body.Mode != "kv" || len(f.Body.Marks) != 1 || f.Body.Points[0].T != 1_700_000_001 {
				t.Fatalf("second frame = %+v", f)
			}
		}},
		{"the CSV export is a download with a row per snapshot and per event", "/recordings/1/export.csv", 200, func(t *testing.T, w *httptest.ResponseRecorder) {
			if cd := w.Header().Get("Content-Disposition"); cd != `attachment; filename="kvlens-recording-1.csv"` {
				t.Errorf("Content-Disposition = %q", cd)
			}
			lines := strings.Split(strings.TrimSpace(w.Body.String()), "\n")
			if len(lines) != 5 || lines[0] != strings.Join(recording.CSVHeader, ",") || !strings.HasPrefix(strings.SplitN(lines[2], ",", 2)[1], "mode,,kv,") || !strings.Contains(lines[3], ",snapshot,a,kv,") {
				t.Fatalf("CSV:\n%s", w.Body.String())
			}
		}},
		{"the JSON export is a download of the recording and its frames", "/recordings/2/export.json", 200, func(t *testing.T, w *httptest.ResponseRecorder) {
			if cd := w.Header().Get("Content-Disposition"); cd != `attachment; filename="kvlens-recording-2.json"` {
				t.Errorf("Content-Disposition = %q", cd)
			}
			var got struct {
				Name   string
				Frames []json.RawMessage
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Name != "booth afternoon" || len(got.Frames) != 2 {
				t.Fatalf("JSON export %q with %d frames (%v)", got.Name, len(got.Frames), err)
			}
		}},

		// Sad paths: a one-line reason, never a page.
		{"an id that is not a number is refused", "/recordings/abc", 400, nil},
		{"id zero is refused", "/recordings/0/frames", 400, nil},
		{"a negative id is refused", "/recordings/-1/export.csv", 400, nil},
		{"an unknown recording's page is not found", "/recordings/99", 404, nil},
		{"an unknown recording's frames are not found", "/recordings/99/frames", 404, nil},
		{"an unknown recording's export is not found", "/recordings/99/export.json", 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(s, "GET", tt.path, false)
			if w.Code != tt.code {
				t.Fatalf("GET %s = %d %q, want %d", tt.path, w.Code, w.Body.String(), tt.code)
			}
			if tt.code != 200 {
				if body := strings.TrimSpace(w.Body.String()); body == "" || strings.Contains(body, "\n") || strings.Contains(body, "<") {
					t.Fatalf("GET %s answered %q, want a one-line reason", tt.path, body)
				}
				return
			}
			tt.check(t, w)
		})
	}
}

func TestDeletingRecordings(t *testing.T) {
	tests := []struct {
		name     string
		id       string
		operator bool
		code     int
		// remaining is how many recordings the store keeps afterwards.
		remaining int
	}{
		{"a viewer cannot delete a recording", "1", false, 403, 3},
		{"the operator deletes a finished recording and returns to the list", "1", true, 303, 2},
		{"the session being recorded cannot be deleted", "3", true, 409, 3},
		{"deleting an unknown recording is not found", "99", true, 404, 3},
		{"deleting a malformed id is refused", "x1", true, 400, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, db := recordingServer(t)
			w := serve(s, "POST", "/recordings/"+tt.id+"/delete", tt.operator)
			if w.Code != tt.code {
				t.Fatalf("delete = %d %q, want %d", w.Code, w.Body.String(), tt.code)
			}
			recs, err := db.Recordings(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tt.remaining {
				t.Fatalf("%d recordings left, want %d", len(recs), tt.remaining)
			}
		})
	}
}

// TestARecordingAnotherKvlensWritesIsNotDeleted: recording 3 has no end
// and started a moment ago, so some kvlens is writing it; here it is not
// this server's session, and deleting it would fail that kvlens's flushes.
func TestARecordingAnotherKvlensWritesIsNotDeleted(t *testing.T) {
	s, db := recordingServer(t)
	s.opts.CurrentRecording = 0
	w := serve(s, "POST", "/recordings/3/delete", true)
	if w.Code != 409 || strings.TrimSpace(w.Body.String()) != "recording 3 is still being recorded by another running kvlens" {
		t.Fatalf("delete = %d %q, want 409 and why", w.Code, w.Body.String())
	}
	if recs, err := db.Recordings(context.Background()); err != nil || len(recs) != 3 {
		t.Fatalf("%d recordings left (%v), want 3", len(recs), err)
	}
}

func TestRecordingsOffSaysWhy(t *testing.T) {
	opts := testOptions()
	opts.RecordingsOff = "kvlens runs without a store (--db)"
	s := New(&fakeLoad{}, newFakeRouter("round_robin"), opts)
	w := serve(s, "GET", "/recordings", false)
	doc, _ := goquery.NewDocumentFromReader(w.Body)
	if got := doc.Find(`[data-testid=recordings-off]`).Text(); got != "Recordings are off: kvlens runs without a store (--db)" {
		t.Fatalf("page says %q", got)
	}
	if w := serve(s, "GET", "/recordings/1/frames", false); w.Code != 404 || strings.TrimSpace(w.Body.String()) != "recordings are off: kvlens runs without a store (--db)" {
		t.Fatalf("frames without a store = %d %q, want 404 giving the same reason as the page", w.Code, w.Body)
	}
	live := serve(s, "GET", "/", false)
	doc, _ = goquery.NewDocumentFromReader(live.Body)
	if href, _ := doc.Find(`[data-testid=recordings-link]`).Attr("href"); href != "/recordings" {
		t.Fatalf("the live page links to %q for recordings", href)
	}
}

func FuzzRecordingID(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "abc", "99999999999999999999", "1e3", " 2"} {
		f.Add(s)
	}
	srv, _ := recordingServer(f)
	f.Fuzz(func(t *testing.T, id string) {
		w := serve(srv, "GET", "/recordings/"+url.PathEscape(id)+"/frames", false)
		switch w.Code {
		case 200, 400, 404:
		default:
			t.Fatalf("id %q: %d %q", id, w.Code, w.Body.String())
		}
	})
}

func TestReplayFirstLoadIsLightAndSelfContained(t *testing.T) {
	// The replay page loads the same vendored chart library as the live
	// page, from the binary, within the same 300 KB budget.
	s, _ := recordingServer(t)
	page := serve(s, "GET", "/recordings/1", false)
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(page.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	total := page.Body.Len()
	var assets []string
	doc.Find("script[src], link[href]").Each(func(_ int, sel *goquery.Selection) {
		for _, attr := range []string{"src", "href"} {
			if v, ok := sel.Attr(attr); ok {
				assets = append(assets, v)
			}
		}
	})
	if len(assets) < 4 {
		t.Fatalf("found only %d assets: %v", len(assets), assets)
	}
	for _, a := range assets {
		if !strings.HasPrefix(a, "/static/") {
			t.Fatalf("asset %q is not served by kvlens itself", a)
		}
		w := serve(s, "GET", a, false)
		if w.Code != 200 {
			t.Fatalf("GET %s = %d", a, w.Code)
		}
		total += w.Body.Len()
	}
	t.Logf("replay first load: %d bytes over %d requests, before the frames", total, len(assets)+1)
	if total > 300_000 {
		t.Fatalf("replay first load is %d bytes, over the 300 KB budget", total)
	}
}

// TestReplayShowsWhatTheLivePageShowed records an A/B session's ticks as the
// demo does, then replays them: each second's headline and tiles are the
// very ones the browsers were sent, the baseline is recorded at the start
// and again when another is put in use, and a frame from before kvlens kept
// tiles replays with dashes and the reason.
func TestReplayShowsWhatTheLivePageShowed(t *testing.T) {
	ctx := context.Background()
	s, _, lb, _, _ := abServer(t, settled(window(561, 0.86)), settled(window(372, 0.98)))
	_, db := recordingServer(t)
	id, err := db.CreateRecording(ctx, "booth A/B", nil)
	if err != nil {
		t.Fatal(err)
	}
	var recorded []store.Frame
	s.opts.Record = func(kind string, body []byte) {
		recorded = append(recorded, store.Frame{T: time.Now(), Kind: kind, Body: body})
	}
	s.opts.Recordings = db

	var pushed []string // the panels' HTML each tick sent to the browsers
	tick := func() { pushed = append(pushed, string(s.frames()[1])) }
	tick()
	lb.snap.Window = window(450, 0.97) // lane B's window begins again: settling
	tick()
	other := *s.base()
	other.Name = "simulated just now"
	s.baseline.Store(&other) // "Compare with it"
	tick()
	// A frame as kvlens recorded it before it kept tiles.
	recorded = append(recorded, store.Frame{T: time.Now(), Kind: "snapshot", Body: recordedFrame(t, time.Now().Unix(), "kv")})
	if err := db.AppendFrames(ctx, id, recorded); err != nil {
		t.Fatal(err)
	}

	var kinds []string
	for _, f := range recorded {
		kinds = append(kinds, f.Kind)
	}
	if got := strings.Join(kinds, ","); got != "baseline,snapshot,panels,snapshot,panels,baseline,snapshot,panels,snapshot" {
		t.Fatalf("recorded %s; want each snapshot followed by its panels, and the baseline before the first and again when it changed", got)
	}
	for i, f := range recorded {
		// A frame is one row of the store, which keeps a row of up to about
		// 1 KB in its page and puts a longer one's rest in a 4 KB page.
		if n := len(gzipped(t, f.Body)); n > 900 {
			t.Errorf("frame %d (%s) is %d bytes compressed; want a row that fits the page", i, f.Kind, n)
		}
	}

	panels := func(seq int) *goquery.Document {
		t.Helper()
		w := serve(s, "GET", fmt.Sprintf("/recordings/%d/frames/%d/panels", id, seq), false)
		if w.Code != 200 {
			t.Fatalf("panels of frame %d = %d %q", seq, w.Code, w.Body.String())
		}
		doc, err := goquery.NewDocumentFromReader(w.Body)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	outer := func(doc *goquery.Document, sel string) string {
		h, _ := goquery.OuterHtml(doc.Find(sel))
		return h
	}
	for i, seq := range []int{1, 3, 6} {
		live, _ := goquery.NewDocumentFromReader(strings.NewReader(pushed[i]))
		got := panels(seq)
		for _, sel := range []string{"#tiles", "#headline"} {
			if want := outer(live, sel); want == "" || outer(got, sel) != want {
				t.Errorf("tick %d's %s replays as\n%s\nwant what the browsers got:\n%s", i, sel, outer(got, sel), want)
			}
		}
	}
	// The two ticks differ as the live page did: settled, then settling.
	if v := panels(1).Find(`[data-testid=ttft-p95]`).Text(); v != "372 ms" {
		t.Errorf("first tick's TTFT p95 tile = %q, want 372 ms", v)
	}
	if d := panels(1).Find(`[data-testid=ttft-p95-status]`).Text(); d != "−34%" {
		t.Errorf("first tick's TTFT p95 difference = %q, want −34%%", d)
	}
	second := panels(3)
	if v, st := second.Find(`[data-testid=ttft-p95]`).Text(), second.Find(`[data-testid=ttft-p95-status]`).Text(); v != "450 ms" || !strings.HasPrefix(st, "settling") {
		t.Errorf("second tick's TTFT p95 tile = %q, %q; want 450 ms, settling", v, st)
	}

	old := panels(8)
	if old.Find(`.tile`).Length() != 12 || old.Find(`[data-testid=ttft-p95]`).Text() != "—" || old.Find(`[data-testid=kv-hit]`).Text() != "—" {
		t.Errorf("an old frame's tiles: %d, TTFT p95 %q; want 12 tiles of dashes", old.Find(`.tile`).Length(), old.Find(`[data-testid=ttft-p95]`).Text())
	}
	if _, hidden := old.Find(`#headline`).Attr("hidden"); !hidden || !strings.Contains(old.Find(`[data-testid=compare]`).Text(), noPanels) {
		t.Errorf("an old frame shows a headline, or does not say why its tiles are dashes: %s", outer(old, "#tiles"))
	}

	// The player's frames: in order, numbered as stored, with the
	// baselines, and without the panels it fetches one second at a time.
	w := serve(s, "GET", fmt.Sprintf("/recordings/%d/frames", id), false)
	var got struct {
		Frames []struct {
			Seq  int
			Kind string
			Body map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got.Frames) != 6 {
		t.Fatalf("frames: %d, %v", len(got.Frames), err)
	}
	var seqs []string
	for _, f := range got.Frames {
		seqs = append(seqs, fmt.Sprint(f.Seq))
	}
	if got := strings.Join(seqs, ","); got != "0,1,3,5,6,8" {
		t.Errorf("the player's frames are numbered %s, want 0,1,3,5,6,8: every frame but the panels, by its number in the store", got)
	}
	if name := string(got.Frames[3].Body["name"]); name != `"simulated just now"` || got.Frames[4].Body["live"] == nil {
		t.Errorf("the second baseline is %s; the snapshot after it has live point %s", name, got.Frames[4].Body["live"])
	}

	// Sad paths: a one-line reason.
	for _, tt := range []struct {
		name, path string
		code       int
	}{
		{"a baseline frame has no tiles", fmt.Sprintf("/recordings/%d/frames/0/panels", id), 400},
		{"the panels are asked for by their snapshot's number", fmt.Sprintf("/recordings/%d/frames/2/panels", id), 400},
		{"a frame past the end is not found", fmt.Sprintf("/recordings/%d/frames/9/panels", id), 404},
		{"a frame number that is not a number is refused", fmt.Sprintf("/recordings/%d/frames/x/panels", id), 400},
		{"a negative frame number is refused", fmt.Sprintf("/recordings/%d/frames/-1/panels", id), 400},
		{"an unknown recording's panels are not found", "/recordings/99/frames/1/panels", 404},
	} {
		w := serve(s, "GET", tt.path, false)
		if body := strings.TrimSpace(w.Body.String()); w.Code != tt.code || body == "" || strings.Contains(body, "\n") {
			t.Errorf("%s: GET %s = %d %q, want %d and one line", tt.name, tt.path, w.Code, body, tt.code)
		}
	}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReplayShowsTheWarmUpAsTheWarmUp records a warm-up's ticks and one
// after it, as the demo does, and replays them: the warm-up's seconds show
// the headline and tiles the live page showed then (warming up, so many
// seconds left), not dashes blamed on an older kvlens. A warm-up's points
// sit at the warm-up's own time, in the past, while kvlens before this
// stamped its panels with the wall clock; a recording made so replays the
// same.
func TestReplayShowsTheWarmUpAsTheWarmUp(t *testing.T) {
	ctx := context.Background()
	s, base, _, _ := warmServer(t, "", "")
	_, db := recordingServer(t)
	var recorded []store.Frame
	s.opts.Record = func(kind string, body []byte) {
		recorded = append(recorded, store.Frame{T: time.Now(), Kind: kind, Body: body})
	}
	s.opts.Recordings = db

	var pushed []string // the panels' HTML each tick sent to the browsers
	tick := func() { pushed = append(pushed, string(s.frames()[1])) }
	tick()
	base.Advance(time.Second)
	tick()
	endWarmUp(t, s, base)
	tick()

	for i, f := range recorded {
		if f.Kind != "panels" {
			continue
		}
		var snap Frame
		var p Panels
		if json.Unmarshal(recorded[i-1].Body, &snap) != nil || json.Unmarshal(f.Body, &p) != nil || len(snap.Points) == 0 {
			t.Fatalf("frame %d or the snapshot before it cannot be read", i)
		}
		if p.T != snap.Points[0].T {
			t.Errorf("frame %d: panels of second %d after a snapshot whose points are at %d; want its points' second", i, p.T, snap.Points[0].T)
		}
	}

	// The same ticks as kvlens recorded them before: each warm-up panels
	// frame stamped with the wall clock's second, not its points'. (After
	// the warm-up the two were the same second, as the warp is then the
	// wall clock; here its base is the test's clock, so those are kept.)
	var legacy []store.Frame
	for i, f := range recorded {
		if f.Kind == "panels" && strings.Contains(string(recorded[i-1].Body), `"warming":true`) {
			var p map[string]json.RawMessage
			if err := json.Unmarshal(f.Body, &p); err != nil {
				t.Fatal(err)
			}
			p["t"] = json.RawMessage(fmt.Sprint(f.T.Unix()))
			f.Body, _ = json.Marshal(p)
		}
		legacy = append(legacy, f)
	}

	for _, tt := range []struct {
		name   string
		frames []store.Frame
	}{
		{"recorded now", recorded},
		{"recorded before the warm-up's panels took its points' time", legacy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, err := db.CreateRecording(ctx, "warm start", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.AppendFrames(ctx, id, tt.frames); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, f := range tt.frames {
				kinds = append(kinds, f.Kind)
			}
			if got := strings.Join(kinds, ","); got != "baseline,snapshot,panels,snapshot,panels,snapshot,panels" {
				t.Fatalf("recorded %s", got)
			}
			for i, seq := range []int{1, 3, 5} {
				w := serve(s, "GET", fmt.Sprintf("/recordings/%d/frames/%d/panels", id, seq), false)
				if w.Code != 200 {
					t.Fatalf("panels of frame %d = %d %q", seq, w.Code, w.Body.String())
				}
				got, _ := goquery.NewDocumentFromReader(w.Body)
				live, _ := goquery.NewDocumentFromReader(strings.NewReader(pushed[i]))
				if says := got.Find(`[data-testid=compare]`).Text(); strings.Contains(says, "older kvlens") {
					t.Errorf("tick %d replays as made by an older kvlens: %q", i, says)
				}
				for _, sel := range []string{"#tiles", "#headline"} {
					g, _ := goquery.OuterHtml(got.Find(sel))
					if want, _ := goquery.OuterHtml(live.Find(sel)); want == "" || g != want {
						t.Errorf("tick %d's %s replays as %q, want what the browsers got: %q", i, sel, got.Find(sel).Text(), live.Find(sel).Text())
					}
				}
				warming := got.Find(`[data-testid=headline-warming]`).Text()
				if i < 2 && (!strings.HasPrefix(warming, "Warming up: the fleets run 2 min of traffic ahead") || got.Find(`[data-testid=ttft-p95]`).Text() != "—") {
					t.Errorf("warm-up tick %d replays with the headline %q, TTFT p95 %q; want warming up, and no figure", i, warming, got.Find(`[data-testid=ttft-p95]`).Text())
				}
				if i == 2 && warming != "" {
					t.Errorf("the tick after the warm-up replays as warming: %q", warming)
				}
			}
		})
	}
}

// TestAnEmptyRecordingSaysNothingWasRecorded: a session that ended before
// its first frame reached the store is listed as holding nothing, not with
// the length its session ran beside 0 frames, and its page says that
// alone: no player that reads "loading" beside "no frames". The session
// being recorded, with none written yet, says they are coming.
func TestAnEmptyRecordingSaysNothingWasRecorded(t *testing.T) {
	s, db := recordingServer(t)
	ctx := context.Background()
	ended, err := db.CreateRecording(ctx, "closed at once", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := db.Recording(ctx, ended)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.EndRecording(ctx, ended, rec.Started.Add(12*time.Second)); err != nil {
		t.Fatal(err)
	}
	fresh, err := db.CreateRecording(ctx, "just started", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.opts.CurrentRecording = fresh

	list, _ := goquery.NewDocumentFromReader(serve(s, "GET", "/recordings", false).Body)
	for _, tt := range []struct {
		name           string
		id             int64
		length, frames string
	}{
		{"the ended one holds nothing", ended, "nothing recorded", "0"},
		{"this session's is recording", fresh, "recording now", "0"},
	} {
		row := list.Find(fmt.Sprintf(`[data-testid=recording-row][data-id="%d"]`, tt.id))
		if l, f := row.Find(`[data-testid=recording-length]`).Text(), row.Find(`[data-testid=recording-frames]`).Text(); l != tt.length || f != tt.frames {
			t.Errorf("%s: listed with length %q and %q frames; want %q and %q", tt.name, l, f, tt.length, tt.frames)
		}
	}

	for _, tt := range []struct {
		name string
		id   int64
		says string
	}{
		{"replay_empty", ended, "Nothing was recorded: this recording has no frames to play."},
		{"replay_empty_current", fresh, "Nothing recorded yet: the recorder writes its frames every 10 s. Reload the page in a moment."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := fmt.Sprintf("/recordings/%d", tt.id)
			w := serve(s, "GET", path, false)
			if w.Code != 200 {
				t.Fatalf("GET %s = %d %q", path, w.Code, w.Body.String())
			}
			page := w.Body.Bytes()
			golden(t, tt.name, path, page)
			doc, _ := goquery.NewDocumentFromReader(bytes.NewReader(page))
			if got := doc.Find(`[data-testid=replay-empty]`).Text(); got != tt.says {
				t.Errorf("the page says %q, want %q", got, tt.says)
			}
			for _, id := range []string{"play", "timeline", "playhead", "compare", "ttft-chart"} {
				if doc.Find(`[data-testid=`+id+`]`).Length() != 0 {
					t.Errorf("the page of an empty recording has a %s", id)
				}
			}
			if strings.Contains(string(page), "loading") {
				t.Error("the page of an empty recording says something is loading")
			}
		})
	}
}

// Package components holds the dashboard's templ components. Each renders
// from a plain data struct, so tests can render them without a server.
package components

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/a-h/templ"
)

// PageData is what the dashboard page needs on first load.
type PageData struct {
	// Blind says why KV routing cannot see the workers' caches, such as a
	// tokenizer mismatch; empty when it can.
	Blind string
	// Mode is the active routing policy in plain words, such as "Round-robin".
	Mode string
	// Workers describes the fleet, such as "3 simulated H200 workers".
	Workers string
	// Profile is the workers' engine profile or endpoints, in plain words.
	Profile string
	// ProfileName names the simulated workers' profile, for the header's
	// hover text; "" when Profile is the name itself.
	ProfileName string
	// Running says whether load is being generated.
	Running bool
	// SliderMin, SliderMax and SliderStep bound the concurrency slider.
	SliderMin, SliderMax, SliderStep int
	// Target is the concurrency asked for.
	Target int
	// SLOTTFTms is the TTFT objective, in ms.
	SLOTTFTms float64
	// SLOTPOTms is the TPOT objective, in ms.
	SLOTPOTms float64
	// Headline states the A/B view's live difference; hidden in the single view.
	Headline HeadlineData
	// Tiles are the headline figures at render time.
	Tiles TilesData
	// Live is the number of conversations running in each lane.
	Live []int
	// Modes is the single view's routing-mode switch.
	Modes ModeData
	// Pair is the A/B view's pair of policy selects; PairText names the
	// pair in plain words for the header. Both are empty in the single view.
	Pair     PairData
	PairText []string
	// Workers is the workers panel at render time.
	WorkerPanel WorkersData
	// Baseline is the overlay chart's data, embedded as JSON.
	Baseline any
	// Faults are the fault presets the operator may inject; empty for real
	// workers.
	Faults []Option
	// Sim is "simulate this curve"'s state.
	Sim SimData
	// BaselineName names the stored set the page compares with.
	BaselineName string
	// Caveat, when set, says what a comparison of simulated workers with
	// curves measured on hardware can and cannot show.
	Caveat string
	// Envelope is the SLO envelope in one sentence.
	Envelope string
	// Operator says whether this browser may change the demo; viewers see
	// the controls disabled.
	Operator bool
	// CanLogin says whether an operator token exists to enter.
	CanLogin bool
	// QR says whether to show the QR code of PublicURL.
	QR bool
	// PublicURL is the address the QR code opens.
	PublicURL string
	// How fills the "How it works" panel.
	How HowData
	// Tour is the tour's bar; hidden without --tour.
	Tour TourData
}

// TourData is the tour's bar (--tour).
type TourData struct {
	// Show says a tour plays, or is paused.
	Show bool
	// Step is the step playing or paused in, from 1, of Steps.
	Step, Steps int
	// Caption tells visitors what to watch.
	Caption string
	// Left is the time to the next step, such as "42 s left".
	Left string
	// Done is the fraction of the step's time gone, 0 to 1.
	Done float64
	// Paused says an operator has taken over.
	Paused bool
	// Operator enables Pause and Resume on this render.
	Operator bool
	// Err says why the step's change failed; empty when it did not.
	Err string
}

// TilesData are the headline figures, pushed to the browser every second.
// Recordings keep it, and HeadlineData, as JSON under these tags, so that a
// replay shows what the page showed: a renamed field keeps its tag.
type TilesData struct {
	// Tiles are the figures in display order.
	Tiles []Tile `json:"tiles"`
	// Lanes name the lanes the charts draw, each in its colour, when they
	// draw more than one: the legend of every chart.
	Lanes []string `json:"lanes,omitempty"`
	// Compare says what the tiles show and compare with, such as "tiles: B
	// vs A, same conversations at the same time".
	Compare string `json:"compare"`
	// Settling says why no tile shows a difference yet, such as "settling
	// (12 s of 30)"; empty once the windows are settled.
	Settling string `json:"settling,omitempty"`
}

// Tile is one headline figure: live value, baseline value and difference.
type Tile struct {
	// ID names the tile for tests (data-testid) and styling.
	ID string `json:"id"`
	// Label is the figure's name, such as "TTFT p95".
	Label string `json:"label"`
	// Value is the live figure with its unit (lane B's in the A/B view), or
	// a dash when there is no data.
	Value string `json:"value"`
	// Baseline is what Value is compared with, or a dash: lane A's figure
	// ("vs 561 ms") or the stored one at the current concurrency ("base
	// 561 ms").
	Baseline string `json:"baseline"`
	// Delta is Value's difference from Baseline, such as "+12%"; empty when
	// either is missing or the windows are settling.
	Delta string `json:"delta,omitempty"`
	// Better says whether Delta is an improvement, Even that it is none
	// either way or within the figure's noise band; they colour the delta.
	Better bool `json:"better,omitempty"`
	Even   bool `json:"even,omitempty"`
	// Noise says, for an even Delta, why it is not coloured: the figure's
	// noise band, such as "not coloured: two lanes running one policy
	// differ by up to 22% in 9 windows of 10".
	Noise string `json:"noise,omitempty"`
	// Level is the SLO colour: "ok", "warn", "bad" or "none".
	Level string `json:"level"`
	// Note is a small extra line, such as the shed count.
	Note string `json:"note,omitempty"`
	// Settling, while the window is too young to compare, says so in place
	// of Delta, such as "settling (12 s of 30)"; the tile is not coloured.
	Settling string `json:"settling,omitempty"`
}

// HeadlineData is the A/B view's sentence: lane B against lane A in words
// and numbers, such as "KV-aware vs Round-robin: TTFT p95 372 ms vs 561 ms,
// −34%; cache hit 98% vs 86% · 120 conversations each".
type HeadlineData struct {
	// Show is false in the single view, which has no headline.
	Show bool `json:"show"`
	// A and B name the policies in plain words; AgoA and AgoB are a kept
	// window's age in the alternating view.
	A    string `json:"a,omitempty"`
	B    string `json:"b,omitempty"`
	AgoA string `json:"ago_a,omitempty"`
	AgoB string `json:"ago_b,omitempty"`
	// Conversations is the concurrency both run; Stopped says the load is
	// stopped, and the headline says so in its place.
	Conversations int  `json:"conversations,omitempty"`
	Stopped       bool `json:"stopped,omitempty"`
	// TTFTA and TTFTB are TTFT p95 formatted, or dashes; TTFTAms and
	// TTFTBms the same in ms (0 without data), for tests to read.
	TTFTA   string  `json:"ttft_a,omitempty"`
	TTFTB   string  `json:"ttft_b,omitempty"`
	TTFTAms float64 `json:"ttft_a_ms,omitempty"`
	TTFTBms float64 `json:"ttft_b_ms,omitempty"`
	// Delta is B's TTFT p95 against A's, such as "−34%"; Better and Even
	// colour it, and Noise says why an even one is not coloured (Tile.Noise).
	Delta  string `json:"delta,omitempty"`
	Better bool   `json:"better,omitempty"`
	Even   bool   `json:"even,omitempty"`
	Noise  string `json:"noise,omitempty"`
	// HitA and HitB are the KV hit rates, or "" while a lane's window has
	// none.
	HitA string `json:"hit_a,omitempty"`
	HitB string `json:"hit_b,omitempty"`
	// Settling replaces Delta while a window is too young.
	Settling string `json:"settling,omitempty"`
	// Warming, while the fleets warm up, replaces the whole sentence, such
	// as "Warming up: the fleets run 2 min of traffic ahead, 18 s left".
	Warming string `json:"warming,omitempty"`
}

// PairData is the A/B view's policy selects, one per lane.
type PairData struct {
	Lanes []PairLane
	// Operator enables the selects.
	Operator bool
}

// PairLane is one lane's policy select.
type PairLane struct {
	// ID is the lane's name: a or b.
	ID string
	// Active is the lane's policy.
	Active  string
	Options []ModeOption
}

// ModeData is the routing-mode switch.
type ModeData struct {
	// Active is the live policy's name.
	Active string
	// Main are the policies with their own buttons; More go behind a menu.
	Main, More []ModeOption
	// Operator enables the controls.
	Operator bool
}

// ModeOption is one routing policy a button or menu entry selects.
type ModeOption struct {
	// Name is the policy's identifier, such as kv.
	Name string
	// Text names its router, such as "kvlens kv".
	Text string
	// Title says what it does in plain words, on hover.
	Title string
}

// WorkersData is the workers panel.
type WorkersData struct {
	// Lanes are the fleets, each with its workers in its router's order.
	Lanes []WorkerLane
	// Source says where queue and KV figures come from.
	Source string
	// Frontend is a Dynamo frontend's own view, when Dynamo routes and
	// kvlens reads its /metrics; nil otherwise.
	Frontend *FrontendRow
	// Fault names the fault injected into every simulated worker, such as
	// "fault: 10% HTTP 503"; empty when none is.
	Fault string
}

// WorkerLane is one lane's fleet in the workers panel.
type WorkerLane struct {
	// ID is the lane's name (a, b); Name its heading, empty in the single
	// view.
	ID, Name string
	Rows     []WorkerRow
}

// FrontendRow is what a Dynamo frontend reports of itself.
type FrontendRow struct {
	// OK says at least two scrapes succeeded; else Error says why not.
	OK    bool
	Error string
	// KVHitRate is from 0 to 1, over the window.
	KVHitRate float64
	// InFlight and Queued are requests at the last scrape.
	InFlight, Queued float64
}

// WorkerRow is one worker's live state. Fractions are 0 to 1; a negative
// fraction means the figure is not available and is shown as a dash.
type WorkerRow struct {
	// Name is the worker's name in the router.
	Name string
	// Healthy says whether the router sends it requests.
	Healthy bool
	// InFlight is requests the router has open on it; Capacity its batch size.
	InFlight, Capacity int
	// Queued is requests waiting for admission on the worker; -1 if unknown.
	Queued int
	// KVUsage is the fraction of its KV cache in use; -1 if unknown.
	KVUsage float64
	// HitRate is Σcached / Σprompt tokens of its requests in the window; -1
	// when it served none.
	HitRate float64
	// Share is its fraction of the window's requests; -1 when there were none.
	Share float64
	// Events is its KV event stream; nil when it publishes none.
	Events *EventsData
}

// ConversationsData is the list of live and recent conversations.
type ConversationsData struct {
	// Items are the conversations, newest first.
	Items []ConversationItem
	// Lanes is how many lanes play the same conversations; past one, each
	// item links to every lane's copy.
	Lanes int
}

// ConversationItem is one line of the list.
type ConversationItem struct {
	ID                   uint64
	Title                string
	Turns, Planned, Errs int
	Done                 bool
	Worker               string
	// Asking says that a turn is out, waiting for its answer.
	Asking bool
}

// ConversationData is one conversation, turn by turn.
type ConversationData struct {
	ID      uint64
	Title   string
	Starter string
	// Lane names the lane that played it, in the A/B view.
	Lane  string
	Turns []TurnData
	// Asking is the question waiting for its answer; nil when none is.
	Asking *AskingData
}

// AskingData is a question sent and not yet answered.
type AskingData struct {
	Index            int
	Question, Source string
	// Waiting is how long it has waited, formatted ("12 s").
	Waiting string
}

// TurnData is one turn of a conversation; times are formatted.
type TurnData struct {
	Index            int
	Question, Answer string
	Source           string
	Worker           string
	TTFT, TPOT       string
	ISL, OSL, Cached int
	Error            string
}

// FormatMs formats a latency in ms for a tile, or a dash when there is no data.
func FormatMs(v float64, n int) string {
	if n == 0 || math.IsNaN(v) {
		return "—"
	}
	if v >= 10000 {
		return fmt.Sprintf("%.1f s", v/1000)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// SLOLevel is "ok", "warn" (from 90% of the objective) or "bad" (at or over
// it), as the original demo coloured its table.
func SLOLevel(v, slo float64, n int) string {
	switch {
	case n == 0 || slo <= 0:
		return "none"
	case v >= slo:
		return "bad"
	case v >= 0.9*slo:
		return "warn"
	}
	return "ok"
}

func num(v float64) string { return fmt.Sprintf("%.0f", v) }

// pctOrDash formats a fraction as a percentage, or a dash when negative.
func pctOrDash(v float64) string {
	if v < 0 || math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

// barWidth is a fraction as a CSS width, clamped to 0–100%.
func barWidth(v float64) string {
	if v < 0 || math.IsNaN(v) {
		v = 0
	}
	return fmt.Sprintf("width:%.0f%%", 100*min(v, 1))
}

func queued(n int) string {
	if n < 0 {
		return "—"
	}
	return itoa(n)
}

func itoa(n int) string { return fmt.Sprint(n) }

func fixed1(v float64) string { return fmt.Sprintf("%.1f", v) }

func inMore(m ModeData) bool {
	for _, o := range m.More {
		if o.Name == m.Active {
			return true
		}
	}
	return false
}

func barStyle(v float64) templ.SafeCSS { return templ.SafeCSS(barWidth(v)) }

// laneID is lane i's id: a, b, …
func laneID(i int) string { return string(rune('a' + i)) }

// laneLetter is a lane's id as the page shows it: A, B.
func laneLetter(id string) string { return strings.ToUpper(id) }

// countsStyle sizes the slider's target and live count (app.css) for the
// most digits the slider can ask for, in every lane the count shows, so
// that the controls after them stay put as the count grows: from 60 · 60
// to 180 · 180 the pair's selects moved 31 px, and back 58 px at a Stop.
func countsStyle(d PageData) templ.SafeCSS {
	return templ.SafeCSS(fmt.Sprintf("--digits: %d; --lanes: %d;", len(strconv.Itoa(max(d.SliderMax, 0))), max(len(d.Live), 1)))
}

// laneCounts is each lane's count, as "60 · 60", each in its lane's
// colour when there are several. It is written here rather than in the
// template, whose line breaks would put spaces in the figures' text
// (" 60 ·  60"), which the page and its tests read.
func laneCounts(ns []int) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		if len(ns) < 2 {
			_, err := io.WriteString(w, counts(ns))
			return err
		}
		for i, n := range ns {
			if i > 0 {
				if _, err := io.WriteString(w, " · "); err != nil {
					return err
				}
			}
			if _, err := fmt.Fprintf(w, `<span class="lane-%s">%d</span>`, laneID(i), n); err != nil {
				return err
			}
		}
		return nil
	})
}

// counts joins each lane's count, as "60 · 60".
func counts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, " · ")
}

// msAttr is a latency for a data attribute: digits, or empty without data.
func msAttr(v float64, has string) string {
	if has == "—" || has == "" {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// paren is a kept window's age in brackets after a space, or nothing.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// loadText is the headline's last clause: the concurrency both lanes run,
// or that the load is stopped.
func loadText(h HeadlineData) string {
	if h.Stopped {
		return "load stopped"
	}
	return strconv.Itoa(h.Conversations) + " conversations each"
}

// comma separates a headline's difference from its figures, when it has one.
func comma(s string) string {
	if s == "" {
		return ""
	}
	return ", "
}

// headlineStatusClass colours the headline's difference, or marks it as
// settling.
func headlineStatusClass(h HeadlineData) string {
	switch {
	case h.Settling != "":
		return "settling"
	case h.Better:
		return "delta better"
	case h.Even:
		return "delta even"
	}
	return "delta worse"
}

func headlineStatusID(h HeadlineData) string {
	if h.Settling != "" {
		return "headline-settling"
	}
	return "headline-delta"
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ")"
}

// SimData is "simulate this curve"'s state, for SimStatus.
type SimData struct {
	// Available says the dashboard can simulate (a simulated fleet).
	Available bool
	// Operator says this rendering may press the buttons.
	Operator bool
	// Running, Finished, Steps and Phase describe a simulation under way.
	Running         bool
	Finished, Steps int
	Phase           string
	// Err is why the last simulation failed.
	Err string
	// Result names the finished curve set; Took is how long it took.
	Result, Took string
	// Stored says the set was saved in the store, NotStored why not;
	// InUse that the dashboard compares with it now.
	Stored, InUse bool
	NotStored     string
}

func storedText(stored bool, why string) string {
	if stored {
		return " (stored)"
	}
	return " (not stored: " + cmp.Or(why, "no store") + ")"
}

// Option is one choice of a select.
type Option struct {
	Value, Label string
	// Selected marks the option in force.
	Selected bool
}

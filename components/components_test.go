package components

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
)

func render(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	var b bytes.Buffer
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestHowItWorks(t *testing.T) {
	tests := []struct {
		name    string
		data    HowData
		check   string
		want    string
		present bool
	}{
		{"the workers are named with their model", HowData{Workers: "3 simulated H200 workers", Model: "Llama", BlockSize: 32},
			`[data-testid=how-workers]`, "3 simulated H200 workers, serving Llama.", true},
		{"the formula uses the workers' block size", HowData{BlockSize: 16}, `.formula`, "prefill_tokens(w) / 16", true},
		{"without a decision there is no worked example", HowData{BlockSize: 32}, `[data-testid=cost-example]`, "", false},
		{"a worked example marks the chosen worker", HowData{BlockSize: 32, Example: &CostExample{
			PromptTokens: 4000, Chosen: "w1",
			Rows: []CostRow{{Worker: "w0", Cost: 140.5}, {Worker: "w1", OverlapBlocks: 120, Cost: 12.3}},
		}}, `tr.chosen td:first-child`, "w1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := render(t, HowItWorks(tt.data)).Find(tt.check)
			if (sel.Length() > 0) != tt.present {
				t.Fatalf("%s present = %v, want %v", tt.check, sel.Length() > 0, tt.present)
			}
			if tt.present && !strings.Contains(sel.Text(), tt.want) {
				t.Fatalf("%s = %q, want it to contain %q", tt.check, sel.Text(), tt.want)
			}
		})
	}
}

func TestComponents(t *testing.T) {
	tiles := TilesData{Compare: "Live round-robin · baseline: KV-aware curve at 120", Tiles: []Tile{
		{ID: "ttft-p95", Label: "TTFT p95", Value: "700 ms", Baseline: "base 500 ms", Delta: "+40%", Level: "bad"},
		{ID: "tops", Label: "Output tok/s", Value: "—", Baseline: "—", Level: "none"},
	}}
	settlingTiles := TilesData{Compare: "B vs A", Settling: "settling (12 s of 30)", Tiles: []Tile{
		{ID: "ttft-p95", Label: "TTFT p95", Value: "372 ms", Baseline: "vs 561 ms", Level: "none", Settling: "settling (12 s of 30)"},
	}}
	modes := ModeData{Active: "dynamo", Operator: false,
		Main: []ModeOption{{Name: "round_robin", Text: "round-robin"}, {Name: "kv", Text: "kvlens kv", Title: "KV-aware"}},
		More: []ModeOption{{Name: "dynamo", Text: "kvlens copy of Dynamo 0.9's cost"}}}
	pair := PairData{Operator: true, Lanes: []PairLane{
		{ID: "a", Active: "round_robin", Options: modes.Main}, {ID: "b", Active: "kv", Options: modes.Main}}}
	workers := WorkersData{Lanes: []WorkerLane{{ID: "a", Rows: []WorkerRow{
		{Name: "sim-0", Healthy: true, InFlight: 32, Capacity: 64, Queued: 3, KVUsage: 0.5, HitRate: 0.9, Share: 0.4},
		{Name: "w1", Healthy: false, Capacity: 64, Queued: -1, KVUsage: -1, HitRate: -1, Share: -1},
	}}}}
	twoFleets := WorkersData{Lanes: []WorkerLane{
		{ID: "a", Name: "A · round-robin · simulated", Rows: []WorkerRow{{Name: "sim-0", Queued: -1, KVUsage: -1, HitRate: -1, Share: -1}}},
		{ID: "b", Name: "B · kvlens kv · simulated", Rows: []WorkerRow{{Name: "sim-3", Queued: -1, KVUsage: -1, HitRate: -1, Share: -1}}},
	}}
	headline := HeadlineData{Show: true, A: "Round-robin", B: "KV-aware", TTFTA: "561 ms", TTFTB: "372 ms", TTFTAms: 561, TTFTBms: 372,
		Delta: "−34%", Better: true, HitA: "86%", HitB: "98%", Conversations: 120}
	settlingHeadline := headline
	worseHeadline := headline
	worseHeadline.TTFTA, worseHeadline.TTFTB, worseHeadline.TTFTAms, worseHeadline.TTFTBms = "372 ms", "561 ms", 372, 561
	worseHeadline.Delta, worseHeadline.Better = "+51%", false
	settlingHeadline.Delta, settlingHeadline.Settling = "", "settling (12 s of 30)"
	conv := ConversationData{ID: 3, Title: "KV cache", Turns: []TurnData{{Index: 1, Question: "<b>why</b>", Answer: "because", Worker: "sim-2", TTFT: "90 ms", TPOT: "20.0 ms"}}}
	mdConv := ConversationData{ID: 4, Title: "Scheduler", Starter: "The **scheduler** picks a node.", Turns: []TurnData{{Index: 0, Question: "go on",
		Answer: "It compares the **allocatable** capacity.\n\n1. filter\n2. score\n\n<script>alert(1)</script> and [a link](javascript:alert(1))"}}}
	tests := []struct {
		name string
		c    templ.Component
		sel  string
		want string // "" means the selection must be absent
	}{
		{"a tile shows its live value", Tiles(tiles), `[data-testid=ttft-p95]`, "700 ms"},
		{"a tile shows what it is compared with", Tiles(tiles), `[data-testid=ttft-p95-baseline]`, "base 500 ms"},
		{"a tile without data shows a dash, not a zero", Tiles(tiles), `[data-testid=tops]`, "—"},
		{"a tile without a baseline shows no delta", Tiles(tiles), `[data-tile=tops] .delta`, ""},
		{"the tiles say what they compare with", Tiles(tiles), `[data-testid=compare]`, "Live round-robin · baseline: KV-aware curve at 120 · last 60 s, or since the last change"},
		{"a tile shows its difference on the status line", Tiles(tiles), `[data-testid=ttft-p95-status] .delta.worse`, "+40%"},
		{"a settling tile says so instead of a difference", Tiles(settlingTiles), `[data-tile=ttft-p95][data-settling=true] [data-testid=ttft-p95-status]`, "settling (12 s of 30)"},
		{"a settling tile shows no difference", Tiles(settlingTiles), `.delta`, ""},
		{"the tiles say they are settling", Tiles(settlingTiles), `#tiles[data-settling=true] [data-testid=ttft-p95]`, "372 ms"},
		{"the headline carries both lanes' TTFT for tests", Headline(headline), `[data-testid=headline][data-ttft-a="561"][data-ttft-b="372"] .delta.better`, "−34%"},
		{"a headline where B is slower colours its difference as worse", Headline(worseHeadline), `[data-testid=headline][data-ttft-a="372"][data-ttft-b="561"] .delta.worse`, "+51%"},
		{"a headline where B is slower is not coloured better", Headline(worseHeadline), `.delta.better`, ""},
		{"a settling headline names no difference", Headline(settlingHeadline), `[data-testid=headline][data-settling=true] [data-testid=headline-settling]`, "settling (12 s of 30)"},
		{"a settling headline has no delta", Headline(settlingHeadline), `.delta`, ""},
		{"the pair has one select per lane", PairSwitch(pair), `[data-testid=pair-b] option[selected]`, "kvlens kv"},
		{"a pair select posts its lane", PairSwitch(pair), `[data-testid=pair-a][hx-vals='{"lane":"a"}'] option[selected]`, "round-robin"},
		{"the header names the pair in lane colours", PairNames([]string{"Round-robin", "KV-aware"}), `#pair-names .lane-b`, "KV-aware"},
		{"the workers panel marks each fleet with its lane", Workers(twoFleets), `th.lane-b[data-testid=worker-lane][title="B · kvlens kv · simulated"]`, "B"},
		{"the single view has no fleet headings", Workers(workers), `[data-testid=worker-lane]`, ""},
		{"a mode button says what it does on hover", ModeSwitch(modes), `[data-testid=mode-kv][title=KV-aware]`, "kvlens kv"},
		{"the live mode in the more menu is selected", ModeSwitch(modes), `[data-testid=mode-more] option[selected]`, "kvlens copy of Dynamo 0.9's cost"},
		{"mode buttons are disabled for a viewer", ModeSwitch(modes), `[data-testid=mode-kv][disabled]`, "kvlens kv"},
		{"the live count is an out-of-band swap", LiveCount([]int{42}), `#live-count[hx-swap-oob=true]`, "42"},
		{"the live count names each lane's", LiveCount([]int{60, 59}), `#live-count`, "60 · 59"},
		{"each lane's live count is in its lane's colour", LiveCount([]int{60, 59}), `#live-count .lane-b`, "59"},
		{"a worker's queue and bars render", Workers(workers), `[data-testid=worker-row]:first-child [data-testid=worker-queued]`, "3"},
		{"a worker without figures shows dashes", Workers(workers), `tr.down [data-testid=worker-queued]`, "—"},
		{"a turn names its worker", Conversation(conv), `[data-testid=turn] .turn-meta strong`, "sim-2"},
		{"a turn's text is escaped, not markup", Conversation(conv), `[data-testid=turn] .q`, "User (): <b>why</b>"},
		{"an answer's Markdown emphasis is drawn, not shown as asterisks", Conversation(mdConv), `[data-testid=answer] p + p strong`, "allocatable"},
		{"an answer's numbered list is a list", Conversation(mdConv), `[data-testid=answer] ol li:last-child`, "score"},
		{"an answer's raw HTML is left out, not run", Conversation(mdConv), `[data-testid=answer] script`, ""},
		{"an answer's javascript: link goes nowhere", Conversation(mdConv), `[data-testid=answer] a[href^=javascript]`, ""},
		{"the opening passage's Markdown is drawn too", Conversation(mdConv), `details .text strong`, "scheduler"},
		{"an empty list says so", Conversations(ConversationsData{}), `.muted`, "No conversation yet."},
		{"the mode name updates the header", ModeName("KV-aware"), `#mode-name[hx-swap-oob=true]`, "KV-aware"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := render(t, tt.c).Find(tt.sel)
			if tt.want == "" {
				if sel.Length() != 0 {
					t.Fatalf("%s is present", tt.sel)
				}
				return
			}
			if got := strings.Join(strings.Fields(sel.Text()), ""); got != strings.Join(strings.Fields(tt.want), "") {
				t.Fatalf("%s = %q, want %q", tt.sel, sel.Text(), tt.want)
			}
		})
	}
}

func TestHeadlineReadsAsASentence(t *testing.T) {
	h := HeadlineData{Show: true, A: "Round-robin", B: "KV-aware", TTFTA: "561 ms", TTFTB: "372 ms", TTFTAms: 561, TTFTBms: 372,
		Delta: "−34%", Better: true, HitA: "86%", HitB: "98%", Conversations: 120}
	settling := h
	settling.Delta, settling.Settling = "", "settling (12 s of 30)"
	kept := h
	kept.AgoA = "2 min ago"
	noHit := settling
	noHit.HitA, noHit.HitB = "", ""
	oneHit := settling
	oneHit.HitA = ""
	stopped := h
	stopped.Delta, stopped.Settling, stopped.Stopped = "", "stopped", true
	tests := []struct {
		name string
		h    HeadlineData
		want string
	}{
		{"a settled headline states the difference", h, "KV-aware vs Round-robin: TTFT p95 372 ms vs 561 ms, −34%; cache hit 98% vs 86% · 120 conversations each"},
		{"a settling headline says so instead", settling, "KV-aware vs Round-robin: TTFT p95 372 ms vs 561 ms, settling (12 s of 30); cache hit 98% vs 86% · 120 conversations each"},
		{"no hit rate yet on either side says settling once", noHit, "KV-aware vs Round-robin: TTFT p95 372 ms vs 561 ms, settling (12 s of 30); cache hit settling · 120 conversations each"},
		{"a side without a hit rate yet says settling, not a dash", oneHit, "KV-aware vs Round-robin: TTFT p95 372 ms vs 561 ms, settling (12 s of 30); cache hit 98% vs settling · 120 conversations each"},
		{"an alternation's kept side gives its age", kept, "KV-aware vs Round-robin (2 min ago): TTFT p95 372 ms vs 561 ms, −34%; cache hit 98% vs 86% · 120 conversations each"},
		{"a stopped load runs no conversations", stopped, "KV-aware vs Round-robin: TTFT p95 372 ms vs 561 ms, stopped; cache hit 98% vs 86% · load stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Exact text, spaces included: no space may slip in before a comma.
			if got := render(t, Headline(tt.h)).Find(`[data-testid=headline]`).Text(); got != tt.want {
				t.Fatalf("headline = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPage(t *testing.T) {
	base := PageData{Mode: "KV-aware", Workers: "3 simulated H200 workers", Profile: "h200", SliderMin: 60, SliderMax: 180, SliderStep: 20,
		Target: 120, Live: []int{118}, Envelope: "KV-aware holds it up to 120 conversations", BaselineName: "seeds",
		Baseline: map[string]any{"name": "seeds"}, Modes: ModeData{Active: "kv", Main: []ModeOption{{Name: "kv", Text: "KV-aware"}}}}
	viewer, operator := base, base
	viewer.CanLogin = true
	operator.Operator = true
	operator.Modes.Operator = true
	tests := []struct {
		name string
		d    PageData
		sel  string
		want string // "" means absent
	}{
		{"the mode is in the header", base, `[data-testid=mode] #mode-name`, "KV-aware"},
		{"the fleet names its profile", base, `[data-testid=workers]`, "3 simulated H200 workersh200"},
		{"the target sits beside the live count", base, `.counts`, "target 120 · live 118"},
		{"the envelope sentence is under the baseline chart", base, `[data-testid=envelope]`, "KV-aware holds it up to 120 conversations"},
		{"the baseline curves are embedded as JSON", base, `script#baseline-data`, `{"name":"seeds"}`},
		{"a viewer may enter the token", viewer, `[data-testid=viewer-notice] form[hx-post="/api/login"] button`, "Unlock"},
		{"a viewer's reset is disabled", viewer, `[data-testid=reset][disabled]`, "Reset caches"},
		{"an operator sees no viewer notice", operator, `[data-testid=viewer-notice]`, ""},
		{"an operator's reset is enabled", operator, `[data-testid=reset]:not([disabled])`, "Reset caches"},
		{"the run state says stopped with a Start button", base, `[data-testid=run-state][data-running=false] [data-testid=start]`, "Start"},
		{"the conversations panel loads its list on opening", base, `details[data-testid=conversations][hx-get="/conversations"] summary`, "Conversations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := render(t, Page(tt.d)).Find(tt.sel)
			if tt.want == "" {
				if sel.Length() != 0 {
					t.Fatalf("%s is present", tt.sel)
				}
				return
			}
			if got := strings.Join(strings.Fields(sel.Text()), " "); got != tt.want {
				t.Fatalf("%s = %q, want %q", tt.sel, got, tt.want)
			}
		})
	}
}

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
	tiles := TilesData{Compare: "baseline: KV-aware curve at 120", Tiles: []Tile{
		{ID: "ttft-p95", Label: "TTFT p95", Value: "700 ms", Baseline: "base 500 ms", Delta: "+40%", Level: "bad"},
		{ID: "tops", Label: "Output tok/s", Value: "—", Baseline: "—", Level: "none"},
	}}
	modes := ModeData{Active: "dynamo", Operator: false,
		Main: []ModeOption{{"round_robin", "Round-robin"}, {"kv", "KV-aware"}},
		More: []ModeOption{{"dynamo", "KV-aware (Dynamo cost)"}}}
	workers := WorkersData{Rows: []WorkerRow{
		{Name: "sim-0", Healthy: true, InFlight: 32, Capacity: 64, Queued: 3, KVUsage: 0.5, HitRate: 0.9, Share: 0.4},
		{Name: "w1", Healthy: false, Capacity: 64, Queued: -1, KVUsage: -1, HitRate: -1, Share: -1},
	}}
	conv := ConversationData{ID: 3, Title: "KV cache", Turns: []TurnData{{Index: 1, Question: "<b>why</b>", Answer: "because", Worker: "sim-2", TTFT: "90 ms", TPOT: "20.0 ms"}}}
	tests := []struct {
		name string
		c    templ.Component
		sel  string
		want string // "" means the selection must be absent
	}{
		{"a tile shows its live value", Tiles(tiles), `[data-testid=ttft-p95]`, "700 ms"},
		{"a tile shows the baseline and the difference", Tiles(tiles), `[data-testid=ttft-p95-baseline]`, "base 500 ms+40%"},
		{"a tile without data shows a dash, not a zero", Tiles(tiles), `[data-testid=tops]`, "—"},
		{"a tile without a baseline shows no delta", Tiles(tiles), `[data-tile=tops] .delta`, ""},
		{"the tiles say what they compare with", Tiles(tiles), `[data-testid=compare]`, "Live, last 60 s · baseline: KV-aware curve at 120"},
		{"the live mode in the more menu is selected", ModeSwitch(modes), `[data-testid=mode-more] option[selected]`, "KV-aware (Dynamo cost)"},
		{"mode buttons are disabled for a viewer", ModeSwitch(modes), `[data-testid=mode-kv][disabled]`, "KV-aware"},
		{"the live count is an out-of-band swap", LiveCount(42), `#live-count[hx-swap-oob=true]`, "42"},
		{"a worker's queue and bars render", Workers(workers), `[data-testid=worker-row]:first-child [data-testid=worker-queued]`, "3"},
		{"a worker without figures shows dashes", Workers(workers), `tr.down [data-testid=worker-queued]`, "—"},
		{"a turn names its worker", Conversation(conv), `[data-testid=turn] .turn-meta strong`, "sim-2"},
		{"a turn's text is escaped, not markup", Conversation(conv), `[data-testid=turn] .q`, "User (): <b>why</b>"},
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

func TestPage(t *testing.T) {
	base := PageData{Mode: "KV-aware", Workers: "3 simulated H200 workers", Profile: "h200", SliderMin: 60, SliderMax: 180, SliderStep: 20,
		Target: 120, Live: 118, Envelope: "KV-aware holds it up to 120 conversations", BaselineName: "seeds",
		Baseline: map[string]any{"name": "seeds"}, Modes: ModeData{Active: "kv", Main: []ModeOption{{"kv", "KV-aware"}}}}
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
		{"an operator's reset is enabled", operator, `[data-testid=reset][disabled]`, ""},
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

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

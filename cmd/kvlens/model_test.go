package main

import (
	"strings"
	"testing"
)

// TestModelNameIsOneLineOfText: a --model with a control character went
// into every request's body, the logs, the page and the reports; each
// command that takes one now refuses it in one line, with status 2.
func TestModelNameIsOneLineOfText(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"serve refuses a line break, which split its log lines", []string{"serve", "--model", "llama\nkvlens: fake line"}, "kvlens serve: --model holds the control character U+000A"},
		{"serve refuses an escape sequence, which drove the terminal", []string{"serve", "--model", "\x1b[2Jllama"}, "kvlens serve: --model holds the control character U+001B"},
		{"serve refuses DEL", []string{"serve", "--model", "llama\x7f"}, "kvlens serve: --model holds the control character U+007F"},
		{"serve refuses a C1 control", []string{"serve", "--model", "llama\u0085"}, "kvlens serve: --model holds the control character U+0085"},
		{"serve refuses invalid UTF-8, which JSON sent as U+FFFD", []string{"serve", "--model", "llama\xff"}, `kvlens serve: --model "llama\xff" is not valid UTF-8`},
		{"serve refuses a follow-up model's name alike", []string{"serve", "--user-model-url", "http://127.0.0.1:1/v1", "--user-model", "q\r"}, "kvlens serve: --user-model holds the control character U+000D"},
		{"sim refuses a line break in the model it serves", []string{"sim", "--model", "llama\n"}, "kvlens sim: --model holds the control character U+000A"},
		{"sweep refuses a tab, which broke its report's table", []string{"sweep", "--model", "llama\tx"}, "kvlens sweep: --model holds the control character U+0009"},
		{"serve refuses an empty model, which every server refuses", []string{"serve", "--model", ""}, "kvlens serve: --model is empty: give a model's name, or leave --model out"},
		{"sweep refuses an empty model", []string{"sweep", "--model", ""}, "kvlens sweep: --model is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused(t, tt.args, tt.want)
		})
	}
}

// TestModelNameChecksInProcess covers what a command line cannot carry (a
// NUL ends an argument) and the names that must pass.
func TestModelNameChecksInProcess(t *testing.T) {
	tests := []struct {
		name  string
		model string
		want  string // "" means accepted
	}{
		{"a NUL, which a config file or a test could hand over", "llama\x00", "holds the control character U+0000"},
		// Sent in every request's body and stored with a sweep's set.
		{"a name longer than a stored set may carry", strings.Repeat("m", 4097), "--model is 4097 bytes long: at most 4096"},
		{"a Hugging Face name with its organisation", "meta-llama/Llama-3.1-70B-Instruct", ""},
		{"a name in another script", "模型-7b", ""},
		{"a name with spaces, as some servers use", "My Model v2", ""},
	}
	for _, tt := range tests {
		t.Run("serve: "+tt.name, func(t *testing.T) {
			_, err := parseServe([]string{"--model", tt.model})
			refusedInOneLine(t, err, tt.want)
		})
		t.Run("sweep: "+tt.name, func(t *testing.T) {
			_, err := sweepOptionsFor("--virtual", "--model", tt.model)
			refusedInOneLine(t, err, tt.want)
		})
	}
}

// TestSweepBlockSizeIsTheRealWorkers: sweep's --block-size is for real
// workers routed by kvlens; without them it did nothing, silently.
func TestSweepBlockSizeIsTheRealWorkers(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"over the simulated fleet", []string{"sweep", "--block-size", "16"}, "kvlens sweep: --block-size is the real workers' (--workers, routed by kvlens)"},
		{"with --target, which routes by its own", []string{"sweep", "--block-size", "16", "--target", "http://127.0.0.1:1/v1", "--modes", "rr"}, "kvlens sweep: --block-size is the real workers'"},
		{"past the largest block", []string{"sweep", "--block-size", "5000", "--workers", "http://127.0.0.1:1"}, "kvlens sweep: --block-size 5000: want 1 to 4096 tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused(t, tt.args, tt.want)
		})
	}
}

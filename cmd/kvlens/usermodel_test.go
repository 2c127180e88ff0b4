package main

import "testing"

func TestServeChecksTheFollowUpModelBeforeItStarts(t *testing.T) {
	const url = "http://127.0.0.1:1/v1" // never called: the flags only parse
	tests := []struct {
		name string
		args []string
		want string // "" means accepted
	}{
		// Each started, then stopped with status 1: "loadgen: user model
		// at … needs a model name and a positive timeout".
		{"a URL that is not one", []string{"--user-model-url", "not a url", "--user-model", "m"}, `--user-model-url "not a url": want the OpenAI base URL of the model that writes follow-up questions`},
		{"a URL without the model to ask there", []string{"--user-model-url", url}, "--user-model-url needs --user-model, the model name to ask there"},
		{"a timeout of no time", []string{"--user-model-url", url, "--user-model", "m", "--user-model-timeout", "0s"}, "--user-model-timeout must be positive, got 0s"},
		{"a negative timeout", []string{"--user-model-url", url, "--user-model", "m", "--user-model-timeout", "-1s"}, "--user-model-timeout must be positive, got -1s"},
		// Each did nothing, silently.
		{"a model name without its URL", []string{"--user-model", "m"}, "--user-model goes with --user-model-url"},
		{"a timeout without the URL", []string{"--user-model-timeout", "3s"}, "--user-model-timeout goes with --user-model-url"},
		{"a URL, a model and the default timeout", []string{"--user-model-url", url, "--user-model", "m"}, ""},
		{"no follow-up model at all", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseServe(tt.args)
			refusedInOneLine(t, err, tt.want)
		})
	}
}

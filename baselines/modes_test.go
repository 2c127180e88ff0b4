package baselines

import (
	"strings"
	"testing"
)

func TestCheckModesRefusesUnknownModes(t *testing.T) {
	known := []string{"round_robin", "kv"}
	tests := []struct {
		name  string
		modes []string
		// wantErr is in the one-line error; empty means accepted.
		wantErr string
	}{
		{"known modes are accepted", []string{"round_robin", "kv"}, ""},
		{"a set of one known mode is accepted", []string{"kv"}, ""},

		// Sad path.
		{"an unknown mode is refused with the known ones listed", []string{"round_robin", "fastest"}, `levels[1].mode: "fastest" is not a known routing mode (known: round_robin, kv)`},
		{"a mode spelled with a hyphen is not the same mode", []string{"kv-aware"}, `levels[0].mode: "kv-aware"`},
		{"an alias is not a stored mode", []string{"rr"}, `"rr" is not a known routing mode`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Set
			for _, m := range tt.modes {
				s.Levels = append(s.Levels, Level{Concurrency: 10, Mode: m})
			}
			err := s.CheckModes(known)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

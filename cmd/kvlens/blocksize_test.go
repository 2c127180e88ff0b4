package main

import "testing"

func TestServeBlockSizeIsAnEnginesBlock(t *testing.T) {
	const worker = "http://127.0.0.1:1" // never called: the flags only parse
	tests := []struct {
		name string
		args []string
		want string // "" means accepted, with the router's blocks of size
		size int
	}{
		// Each was accepted, and no prompt ever filled a block: kv routed
		// blind, with nothing said.
		{"a block of a hundred million tokens", []string{"--workers", worker, "--block-size", "100000000"}, "--block-size must be from 1 to 4096 tokens, as the workers' KV blocks are, got 100000000", 0},
		{"a block one past the largest", []string{"--workers", worker, "--block-size", "4097"}, "--block-size must be from 1 to 4096 tokens", 0},
		{"a block of no tokens", []string{"--workers", worker, "--block-size", "0"}, "--block-size must be from 1 to 4096 tokens, as the workers' KV blocks are, got 0", 0},
		{"a negative block", []string{"--workers", worker, "--block-size", "-16"}, "got -16", 0},
		{"vLLM's default block", []string{"--workers", worker, "--block-size", "16"}, "", 16},
		{"the largest block", []string{"--workers", worker, "--block-size", "4096"}, "", 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServe(tt.args)
			if refusedInOneLine(t, err, tt.want) {
				return
			}
			if cfg.Router.BlockSize != tt.size {
				t.Fatalf("router block size %d, want %d", cfg.Router.BlockSize, tt.size)
			}
		})
	}
}

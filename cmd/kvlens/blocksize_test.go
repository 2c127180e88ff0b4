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
		// The simulated workers' blocks are their profile's: the index
		// dropped every one of another size, and kv routed blind.
		{"the simulated fleet's blocks are its profile's", nil, "", 32},
		{"a profile of 64-token blocks, which the router indexed as 32", []string{"--sim-profile", "a100-qwen3-8b"}, "", 64},
		{"a --block-size that is the profile's", []string{"--sim-profile", "a100-qwen3-8b", "--block-size", "64"}, "", 64},
		{"a --block-size other than the simulated workers'", []string{"--block-size", "64"}, "--block-size 64: the simulated workers (h200-llama3.1-70b-fp8-tp1) store blocks of 32 tokens, and the router must index the same: drop --block-size (it is for --workers)", 0},
		{"a target alone runs no workers to match", []string{"--target", "http://frontend:8000/v1", "--block-size", "64"}, "", 64},
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

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/kvlens/kvlens/loadgen"
	"github.com/kvlens/kvlens/sim"
)

// The kinds of JSON file kvlens writes and reads, as fileKind names them.
const (
	kindBaselines = "a baseline set (kvlens baselines import reads it)"
	kindBench     = "a report of kvlens bench routing (kvlens bench routing --from draws it)"
	kindPartial   = "an interrupted grid of kvlens bench routing (kvlens bench routing --resume finishes it)"
	kindRecording = "a recording exported by kvlens recordings export"
	kindProfile   = "an engine profile (--sim-profile reads it)"
	kindTrace     = "a Mooncake-format trace (--trace replays it)"
)

// fileKind says which of kvlens's files data is, or "" when it is none of
// them, so that a file given to the wrong command is named as what it is
// rather than picked apart field by field ("engine: unknown field").
// It reads the top-level keys only: a file that has a kind's keys but is
// broken is still that kind, and its own reader names what is wrong.
func fileKind(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil || top == nil {
		return ""
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := top[k]; !ok {
				return false
			}
		}
		return true
	}
	switch {
	case has("runs", "policies", "workloads"):
		if bytes.Equal(bytes.TrimSpace(top["partial"]), []byte("true")) {
			return kindPartial
		}
		return kindBench
	case has("frames", "started"):
		return kindRecording
	case has("hash_ids", "input_length"):
		return kindTrace
	case has("levels"):
		return kindBaselines
	}
	if _, err := sim.ParseProfile(data); err == nil {
		return kindProfile
	}
	return ""
}

// wrongKind is the error for a file of another kind than want, or nil
// when fileKind cannot tell what it is.
func wrongKind(path string, data []byte, want string) error {
	kind := fileKind(data)
	if kind == "" || kind == want {
		return nil
	}
	return fmt.Errorf("%s is %s, not %s", path, kind, want)
}

// readInput reads the file at path, refusing one longer than limit
// without reading it all: a device such as /dev/zero, or a file of model
// weights given for a small JSON, would otherwise fill memory until the
// process dies.
func readInput(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is longer than %d MiB, more than any file this reads", path, limit>>20)
	}
	return data, nil
}

// loadProfile is sim.LoadProfile naming another of kvlens's files given in
// a profile's place: a baseline set was "json: unknown field \"levels\"".
func loadProfile(nameOrPath string) (sim.Profile, error) {
	p, err := sim.LoadProfile(nameOrPath)
	if err != nil {
		if kind := kindOf(nameOrPath, kindProfile); kind != nil {
			return p, kind
		}
	}
	return p, err
}

// loadTrace is loadgen.LoadTrace naming another of kvlens's files given
// in a trace's place: an indented JSON file was "line 1: unexpected EOF".
func loadTrace(path string) ([]loadgen.TraceRecord, error) {
	recs, err := loadgen.LoadTrace(path)
	if err != nil {
		if kind := kindOf(path, kindTrace); kind != nil {
			return recs, kind
		}
	}
	return recs, err
}

// kindOf is wrongKind of the file at path, read no further than kvlens's
// own files go; nil when it cannot be read or its kind is not known.
func kindOf(path, want string) error {
	data, err := readInput(path, 16<<20)
	if err != nil {
		return nil
	}
	return wrongKind(path, data, want)
}

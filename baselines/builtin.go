package baselines

import (
	"embed"
	"fmt"
	"io/fs"
)

// builtinFiles are the seeds' published figures in kvlens's own format,
// generated from the seed texts by TestBuiltinMatchesSeeds -update.
//
//go:embed builtin
var builtinFiles embed.FS

// Builtin returns the sets that ship with kvlens, in file-name order: the
// seeds' measured figures for 3×H200, Llama 3.1 70B FP8, TRT-LLM and Dynamo 0.9.
func Builtin() ([]Set, error) {
	names, err := fs.Glob(builtinFiles, "builtin/*.json")
	if err != nil {
		return nil, err
	}
	var sets []Set
	for _, name := range names {
		data, err := builtinFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		s, _, err := Decode(data)
		if err != nil {
			return nil, fmt.Errorf("baselines: built-in %s: %w", name, err)
		}
		sets = append(sets, s)
	}
	return sets, nil
}

// BuiltinRevision numbers the contents of the built-in sets. A store imports
// them once per revision, so that a set the user deleted stays deleted.
const BuiltinRevision = 1

package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/kvlens/kvlens/tokenizer"
)

// TraceBlockTokens is the block size of a Mooncake trace's hash_ids.
const TraceBlockTokens = 512

// TraceRecord is one request of a Mooncake-format trace.
type TraceRecord struct {
	// Timestamp is when to send the request, in ms from the trace's origin.
	Timestamp int64 `json:"timestamp"`
	// InputLength is the prompt length, in tokens.
	InputLength int `json:"input_length"`
	// OutputLength is the answer length asked for, in tokens (max_tokens).
	OutputLength int `json:"output_length"`
	// HashIDs name the prompt's 512-token blocks: equal ids are equal blocks,
	// and ids are chained, so an equal id implies an equal prefix.
	HashIDs []int64 `json:"hash_ids"`
	// Line is the record's line in its file, from 1.
	Line int `json:"-"`
	// BlockTokens is how many tokens each hash id names; 0 means
	// TraceBlockTokens, Mooncake's 512.
	BlockTokens int `json:"-"`
}

// blockTokens is the tokens each of the record's hash ids names.
func (r *TraceRecord) blockTokens() int {
	if r.BlockTokens > 0 {
		return r.BlockTokens
	}
	return TraceBlockTokens
}

// traceLine has pointers so a missing field can be told from a zero.
type traceLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      *[]int64 `json:"hash_ids"`
}

// maxTraceTokens bounds a record's lengths: far beyond any context window,
// yet small enough that a typo cannot make the replay allocate gigabytes.
const maxTraceTokens = 1 << 20

// maxTraceMillis bounds a record's timestamp: some 30,000 years, and exact
// in a float64 and an int64.
const maxTraceMillis = 1e15

// LoadTrace reads a Mooncake-format JSONL trace from path.
func LoadTrace(path string) ([]TraceRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	return ParseTrace(f, filepath.Base(path))
}

// ParseTrace reads a Mooncake-format JSONL trace: one object a line with
// timestamp (ms), input_length, output_length and hash_ids. Unknown fields
// are ignored, blank lines skipped; records are returned in timestamp order.
// Errors name the file and line.
func ParseTrace(r io.Reader, name string) ([]TraceRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	var recs []TraceRecord
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var tl traceLine
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&tl); err != nil {
			return nil, fmt.Errorf("trace: %s line %d: %w", name, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("trace: %s line %d: more than one JSON value", name, line)
		}
		fail := func(format string, a ...any) ([]TraceRecord, error) {
			return nil, fmt.Errorf("trace: %s line %d: %s", name, line, fmt.Sprintf(format, a...))
		}
		switch {
		case tl.Timestamp == nil:
			return fail("missing timestamp")
		case tl.InputLength == nil:
			return fail("missing input_length")
		case tl.OutputLength == nil:
			return fail("missing output_length")
		case tl.HashIDs == nil:
			return fail("missing hash_ids")
		case *tl.Timestamp < 0 || *tl.Timestamp > maxTraceMillis:
			return fail("timestamp %v ms is outside 0..%g", *tl.Timestamp, maxTraceMillis)
		case *tl.InputLength < 1 || *tl.InputLength > maxTraceTokens:
			return fail("input_length %d is outside 1..%d", *tl.InputLength, maxTraceTokens)
		case *tl.OutputLength < 1 || *tl.OutputLength > maxTraceTokens:
			return fail("output_length %d is outside 1..%d", *tl.OutputLength, maxTraceTokens)
		case len(*tl.HashIDs)*TraceBlockTokens > maxTraceTokens:
			return fail("%d hash_ids are more than input_length could need", len(*tl.HashIDs))
		}
		recs = append(recs, TraceRecord{
			Timestamp:    int64(*tl.Timestamp),
			InputLength:  *tl.InputLength,
			OutputLength: *tl.OutputLength,
			HashIDs:      *tl.HashIDs,
			Line:         line,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace: %s line %d: %w", name, line+1, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("trace: %s: no records", name)
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Timestamp < recs[j].Timestamp })
	return recs, nil
}

// blockVocabSize is how many words prompt blocks are drawn from: enough that
// two different hash ids never share a block by chance.
const blockVocabSize = 2048

var (
	vocabOnce sync.Once
	vocab     []string // each " word", one cl100k token on its own
)

// blockVocab returns words that are each a single token with a leading space
// and letters only. cl100k's pre-tokenizer splits text before every space
// followed by letters, and BPE never merges across that split, so any
// sequence of these words encodes to exactly one token per word, whatever
// comes before or after it: block boundaries cannot shift.
func blockVocab() []string {
	vocabOnce.Do(func() {
		for id := uint32(0); len(vocab) < blockVocabSize && id < 200_000; id++ {
			w := tokenizer.Decode([]uint32{id})
			if len(w) < 4 || len(w) > 12 || w[0] != ' ' || strings.TrimLeft(w[1:], "abcdefghijklmnopqrstuvwxyz") != "" {
				continue
			}
			if ids := tokenizer.Encode(w); len(ids) != 1 || ids[0] != id {
				continue
			}
			vocab = append(vocab, w)
		}
	})
	return vocab
}

// blockWords appends to b the first n words of the block named by seed: the
// same seed gives the same words, every time.
func blockWords(b *strings.Builder, seed uint64, n int) {
	v := blockVocab()
	rng := rand.New(rand.NewPCG(seed, 0x6b766c656e73))
	for range n {
		b.WriteString(v[rng.IntN(len(v))])
	}
}

// TracePrompt synthesizes the prompt of rec: InputLength tokens, where the
// i-th block (of rec.BlockTokens, by default 512) is determined by
// HashIDs[i] alone, so equal hash_ids become identical token blocks. Tokens
// beyond the hash_ids' reach are unique to the record.
func TracePrompt(rec TraceRecord) string {
	var b strings.Builder
	left := rec.InputLength
	bs := rec.blockTokens()
	for _, h := range rec.HashIDs {
		if left <= 0 {
			break
		}
		n := min(left, bs)
		blockWords(&b, uint64(h), n)
		left -= n
	}
	if left > 0 {
		// A seed outside the hash-id space: high bit set, plus the line.
		blockWords(&b, 1<<63|uint64(rec.Line)<<20|uint64(rec.Timestamp&0xfffff), left)
	}
	return b.String()
}

// chatTemplateTokens is what the chat template adds around a trace prompt,
// in tokens, with room to spare: "<|user|>\n", "\n<|assistant|>\n".
const chatTemplateTokens = 16

// FitTrace clips the records that ask for more than maxModelLen tokens
// (input_length + output_length, plus the chat template's few tokens), so
// none is sent as a prompt every worker must refuse: it shortens
// input_length, and output_length too when that alone fills the context
// (to half of it), dropping the hash_ids past the new length. It returns the
// records, changed in place, and a one-line message counting the clipped
// ones, empty when none was.
func FitTrace(recs []TraceRecord, maxModelLen int) ([]TraceRecord, string) {
	budget := maxModelLen - chatTemplateTokens
	if budget < 2 {
		return recs, ""
	}
	clipped, longest := 0, 0
	for i := range recs {
		r := &recs[i]
		if r.InputLength+r.OutputLength <= budget {
			continue
		}
		clipped++
		longest = max(longest, r.InputLength+r.OutputLength)
		if r.OutputLength >= budget {
			r.OutputLength = budget / 2
		}
		r.InputLength = budget - r.OutputLength
		if blocks := (r.InputLength + r.blockTokens() - 1) / r.blockTokens(); len(r.HashIDs) > blocks {
			r.HashIDs = r.HashIDs[:blocks]
		}
	}
	if clipped == 0 {
		return recs, ""
	}
	return recs, fmt.Sprintf("trace: %d of %d records ask for more than the maximum context length of %d tokens (input_length + output_length, up to %d); their input_length is clipped to fit",
		clipped, len(recs), maxModelLen, longest)
}

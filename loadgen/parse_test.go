package loadgen

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseTurns(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // TurnDist.String, or the error's fragment
		wantErr  bool
	}{
		{"a range is uniform over its counts", "3-5", "3-5", false},
		{"a single count is a fixed length", "5", "5", false},
		{"equal weights over consecutive counts read back as a range", "4:1,3:1", "3-4", false},
		{"weights are kept and counts sorted", "5:1, 3:1 ,4:2", "3:1,4:2,5:1", false},
		{"a reversed range is refused", "5-3", "range", true},
		{"a zero count is refused", "0", "not a count", true},
		{"a zero weight is refused", "3:0", "not a count", true},
		{"a repeated count is refused", "3:1,3:2", "twice", true},
		{"junk is refused", "three", "not a count", true},
		{"an empty string is refused", "", "not a count", true},
		{"more than 100 turns is refused", "1-500", "range", true},
		{"a weight of a million is the largest", "3:1000000,4:1", "3:1000000,4:1", false},
		{"weights that would add up past an int are refused", "1:9223372036854775807,2:9223372036854775807", "weight 1..1000000", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseTurns(tt.in)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
				}
				return
			}
			if err != nil || d.String() != tt.want {
				t.Fatalf("got %v, %v; want %s", d, err, tt.want)
			}
		})
	}
}

func TestTurnDistSampleFollowsWeights(t *testing.T) {
	d, _ := ParseTurns("3:1,4:2,5:1")
	rng := rand.New(rand.NewPCG(1, 2))
	got := map[int]int{}
	for range 40000 {
		got[d.sample(rng)]++
	}
	// expected 10,000 / 20,000 / 10,000; 3% slack is > 10 standard deviations
	for n, want := range map[int]int{3: 10000, 4: 20000, 5: 10000} {
		if d := got[n] - want; d > want*3/100 || d < -want*3/100 {
			t.Errorf("%d turns drawn %d times, want about %d", n, got[n], want)
		}
	}
	if len(got) != 3 {
		t.Errorf("drew counts %v, want only 3, 4, 5", got)
	}
}

// FuzzParseTurns checks that a distribution ParseTurns accepts is one the
// load generator can draw from (counts 1..100 ascending, weights that add up
// without overflow), and that it reads back from its String as itself.
func FuzzParseTurns(f *testing.F) {
	for _, s := range []string{"5", "3-5", "3:1,4:2,5:1", "1:1000000,100:1000000", "1:9223372036854775807,2:1", " 4 - 7 ", "3:1,3:2", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := ParseTurns(in)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if err := d.valid(); err != nil {
			t.Fatalf("ParseTurns(%q) accepted an invalid distribution: %v", in, err)
		}
		for i := 1; i < len(d.Counts); i++ {
			if d.Counts[i] <= d.Counts[i-1] {
				t.Fatalf("ParseTurns(%q) counts %v are not ascending", in, d.Counts)
			}
		}
		back, err := ParseTurns(d.String())
		if err != nil || back.String() != d.String() || !slices.Equal(back.Counts, d.Counts) || !slices.Equal(back.Weights, d.Weights) {
			t.Fatalf("ParseTurns(%q) = %v, which reads back as %v, %v", in, d, back, err)
		}
		n := d.sample(rand.New(rand.NewPCG(1, 2)))
		if !slices.Contains(d.Counts, n) {
			t.Fatalf("ParseTurns(%q) drew %d turns, not one of %v", in, n, d.Counts)
		}
	})
}

func TestParseStarterJSONL(t *testing.T) {
	tests := []struct {
		name, in string
		wantN    int
		wantErr  string
	}{
		{"records become starters and blank lines are skipped", `{"id":"a","topic":"t","text":"x"}` + "\n\n" + `{"id":"b","topic":"u","text":"y","title":"B"}`, 2, ""},
		{"a broken line names the file and line", `{"id":"a","topic":"t","text":"x"}` + "\n" + `{"id":`, 0, "s.jsonl line 2:"},
		{"a missing topic names its line", `{"id":"a","text":"x"}`, 0, "line 1: missing topic"},
		{"a missing text names its line", "\n" + `{"id":"a","topic":"t"}`, 0, "line 2: missing text"},
		{"a missing id names its line", `{"topic":"t","text":"x"}`, 0, "line 1: missing id"},
		{"an unknown field is refused, catching typos", `{"id":"a","topic":"t","txt":"x"}`, 0, "line 1:"},
		{"a duplicate id names both lines", `{"id":"a","topic":"t","text":"x"}` + "\n" + `{"id":"a","topic":"t","text":"y"}`, 0, "line 2: id \"a\" already used on line 1"},
		{"two values on a line are refused", `{"id":"a","topic":"t","text":"x"} {}`, 0, "line 1: more than one"},
		{"an empty file is refused", "\n\n", 0, "no starters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss, err := parseStarterJSONL(strings.NewReader(tt.in), "s.jsonl")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one line containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(ss) != tt.wantN {
				t.Fatalf("got %d starters, %v; want %d", len(ss), err, tt.wantN)
			}
		})
	}
}

func TestLoadStartersFromADirectoryAndAFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("Plain text starter."), 0o644)
	os.WriteFile(filepath.Join(dir, "a.md"), []byte("---\ntitle: A\ntopic: alpha\n---\nBody of A."), 0o644)
	os.WriteFile(filepath.Join(dir, "ignored.json"), []byte("{}"), 0o644)
	ss, err := LoadStarters(dir)
	if err != nil || len(ss) != 2 || ss[0].ID != "a" || ss[0].Topic != "alpha" || ss[1].Text != "Plain text starter." {
		t.Fatalf("directory: %+v, %v", ss, err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "x.md"), []byte("---\ntitle: x\nno colon here\n---\nbody"), 0o644)
	if _, err := LoadStarters(bad); err == nil || !strings.Contains(err.Error(), filepath.Join(bad, "x.md")+": line 3") {
		t.Fatalf("a bad file in a directory: err = %v, want its name and line", err)
	}
	f := filepath.Join(t.TempDir(), "s.jsonl")
	os.WriteFile(f, []byte(`{"id":"k","topic":"kv","text":"Keys and values."}`+"\n"), 0o644)
	if ss, err := LoadStarters(f); err != nil || len(ss) != 1 || ss[0].Title != "k" {
		t.Fatalf("file: %+v, %v", ss, err)
	}
	if _, err := LoadStarters(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing path was accepted")
	}
}

func FuzzParseStarterJSONL(f *testing.F) {
	f.Add(`{"id":"a","topic":"t","text":"x"}`)
	f.Add(`{"id":"a","topic":"t","text":"x"}` + "\n" + `{"id":`)
	f.Add("\n\n{}\n")
	f.Fuzz(func(t *testing.T, in string) {
		ss, err := parseStarterJSONL(strings.NewReader(in), "f.jsonl")
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "starters: f.jsonl") {
				t.Fatalf("error is not one line naming the file: %q", err)
			}
			return
		}
		for _, s := range ss {
			if s.ID == "" || s.Topic == "" || s.Text == "" || s.Title == "" {
				t.Fatalf("accepted an incomplete starter %+v", s)
			}
		}
	})
}

func TestParseTrace(t *testing.T) {
	tests := []struct {
		name, in string
		wantN    int
		wantErr  string
	}{
		{"records are read and sorted by timestamp", `{"timestamp":27,"input_length":600,"output_length":5,"hash_ids":[1,2]}` + "\n" + `{"timestamp":0,"input_length":10,"output_length":1,"hash_ids":[3],"extra":1}`, 2, ""},
		{"a broken line names the file and line", `{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[1]}` + "\n" + `{"timestamp":`, 0, "t.jsonl line 2:"},
		{"a missing hash_ids names its line", `{"timestamp":0,"input_length":1,"output_length":1}`, 0, "line 1: missing hash_ids"},
		{"a missing timestamp names its line", `{"input_length":1,"output_length":1,"hash_ids":[]}`, 0, "line 1: missing timestamp"},
		{"a zero output length is refused", `{"timestamp":0,"input_length":1,"output_length":0,"hash_ids":[1]}`, 0, "output_length 0"},
		{"a negative timestamp is refused", `{"timestamp":-5,"input_length":1,"output_length":1,"hash_ids":[1]}`, 0, "timestamp -5"},
		{"a string hash id is refused", `{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":["a"]}`, 0, "line 1:"},
		{"an empty trace is refused", "", 0, "no records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := ParseTrace(strings.NewReader(tt.in), "t.jsonl")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one line containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(recs) != tt.wantN {
				t.Fatalf("got %d records, %v; want %d", len(recs), err, tt.wantN)
			}
			if recs[0].Timestamp != 0 || recs[0].Line != 2 || recs[1].HashIDs[1] != 2 {
				t.Fatalf("records not sorted by time with their lines: %+v", recs)
			}
		})
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add(`{"timestamp":0,"input_length":600,"output_length":5,"hash_ids":[1,2]}`)
	f.Add(`{"timestamp":1.5,"input_length":1,"output_length":1,"hash_ids":[]}` + "\n{")
	f.Add("\n")
	f.Fuzz(func(t *testing.T, in string) {
		recs, err := ParseTrace(strings.NewReader(in), "f.jsonl")
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "trace: f.jsonl") {
				t.Fatalf("error is not one line naming the file: %q", err)
			}
			return
		}
		for i, r := range recs {
			if r.InputLength < 1 || r.OutputLength < 1 || r.Timestamp < 0 || r.Line < 1 {
				t.Fatalf("accepted a bad record %+v", r)
			}
			if i > 0 && r.Timestamp < recs[i-1].Timestamp {
				t.Fatal("records out of order")
			}
		}
	})
}

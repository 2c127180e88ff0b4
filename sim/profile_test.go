package sim

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvlens/kvlens/tokenizer"
)

func TestBuiltinProfilesAreValid(t *testing.T) {
	for _, name := range Profiles() {
		t.Run(name, func(t *testing.T) {
			p, err := LoadProfile(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadProfileFromAFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p, err := LoadProfile(write("small.json", `{"name":"small","kv_blocks":2000,"keep_generated_blocks":true}`))
	if err != nil {
		t.Fatal(err)
	}
	def := MustProfile(DefaultProfile)
	if p.Name != "small" || p.KVBlocks != 2000 || !p.KeepGeneratedBlocks || p.WeightsMs != def.WeightsMs {
		t.Fatalf("got %+v, want the file's fields over the default's", p)
	}

	tests := []struct {
		name, arg, wantErr string
	}{
		{"an unknown name that is no file says what is built in", "h300", "neither a built-in"},
		{"malformed JSON is refused", write("bad.json", `{"kv_blocks":`), "decode profile"},
		{"unknown fields are refused", write("typo.json", `{"kv_blocs":5}`), "unknown field"},
		{"a second object, which was ignored, is refused", write("two.json", `{"kv_blocks":2000} {"kv_blocks":10}`), "more after the profile's JSON object"},
		{"a stray line after the object is refused", write("stray.json", "{\"kv_blocks\":2000}\nper_token_ms: 3\n"), "more after the profile's JSON object"},
		{"a cache too small for one sequence is refused", write("tiny.json", `{"kv_blocks":10}`), "cannot hold"},
		{"negative constants are refused", write("neg.json", `{"per_token_ms":-1}`), "per_token_ms"},
		{"inverted output bounds are refused", write("out.json", `{"output_min":9,"output_max":3}`), "output_max"},
		{"a negative eager floor is refused", write("eager.json", `{"eager_step_ms":-44}`), "eager_step_ms"},
		{"a negative eager cost per sequence is refused", write("eager-seq.json", `{"eager_per_seq_ms":-0.4}`), "eager_per_seq_ms"},
		{"a CUDA graph for no sequences is refused", write("graphs.json", `{"graph_batch_sizes":[1,0,64]}`), "graph_batch_sizes"},
		{"a negative number of intake stages is refused", write("intake.json", `{"intake_steps":-6}`), "intake_steps"},
		{"an intake path a million steps long is refused", write("intake-long.json", `{"intake_steps":1000000}`), "at most 1000"},
		{"a negative number of stages beside the engine is refused", write("beside.json", `{"beside_steps":-6}`), "beside_steps"},
		{"a path beside the engine a million steps long is refused", write("beside-long.json", `{"beside_steps":1000000}`), "at most 1000"},
		{"a negative path stage shape is refused", write("shape.json", `{"path_stage_shape":-2}`), "path_stage_shape"},
		{"a path stage shape of a thousand waits a stage is refused", write("shape-big.json", `{"path_stage_shape":1000}`), "path_stage_shape must be at most 16"},
		{"a negative millisecond stage is refused", write("jitter.json", `{"path_jitter_ms":-30}`), "path_jitter_ms"},
		{"a millisecond stage that is not a number is refused", write("jitter-nan.json", `{"path_jitter_ms":"slow"}`), "decode profile"},
		{"a cache of a billion blocks is refused before it is allocated", write("huge-cache.json", `{"kv_blocks":1000000000}`), "kv_blocks must be at most"},
		{"a batch of a million sequences is refused", write("huge-batch.json", `{"max_batch_size":1000000}`), "max_batch_size must be at most"},
		{"an answer draw that would overflow is refused", write("huge-answer.json", `{"output_min":0,"output_max":9223372036854775807}`), "output_max must be at most"},
		{"a step-time constant whose steps would overflow a duration is refused", write("huge-step.json", `{"per_token_ms":1e300}`), "more than an hour"},
		{"an eager floor of a day is refused", write("day-floor.json", `{"eager_step_ms":86400000}`), "more than an hour"},
		// Each stands in reports, on the page, or in every answer.
		{"a name of two lines, which broke a report's table", write("name.json", `{"name":"h200\n| fake | row |"}`), `sim: profile "h200\n| fake | row |": name holds the control character U+000A`},
		{"a description with an escape sequence", write("desc.json", `{"description":"\u001b[2J one H200"}`), "description holds the control character U+001B"},
		{"a served model name with a NUL", write("model.json", `{"model":"llama\u0000"}`), "model holds the control character U+0000"},
		{"a description longer than a stored set's text", write("long.json", `{"description":"`+strings.Repeat("x", 4097)+`"}`), "description is 4097 bytes long: at most 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadProfile(tt.arg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestIncrementalEncodingEqualsRenderChat(t *testing.T) {
	c := &benchConversation{}
	c.add("system", systemPrompt)
	c.add("user", "Please explain the following text about caches.\n\nA cache keeps data close.\n\n")
	c.add("assistant", " The KV cache stores keys. It ends mid-sentence,")
	c.add("user", `Could you give a concrete example of "keys and values"?`)
	want := tokenizer.Encode(tokenizer.RenderChat(c.msgs))
	got := c.prompt()
	if len(got) != len(want) {
		t.Fatalf("%d tokens by message, %d rendered whole", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("token %d differs: %d by message, %d whole", i, got[i], want[i])
		}
	}
}

func TestOfflineThroughputIsNearNVIDIAsFigures(t *testing.T) {
	// One configuration only, to keep the package's tests fast; `kvlens
	// sim bench offline` runs all three.
	r, err := Offline(OfflineConfig{Profile: MustProfile(DefaultProfile), ISL: 5000, OSL: 500, Requests: 600})
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputTokensPerSec < 560*0.9 || r.OutputTokensPerSec > 560*1.1 {
		t.Fatalf("5000/500: %.0f output tokens/s, want 560 ±10%%", r.OutputTokensPerSec)
	}
	if r.Elapsed < time.Minute {
		t.Fatalf("run covered %v of virtual time, too little to mean anything", r.Elapsed)
	}
}

// TestOfflineRunsPriceNoStepAsEager: NVIDIA's figures were measured with
// every decode batch padded onto a CUDA graph and no serving path, so an
// offline run ignores a profile's host floor and path, flat or growing.
func TestOfflineRunsPriceNoStepAsEager(t *testing.T) {
	plain := MustProfile(DefaultProfile)
	plain.EagerStepMs, plain.EagerPerSeqMs, plain.IntakeSteps, plain.BesideSteps, plain.PathJitterMs = 0, 0, 0, 0, 0
	tests := []struct {
		name   string
		change func(*Profile)
	}{
		{"a flat floor far above the GPU time", func(p *Profile) { p.EagerStepMs = 80 }},
		{"a floor growing with the batch", func(p *Profile) { p.EagerStepMs, p.EagerPerSeqMs = 22, 0.4 }},
		{"a serving path in steps and in milliseconds", func(p *Profile) { p.IntakeSteps, p.BesideSteps, p.PathJitterMs = 2, 5, 38 }},
	}
	cfg := OfflineConfig{Profile: plain, ISL: 1000, OSL: 1000, Requests: 300, Concurrency: 100}
	want, err := Offline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			tt.change(&c.Profile)
			got, err := Offline(c)
			if err != nil {
				t.Fatal(err)
			}
			if got.Elapsed != want.Elapsed || got.Steps != want.Steps {
				t.Fatalf("took %v in %d steps, want %v in %d as with neither", got.Elapsed, got.Steps, want.Elapsed, want.Steps)
			}
		})
	}
}

// TestTheBeforeProfilesAreTheDefaultAsItWas guards the profiles
// docs/simulator.md and docs/routing.md reproduce earlier figures with: the
// default H200 profile before the narrower serving path of 2026-11-27's
// evening; before that day's growing floor, millisecond stage and
// TensorRT-LLM's admission; before 2026-11-25's 41 ms eager floor (with
// --turns 3-5); before that with its whole serving path, six stages, in
// front of the queue; and the first without its serving path.
func TestTheBeforeProfilesAreTheDefaultAsItWas(t *testing.T) {
	// flat41 is the default before 2026-11-27, as the later files edit it.
	flat41 := func(p *Profile) {
		p.EagerStepMs, p.EagerPerSeqMs, p.PathJitterMs, p.BesideSteps, p.PathStageShape = 41, 0, 0, 6, 1
		p.ReserveMaxTokens = false
	}
	tests := []struct {
		name string
		file string
		edit func(*Profile)
	}{
		{"the exp-path profile is the default with exponential path stages, 2 in front, 5 beside and 38 ms", "../docs/h200-exp-path.json",
			func(p *Profile) {
				p.Name, p.BesideSteps, p.PathJitterMs, p.PathStageShape = "h200-exp-path", 5, 38, 1
				p.Description = "Llama 3.1 70B FP8 on one H200: the default until 2026-11-27 (evening), a serving path of exponential stages, 2 steps in front and 5 beside, and a 38 ms stage"
			}},
		{"the flat41 profile is the default before 2026-11-27: a flat 41 ms floor, 2 steps in front and 6 beside", "../docs/h200-flat41.json",
			func(p *Profile) {
				flat41(p)
				p.Name = "h200-flat41"
				p.Description = "Llama 3.1 70B FP8 on one H200: the default until 2026-11-27, a flat 41 ms eager floor and a serving path of 2 steps in front and 6 beside"
			}},
		{"the eager44 profile is the flat41 one with the 44 ms floor", "../docs/h200-eager44.json",
			func(p *Profile) { flat41(p); p.Name, p.EagerStepMs = "h200-eager44", 44 }},
		{"the path-in-front profile has the 44 ms floor and the whole path in front of the queue", "../docs/h200-path-in-front.json",
			func(p *Profile) {
				flat41(p)
				p.Name, p.EagerStepMs, p.IntakeSteps, p.BesideSteps = "h200-path-in-front", 44, 6, 0
			}},
		{"the no-path profile is the flat41 one without its serving path", "../docs/h200-no-path.json",
			func(p *Profile) { flat41(p); p.Name, p.IntakeSteps, p.BesideSteps = "h200-no-path", 0, 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadProfile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			want := MustProfile(DefaultProfile)
			tt.edit(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// FuzzParseProfile: a profile file is outside input. Whatever it holds,
// either it is refused in one line or every step the engine can run lasts
// a duration from zero to an hour, and an engine built from it serves a
// request to its end.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"name":"small","kv_blocks":2000,"keep_generated_blocks":true}`))
	f.Add([]byte(`{"max_batch_size":2,"max_num_tokens":10,"max_model_len":64,"block_size":4,"kv_blocks":64,"intake_steps":2,"beside_steps":3,"path_jitter_ms":5,"path_stage_shape":2}`))
	f.Add([]byte(`{"output_min":0,"output_max":9223372036854775807}`))
	f.Add([]byte(`{"per_token_ms":1e300}`))
	f.Add([]byte(`{"graph_batch_sizes":[1,2,4],"graph_padding":true,"eager_step_ms":40,"eager_per_seq_ms":0.5}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseProfile(raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		for _, b := range []Batch{{Decodes: 1, Context: 1}, p.fullBatch()} {
			if d := p.StepTime(b); d < 0 || d > time.Hour {
				t.Fatalf("accepted profile %+v: a step of %+v lasts %v", p, b, d)
			}
		}
		if p.KVBlocks > 1<<16 || p.MaxModelLen < 2 {
			return // a large cache takes long to allocate on every input; the bounds test covers it
		}
		e, err := NewEngine(p, Options{Seed: 1})
		if err != nil {
			t.Fatalf("accepted profile %+v: %v", p, err)
		}
		if err := e.Submit(Request{ID: 1, Prompt: []uint32{7}, MaxTokens: 1}); err != nil {
			t.Fatalf("accepted profile %+v refuses a one-token request: %v", p, err)
		}
		for range 10_000 {
			if e.Idle() {
				return
			}
			if d := e.Step().Duration; d < 0 {
				t.Fatalf("accepted profile %+v: a step lasted %v", p, d)
			}
		}
		t.Fatalf("accepted profile %+v: a one-token request did not end in 10,000 steps", p)
	})
}

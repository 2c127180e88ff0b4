// Package baselines holds measured latency and throughput curves: the seeds'
// published figures built in, sets imported from files, and sets produced by
// the sweep runner. The dashboard draws them next to live numbers.
package baselines

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Metrics are one level's figures, in the units of the seeds' reference JSON.
type Metrics struct {
	// TTFTP50 is the median time to first token, in ms.
	TTFTP50 float64 `json:"ttft_p50_ms"`
	// TTFTP95 is the 95th-percentile time to first token, in ms.
	TTFTP95 float64 `json:"ttft_p95_ms"`
	// KVHitRate is Σ cached prompt tokens / Σ prompt tokens, in percent;
	// nil when the workers reported no cached tokens (vLLM without
	// --enable-prompt-tokens-details), which is unknown, not 0%.
	KVHitRate *float64 `json:"kv_hit_rate_pct,omitempty"`
	// TOPS is output tokens per second over the whole fleet.
	TOPS float64 `json:"tops"`
	// TPOTP50 is the median time per output token, in ms.
	TPOTP50 float64 `json:"tpot_p50_ms"`
	// TPOTP95 is the 95th-percentile time per output token, in ms.
	TPOTP95 float64 `json:"tpot_p95_ms"`
	// LatencyP50 is the median end-to-end request latency, in ms.
	LatencyP50 float64 `json:"latency_p50_ms"`
	// LatencyP95 is the 95th-percentile end-to-end request latency, in ms.
	LatencyP95 float64 `json:"latency_p95_ms"`
	// ErrorPct is errors / (successes + errors), in percent; nil if not measured.
	ErrorPct *float64 `json:"error_pct,omitempty"`
	// ActualRPS is completed requests per second; nil if not measured.
	ActualRPS *float64 `json:"actual_rps,omitempty"`
	// Goodput is requests per second that met every SLO; nil if not measured.
	Goodput *float64 `json:"goodput,omitempty"`
	// Shed is requests refused by load shedding during the measurement, a
	// count (an average when levels are averaged); nil if not measured.
	Shed *float64 `json:"shed,omitempty"`
	// OracleHitRate is the best achievable KVHitRate over the same
	// requests (every block any worker ever stored, never evicted), in
	// percent; nil when the router reported no oracle.
	OracleHitRate *float64 `json:"oracle_hit_rate_pct,omitempty"`
}

// Level is one concurrency level of one routing mode.
type Level struct {
	// Concurrency is the number of simultaneous conversations.
	Concurrency int `json:"concurrency"`
	// Mode is the routing policy's name, such as round_robin or kv.
	Mode string `json:"mode"`
	Metrics
	// Repeats is how many sweeps were averaged into this level; 0 means
	// unknown (an imported figure).
	Repeats int `json:"repeats,omitempty"`
	// Spread is the sample standard deviation of each figure across the
	// repeats, in the figure's own unit; nil for fewer than two repeats.
	Spread *Metrics `json:"spread,omitempty"`
}

// Set is a named collection of levels measured on one deployment.
type Set struct {
	// Name identifies the set; it is unique in a store.
	Name string `json:"name"`
	// Source says where the figures come from: a seed, a file, a sweep run.
	Source string `json:"source"`
	// Deployment describes the hardware, model and serving stack measured.
	Deployment string `json:"deployment"`
	// Method describes how the figures were measured (warmup, window, repeats).
	Method string `json:"method,omitempty"`
	// Generated is when the figures were measured, as RFC 3339 text when
	// known; kept as text so that an imported file round-trips exactly.
	Generated string `json:"generated,omitempty"`
	// Metric names the latency metric the figures were read from.
	Metric string `json:"metric,omitempty"`
	// TargetRPS is the load generator's conversation start rate, per second.
	TargetRPS *float64 `json:"target_rps,omitempty"`
	// CreatedAt is when the set entered the store; zero before that.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Levels are ordered by mode (in order of first appearance) and then by
	// concurrency.
	Levels []Level `json:"levels"`
}

// Modes returns the set's routing modes in order of first appearance.
func (s *Set) Modes() []string {
	var modes []string
	for _, l := range s.Levels {
		if !slices.Contains(modes, l.Mode) {
			modes = append(modes, l.Mode)
		}
	}
	return modes
}

// Curve returns the levels of one mode, by increasing concurrency.
func (s *Set) Curve(mode string) []Level {
	var c []Level
	for _, l := range s.Levels {
		if l.Mode == mode {
			c = append(c, l)
		}
	}
	slices.SortFunc(c, func(a, b Level) int { return cmp.Compare(a.Concurrency, b.Concurrency) })
	return c
}

// Concurrencies returns every concurrency measured in any mode, ascending.
func (s *Set) Concurrencies() []int {
	var cs []int
	for _, l := range s.Levels {
		if !slices.Contains(cs, l.Concurrency) {
			cs = append(cs, l.Concurrency)
		}
	}
	slices.Sort(cs)
	return cs
}

// Level returns the level of mode at exactly concurrency c.
func (s *Set) Level(mode string, c int) (Level, bool) {
	for _, l := range s.Levels {
		if l.Mode == mode && l.Concurrency == c {
			return l, true
		}
	}
	return Level{}, false
}

// Sort orders the levels by mode, in order of first appearance, then by
// concurrency.
func (s *Set) Sort() {
	modes := s.Modes()
	slices.SortStableFunc(s.Levels, func(a, b Level) int {
		return cmp.Or(
			cmp.Compare(slices.Index(modes, a.Mode), slices.Index(modes, b.Mode)),
			cmp.Compare(a.Concurrency, b.Concurrency))
	})
}

// Field names one figure of Metrics by its JSON key.
type Field struct {
	// Key is the JSON key, such as ttft_p95_ms.
	Key string
	// Optional fields may be absent (nil).
	Optional bool
	// Percent fields lie between 0 and 100.
	Percent bool
	get     func(*Metrics) *float64
	getOpt  func(*Metrics) **float64
}

// Value returns the field's value in m, and whether it is present.
func (f Field) Value(m *Metrics) (float64, bool) {
	if f.Optional {
		p := *f.getOpt(m)
		if p == nil {
			return 0, false
		}
		return *p, true
	}
	return *f.get(m), true
}

// Set stores v as the field's value in m.
func (f Field) Set(m *Metrics, v float64) {
	if f.Optional {
		*f.getOpt(m) = &v
		return
	}
	*f.get(m) = v
}

// Clear makes an optional field absent; it zeroes a required one.
func (f Field) Clear(m *Metrics) {
	if f.Optional {
		*f.getOpt(m) = nil
		return
	}
	*f.get(m) = 0
}

// Fields lists every figure of Metrics in the seeds' order.
var Fields = []Field{
	{Key: "ttft_p50_ms", get: func(m *Metrics) *float64 { return &m.TTFTP50 }},
	{Key: "ttft_p95_ms", get: func(m *Metrics) *float64 { return &m.TTFTP95 }},
	{Key: "kv_hit_rate_pct", Optional: true, Percent: true, getOpt: func(m *Metrics) **float64 { return &m.KVHitRate }},
	{Key: "tops", get: func(m *Metrics) *float64 { return &m.TOPS }},
	{Key: "tpot_p50_ms", get: func(m *Metrics) *float64 { return &m.TPOTP50 }},
	{Key: "tpot_p95_ms", get: func(m *Metrics) *float64 { return &m.TPOTP95 }},
	{Key: "latency_p50_ms", get: func(m *Metrics) *float64 { return &m.LatencyP50 }},
	{Key: "latency_p95_ms", get: func(m *Metrics) *float64 { return &m.LatencyP95 }},
	{Key: "error_pct", Optional: true, Percent: true, getOpt: func(m *Metrics) **float64 { return &m.ErrorPct }},
	{Key: "actual_rps", Optional: true, getOpt: func(m *Metrics) **float64 { return &m.ActualRPS }},
	{Key: "goodput", Optional: true, getOpt: func(m *Metrics) **float64 { return &m.Goodput }},
	{Key: "shed", Optional: true, getOpt: func(m *Metrics) **float64 { return &m.Shed }},
	{Key: "oracle_hit_rate_pct", Optional: true, Percent: true, getOpt: func(m *Metrics) **float64 { return &m.OracleHitRate }},
}

// FieldByKey returns the field with JSON key k.
func FieldByKey(k string) (Field, bool) {
	for _, f := range Fields {
		if f.Key == k {
			return f, true
		}
	}
	return Field{}, false
}

// At returns a figure of mode's curve at concurrency c. At a measured level
// it is that level's value; between two measured levels it is interpolated
// linearly between them. Outside the measured range, or when the figure is
// absent from either neighbour, ok is false: a curve is never extrapolated.
func (s *Set) At(mode string, c float64, field Field) (v float64, ok bool) {
	curve := s.Curve(mode)
	for i, l := range curve {
		x := float64(l.Concurrency)
		if c == x {
			return field.Value(&l.Metrics)
		}
		if c < x {
			if i == 0 {
				return 0, false
			}
			lo := curve[i-1]
			y0, ok0 := field.Value(&lo.Metrics)
			y1, ok1 := field.Value(&l.Metrics)
			if !ok0 || !ok1 {
				return 0, false
			}
			x0 := float64(lo.Concurrency)
			return y0 + (y1-y0)*(c-x0)/(x-x0), true
		}
	}
	return 0, false
}

// SLO is a service-level objective on the p95 figures of a level.
type SLO struct {
	// TTFT bounds p95 time to first token; zero means unchecked.
	TTFT time.Duration
	// TPOT bounds p95 time per output token; zero means unchecked.
	TPOT time.Duration
}

// DefaultSLO is the seeds' objective: TTFT ≤ 600 ms and TPOT ≤ 60 ms.
var DefaultSLO = SLO{TTFT: 600 * time.Millisecond, TPOT: 60 * time.Millisecond}

// Check refuses an objective that is not positive, naming the flag that
// sets it.
func (o SLO) Check() error {
	if o.TTFT <= 0 || o.TPOT <= 0 {
		return fmt.Errorf("--slo-ttft %v and --slo-tpot %v: both must be positive", o.TTFT, o.TPOT)
	}
	return nil
}

// Meets reports whether m is within the objective. More than 5% of
// requests failing misses it whatever the latencies: a failed request
// never got its first token, so it is among the slowest 5%.
func (o SLO) Meets(m Metrics) bool {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if m.ErrorPct != nil && *m.ErrorPct > 5 {
		return false
	}
	if o.TTFT > 0 && m.TTFTP95 > ms(o.TTFT) {
		return false
	}
	if o.TPOT > 0 && m.TPOTP95 > ms(o.TPOT) {
		return false
	}
	return true
}

// Envelope returns the highest measured concurrency of mode up to which every
// measured level meets slo, and false when even the lowest level misses it.
// A level that meets the objective above one that misses it does not extend
// the envelope: a fleet that fails at 140 is not "within SLO up to 160".
func (s *Set) Envelope(mode string, slo SLO) (int, bool) {
	best, ok := 0, false
	for _, l := range s.Curve(mode) {
		if !slo.Meets(l.Metrics) {
			break
		}
		best, ok = l.Concurrency, true
	}
	return best, ok
}

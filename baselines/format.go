package baselines

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format is a file format for a baseline set.
type Format string

// The formats Decode reads and Encode writes.
const (
	// FormatKvlens is kvlens's own versioned JSON: a whole Set, with
	// name, deployment, method, repeats and spread.
	FormatKvlens Format = "kvlens"
	// FormatDual is the seeds' Reference Data JSON comparing modes: each
	// level holds one object per mode, keyed round_robin, kv_aware... (seed 000).
	FormatDual Format = "dual"
	// FormatSingle is the seeds' Reference Data JSON for one mode: a top-level
	// "mode" and flat levels (seed 001).
	FormatSingle Format = "single"
)

// KvlensFormatName and KvlensFormatVersion mark a file in kvlens's own format.
const (
	KvlensFormatName    = "kvlens-baselines"
	KvlensFormatVersion = 1
)

// MaxFileBytes bounds a baseline file Decode reads, so that a hostile file
// cannot exhaust memory; a reader of files should read no more than this
// (and one byte, to tell a longer file).
const MaxFileBytes = 16 << 20

// MaxTextBytes bounds each text of a set (source, deployment, method) in
// a file: a set whose text is longer exports to a file Decode refuses.
const MaxTextBytes = 4096

// Limits on input, so that a hostile file cannot exhaust memory.
const (
	maxLevels      = 10000
	maxConcurrency = 1000000
	// maxFigure bounds every figure: 10^9 ms is eleven days, and 10^9
	// tokens or requests a second is more than any fleet serves. A larger
	// one is a broken file, and it would flatten every chart it is drawn in.
	maxFigure = 1e9
	// maxNameLen bounds a set's name, which is one line of every listing.
	maxNameLen = 200
)

// figureError is the one message for a figure out of range, so that a file
// and a set built in code are refused alike.
const figureError = "must be a number from 0 to 1,000,000,000"

// modeKeys maps the dual format's per-mode keys to routing policy names where
// they differ: the seeds call the KV router's results "kv_aware".
var modeKeys = map[string]string{"kv_aware": "kv"}

// ModeKey returns the dual format's key for a routing mode.
func ModeKey(mode string) string {
	for k, m := range modeKeys {
		if m == mode {
			return k
		}
	}
	return mode
}

var modeName = regexp.MustCompile(`^[a-z][a-z0-9_\-]{0,63}$`)

// Decode reads a baseline set in any of the three formats, telling which it
// found. A file that is malformed or inconsistent gets an error naming the
// offending field, such as "levels[3].kv_aware.ttft_p95_ms: must be a
// non-negative number".
func Decode(data []byte) (Set, Format, error) {
	if len(data) > MaxFileBytes {
		return Set{}, "", fmt.Errorf("file is %d bytes, more than the %d allowed", len(data), MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Set{}, "", fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Set{}, "", errors.New("not JSON: data after the top-level value")
	}
	top, ok := v.(map[string]any)
	if !ok {
		return Set{}, "", errors.New("top level: must be an object")
	}
	var (
		set Set
		f   Format
		err error
	)
	switch {
	case top["format"] != nil:
		set, err = decodeKvlens(top)
		f = FormatKvlens
	case top["mode"] != nil:
		set, err = decodeSingle(top)
		f = FormatSingle
	default:
		set, err = decodeDual(top)
		f = FormatDual
	}
	if err != nil {
		return Set{}, "", err
	}
	if err := set.Validate(); err != nil {
		return Set{}, "", err
	}
	set.Sort()
	return set, f, nil
}

// fieldError names the field at path.
func fieldError(path, msg string) error { return fmt.Errorf("%s: %s", path, msg) }

// object is a decoded JSON object being read field by field: it remembers
// which keys were used, so that unknown ones can be reported.
type object struct {
	path string
	m    map[string]any
	used map[string]bool
}

func asObject(path string, v any) (*object, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fieldError(path, "must be an object")
	}
	return &object{path: path, m: m, used: map[string]bool{}}, nil
}

func (o *object) at(k string) string {
	if o.path == "" {
		return k
	}
	return o.path + "." + k
}

func (o *object) get(k string) (any, bool) {
	o.used[k] = true
	v, ok := o.m[k]
	return v, ok && v != nil
}

func (o *object) text(k string) (string, error) {
	v, ok := o.get(k)
	if !ok {
		return "", nil
	}
	s, isText := v.(string)
	if !isText {
		return "", fieldError(o.at(k), "must be a string")
	}
	if len(s) > MaxTextBytes {
		return "", fieldError(o.at(k), fmt.Sprintf("is longer than %d bytes", MaxTextBytes))
	}
	return s, nil
}

func (o *object) number(k string) (float64, bool, error) {
	v, ok := o.get(k)
	if !ok {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, false, fieldError(o.at(k), figureError)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || !(f >= 0 && f <= maxFigure) {
		return 0, false, fieldError(o.at(k), figureError)
	}
	return f, true, nil
}

func (o *object) integer(k string) (int, error) {
	v, ok := o.get(k)
	if !ok {
		return 0, fieldError(o.at(k), "is missing")
	}
	n, isNum := v.(json.Number)
	i, err := strconv.Atoi(string(n))
	if !isNum || err != nil || i < 1 || i > maxConcurrency {
		return 0, fieldError(o.at(k), fmt.Sprintf("must be a whole number from 1 to %d", maxConcurrency))
	}
	return i, nil
}

func (o *object) array(k string) ([]any, error) {
	v, ok := o.get(k)
	if !ok {
		return nil, fieldError(o.at(k), "is missing")
	}
	a, isArray := v.([]any)
	if !isArray {
		return nil, fieldError(o.at(k), "must be an array")
	}
	if len(a) > maxLevels {
		return nil, fieldError(o.at(k), fmt.Sprintf("has more than %d entries", maxLevels))
	}
	return a, nil
}

// unknown fails on the first key, in sorted order, that nothing read.
func (o *object) unknown() error {
	var keys []string
	for k := range o.m {
		if !o.used[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return fieldError(o.at(keys[0]), "unknown field")
}

// metrics reads the figures of one level from o: required ones must be
// present, and no p50 may exceed its p95.
func (o *object) metrics() (Metrics, error) {
	var m Metrics
	for _, f := range Fields {
		v, ok, err := o.number(f.Key)
		if err != nil {
			return m, err
		}
		if !ok {
			if !f.Optional {
				return m, fieldError(o.at(f.Key), "is missing")
			}
			continue
		}
		if f.Percent && v > 100 {
			return m, fieldError(o.at(f.Key), "must be a percentage from 0 to 100")
		}
		f.Set(&m, v)
	}
	for _, q := range []struct {
		name     string
		p50, p95 float64
	}{{"ttft", m.TTFTP50, m.TTFTP95}, {"tpot", m.TPOTP50, m.TPOTP95}, {"latency", m.LatencyP50, m.LatencyP95}} {
		if q.p50 > q.p95 {
			return m, fieldError(o.at(q.name+"_p50_ms"), fmt.Sprintf("%v is above %s_p95_ms %v", q.p50, q.name, q.p95))
		}
	}
	return m, nil
}

// levelKey identifies a level within a set.
type levelKey struct {
	mode string
	c    int
}

// once fails when a mode's concurrency appears twice in a file.
func once(seen map[levelKey]bool, path, mode string, c int) error {
	k := levelKey{mode, c}
	if seen[k] {
		return fieldError(path, fmt.Sprintf("repeats concurrency %d of mode %s", c, mode))
	}
	seen[k] = true
	return nil
}

// header reads the fields every format shares.
func (o *object) header(s *Set) error {
	var err error
	if s.Generated, err = o.text("generated"); err != nil {
		return err
	}
	if s.Metric, err = o.text("metric"); err != nil {
		return err
	}
	rps, ok, err := o.number("target_rps")
	if err != nil {
		return err
	}
	if ok {
		s.TargetRPS = &rps
	}
	return nil
}

func decodeDual(top map[string]any) (Set, error) {
	o, _ := asObject("", top)
	var s Set
	if err := o.header(&s); err != nil {
		return s, err
	}
	seen := map[levelKey]bool{}
	err := o.eachLevel(func(lo *object, c int) error {
		keys := make([]string, 0, len(lo.m))
		for k := range lo.m {
			if k != "concurrency" {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return fieldError(lo.path, "has no mode (such as round_robin or kv_aware)")
		}
		// Modes keep the order of the seeds' files: round_robin first,
		// then the others by name.
		slices.SortFunc(keys, func(a, b string) int {
			if a == b {
				return 0
			}
			if a == "round_robin" {
				return -1
			}
			if b == "round_robin" {
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			mode := k
			if m, ok := modeKeys[k]; ok {
				mode = m
			}
			if !modeName.MatchString(k) {
				return fieldError(lo.at(k), "is not a mode name (lower-case letters, digits, _ and -)")
			}
			v, _ := lo.get(k)
			mo, err := asObject(lo.at(k), v)
			if err != nil {
				return err
			}
			m, err := mo.metrics()
			if err != nil {
				return err
			}
			if err := mo.unknown(); err != nil {
				return err
			}
			if err := once(seen, lo.at(k), mode, c); err != nil {
				return err
			}
			s.Levels = append(s.Levels, Level{Concurrency: c, Mode: mode, Metrics: m})
		}
		return nil
	})
	return s, err
}

func decodeSingle(top map[string]any) (Set, error) {
	o, _ := asObject("", top)
	var s Set
	if err := o.header(&s); err != nil {
		return s, err
	}
	mode, err := o.text("mode")
	if err != nil {
		return s, err
	}
	if !modeName.MatchString(mode) {
		return s, fieldError("mode", "is not a mode name (lower-case letters, digits, _ and -)")
	}
	seen := map[levelKey]bool{}
	err = o.eachLevel(func(lo *object, c int) error {
		m, err := lo.metrics()
		if err != nil {
			return err
		}
		if err := lo.unknown(); err != nil {
			return err
		}
		if err := once(seen, lo.path, mode, c); err != nil {
			return err
		}
		s.Levels = append(s.Levels, Level{Concurrency: c, Mode: mode, Metrics: m})
		return nil
	})
	return s, err
}

// eachLevel reads o's "levels" array, refuses keys of o it has not read, and
// calls f with each level's object and concurrency, in order, stopping at
// the first error.
func (o *object) eachLevel(f func(lo *object, c int) error) error {
	levels, err := o.array("levels")
	if err != nil {
		return err
	}
	if err := o.unknown(); err != nil {
		return err
	}
	for i, lv := range levels {
		lo, err := asObject(fmt.Sprintf("levels[%d]", i), lv)
		if err != nil {
			return err
		}
		c, err := lo.integer("concurrency")
		if err != nil {
			return err
		}
		if err := f(lo, c); err != nil {
			return err
		}
	}
	return nil
}

func decodeKvlens(top map[string]any) (Set, error) {
	o, _ := asObject("", top)
	var s Set
	name, err := o.text("format")
	if err != nil {
		return s, err
	}
	if name != KvlensFormatName {
		return s, fieldError("format", fmt.Sprintf("must be %q", KvlensFormatName))
	}
	version, err := o.integer("version")
	if err != nil {
		return s, err
	}
	if version != KvlensFormatVersion {
		return s, fieldError("version", fmt.Sprintf("%d is not supported by this kvlens (it reads version %d)", version, KvlensFormatVersion))
	}
	if err := o.header(&s); err != nil {
		return s, err
	}
	for _, t := range []struct {
		key string
		dst *string
	}{{"name", &s.Name}, {"source", &s.Source}, {"deployment", &s.Deployment}, {"method", &s.Method}} {
		if *t.dst, err = o.text(t.key); err != nil {
			return s, err
		}
	}
	levels, err := o.array("levels")
	if err != nil {
		return s, err
	}
	if err := o.unknown(); err != nil {
		return s, err
	}
	seen := map[levelKey]bool{}
	for i, lv := range levels {
		lo, err := asObject(fmt.Sprintf("levels[%d]", i), lv)
		if err != nil {
			return s, err
		}
		l := Level{}
		if l.Concurrency, err = lo.integer("concurrency"); err != nil {
			return s, err
		}
		if l.Mode, err = lo.text("mode"); err != nil {
			return s, err
		}
		if !modeName.MatchString(l.Mode) {
			return s, fieldError(lo.at("mode"), "is not a mode name (lower-case letters, digits, _ and -)")
		}
		if l.Metrics, err = lo.metrics(); err != nil {
			return s, err
		}
		if _, ok := lo.get("repeats"); ok {
			if l.Repeats, err = lo.integer("repeats"); err != nil {
				return s, err
			}
		}
		if v, ok := lo.get("spread"); ok {
			so, err := asObject(lo.at("spread"), v)
			if err != nil {
				return s, err
			}
			sp := Metrics{}
			for _, f := range Fields {
				x, ok, err := so.number(f.Key)
				if err != nil {
					return s, err
				}
				if ok {
					f.Set(&sp, x)
				}
			}
			if err := so.unknown(); err != nil {
				return s, err
			}
			l.Spread = &sp
		}
		if err := lo.unknown(); err != nil {
			return s, err
		}
		if err := once(seen, lo.path, l.Mode, l.Concurrency); err != nil {
			return s, err
		}
		s.Levels = append(s.Levels, l)
	}
	return s, nil
}

// Validate checks that a set built in code is consistent: at least one level,
// valid mode names, no two levels of a mode at the same concurrency, and
// figures from 0 to maxFigure (percentages to 100), and a name that is one
// line of printable text. Decode checks more, with the file's own paths; its
// errors name the level as levels[i], in the set's order.
func (s *Set) Validate() error {
	if err := CheckName(s.Name); err != nil {
		return err
	}
	if len(s.Levels) == 0 {
		return fieldError("levels", "is empty")
	}
	seen := map[levelKey]bool{}
	for i, l := range s.Levels {
		path := fmt.Sprintf("levels[%d]", i)
		if !modeName.MatchString(l.Mode) {
			return fieldError(path+".mode", "is not a mode name (lower-case letters, digits, _ and -)")
		}
		if l.Concurrency < 1 || l.Concurrency > maxConcurrency {
			return fieldError(path+".concurrency", fmt.Sprintf("must be a whole number from 1 to %d", maxConcurrency))
		}
		if err := once(seen, path, l.Mode, l.Concurrency); err != nil {
			return err
		}
		for _, f := range Fields {
			v, ok := f.Value(&l.Metrics)
			switch {
			case !ok:
			case !(v >= 0 && v <= maxFigure):
				return fieldError(path+"."+f.Key, figureError)
			case f.Percent && v > 100:
				return fieldError(path+"."+f.Key, "must be a percentage from 0 to 100")
			}
		}
	}
	return nil
}

// CheckName refuses a set's name that would not read as one line of a
// listing: blanks alone, a control character (a newline, a tab, an escape
// sequence), text that is not UTF-8, or more than maxNameLen characters. An
// empty name passes, as "not given"; the store asks for one.
func CheckName(name string) error {
	if name != "" && strings.TrimSpace(name) == "" {
		return fieldError("name", "is blank")
	}
	if !utf8.ValidString(name) {
		return fieldError("name", "is not UTF-8 text")
	}
	if n := utf8.RuneCountInString(name); n > maxNameLen {
		return fieldError("name", fmt.Sprintf("is %d characters long, more than %d", n, maxNameLen))
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fieldError("name", fmt.Sprintf("holds the control character %U; a name is one line of text", r))
		}
	}
	return nil
}

// orderedObject marshals as a JSON object whose keys keep their order.
type orderedObject []struct {
	key string
	val any
}

func (o *orderedObject) add(k string, v any) {
	*o = append(*o, struct {
		key string
		val any
	}{k, v})
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(kv.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func metricsObject(m Metrics) orderedObject {
	var o orderedObject
	for _, f := range Fields {
		if v, ok := f.Value(&m); ok {
			o.add(f.Key, v)
		}
	}
	return o
}

func headerObject(s *Set) orderedObject {
	var o orderedObject
	if s.Generated != "" {
		o.add("generated", s.Generated)
	}
	if s.Metric != "" {
		o.add("metric", s.Metric)
	}
	return o
}

// Encode writes s in format f, indented like the seeds' files. The dual
// format needs at least one level per concurrency; the single format needs
// exactly one mode.
func Encode(s *Set, f Format) ([]byte, error) {
	var o orderedObject
	switch f {
	case FormatKvlens:
		o.add("format", KvlensFormatName)
		o.add("version", KvlensFormatVersion)
		o.add("name", s.Name)
		o.add("source", s.Source)
		o.add("deployment", s.Deployment)
		if s.Method != "" {
			o.add("method", s.Method)
		}
		o = append(o, headerObject(s)...)
		if s.TargetRPS != nil {
			o.add("target_rps", *s.TargetRPS)
		}
		var levels []orderedObject
		for _, l := range s.Levels {
			var lo orderedObject
			lo.add("concurrency", l.Concurrency)
			lo.add("mode", l.Mode)
			lo = append(lo, metricsObject(l.Metrics)...)
			if l.Repeats > 0 {
				lo.add("repeats", l.Repeats)
			}
			if l.Spread != nil {
				lo.add("spread", metricsObject(*l.Spread))
			}
			levels = append(levels, lo)
		}
		o.add("levels", levels)
	case FormatDual:
		o = headerObject(s)
		if s.TargetRPS != nil {
			o.add("target_rps", *s.TargetRPS)
		}
		levels := []orderedObject{}
		for _, c := range s.Concurrencies() {
			var lo orderedObject
			lo.add("concurrency", c)
			for _, mode := range s.Modes() {
				if l, ok := s.Level(mode, c); ok {
					lo.add(ModeKey(mode), metricsObject(l.Metrics))
				}
			}
			levels = append(levels, lo)
		}
		o.add("levels", levels)
	case FormatSingle:
		modes := s.Modes()
		if len(modes) != 1 {
			return nil, fmt.Errorf("the single-mode format holds one mode, and the set has %d (%s): use --format dual or kvlens", len(modes), strings.Join(modes, ", "))
		}
		if s.Generated != "" {
			o.add("generated", s.Generated)
		}
		o.add("mode", modes[0])
		if s.TargetRPS != nil {
			o.add("target_rps", *s.TargetRPS)
		}
		levels := []orderedObject{}
		for _, l := range s.Curve(modes[0]) {
			var lo orderedObject
			lo.add("concurrency", l.Concurrency)
			lo = append(lo, metricsObject(l.Metrics)...)
			levels = append(levels, lo)
		}
		o.add("levels", levels)
	default:
		return nil, fmt.Errorf("unknown format %q (formats: kvlens, dual, single)", f)
	}
	flat, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, flat, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// ParseFormat reads a format name as given on the command line.
func ParseFormat(name string) (Format, error) {
	switch f := Format(name); f {
	case FormatKvlens, FormatDual, FormatSingle:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q (formats: kvlens, dual, single)", name)
}

// CheckModes refuses a set with a mode that is not in known, naming the
// level and listing the known modes, so that a typo such as "kv-aware" or a
// mode kvlens cannot route by is caught when a file is imported, not when a
// chart shows no curve for it.
func (s *Set) CheckModes(known []string) error {
	for i, l := range s.Levels {
		if !slices.Contains(known, l.Mode) {
			return fieldError(fmt.Sprintf("levels[%d].mode", i), fmt.Sprintf("%q is not a known routing mode (known: %s)", l.Mode, strings.Join(known, ", ")))
		}
	}
	return nil
}

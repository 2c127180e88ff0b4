package web

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseConcurrency reads any slider value, from a form or a tour file:
// it accepts exactly the slider's own steps, and refuses anything else in
// one line.
func FuzzParseConcurrency(f *testing.F) {
	for _, s := range []string{"60", " 120 ", "180", "59", "70", "200", "-60", "1e2", "0x3c", "", "120\n", "+80", "99999999999999999999"} {
		f.Add(s)
	}
	o := Options{SliderMin: 60, SliderMax: 180, SliderStep: 20}
	f.Fuzz(func(t *testing.T, raw string) {
		n, err := o.ParseConcurrency(raw)
		want, convErr := strconv.Atoi(strings.TrimSpace(raw))
		onScale := convErr == nil && want >= 60 && want <= 180 && (want-60)%20 == 0
		switch {
		case err != nil && strings.ContainsAny(err.Error(), "\r\n"):
			t.Fatalf("ParseConcurrency(%q): an error of more than one line: %q", raw, err)
		case err == nil && (!onScale || n != want):
			t.Fatalf("ParseConcurrency(%q) = %d, off the slider's scale", raw, n)
		case err != nil && onScale:
			t.Fatalf("ParseConcurrency(%q) refused a value on the scale: %v", raw, err)
		}
	})
}

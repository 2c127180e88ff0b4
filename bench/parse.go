package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxListed bounds what ParseList expands to: a grid of more levels or
// seeds than this would run for days.
const maxListed = 1000

// ParseList reads a list of whole numbers from lo to hi: comma-separated
// items, each a number ("40"), a range ("1-5") or a range with a step
// ("40-200/20"), in the order given, none twice.
func ParseList(s string, lo, hi int) ([]int, error) {
	var out []int
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		first, last, step := item, item, "1"
		if a, b, ok := strings.Cut(item, "-"); ok {
			first, last = a, b
			if l, st, ok := strings.Cut(b, "/"); ok {
				last, step = l, st
			}
		}
		a, errA := strconv.Atoi(strings.TrimSpace(first))
		b, errB := strconv.Atoi(strings.TrimSpace(last))
		st, errS := strconv.Atoi(strings.TrimSpace(step))
		switch {
		case errA != nil || errB != nil || errS != nil:
			return nil, fmt.Errorf("%q is not a number, a range like 1-5 or a range with a step like 40-200/20", item)
		case a < lo || b > hi || a > b:
			return nil, fmt.Errorf("%q: want numbers from %d to %d, low to high", item, lo, hi)
		case st < 1:
			return nil, fmt.Errorf("%q: the step must be at least 1", item)
		case (b-a)/st+1+len(out) > maxListed:
			return nil, fmt.Errorf("%q: more than %d values", item, maxListed)
		}
		for v := a; v <= b; v += st {
			if slices.Contains(out, v) {
				return nil, fmt.Errorf("%d is given twice", v)
			}
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no value given")
	}
	return out, nil
}

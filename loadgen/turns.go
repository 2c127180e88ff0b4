package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// TurnDist is a distribution of the number of turns per conversation.
type TurnDist struct {
	// Counts are the possible turn counts, ascending.
	Counts []int
	// Weights are their relative weights, all positive.
	Weights []int
}

// UniformTurns returns the uniform distribution over min..max turns.
func UniformTurns(min, max int) TurnDist {
	var d TurnDist
	for n := min; n <= max; n++ {
		d.Counts = append(d.Counts, n)
		d.Weights = append(d.Weights, 1)
	}
	return d
}

// ParseTurns reads a turn distribution: a single count ("5"), a uniform range
// ("3-5"), or weighted counts ("3:1,4:2,5:1").
func ParseTurns(s string) (TurnDist, error) {
	s = strings.TrimSpace(s)
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || a < 1 || b < a || b > maxTurns {
			return TurnDist{}, fmt.Errorf("turns %q: want a range like 3-5 with 1 <= low <= high <= %d", s, maxTurns)
		}
		return UniformTurns(a, b), nil
	}
	weights := map[int]int{}
	for _, part := range strings.Split(s, ",") {
		cs, ws, weighted := strings.Cut(strings.TrimSpace(part), ":")
		n, errN := strconv.Atoi(strings.TrimSpace(cs))
		w, errW := 1, error(nil)
		if weighted {
			w, errW = strconv.Atoi(strings.TrimSpace(ws))
		}
		if errN != nil || errW != nil || n < 1 || n > maxTurns || w < 1 || w > maxTurnWeight {
			return TurnDist{}, fmt.Errorf("turns %q: %q is not a count 1..%d or count:weight with a weight 1..%d", s, part, maxTurns, maxTurnWeight)
		}
		if _, dup := weights[n]; dup {
			return TurnDist{}, fmt.Errorf("turns %q: count %d appears twice", s, n)
		}
		weights[n] = w
	}
	var d TurnDist
	for n := 1; n <= maxTurns; n++ {
		if w, ok := weights[n]; ok {
			d.Counts = append(d.Counts, n)
			d.Weights = append(d.Weights, w)
		}
	}
	return d, nil
}

// maxTurns bounds a conversation: the history is resent every turn, so a long
// one would outgrow any context window.
const maxTurns = 100

// maxTurnWeight bounds a count's weight, so that the weights of all
// maxTurns counts add up without overflow: a million to one is already
// finer than any load a person would write.
const maxTurnWeight = 1_000_000

// String writes d in the form ParseTurns reads: a range when d is uniform
// over consecutive counts, else count:weight pairs.
func (d TurnDist) String() string {
	uniform := len(d.Counts) > 0
	for i, n := range d.Counts {
		uniform = uniform && d.Weights[i] == 1 && n == d.Counts[0]+i
	}
	switch {
	case uniform && len(d.Counts) == 1:
		return strconv.Itoa(d.Counts[0])
	case uniform:
		return fmt.Sprintf("%d-%d", d.Counts[0], d.Counts[len(d.Counts)-1])
	}
	parts := make([]string, len(d.Counts))
	for i, n := range d.Counts {
		parts[i] = fmt.Sprintf("%d:%d", n, d.Weights[i])
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (d *TurnDist) Set(s string) error {
	v, err := ParseTurns(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func (d TurnDist) valid() error {
	if len(d.Counts) == 0 || len(d.Counts) != len(d.Weights) {
		return fmt.Errorf("turn distribution %v is empty", d)
	}
	for i, n := range d.Counts {
		if n < 1 || n > maxTurns || d.Weights[i] < 1 || d.Weights[i] > maxTurnWeight {
			return fmt.Errorf("turn distribution %v: counts must be 1..%d and weights 1..%d", d, maxTurns, maxTurnWeight)
		}
	}
	return nil
}

func (d TurnDist) sample(rng *rand.Rand) int {
	total := 0
	for _, w := range d.Weights {
		total += w
	}
	x := rng.IntN(total)
	for i, w := range d.Weights {
		if x < w {
			return d.Counts[i]
		}
		x -= w
	}
	return d.Counts[len(d.Counts)-1]
}

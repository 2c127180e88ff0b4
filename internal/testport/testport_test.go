package testport

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePicksBindablePortsBelowTheEphemeralRange(t *testing.T) {
	hi := ephemeralStart()
	for _, n := range []int{1, 4} {
		base := Free(t, n)
		if base < lowest || base+n > hi {
			t.Fatalf("Free(%d) = %d: want %d ports within %d-%d", n, base, n, lowest, hi-1)
		}
		for p := base; p < base+n; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				t.Fatalf("Free(%d) = %d, but port %d does not bind: %v", n, base, p, err)
			}
			l.Close()
		}
	}
}

func TestBindableRefusesARangeWithAHeldPort(t *testing.T) {
	base := Free(t, 3)
	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+2))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	tests := []struct {
		name      string
		base, n   int
		wantBinds bool
	}{
		{"the two ports before the held one", base, 2, true},
		{"a range that ends on the held port", base, 3, false},
		{"the held port alone", base + 2, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Bindable(tt.base, tt.n, "127.0.0.1"); got != tt.wantBinds {
				t.Fatalf("Bindable(%d, %d) = %v, want %v", tt.base, tt.n, got, tt.wantBinds)
			}
		})
	}
}

func TestFreeNeverGivesAPortTwice(t *testing.T) {
	seen := map[int]int{}
	for i := range 300 {
		base := Free(t, 3)
		for p := base; p < base+3; p++ {
			if j, ok := seen[p]; ok {
				t.Fatalf("call %d gave port %d, which call %d gave too", i, p, j)
			}
			seen[p] = i
		}
	}
}

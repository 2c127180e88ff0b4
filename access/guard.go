package access

import (
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Wrong tokens are limited per address, for every Rule of the process at
// once: the dashboard's login, a Bearer header on its controls, the router's
// admin API and the simulated workers' fault API draw on one budget. A
// random token (serve's default, 64 bits) cannot be guessed at any rate; an
// operator's own (--control-token-file) may be short, and this bounds how
// fast anyone may try. A right token never spends the budget, but is
// refused while an address is held back, or guessing would go on
// regardless.
const (
	// GuessBurst is how many wrong tokens an address may send at once.
	GuessBurst = 10
	// GuessEvery is how often one more is allowed after them: 6 a minute,
	// under 9,000 a day.
	GuessEvery = 10 * time.Second
	// guessAddresses bounds the addresses remembered; past it those whose
	// budget has filled again are forgotten, and while none has, a new
	// address is held back too.
	guessAddresses = 4096
)

// guesses is the process's one budget of wrong tokens.
var guesses = &guard{lims: map[netip.Prefix]*rate.Limiter{}}

type guard struct {
	mu   sync.Mutex
	lims map[netip.Prefix]*rate.Limiter
}

// HeldError says an address may not try a token for now: HTTP 429.
type HeldError struct{ msg string }

func (e *HeldError) Error() string { return e.msg }

// held returns why r's address may not try a token now, or nil. This
// machine is never held back: whoever runs there can change the demo anyway
// (unless --loopback-viewer), and its scripts must not be locked out.
func (g *guard) held(r *http.Request) error {
	if FromLoopback(r) {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	at := now()
	addr := PeerPrefix(r.RemoteAddr)
	lim, ok := g.lims[addr]
	if !ok {
		if len(g.lims) < guessAddresses {
			return nil
		}
		g.forget(at)
		if len(g.lims) < guessAddresses {
			return nil
		}
		return &HeldError{fmt.Sprintf("access: too many addresses sent wrong operator tokens; try again in %d s", int(GuessEvery/time.Second))}
	}
	if lim.TokensAt(at) >= 1 {
		return nil
	}
	wait := time.Duration((1 - lim.TokensAt(at)) * float64(GuessEvery))
	return &HeldError{fmt.Sprintf("access: too many wrong operator tokens from %s; try again in %d s", PrefixName(addr), int(wait.Round(time.Second)/time.Second)+1)}
}

// wrong spends one of r's address's budget on a wrong token.
func (g *guard) wrong(r *http.Request) {
	if FromLoopback(r) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	at := now()
	addr := PeerPrefix(r.RemoteAddr)
	lim, ok := g.lims[addr]
	if !ok {
		if len(g.lims) >= guessAddresses {
			g.forget(at)
		}
		lim = rate.NewLimiter(rate.Every(GuessEvery), GuessBurst)
		g.lims[addr] = lim
	}
	lim.AllowN(at, 1)
}

// forget drops the addresses whose budget has filled again; g.mu is held.
func (g *guard) forget(at time.Time) {
	for a, lim := range g.lims {
		if lim.TokensAt(at) >= GuessBurst {
			delete(g.lims, a)
		}
	}
}

// reset forgets every address: for tests.
func (g *guard) reset() {
	g.mu.Lock()
	g.lims = map[netip.Prefix]*rate.Limiter{}
	g.mu.Unlock()
}

// PeerPrefix is what a per-address limit counts a peer (a RemoteAddr)
// against: its IPv4 address, or the /64 of its IPv6 address, since one host
// usually has a whole /64 to pick addresses from. A peer that is not TCP
// counts as the zero prefix, shared by all such.
func PeerPrefix(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// PrefixName names a PeerPrefix as a refusal shows it: an IPv4 address
// alone, an IPv6 one as its /64.
func PrefixName(p netip.Prefix) string {
	switch {
	case !p.IsValid():
		return "this address"
	case p.Addr().Is4():
		return p.Addr().String()
	}
	return p.String()
}

package access

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
)

// loopbackNames are the names every server answers to.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// Hosts is the set of names a browser may use to reach a server: its Host
// header must name one of them. A page served under any other name, such as
// an attacker's domain rebound to this machine's address, is refused.
type Hosts struct {
	names map[string]bool
	list  []string
	any   bool
}

// NewHosts returns the loopback names plus names. Each is a host name, an
// address, host:port or a URL (only its host counts); "*" allows any host,
// which turns the DNS-rebinding defence off, and "" adds nothing.
func NewHosts(names ...string) (*Hosts, error) {
	h := &Hosts{names: map[string]bool{}}
	for _, n := range loopbackNames {
		h.add(n)
	}
	for _, n := range names {
		switch strings.TrimSpace(n) {
		case "":
			continue
		case "*":
			h.any = true
			h.list = append(h.list, "*")
			continue
		}
		norm, err := normalize(n)
		if err != nil {
			return nil, err
		}
		h.add(norm)
	}
	return h, nil
}

// MachineHosts is NewHosts with this machine's own names added: its host
// name and every interface address.
func MachineHosts(names ...string) (*Hosts, error) {
	var own []string
	if hn, err := os.Hostname(); err == nil && hn != "" {
		own = append(own, hn)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
				own = append(own, ipn.IP.String())
			}
		}
	}
	h, err := NewHosts(names...)
	if err != nil {
		return nil, err
	}
	for _, n := range own {
		if norm, err := normalize(n); err == nil {
			h.add(norm)
		}
	}
	return h, nil
}

func (h *Hosts) add(n string) {
	if !h.names[n] {
		h.names[n] = true
		h.list = append(h.list, n)
	}
}

// Allows reports whether a Host header value (name, address, name:port or
// [v6]:port) names one of h. A nil h allows the loopback names only.
func (h *Hosts) Allows(hostport string) bool {
	n, err := normalize(hostOnly(hostport))
	if err != nil {
		return false
	}
	if h == nil {
		return slices.Contains(loopbackNames, n)
	}
	return h.any || h.names[n]
}

// Names lists the allowed names in the order they were added, IPv6
// addresses in brackets as a browser writes them.
func (h *Hosts) Names() []string {
	list := loopbackNames
	if h != nil {
		list = h.list
	}
	out := make([]string, len(list))
	for i, n := range list {
		if strings.Contains(n, ":") {
			n = "[" + n + "]"
		}
		out[i] = n
	}
	return out
}

// Guard answers 421 Misdirected Request, with one sentence naming the flag
// that would allow it, to any request whose Host is not one of h.
func (h *Hosts) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.Allows(r.Host) {
			host := hostOnly(r.Host)
			http.Error(w, fmt.Sprintf("access: this server does not answer to host %q; if that is your name for it, start kvlens with --allow-host=%s", host, host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostOnly strips the port from a Host header value, if it has one, and
// the brackets from an IPv6 address.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// ParseList splits a flag value of comma-separated hosts and checks each;
// the flag can also be repeated.
func ParseList(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if f != "*" {
			if _, err := normalize(f); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// normalize turns a name, address, host:port or URL into the lower-case host
// alone, without a trailing dot, or says what is wrong with it.
func normalize(s string) (string, error) {
	s = strings.TrimSpace(s)
	raw := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return "", fmt.Errorf("access: host %q: %v", raw, err)
		}
		s = u.Host
	}
	s = strings.ToLower(strings.TrimSuffix(hostOnly(s), "."))
	if s == "" {
		return "", fmt.Errorf("access: host %q: empty", raw)
	}
	if ip := net.ParseIP(s); ip != nil {
		return ip.String(), nil
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", fmt.Errorf("access: host %q: want a name or address such as kvlens.example.com or 192.168.1.20", raw)
		}
	}
	return s, nil
}

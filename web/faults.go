package web

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// A FaultInjector applies a fault to every worker of a simulated fleet.
type FaultInjector interface {
	// InjectFault sets kind ("none", "503", "429", "500", "cut" or "slow")
	// at amount: a percentage of requests, or a slow-down factor for slow.
	InjectFault(kind string, amount float64) error
}

// Fault presets the dashboard offers: value, then label.
var FaultPresets = [][2]string{
	{"none", "no faults"},
	{"503:10", "10% HTTP 503"},
	{"429:10", "10% HTTP 429"},
	{"500:10", "10% HTTP 500"},
	{"cut:10", "10% cut streams"},
	{"slow:2", "2× slower steps"},
}

// ParseFault reads a fault value such as "503:10" (10% of requests answered
// 503), "slow:2" (steps twice as long) or "none".
func ParseFault(v string) (kind string, amount float64, err error) {
	kind, rest, _ := strings.Cut(strings.TrimSpace(v), ":")
	switch kind {
	case "none":
		return kind, 0, nil
	case "503", "429", "500", "cut", "slow":
	default:
		return "", 0, fmt.Errorf("fault %q: want none, 503:PCT, 429:PCT, 500:PCT, cut:PCT or slow:FACTOR", v)
	}
	amount, err = strconv.ParseFloat(rest, 64)
	switch {
	case err != nil || math.IsNaN(amount):
		return "", 0, fmt.Errorf("fault %q: %q is not a number", v, rest)
	case kind == "slow" && (amount < 1 || amount > 100):
		return "", 0, fmt.Errorf("fault %q: a slow-down factor is from 1 to 100", v)
	case kind != "slow" && (amount < 0 || amount > 100):
		return "", 0, fmt.Errorf("fault %q: a percentage is from 0 to 100", v)
	}
	return kind, amount, nil
}

// faultLabel names a fault for the charts' marks.
func faultLabel(kind string, amount float64) string {
	switch kind {
	case "none":
		return "faults off"
	case "slow":
		return fmt.Sprintf("fault: %g× slower", amount)
	case "cut":
		return fmt.Sprintf("fault: %g%% cut streams", amount)
	}
	return fmt.Sprintf("fault: %g%% HTTP %s", amount, kind)
}

// fault injects a fault in every simulated worker and marks it on the charts
// (and so in the session's recording).
func (s *Server) fault(w http.ResponseWriter, r *http.Request) {
	if s.opts.Faults == nil {
		http.Error(w, "faults can be injected only into the simulated fleet", http.StatusNotFound)
		return
	}
	kind, amount, err := ParseFault(r.FormValue("fault"))
	if err == nil {
		s.operatorTakes()
		err = s.injectFault(kind, amount)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%s: every simulated worker", faultLabel(kind, amount))
}

// injectFault puts a fault, as ParseFault read it, in force in every
// simulated worker.
func (s *Server) injectFault(kind string, amount float64) error {
	// A fault begins a new window: the figures with it are not those
	// without it.
	err := s.change(Mark{Kind: "fault", Label: faultLabel(kind, amount)}, func() error { return s.opts.Faults.InjectFault(kind, amount) })
	if err != nil {
		return err
	}
	value := faultValue(kind, amount)
	s.faultInForce.Store(&value)
	return nil
}

// faultValue writes a fault as /api/fault takes it: "503:10", "none".
func faultValue(kind string, amount float64) string {
	if kind == "none" {
		return kind
	}
	return kind + ":" + strconv.FormatFloat(amount, 'g', -1, 64)
}

// currentFault is the fault in force, as /api/fault takes it.
func (s *Server) currentFault() string {
	if v := s.faultInForce.Load(); v != nil {
		return *v
	}
	return "none"
}

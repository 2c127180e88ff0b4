package components

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// EventsData is a worker's KV event stream, as the workers panel shows it.
type EventsData struct {
	// State is "connected", "listening" (kvlens bound, no publisher
	// connected) or "connecting" (kvlens dials, no connection open).
	State string
	// Warming says the worker holds blocks the index has not heard of.
	Warming bool
	// LastEventAge is the time since the last event batch, in seconds; -1
	// before the first.
	LastEventAge float64
	// Dropped counts blocks not applied, by reason (unknown_parent, …).
	Dropped map[string]uint64
	// Endpoint is the events endpoint, for the cell's tooltip.
	Endpoint string
}

// eventsClass colours a stream's state: fine when connected and caught
// up, a warning otherwise.
func eventsClass(e *EventsData) string {
	if e.State == "connected" && !e.Warming {
		return "events"
	}
	return "events notice"
}

// eventsState is the state in a word or two: "connected", "listening",
// "connected, warming".
func eventsState(e *EventsData) string {
	if e.Warming {
		return e.State + ", warming"
	}
	return e.State
}

// eventAge says how long ago the last event came, compactly: "2 s ago",
// "5 min ago", or "no events yet".
func eventAge(sec float64) string {
	switch {
	case sec < 0:
		return "no events yet"
	case sec < 120:
		return fmt.Sprintf("%.0f s ago", sec)
	case sec < 2*3600:
		return fmt.Sprintf("%.0f min ago", sec/60)
	}
	return fmt.Sprintf("%.0f h ago", sec/3600)
}

// droppedTotal is the number of blocks dropped for any reason.
func droppedTotal(e *EventsData) uint64 {
	var n uint64
	for _, v := range e.Dropped {
		n += v
	}
	return n
}

// eventsTitle is the cell's tooltip: the endpoint and the drops by reason.
func eventsTitle(e *EventsData) string {
	t := "KV events from " + e.Endpoint
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e.Dropped)) {
		if e.Dropped[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, e.Dropped[k]))
		}
	}
	if len(parts) > 0 {
		t += "; dropped blocks: " + strings.Join(parts, ", ")
	}
	return t
}

package kvevents

import (
	stdlog "log"
	"log/slog"
	"strings"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/internal/lograte"
)

// What a peer can make the subscriber and the publisher log once a message
// or a connection, as lograte counts them: a few lines of each kind an
// endpoint every 10 s, then one line saying how many more there were. The
// stats count every one whatever is logged.
const (
	quietMalformed     = "malformed KV-event messages"
	quietRestart       = "KV-event publisher restarts"
	quietGap           = "KV-event gaps"
	quietReplay        = "failed KV-event replays"
	quietReplayAnswer  = "malformed KV-event replay answers"
	quietReplayRequest = "malformed KV-event replay requests"
	quietSend          = "failed KV-event sends"
	quietHandshake     = "failed ZMTP handshakes"
	quietDial          = "failed KV-event dials"
)

// newQuiet returns the limiter of log's lines, on clk (nil: the wall clock,
// which a terminal and a disk fill by); its summaries go to log.
func newQuiet(clk clock.Clock, log *slog.Logger) *lograte.Limiter {
	return lograte.New(clk, func(line string) { log.Warn("kvevents: " + line) })
}

// zmqLog is the logger go-zeromq writes its own lines to. It writes one
// each time a connection to a bound socket fails its handshake, which any
// peer can cause as fast as it connects (its default logger writes them all
// to stderr); they go to log through quiet instead, as failed handshakes on
// endpoint.
func zmqLog(log *slog.Logger, quiet *lograte.Limiter, endpoint string) *stdlog.Logger {
	return stdlog.New(lineWriter(func(line string) {
		if quiet.Allow(quietHandshake, endpoint) {
			log.Warn("kvevents: a peer failed the ZMTP handshake", "endpoint", endpoint, "err", line)
		}
	}), "", 0)
}

// lineWriter hands each line a log.Logger writes to a func.
type lineWriter func(line string)

func (w lineWriter) Write(p []byte) (int, error) {
	w(strings.TrimSpace(string(p)))
	return len(p), nil
}

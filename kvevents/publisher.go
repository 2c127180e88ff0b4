package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvlens/kvlens/internal/lograte"
)

// PublisherConfig says where and how a worker publishes its KV events.
type PublisherConfig struct {
	// Endpoint is the ZMQ endpoint, such as "tcp://*:5557" (vLLM's default,
	// bound) or "tcp://router:5557" (dialed, with Connect).
	Endpoint string
	// Connect dials Endpoint, for a subscriber that binds, instead of
	// binding it. The dial retries until it succeeds or the publisher
	// closes, and again each time the connection ends (see redial.go).
	Connect bool
	// Topic is the first frame of every message. vLLM's default is empty;
	// when many workers connect to one bound subscriber, the topic is what
	// tells them apart, as in llm-d's "kv@<ip>:<port>@<model>".
	Topic string
	// QueueSize is how many batches may wait to be sent; Publish drops a
	// batch beyond it. Zero means 1024.
	QueueSize int
	// ReplayEndpoint, when set, binds a ROUTER socket that answers replay
	// requests from the last ReplaySize messages, as vLLM's does.
	ReplayEndpoint string
	// ReplaySize is how many recent messages the replay buffer keeps. Zero
	// means 4096.
	ReplaySize int
	// Logger receives a line per socket error and malformed replay
	// request, at most 5 of each kind at once and one every 2 s after them,
	// then one line every 10 s saying how many more there were; nil means
	// slog.Default().
	Logger *slog.Logger
}

// PublisherStats counts what a Publisher did since it started.
type PublisherStats struct {
	// Published is the number of messages handed to the socket. The socket
	// may still drop one at its high-water mark, unseen here.
	Published uint64
	// Dropped is the number of batches dropped because the queue was full.
	// Each dropped batch still used a sequence number, so subscribers see the
	// loss as a gap.
	Dropped uint64
	// ReplayRequests is the number of replay requests answered.
	ReplayRequests uint64
	// BadReplayRequests is the number of replay requests refused as
	// malformed: not [id, ..., 8-byte start seq].
	BadReplayRequests uint64
}

// Publisher sends event batches on a ZMQ PUB socket in vLLM's framing:
// [topic, seq, payload], seq an 8-byte big-endian counter that starts at 0
// and grows by 1 per batch, payload the msgpack of EncodeBatch.
//
// Publish never blocks on the network: batches wait in a bounded queue for a
// sending goroutine, and a batch that finds the queue full is dropped. The
// sequence number is taken before the queue, so a drop leaves a gap that
// subscribers detect (and, with a replay endpoint, can fill: dropped batches
// still enter the replay buffer).
type Publisher struct {
	cfg    PublisherConfig
	log    *slog.Logger
	quiet  *lograte.Limiter // what peers can make log write once a message
	ctx    context.Context
	cancel context.CancelFunc
	sock   zmq4.Socket
	replay zmq4.Socket

	mu     sync.Mutex // orders seq assignment, the ring and the queue
	seq    uint64     // next sequence number
	ring   []frame    // replay buffer, oldest first once full
	next   int        // ring slot the next message goes to
	closed bool

	queue chan frame
	done  chan struct{} // closed when the sender has drained the queue
	wg    sync.WaitGroup

	published, dropped, replays, badReplays atomic.Uint64

	// beforeSend, set only by tests, runs before each message is sent, so a
	// test can hold the sender and fill the queue.
	beforeSend func()
}

// frame is one encoded message with its sequence number.
type frame struct {
	seq     uint64
	payload []byte
}

// NewPublisher opens the PUB socket (and the replay socket, when
// configured). A bound endpoint must be free; a dialed one may come up later.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	return newPublisher(cfg, nil)
}

func newPublisher(cfg PublisherConfig, beforeSend func()) (*Publisher, error) {
	if err := checkEndpoint(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	if cfg.ReplayEndpoint != "" {
		if err := checkEndpoint(cfg.ReplayEndpoint); err != nil {
			return nil, fmt.Errorf("kvevents: publisher replay: %w", err)
		}
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1024
	}
	if cfg.ReplaySize <= 0 {
		cfg.ReplaySize = 4096
	}
	p := &Publisher{cfg: cfg, log: cfg.Logger, queue: make(chan frame, cfg.QueueSize), done: make(chan struct{}), beforeSend: beforeSend}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.quiet = newQuiet(nil, p.log)
	if cfg.ReplayEndpoint != "" {
		p.ring = make([]frame, 0, cfg.ReplaySize)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	sctx := p.ctx
	var dialer *redialer
	if cfg.Connect {
		dialer = newRedialer(cfg.Endpoint, func(err error, pause time.Duration) {
			if p.quiet.Allow(quietDial, cfg.Endpoint) {
				p.log.Warn("kvevents: publisher dial failed; dialing again", "endpoint", cfg.Endpoint, "in", pause, "err", err)
			}
		})
		sctx = dialer.context(sctx, nil)
	}
	p.sock = zmq4.NewPub(sctx, append(dialOptions(cfg.Connect), zmq4.WithLogger(zmqLog(p.log, p.quiet, cfg.Endpoint)))...)
	// go-zeromq's PUB queues without limit behind our queue, so give it a
	// high-water mark too: memory stays bounded when a subscriber stalls.
	// What it drops there is not in Stats().Dropped, but it used a seq, so
	// subscribers still see the gap.
	if err := p.sock.SetOption(zmq4.OptionHWM, max(4*cfg.QueueSize, 4096)); err != nil {
		p.cancel()
		return nil, fmt.Errorf("kvevents: publisher %s: %w", cfg.Endpoint, err)
	}
	if cfg.Connect {
		dialer.sock = p.sock
		p.wg.Go(func() { dialer.run(p.ctx) })
	} else if err := listen(p.sock, cfg.Endpoint); err != nil {
		p.cancel()
		p.sock.Close()
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	if cfg.ReplayEndpoint != "" {
		p.replay = zmq4.NewRouter(p.ctx, zmq4.WithLogger(zmqLog(p.log, p.quiet, cfg.ReplayEndpoint)))
		if err := listen(p.replay, cfg.ReplayEndpoint); err != nil {
			p.cancel()
			p.sock.Close()
			p.replay.Close()
			return nil, fmt.Errorf("kvevents: publisher replay: %w", err)
		}
		p.wg.Go(p.serveReplay)
	}
	go p.send()
	return p, nil
}

// dialOptions makes a dial retry a refused TCP connect every 100 ms until
// it gets through or the socket closes. go-zeromq's own reconnection is
// left off: a redialer (redial.go) redials instead, and is the only one
// that may, lest a socket run two dial loops.
func dialOptions(connect bool) []zmq4.Option {
	if !connect {
		return nil
	}
	return []zmq4.Option{
		zmq4.WithDialerMaxRetries(-1),
		zmq4.WithDialerRetry(100 * time.Millisecond),
		zmq4.WithAutomaticReconnect(false),
	}
}

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("kvevents: publisher closed")

// Publish encodes b and queues it. It returns an error only for a batch that
// cannot be encoded or a closed publisher; a full queue drops the batch,
// counted in Stats().Dropped, because the engine must never wait on events.
func (p *Publisher) Publish(b Batch) error {
	payload, err := EncodeBatch(b)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	f := frame{seq: p.seq, payload: payload}
	p.seq++
	p.remember(f)
	select {
	case p.queue <- f:
	default:
		p.dropped.Add(1)
	}
	return nil
}

// remember puts f in the replay ring; p.mu is held.
func (p *Publisher) remember(f frame) {
	if p.ring == nil {
		return
	}
	if len(p.ring) < cap(p.ring) {
		p.ring = append(p.ring, f)
		return
	}
	p.ring[p.next] = f
	p.next = (p.next + 1) % len(p.ring)
}

func (p *Publisher) send() {
	defer close(p.done)
	topic := []byte(p.cfg.Topic)
	for f := range p.queue {
		if p.beforeSend != nil {
			p.beforeSend()
		}
		msg := zmq4.NewMsgFrom(topic, binary.BigEndian.AppendUint64(nil, f.seq), f.payload)
		if err := p.sock.SendMulti(msg); err != nil {
			if p.quiet.Allow(quietSend, p.cfg.Endpoint) {
				p.log.Warn("kvevents: publish", "endpoint", p.cfg.Endpoint, "seq", f.seq, "err", err)
			}
			continue
		}
		p.published.Add(1)
	}
}

// endSeq marks the end of a replay: seq -1 as 8 big-endian bytes.
var endSeq = binary.BigEndian.AppendUint64(nil, ^uint64(0))

// serveReplay answers [id, "", start_seq] with [id, "", seq, payload] for
// every buffered message from start_seq on, then [id, "", -1, ""].
func (p *Publisher) serveReplay() {
	for {
		req, err := p.replay.Recv()
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			continue // a requester went away (go-zeromq reports it as io.EOF)
		}
		p.answer(req)
	}
}

// answer answers one replay request, or counts and logs it as malformed.
func (p *Publisher) answer(req zmq4.Msg) {
	if len(req.Frames) < 2 || len(req.Frames[len(req.Frames)-1]) != 8 {
		p.badReplays.Add(1)
		if p.quiet.Allow(quietReplayRequest, p.cfg.ReplayEndpoint) {
			p.log.Warn("kvevents: malformed replay request", "endpoint", p.cfg.ReplayEndpoint, "frames", len(req.Frames))
		}
		return
	}
	id := req.Frames[0]
	start := binary.BigEndian.Uint64(req.Frames[len(req.Frames)-1])
	p.replays.Add(1)
	for _, f := range p.since(start) {
		seq := binary.BigEndian.AppendUint64(nil, f.seq)
		if err := p.replay.SendMulti(zmq4.NewMsgFrom(id, nil, seq, f.payload)); err != nil {
			break
		}
	}
	_ = p.replay.SendMulti(zmq4.NewMsgFrom(id, nil, endSeq, nil))
}

// since returns the buffered messages with seq ≥ start, oldest first.
func (p *Publisher) since(start uint64) []frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []frame
	for i := range p.ring {
		f := p.ring[(p.next+i)%len(p.ring)]
		if f.seq >= start {
			out = append(out, f)
		}
	}
	return out
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{Published: p.published.Load(), Dropped: p.dropped.Load(), ReplayRequests: p.replays.Load(), BadReplayRequests: p.badReplays.Load()}
}

// Close sends what is queued, then closes the sockets. It is safe to call
// more than once.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.queue)
	p.mu.Unlock()

	select {
	case <-p.done:
	case <-time.After(2 * time.Second): // a wedged socket must not hang shutdown
	}
	p.cancel()
	err := p.sock.Close()
	if p.replay != nil {
		p.replay.Close()
	}
	p.wg.Wait()
	p.quiet.Close()
	return err
}

// ReplayEndpoint returns where subscribers reach the replay socket, with
// the port the system chose when the configured one was 0 and a wildcard
// host given as 127.0.0.1; "" when the publisher has none.
func (p *Publisher) ReplayEndpoint() string {
	if p.replay == nil {
		return ""
	}
	return reachable(p.replay.Addr(), p.cfg.ReplayEndpoint)
}

// Endpoint returns where subscribers reach a bound publisher, with the port
// the system chose when the configured one was 0, and a wildcard host given
// as 127.0.0.1. A connecting publisher returns its configured endpoint.
func (p *Publisher) Endpoint() string {
	if p.cfg.Connect {
		return p.cfg.Endpoint
	}
	return reachable(p.sock.Addr(), p.cfg.Endpoint)
}

// reachable turns a bound socket's address into an endpoint to dial;
// configured is returned when the address is not TCP.
func reachable(addr net.Addr, configured string) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return configured
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

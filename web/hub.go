package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

const (
	// clientQueue is how many frames may wait for one slow browser before
	// it is dropped; it then reconnects. The hub itself never waits.
	clientQueue = 16
	// writeTimeout bounds one websocket write.
	writeTimeout = 5 * time.Second
	// tickEvery is the push rate: 1 Hz, like the original demo.
	tickEvery = time.Second
)

// Hub pushes frames to every connected browser at 1 Hz.
type Hub struct {
	tick  func() [][]byte // frames for everyone, built once per tick
	hello func() [][]byte // frames for a browser that just connected

	upgrader websocket.Upgrader
	mu       sync.Mutex
	clients  map[*client]struct{}
	closed   bool
}

type client struct {
	conn *websocket.Conn
	send chan []byte
	once sync.Once
}

func (c *client) close() { c.once.Do(func() { c.conn.Close() }) }

// NewHub returns a hub that sends tick's frames every second, and hello's to
// each new browser.
func NewHub(tick, hello func() [][]byte) *Hub {
	h := &Hub{tick: tick, hello: hello, clients: map[*client]struct{}{}}
	h.upgrader = websocket.Upgrader{CheckOrigin: sameOrigin}
	return h
}

// sameOrigin refuses a websocket opened by a page of another site, so a
// foreign page cannot read the dashboard through a visitor's browser.
// Requests without an Origin (not from a browser) are allowed.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// Clients returns how many browsers are connected.
func (h *Hub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// Run pushes frames every second until ctx ends, then disconnects everyone.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	defer h.closeAll()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.broadcast(h.tick())
		}
	}
}

func (h *Hub) broadcast(frames [][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		for _, f := range frames {
			if !trySend(c, f) {
				// Too slow: drop it rather than stall everyone else.
				delete(h.clients, c)
				close(c.send)
				break
			}
		}
	}
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		delete(h.clients, c)
		close(c.send)
	}
}

// ServeWS upgrades a browser's request and registers it.
func (h *Hub) ServeWS(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "websocket refused: origin "+r.Header.Get("Origin")+" is not this dashboard", http.StatusForbidden)
		return
	}
	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered the client
	}
	c := &client{conn: conn, send: make(chan []byte, clientQueue)}
	for _, f := range h.hello() {
		c.send <- f
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		c.close()
		return
	}
	h.clients[c] = struct{}{}
	h.mu.Unlock()
	go h.write(c)
	go h.read(c)
}

// write sends queued frames until the queue is closed or a write fails.
func (h *Hub) write(c *client) {
	defer c.close()
	for f := range c.send {
		c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := c.conn.WriteMessage(websocket.TextMessage, f); err != nil {
			slog.Debug("websocket write failed", "err", err)
			h.drop(c)
			return
		}
	}
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, ""))
}

// read discards what the browser sends and notices when it leaves.
func (h *Hub) read(c *client) {
	c.conn.SetReadLimit(4096)
	for {
		if _, _, err := c.conn.ReadMessage(); err != nil {
			h.drop(c)
			c.close()
			return
		}
	}
}

func (h *Hub) drop(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c.send)
	}
}

func trySend(c *client, f []byte) bool {
	select {
	case c.send <- f:
		return true
	default:
		return false
	}
}

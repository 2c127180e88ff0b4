package router

import (
	"context"
	"sync"
	"time"

	"github.com/kvlens/kvlens/clock"
	"github.com/kvlens/kvlens/kvevents"
)

// FeedSync is how often a Feed compares its subscriptions with the pool, so
// that a worker DNS discovery adds is subscribed to within a second or so.
const FeedSync = time.Second

// Feed keeps the router's KV index fed from the workers' KV events: one ZMQ
// subscription per worker that names an events endpoint, following workers
// as they join and leave the pool. A gap in a worker's sequence numbers, or
// a publisher restart, clears that worker's index, which then rebuilds from
// the events that follow.
type Feed struct {
	r    *Router
	logf func(string, ...any)

	mu   sync.Mutex
	subs map[string]*feedSub // by worker name
}

type feedSub struct {
	endpoint string
	sub      *kvevents.Subscriber
	cancel   context.CancelFunc
}

// NewFeed returns a feed for r; logf gets one line per subscription change
// and error.
func NewFeed(r *Router, logf func(string, ...any)) *Feed {
	return &Feed{r: r, logf: logf, subs: map[string]*feedSub{}}
}

// Run keeps the subscriptions in step with the pool until ctx ends, then
// closes them all.
func (f *Feed) Run(ctx context.Context, clk clock.Clock) {
	every(ctx, clk, FeedSync, func() { f.Sync(ctx) })
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, s := range f.subs {
		s.close()
		delete(f.subs, name)
	}
}

// Sync subscribes to every worker in the pool that publishes events and is
// not yet subscribed to, and drops the subscriptions (and index entries) of
// workers that left.
func (f *Feed) Sync(ctx context.Context) {
	want := map[string]string{}
	for _, w := range f.r.Pool().Workers() {
		if w.Events != "" {
			want[w.Name] = w.Events
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, s := range f.subs {
		if ep, ok := want[name]; !ok || ep != s.endpoint {
			s.close()
			delete(f.subs, name)
			f.r.Index().RemoveWorker(name)
			f.logf("stopped reading KV events of %s", name)
		}
	}
	for name, ep := range want {
		if _, ok := f.subs[name]; ok {
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		sub, err := kvevents.NewSubscriber(sctx, kvevents.SubscriberConfig{
			Endpoints: []kvevents.Endpoint{{Worker: name, Addr: ep}},
		}, f.apply)
		if err != nil {
			cancel()
			f.logf("KV events of %s: %v", name, err)
			continue
		}
		f.subs[name] = &feedSub{endpoint: ep, sub: sub, cancel: cancel}
		f.logf("reading KV events of %s from %s", name, ep)
	}
}

// apply hands one message's events to the index, clearing the worker first
// when events were lost before it.
func (f *Feed) apply(u kvevents.Update) {
	if u.Reset || u.Missed > 0 {
		f.r.SequenceGap(u.Worker)
	}
	for _, ev := range u.Batch.Events {
		// Apply counts each outcome in the router's metrics; an event that
		// does not apply (an unknown parent, say) is counted, not fatal.
		f.r.Index().Apply(u.Worker, ev)
	}
}

// Subscribed returns the names of the workers whose events are being read.
func (f *Feed) Subscribed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.subs))
	for n := range f.subs {
		names = append(names, n)
	}
	return names
}

func (s *feedSub) close() {
	s.cancel()
	s.sub.Close()
}

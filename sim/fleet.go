package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Fleet is a set of simulated workers, each on its own loopback HTTP port,
// reachable exactly as remote workers would be.
type Fleet struct {
	// URLs holds each worker's base URL, such as http://127.0.0.1:41234.
	URLs    []string
	servers []*http.Server
	wg      sync.WaitGroup
}

// StartFleet starts n workers on ephemeral loopback ports.
func StartFleet(n int, model string, t Timing) (*Fleet, error) {
	if n < 1 {
		return nil, fmt.Errorf("sim: a fleet needs at least 1 worker, got %d", n)
	}
	f := &Fleet{}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Close(context.Background())
			return nil, fmt.Errorf("sim: listen for worker %d: %w", i, err)
		}
		srv := &http.Server{
			Handler:           NewServer(fmt.Sprintf("sim-%d", i), model, t),
			ReadHeaderTimeout: 10 * time.Second,
		}
		f.servers = append(f.servers, srv)
		f.URLs = append(f.URLs, "http://"+ln.Addr().String())
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			srv.Serve(ln)
		}()
	}
	return f, nil
}

// Close stops every worker, cutting open streams once ctx expires.
func (f *Fleet) Close(ctx context.Context) error {
	var errs []error
	for _, srv := range f.servers {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		}
	}
	f.wg.Wait()
	return errors.Join(errs...)
}

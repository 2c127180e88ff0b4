package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// FleetConfig describes a fleet of simulated workers.
type FleetConfig struct {
	// Count is the number of workers.
	Count int
	// Profile is every worker's profile; the zero value means the default.
	Profile Profile
	// Model overrides the profile's model name when set.
	Model string
	// Host is the address the workers listen on; empty means 127.0.0.1.
	Host string
	// Ports are the workers' ports, one each; empty means ephemeral ports,
	// or consecutive ports from BasePort when it is set.
	Ports []int
	// BasePort, when set and Ports is empty, gives worker i port BasePort+i.
	BasePort int
	// Faults are injected in every worker from the start.
	Faults Faults
	// Events, when set, returns the KV event sink of worker i.
	Events func(i int) EventSink
	// Seed makes output lengths and faults reproducible; worker i uses Seed+i.
	Seed uint64
}

// Fleet is a set of simulated workers, each on its own HTTP port, reachable
// exactly as remote workers would be.
type Fleet struct {
	// URLs holds each worker's base URL, such as http://127.0.0.1:41234.
	URLs []string
	// Workers are the workers, in the order of URLs.
	Workers []*Server
	servers []*http.Server
	wg      sync.WaitGroup
}

// StartFleet starts the workers cfg describes.
func StartFleet(cfg FleetConfig) (*Fleet, error) {
	if cfg.Count < 1 {
		return nil, fmt.Errorf("sim: a fleet needs at least 1 worker, got %d", cfg.Count)
	}
	if len(cfg.Ports) > 0 && len(cfg.Ports) != cfg.Count {
		return nil, fmt.Errorf("sim: %d ports given for %d workers", len(cfg.Ports), cfg.Count)
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	f := &Fleet{}
	for i := range cfg.Count {
		port := 0
		switch {
		case len(cfg.Ports) > 0:
			port = cfg.Ports[i]
		case cfg.BasePort > 0:
			port = cfg.BasePort + i
		}
		opts := ServerOptions{
			Name: fmt.Sprintf("sim-%d", i), Profile: cfg.Profile, Model: cfg.Model,
			Faults: cfg.Faults, Seed: cfg.Seed + uint64(i),
		}
		if cfg.Events != nil {
			opts.Events = cfg.Events(i)
		}
		w, err := NewServer(opts)
		if err != nil {
			f.Close(context.Background())
			return nil, err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			w.Close()
			f.Close(context.Background())
			return nil, fmt.Errorf("sim: listen for worker %d: %w", i, err)
		}
		srv := &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}
		f.Workers = append(f.Workers, w)
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
	for _, w := range f.Workers {
		w.Close()
	}
	f.wg.Wait()
	return errors.Join(errs...)
}

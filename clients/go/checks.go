package beacon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Check is one health check run beside the service: it answers a status and why.
type Check interface {
	Run(ctx context.Context) (Health, string)
}

// CheckFunc is the service's own check.
type CheckFunc func(ctx context.Context) (Health, string)

// Run calls f.
func (f CheckFunc) Run(ctx context.Context) (Health, string) { return f(ctx) }

// TCPCheck is passing when a TCP connection to Addr (host:port) opens within Timeout
// (default 1 s).
type TCPCheck struct {
	Addr    string
	Timeout time.Duration
}

// Run dials Addr.
func (c TCPCheck) Run(ctx context.Context) (Health, string) {
	d := net.Dialer{Timeout: orDefault(c.Timeout, time.Second)}
	conn, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return Critical, fmt.Sprintf("tcp %s: %v", c.Addr, err)
	}
	conn.Close()
	return Passing, ""
}

// HTTPCheck is an HTTP GET of URL: 2xx is passing, 429 warning, anything else (or no
// answer within Timeout, default 1 s) critical.
type HTTPCheck struct {
	URL     string
	Timeout time.Duration
}

// Run gets URL.
func (c HTTPCheck) Run(ctx context.Context) (Health, string) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(c.Timeout, time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return Critical, fmt.Sprintf("http %s: %v", c.URL, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Critical, fmt.Sprintf("http %s: %v", c.URL, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return Passing, ""
	case resp.StatusCode == http.StatusTooManyRequests:
		return Warning, fmt.Sprintf("http %s: %d", c.URL, resp.StatusCode)
	}
	return Critical, fmt.Sprintf("http %s: %d", c.URL, resp.StatusCode)
}

// GRPCCheck is the standard gRPC health check (grpc.health.v1.Health/Check) of Service
// ("" for the whole server) at Target: SERVING is passing, anything else critical.
type GRPCCheck struct {
	Target, Service string
	Timeout         time.Duration
}

// Run asks Target.
func (c GRPCCheck) Run(ctx context.Context) (Health, string) {
	name := "grpc " + strings.TrimSpace(c.Target+" "+c.Service)
	conn, err := grpc.NewClient(c.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return Critical, fmt.Sprintf("%s: %v", name, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, orDefault(c.Timeout, time.Second))
	defer cancel()
	answer, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: c.Service})
	if err != nil {
		return Critical, fmt.Sprintf("%s: %v", name, errorOf(err, c.Target))
	}
	if answer.GetStatus() == healthpb.HealthCheckResponse_SERVING {
		return Passing, ""
	}
	return Critical, fmt.Sprintf("%s: %s", name, answer.GetStatus())
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// finding is what one check answered.
type finding struct {
	status Health
	note   string
}

// worst is a round's status: the worst of its checks', with the notes of those that found
// it.
func worst(results []finding) (Health, string) {
	status := Passing
	for _, r := range results {
		status = max(status, r.status)
	}
	var notes []string
	for _, r := range results {
		if r.status == status && r.note != "" {
			notes = append(notes, r.note)
		}
	}
	return status, strings.Join(notes, "; ")
}

// hysteresis reports a status only once it has held for threshold rounds in a row.
type hysteresis struct {
	threshold       int
	published, cand Health
	held            int
}

// observe takes one round's status; whether it is now the one to report.
func (h *hysteresis) observe(s Health) bool {
	if s == h.published {
		h.cand, h.held = s, 0
		return false
	}
	if s != h.cand {
		h.cand, h.held = s, 0
	}
	h.held++
	if h.held >= h.threshold {
		h.published, h.held = s, 0
		return true
	}
	return false
}

// Checker runs a registration's checks (see [Registration.RunChecks]).
type Checker struct {
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// Stop ends the checks and waits for the round under way.
func (c *Checker) Stop() {
	c.once.Do(func() {
		c.stop()
		<-c.done
	})
}

// RunChecks runs checks every interval (1 s when 0) beside the service, each round's
// status the worst of theirs, and reports a status as the registration's health once it
// has held for threshold rounds in a row (3 when 0), so one slow answer does not take the
// service out of discovery; the leader then damps a service that still flaps. The checks
// stop with the registration, or with the Checker's Stop.
func (r *Registration) RunChecks(checks []Check, interval time.Duration, threshold int) (*Checker, error) {
	if len(checks) == 0 {
		return nil, fmt.Errorf("beacon: no checks to run")
	}
	if interval <= 0 {
		interval = time.Second
	}
	if threshold <= 0 {
		threshold = 3
	}
	ctx, stop := context.WithCancel(context.Background())
	ch := &Checker{stop: stop, done: make(chan struct{})}
	h := &hysteresis{threshold: threshold}
	go func() {
		defer close(ch.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			results := make([]finding, 0, len(checks))
			for _, c := range checks {
				s, note := c.Run(ctx)
				results = append(results, finding{s, note})
			}
			if ctx.Err() != nil {
				return
			}
			status, note := worst(results)
			if h.observe(status) {
				r.SetHealth(status, note)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	r.mu.Lock()
	r.checks = append(r.checks, ch)
	r.mu.Unlock()
	return ch, nil
}

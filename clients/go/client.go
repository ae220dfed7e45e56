package beacon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
)

// Consistency is how fresh a read must be.
type Consistency int

const (
	// Linearizable reads see every write acknowledged before them (the default): the
	// beacon confirms with a majority that its replica is current, or the call fails.
	Linearizable Consistency = iota
	// Serializable reads are answered from the called beacon's replica as it is, at once.
	Serializable
)

// Config says how a [Client] reaches its cluster. Only Endpoints is required.
type Config struct {
	// Endpoints are the client addresses (host:port) of the cluster's beacons, or of any of
	// them: any beacon takes any call.
	Endpoints []string
	// Token authenticates the client (sent as `authorization: Bearer TOKEN`).
	Token string
	// TLS turns TLS on (the cluster's CA in RootCAs; a client certificate if it asks one).
	TLS *tls.Config
	// Timeout bounds each attempt at one beacon (default 5 s).
	Timeout time.Duration
	// RetryFor is how long a call keeps trying other beacons while the cluster cannot answer
	// (an election, a lost majority, a beacon that stopped answering); default 10 s.
	RetryFor time.Duration
	// Consistency of reads (default Linearizable).
	Consistency Consistency
	// PingInterval: a call silent for half of it probes its beacon over a fresh connection
	// (within the other half) and leaves a beacon that does not answer, so a hung beacon
	// costs a call about one PingInterval (default 1 s).
	PingInterval time.Duration
	// AttemptDelay: a new connection dials the next beacon too when the one before has not
	// answered within it, and takes the first to answer (default 100 ms).
	AttemptDelay time.Duration
	// SuspectFor is how long a beacon that did not answer in time is tried last (default
	// 5 s, longer than an election takes).
	SuspectFor time.Duration
	// Logger receives what the client notices (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if len(c.Endpoints) == 0 {
		return fmt.Errorf("beacon: give at least one beacon address (host:port) in Config.Endpoints")
	}
	for _, e := range c.Endpoints {
		if !strings.Contains(e, ":") {
			return fmt.Errorf("beacon: endpoint %q is not host:port", e)
		}
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.Timeout, 5*time.Second)
	set(&c.RetryFor, 10*time.Second)
	set(&c.PingInterval, time.Second)
	set(&c.AttemptDelay, 100*time.Millisecond)
	set(&c.SuspectFor, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Client is a cluster of beacons. It is safe for use by many goroutines; Close it when
// done.
type Client struct {
	cfg Config
	log *slog.Logger
	// The per-call metadata: a token, a consistency.
	md metadata.MD

	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
	current  int
	suspects map[string]time.Time
	closed   bool
}

// New makes a client of the cluster that cfg names. It dials nothing yet: the first call
// connects.
func New(cfg Config) (*Client, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	md := metadata.MD{}
	if cfg.Token != "" {
		md.Set("authorization", "Bearer "+cfg.Token)
	}
	if cfg.Consistency == Serializable {
		md.Set("beacon-consistency", "serializable")
	}
	return &Client{
		cfg:      cfg,
		log:      cfg.Logger,
		md:       md,
		conns:    map[string]*grpc.ClientConn{},
		suspects: map[string]time.Time{},
	}, nil
}

// Close closes every connection. Handles made from the client (registrations, watches)
// should be closed first.
func (c *Client) Close() error {
	c.mu.Lock()
	conns := c.conns
	c.conns = map[string]*grpc.ClientConn{}
	c.closed = true
	c.mu.Unlock()
	var errs []error
	for _, conn := range conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

func (c *Client) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if c.cfg.TLS != nil {
		creds = credentials.NewTLS(c.cfg.TLS)
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect to a beacon that comes back soon, not after grpc's default two minutes,
		// and give up a connection that gets no answer after a ping interval.
		// HTTP/2 pings on every connection, with or without calls: a stopped beacon under a
		// watch or a keep-alive stream is noticed within 10 s (grpc-go's least interval)
		// and the stream goes on elsewhere; calls are watched more closely (see watched).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                10 * time.Second,
			Timeout:             2 * c.cfg.PingInterval,
			PermitWithoutStream: true,
		}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  c.cfg.PingInterval,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   2 * time.Second,
			},
			MinConnectTimeout: c.cfg.PingInterval,
		}),
	}
}

// conn is the connection to beacon at (made on first use).
func (c *Client) conn(at string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, &Error{Status: codes.Canceled, Message: "the client is closed"}
	}
	if conn, ok := c.conns[at]; ok {
		return conn, nil
	}
	conn, err := grpc.NewClient(at, c.dialOptions()...)
	if err != nil {
		return nil, &Error{Status: codes.InvalidArgument, Message: err.Error(), Beacon: at}
	}
	c.conns[at] = conn
	return conn, nil
}

// Current is the beacon calls go to now.
func (c *Client) Current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Endpoints[c.current]
}

// outgoing is ctx carrying the client's metadata.
func (c *Client) outgoing(ctx context.Context) context.Context {
	if len(c.md) == 0 {
		return ctx
	}
	return metadata.NewOutgoingContext(ctx, metadata.Join(c.md))
}

func (c *Client) suspected(at string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.suspects[at].After(time.Now())
}

// suspect notes that beacon at did not answer in time: it is tried last for SuspectFor.
func (c *Client) suspect(at string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for b, until := range c.suspects {
		if !until.After(now) {
			delete(c.suspects, b)
		}
	}
	c.suspects[at] = now.Add(c.cfg.SuspectFor)
	c.log.Debug("beacon did not answer in time: tried last for a while", "beacon", at)
}

// next moves on to the next beacon of the list, passing over suspected ones unless every
// one is.
func (c *Client) next() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.cfg.Endpoints)
	now := time.Now()
	for step := 1; step <= n; step++ {
		i := (c.current + step) % n
		if !c.suspects[c.cfg.Endpoints[i]].After(now) {
			c.current = i
			return c.cfg.Endpoints[i]
		}
	}
	c.current = (c.current + 1) % n
	return c.cfg.Endpoints[c.current]
}

// dialOrder: the list from the beacon in use on, the unsuspected first.
func (c *Client) dialOrder() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.cfg.Endpoints)
	now := time.Now()
	var good, bad []string
	for k := 0; k < n; k++ {
		b := c.cfg.Endpoints[(c.current+k)%n]
		if c.suspects[b].After(now) {
			bad = append(bad, b)
		} else {
			good = append(good, b)
		}
	}
	return append(good, bad...)
}

// connect makes the beacon in use one whose connection is up: the current one if it is,
// else the first to connect of it and the next ones, each dialled AttemptDelay after the
// one before, or at once after one fails (happy eyeballs over beacons). It waits limit at
// most, and no longer once every one dialled failed; when none connected, calls go to the
// current one and fail as they will.
func (c *Client) connect(ctx context.Context, limit time.Duration) {
	order := c.dialOrder()
	if conn, err := c.conn(order[0]); err == nil && conn.GetState() == connectivity.Ready {
		c.use(order[0])
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type outcome struct {
		at    string
		ready bool
	}
	settled := make(chan outcome, len(order))
	watch := func(at string) {
		conn, err := c.conn(at)
		if err != nil {
			settled <- outcome{at, false}
			return
		}
		conn.Connect()
		for {
			s := conn.GetState()
			switch s {
			case connectivity.Ready:
				settled <- outcome{at, true}
				return
			case connectivity.TransientFailure, connectivity.Shutdown:
				settled <- outcome{at, false}
				return
			}
			if !conn.WaitForStateChange(ctx, s) {
				return
			}
		}
	}
	started, failed := 0, 0
	for {
		if started < len(order) {
			go watch(order[started])
			started++
		}
		var delay <-chan time.Time
		if started < len(order) {
			delay = time.After(c.cfg.AttemptDelay)
		}
		select {
		case o := <-settled:
			if o.ready {
				c.use(o.at)
				return
			}
			failed++
			if failed >= len(order) {
				return
			}
			if failed < started {
				// Others still dialling: wait for them or the delay.
				continue
			}
		case <-delay:
		case <-ctx.Done():
			return
		}
	}
}

func (c *Client) use(at string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range c.cfg.Endpoints {
		if b == at {
			c.current = i
		}
	}
}

// answers reports whether beacon at answers a health check on a fresh connection of its
// own within limit: the liveness probe of a beacon silent on a call. Any answer counts, a
// refusal too; only silence does not.
func (c *Client) answers(ctx context.Context, at string, limit time.Duration) bool {
	conn, err := grpc.NewClient(at, c.dialOptions()...)
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(c.outgoing(ctx), limit)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err == nil {
		return true
	}
	var typed *Error
	if !errors.As(errorOf(err, at), &typed) {
		return false
	}
	return typed.Status != codes.DeadlineExceeded && typed.Status != codes.Unavailable && ctx.Err() == nil
}

// errHung: an attempt's beacon went silent and did not answer a fresh connection either.
type errHung struct {
	at            string
	silent, probe time.Duration
}

func (e *errHung) Error() string {
	return fmt.Sprintf("beacon at %s stopped answering: silent for %d ms, and a fresh connection got no answer within %d ms",
		e.at, e.silent.Milliseconds(), e.probe.Milliseconds())
}

// watched runs attempt and waits for it while its beacon answers: after each half
// PingInterval of silence the beacon is probed on a fresh connection, and one that does
// not answer ends the wait at once (errHung) instead of at the attempt's deadline.
func (c *Client) watched(ctx context.Context, at string, attempt func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- attempt(ctx) }()
	half := max(c.cfg.PingInterval/2, 50*time.Millisecond)
	started := time.Now()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(half):
			if !c.answers(ctx, at, half) {
				select {
				case err := <-done:
					return err
				default:
				}
				cancel()
				return &errHung{at: at, silent: time.Since(started), probe: half}
			}
		}
	}
}

// do runs attempt against the cluster with failover: on the next beacon whenever one
// cannot answer now, after BUSY's retry-after (with jitter) on the same one, until retryFor
// (0: Config.RetryFor) has passed or ctx ends. Each attempt is bounded by Timeout and by
// what is left, and leaves a hung beacon within about one PingInterval.
// Do runs f with the client's failover, as the client's own calls do: on the next beacon
// whenever one cannot answer now, after BUSY's retry-after (with jitter) on the same one,
// until RetryFor has passed, each attempt bounded by Timeout. It is for what the client
// has no method of its own for: f calls beacon's API on conn through the generated stubs
// (the pb packages) and returns the call's error.
func (c *Client) Do(ctx context.Context, f func(ctx context.Context, conn *grpc.ClientConn) error) error {
	return c.do(ctx, 0, f)
}

func (c *Client) do(ctx context.Context, retryFor time.Duration, attempt func(ctx context.Context, conn *grpc.ClientConn) error) error {
	return c.retry(ctx, retryFor, true, attempt)
}

// doStream runs a stream that lasts until it has what it waits for (within ctx), with
// failover as do has it but no bound on an attempt, nor on the time spent retrying.
func (c *Client) doStream(ctx context.Context, attempt func(ctx context.Context, conn *grpc.ClientConn) error) error {
	return c.retry(ctx, time.Duration(1<<62), false, attempt)
}

func (c *Client) retry(ctx context.Context, retryFor time.Duration, bounded bool, attempt func(ctx context.Context, conn *grpc.ClientConn) error) error {
	if retryFor <= 0 {
		retryFor = c.cfg.RetryFor
	}
	deadline := time.Now().Add(retryFor)
	pause := 10 * time.Millisecond
	refused := map[string]bool{}
	for {
		left := time.Until(deadline)
		c.connect(ctx, max(min(c.cfg.Timeout, left), 50*time.Millisecond))
		at := c.Current()
		conn, err := c.conn(at)
		if err != nil {
			return err
		}
		if bounded {
			bound := max(min(c.cfg.Timeout, left), 50*time.Millisecond)
			err = c.watched(ctx, at, func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(c.outgoing(ctx), bound)
				defer cancel()
				return attempt(ctx, conn)
			})
		} else {
			err = attempt(c.outgoing(ctx), conn)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var hung *errHung
		if errors.As(err, &hung) {
			c.suspect(at)
			if time.Now().Add(pause).After(deadline) {
				return &Error{Status: codes.DeadlineExceeded, Message: hung.Error(), Beacon: at}
			}
			c.next()
			continue
		}
		typed, ok := errorOf(err, at).(*Error)
		if !ok {
			return err
		}
		switch {
		case typed.silent():
			c.suspect(at)
			if time.Now().Add(pause).After(deadline) {
				return typed
			}
			c.next()
			continue
		case typed.Reason == "BUSY":
			wait := time.Duration(float64(max(typed.RetryAfter, 5*time.Millisecond)) * (0.5 + rand.Float64()))
			if time.Now().Add(wait).After(deadline) {
				return typed
			}
			if err := sleep(ctx, wait); err != nil {
				return err
			}
			continue
		case typed.refused():
			refused[at] = true
			if len(refused) >= len(c.cfg.Endpoints) {
				return &Error{
					Status: codes.Unavailable,
					Message: fmt.Sprintf("nothing listens at %s (connection refused): start the beacons, or give the client their client ports",
						strings.Join(c.cfg.Endpoints, ", ")),
				}
			}
		}
		if !typed.retryable() || time.Now().Add(pause).After(deadline) {
			return typed
		}
		c.next()
		if err := sleep(ctx, time.Duration(float64(pause)*(0.5+rand.Float64()))); err != nil {
			return err
		}
		pause = min(pause*2, 500*time.Millisecond)
	}
}

// call is one unary call with failover (see Client.do).
func call[Resp any](ctx context.Context, c *Client, retryFor time.Duration, f func(ctx context.Context, conn *grpc.ClientConn) (Resp, error)) (Resp, error) {
	var out Resp
	err := c.do(ctx, retryFor, func(ctx context.Context, conn *grpc.ClientConn) error {
		r, err := f(ctx, conn)
		if err == nil {
			out = r
		}
		return err
	})
	return out, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

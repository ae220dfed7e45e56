package beacon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"

	"example.invalid/beacon/clients/go/pb/registrypb"
)

// Health is what a service says of itself, and what discovery follows.
type Health int

const (
	// Passing: it serves; listed by discovery and given work.
	Passing Health = iota
	// Warning: it serves, with something to look at; still listed and given work.
	Warning
	// Critical: it does not serve; left out of discovery, given no new work.
	Critical
)

func (h Health) String() string {
	switch h {
	case Passing:
		return "passing"
	case Warning:
		return "warning"
	case Critical:
		return "critical"
	}
	return fmt.Sprintf("health(%d)", int(h))
}

// FencingToken is a registration's (term, index): later registrations of a node ID have
// larger tokens, so a resource guarded by one refuses a holder that lost the ID.
type FencingToken struct {
	Term, Index uint64
}

// Less reports whether t was issued before u.
func (t FencingToken) Less(u FencingToken) bool {
	return t.Term < u.Term || (t.Term == u.Term && t.Index < u.Index)
}

// RegisterOptions are a registration's optional fields.
type RegisterOptions struct {
	// Metadata is a JSON document (at most the cluster's max_metadata_bytes).
	Metadata string
	// AccessAddr is where clients reach the service, when not Addr.
	AccessAddr string
	// Workers is the service's worker count.
	Workers uint32
	// Snowflake: reports reserve time ahead, so that a [Snowflake] may generate IDs on the
	// node ID.
	Snowflake bool
	// OnLost is called once, on its own goroutine, if the lease is lost.
	OnLost func(why string)
}

// Registration is a node ID held under a lease that a goroutine keeps alive over the
// KeepAlive stream.
//
// The lease is trusted only as far as a beacon confirmed it: each report's reply extends
// it to one lease after the report was sent, so the service gives its ID up no later than
// the leader does. A report unanswered for a quarter of the lease (the beacon stopped, or
// the leader behind it) ends the stream there: the beacon is tried last for a while and
// the reports go on through the next one, so a hung beacon costs a lease nothing. The
// lease is lost when the leader says the registration is gone (NO_LEASE, NOT_HOLDER), or
// when no beacon confirmed it for a whole lease: [Registration.Lost] closes and OnLost is
// called, once.
type Registration struct {
	NodeID   uint32
	NodeType string
	Addr     string
	Token    FencingToken
	Lease    time.Duration
	// Warnings the leader gave with the registration.
	Warnings []string
	// ClockFloorMs: snowflake IDs on this node ID start after it (the previous holder's
	// last clock).
	ClockFloorMs uint64

	c         *Client
	snowflake bool
	onLost    func(string)

	mu        sync.Mutex
	confirmed time.Time
	reserved  uint64
	health    *registrypb.NodeReport // health and note, when the service said
	lostWhy   string
	lost      chan struct{}
	listeners []func()

	kick    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
	checks  []*Checker
	closing sync.Once
}

// Register registers a service of nodeType at addr and keeps its lease alive until
// Close.
func (c *Client) Register(ctx context.Context, nodeType, addr string, opts RegisterOptions) (*Registration, error) {
	req := &registrypb.RegisterRequest{
		NodeType:   nodeType,
		Addr:       addr,
		AccessAddr: opts.AccessAddr,
		WorkerNum:  opts.Workers,
		Metadata:   opts.Metadata,
	}
	reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*registrypb.RegisterReply, error) {
		return registrypb.NewRegistryClient(conn).Register(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	node := reply.GetNode()
	r := &Registration{
		NodeID:       node.GetNodeId(),
		NodeType:     node.GetNodeType(),
		Addr:         node.GetAddr(),
		Token:        FencingToken{node.GetTerm(), node.GetIndex()},
		Lease:        time.Duration(reply.GetLeaseMs()) * time.Millisecond,
		Warnings:     reply.GetWarnings(),
		ClockFloorMs: reply.GetClockFloorMs(),
		c:            c,
		snowflake:    opts.Snowflake,
		onLost:       opts.OnLost,
		confirmed:    time.Now().Add(time.Duration(reply.GetLeaseMs()) * time.Millisecond),
		lost:         make(chan struct{}),
		kick:         make(chan struct{}, 1),
		done:         make(chan struct{}),
	}
	run, stop := context.WithCancel(context.Background())
	r.stop = stop
	go r.keepAlive(run)
	go r.watchdog(run)
	return r, nil
}

// Lost is closed once the lease is lost.
func (r *Registration) Lost() <-chan struct{} { return r.lost }

// LostReason says why the lease was lost ("" while it holds).
func (r *Registration) LostReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lostWhy
}

// ConfirmedUntil is until when a beacon confirmed the lease.
func (r *Registration) ConfirmedUntil() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.confirmed
}

// Holds reports whether the lease is known to hold now: check it before each use of the ID
// if the service must never use the ID past its lease.
func (r *Registration) Holds() bool {
	select {
	case <-r.lost:
		return false
	default:
	}
	return time.Now().Before(r.ConfirmedUntil())
}

// reservedMs is the highest timestamp a snowflake generator on this registration may use.
func (r *Registration) reservedMs() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reserved
}

// SetHealth sets the health every report carries from now on, with why, and reports at
// once. The leader writes it only when the status changes; discovery leaves a Critical
// service out. An operator's drain stays the operator's.
func (r *Registration) SetHealth(h Health, note string) {
	if len(note) > 256 {
		// What a beacon takes: a report refused for its note would not renew the lease.
		note = note[:256]
		for !utf8.ValidString(note) {
			note = note[:len(note)-1]
		}
	}
	status := registrypb.HealthStatus(h)
	r.mu.Lock()
	r.health = &registrypb.NodeReport{Health: &status, HealthNote: note}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// whenLost calls f once the lease is lost (at once if it already is).
func (r *Registration) whenLost(f func()) {
	r.mu.Lock()
	select {
	case <-r.lost:
		r.mu.Unlock()
		f()
		return
	default:
	}
	r.listeners = append(r.listeners, f)
	r.mu.Unlock()
}

func (r *Registration) lose(why string) {
	r.mu.Lock()
	select {
	case <-r.lost:
		r.mu.Unlock()
		return
	default:
	}
	r.lostWhy = why
	close(r.lost)
	listeners := r.listeners
	r.listeners = nil
	r.mu.Unlock()
	r.c.log.Warn("lease lost", "node_id", r.NodeID, "why", why)
	for _, f := range listeners {
		f()
	}
	if r.onLost != nil {
		go r.onLost(why)
	}
}

func (r *Registration) report() *registrypb.NodeReport {
	rep := &registrypb.NodeReport{
		NodeId: r.NodeID,
		Addr:   r.Addr,
		Term:   r.Token.Term,
		Index:  r.Token.Index,
	}
	r.mu.Lock()
	if r.health != nil {
		rep.Health = r.health.Health
		rep.HealthNote = r.health.HealthNote
	}
	r.mu.Unlock()
	if r.snowflake {
		// Two report intervals ahead: generation stops by itself within two missed reports,
		// well inside the lease.
		rep.ClockMs = uint64(time.Now().UnixMilli()) + uint64(2*r.interval()/time.Millisecond)
	}
	return rep
}

// watchdog loses the lease the moment no beacon has confirmed it for a whole lease, however
// long the keep-alive waits on a beacon that does not answer (a connection still being made
// to a stopped one, say), and ends the keep-alive then.
func (r *Registration) watchdog(ctx context.Context) {
	for {
		left := time.Until(r.ConfirmedUntil())
		if left <= 0 {
			r.lose(fmt.Sprintf("no beacon confirmed the lease for a whole lease (%d ms)", r.Lease.Milliseconds()))
			r.stop()
			return
		}
		if sleep(ctx, left) != nil {
			return
		}
	}
}

// interval between reports: a quarter of the lease.
func (r *Registration) interval() time.Duration { return r.Lease / 4 }

// keepAlive reports over one stream after another until stopped or lost.
func (r *Registration) keepAlive(ctx context.Context) {
	defer close(r.done)
	pause := 10 * time.Millisecond
	// How long a report may go unanswered before the stream moves on: a quarter of the
	// lease, and half that while the last stream went unanswered. A follower relaying to a
	// leader that stopped holds its reports until the election is over: the stream leaves
	// it sooner and tries the others again, so that the report that lands on the new
	// leader (or on a follower relaying to it) comes well inside the lease.
	patient := max(r.interval(), 50*time.Millisecond)
	attempt := patient
	// Whether the last stream ended on LEADER_CHANGED from its beacon, taken there again.
	again := false
	for ctx.Err() == nil {
		select {
		case <-r.lost:
			return
		default:
		}
		at := r.c.Current()
		answered, err := r.stream(ctx, at, attempt)
		if ctx.Err() != nil {
			return
		}
		r.c.log.Debug("keep-alive stream ended", "node_id", r.NodeID, "beacon", at, "answered", answered, "err", err)
		if errors.Is(err, ErrLeaseLost) {
			r.lose(err.Error())
			return
		}
		if answered {
			pause, attempt, again = 10*time.Millisecond, patient, false
		}
		var typed *Error
		if errors.As(err, &typed) && typed.Reason == "LEADER_CHANGED" && !again {
			// The beacon answered: the leader it carried the report to leads no more. It
			// knows the next one, or leads itself: the same beacon again, at once (once; a
			// second time, the next one).
			again = true
			continue
		}
		if errors.Is(err, errUnanswered) || (errors.As(err, &typed) && typed.silent()) {
			attempt = max(patient/2, 50*time.Millisecond)
			// The beacon (or the leader behind it) stopped answering: the next one at once,
			// and this one last for a while.
			r.c.suspect(at)
			r.c.next()
			continue
		}
		r.c.next()
		if sleep(ctx, pause) != nil {
			return
		}
		pause = min(pause*2, r.interval())
	}
}

var errUnanswered = errors.New("a report went unanswered for a quarter of the lease")

// stream runs one KeepAlive stream at beacon at, until a report goes unanswered for
// attempt; it says whether any report was answered.
func (r *Registration) stream(ctx context.Context, at string, attempt time.Duration) (bool, error) {
	conn, err := r.c.conn(at)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancelCause(r.c.outgoing(ctx))
	defer cancel(nil)
	s, err := registrypb.NewRegistryClient(conn).KeepAlive(ctx)
	if err != nil {
		return false, errorOf(err, at)
	}
	var mu sync.Mutex
	var sent []time.Time
	// The sender: a report every interval (at once on a health change), each watched for
	// its answer. (A lease no beacon confirmed is the watchdog's to lose.)
	go func() {
		scheduled := false
		for {
			mu.Lock()
			sent = append(sent, time.Now())
			mu.Unlock()
			rep := r.report()
			// On schedule with over half the lease left (a retry comes a report later): the
			// answer may wait for the leader's next heartbeat.
			rep.Routine = scheduled && time.Until(r.ConfirmedUntil()) > r.Lease/2 && rep.ClockMs == 0
			if err := s.Send(rep); err != nil {
				return
			}
			next := time.NewTimer(r.interval())
			check := time.NewTicker(max(attempt/4, 10*time.Millisecond))
		wait:
			for {
				select {
				case <-ctx.Done():
					next.Stop()
					check.Stop()
					return
				case <-r.kick:
					scheduled = false
					break wait
				case <-next.C:
					scheduled = true
					break wait
				case <-check.C:
					mu.Lock()
					late := len(sent) > 0 && time.Since(sent[0]) > attempt
					mu.Unlock()
					if late {
						next.Stop()
						check.Stop()
						cancel(errUnanswered)
						return
					}
				}
			}
			next.Stop()
			check.Stop()
		}
	}()
	answered := false
	for {
		reply, err := s.Recv()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				return answered, cause
			}
			return answered, errorOf(err, at)
		}
		answered = true
		mu.Lock()
		from := time.Now()
		if len(sent) > 0 {
			from, sent = sent[0], sent[1:]
		}
		mu.Unlock()
		r.mu.Lock()
		if until := from.Add(r.Lease); until.After(r.confirmed) {
			r.confirmed = until
		}
		r.reserved = max(r.reserved, reply.GetClockMs())
		r.mu.Unlock()
	}
}

// Close stops the keep-alive (and the checks) and ends the registration: the ID is free at
// once (the service stopped using it). A lease already lost is not an error.
func (r *Registration) Close(ctx context.Context) error {
	return r.close(ctx, true, 0)
}

// CloseKeeping stops the keep-alive and ends the registration, the ID quarantined as after
// a lapse; lastClockMs (a snowflake generator's last timestamp) becomes the next holder's
// clock floor.
func (r *Registration) CloseKeeping(ctx context.Context, lastClockMs uint64) error {
	return r.close(ctx, false, lastClockMs)
}

func (r *Registration) close(ctx context.Context, release bool, lastClockMs uint64) error {
	var err error
	r.closing.Do(func() {
		for _, ch := range r.checks {
			ch.Stop()
		}
		r.stop()
		<-r.done
		select {
		case <-r.lost:
			return
		default:
		}
		req := &registrypb.UnregisterRequest{
			NodeId:  r.NodeID,
			Addr:    r.Addr,
			Term:    r.Token.Term,
			Index:   r.Token.Index,
			Release: release,
			ClockMs: lastClockMs,
		}
		_, err = call(ctx, r.c, r.Lease, func(ctx context.Context, conn *grpc.ClientConn) (*registrypb.UnregisterReply, error) {
			return registrypb.NewRegistryClient(conn).Unregister(ctx, req)
		})
		if errors.Is(err, ErrLeaseLost) {
			err = nil
		}
	})
	return err
}

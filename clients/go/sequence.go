package beacon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"example.invalid/beacon/clients/go/pb/sequencepb"
)

// CreateSequence makes sequence name (once, usually by an operator). start and step 0
// take the cluster's defaults. A sequence of that name with other settings is
// [ErrAlreadyExists].
func (c *Client) CreateSequence(ctx context.Context, name string, start, step uint64) error {
	req := &sequencepb.CreateSequence{Name: name, Start: start, Step: step}
	_, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*sequencepb.SequenceReply, error) {
		return sequencepb.NewSequencesClient(conn).Create(ctx, req)
	})
	return err
}

// SequenceOptions tune a [Sequence].
type SequenceOptions struct {
	// Count is how many numbers a segment holds (0: the sequence's step).
	Count uint64
	// PrefetchAt is the share of a segment used when the next one is fetched (default 0.2).
	PrefetchAt float64
	// WaitFor bounds how long Next waits when both segments are used up (default 3 s).
	WaitFor time.Duration
}

// segment is [next, end] of a segment at log index, which started at first.
type segment struct {
	next, end, index, first uint64
}

// Sequence hands out the numbers of a named sequence, never twice across the cluster,
// from a double buffer of segments: each segment comes from the leader, committed before it
// is answered, and the next one is fetched in the background once PrefetchAt of the
// current one is used, so Next is a local increment almost always. If no beacon answers it
// keeps serving what it holds; only when both segments are used up does Next wait, at most
// WaitFor. Safe for many goroutines; Close hands the unused tail back.
type Sequence struct {
	c    *Client
	name string
	opts SequenceOptions

	mu       sync.Mutex
	ready    *sync.Cond
	current  *segment
	spare    *segment
	fetching bool
	lastErr  error
	closed   bool
	// Fetches, Failures and Waits count segments fetched, fetches that failed, and the
	// times Next had to wait for one.
	fetches, failures, waits int
}

// Sequence opens sequence name, fetching its first segment.
func (c *Client) Sequence(ctx context.Context, name string, opts SequenceOptions) (*Sequence, error) {
	if opts.PrefetchAt <= 0 || opts.PrefetchAt > 1 {
		opts.PrefetchAt = 0.2
	}
	if opts.WaitFor <= 0 {
		opts.WaitFor = 3 * time.Second
	}
	s := &Sequence{c: c, name: name, opts: opts}
	s.ready = sync.NewCond(&s.mu)
	first, err := s.fetch(ctx)
	if err != nil {
		return nil, err
	}
	s.current = first
	s.fetches = 1
	return s, nil
}

func (s *Sequence) fetch(ctx context.Context) (*segment, error) {
	req := &sequencepb.NextSegment{Name: s.name, Count: s.opts.Count}
	reply, err := call(ctx, s.c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*sequencepb.SegmentReply, error) {
		return sequencepb.NewSequencesClient(conn).Next(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	g := reply.GetSegment()
	return &segment{next: g.GetStart(), end: g.GetEnd(), index: g.GetIndex(), first: g.GetStart()}, nil
}

// prefetch fetches the spare segment on a goroutine of its own (mu held by the caller).
func (s *Sequence) prefetch() {
	s.fetching = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.c.cfg.RetryFor)
		defer cancel()
		got, err := s.fetch(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.fetching = false
		if err != nil {
			s.failures++
			s.lastErr = err
		} else {
			s.fetches++
			s.lastErr = nil
			if s.closed {
				// Closed meanwhile: give it back whole.
				go s.giveBack(got)
			} else {
				s.spare = got
			}
		}
		s.ready.Broadcast()
	}()
}

// Next is the next number.
func (s *Sequence) Next(ctx context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var deadline time.Time
	for {
		if s.closed {
			return 0, ErrClosed
		}
		if cur := s.current; cur != nil && cur.next <= cur.end {
			n := cur.next
			cur.next++
			used, size := float64(cur.next-cur.first), float64(cur.end-cur.first+1)
			if s.spare == nil && !s.fetching && used >= s.opts.PrefetchAt*size {
				s.prefetch()
			}
			return n, nil
		}
		if s.spare != nil {
			s.current, s.spare = s.spare, nil
			continue
		}
		if !s.fetching {
			s.prefetch()
		}
		if deadline.IsZero() {
			s.waits++
			deadline = time.Now().Add(s.opts.WaitFor)
		}
		if time.Now().After(deadline) {
			return 0, &Error{Status: codes.Unavailable, Message: fmt.Sprintf(
				"both segments of sequence `%s` are used up and no new one came within %v: %v", s.name, s.opts.WaitFor, s.lastErr)}
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// Woken by a fetch's end, or by this timer for the deadline and ctx.
		t := time.AfterFunc(min(time.Until(deadline), 50*time.Millisecond), s.ready.Broadcast)
		s.ready.Wait()
		t.Stop()
	}
}

// Stats are the counts of segments fetched, fetches failed, and waits.
func (s *Sequence) Stats() (fetches, failures, waits int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches, s.failures, s.waits
}

// Close hands back the unused tail of the last segment (accepted while it is the
// sequence's last), so a restart burns no numbers.
func (s *Sequence) Close(ctx context.Context) {
	s.mu.Lock()
	tail := s.spare
	if tail == nil {
		tail = s.current
	}
	s.current, s.spare, s.closed = nil, nil, true
	s.mu.Unlock()
	if tail != nil && tail.next <= tail.end {
		s.giveBackCtx(ctx, tail)
	}
}

func (s *Sequence) giveBack(g *segment) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.giveBackCtx(ctx, g)
}

func (s *Sequence) giveBackCtx(ctx context.Context, g *segment) {
	req := &sequencepb.GiveBack{Name: s.name, Start: g.next, End: g.end, Index: g.index}
	// Not the last segment any more, or nobody answers: the tail is burnt.
	_, _ = call(ctx, s.c, time.Second, func(ctx context.Context, conn *grpc.ClientConn) (*sequencepb.SegmentReply, error) {
		return sequencepb.NewSequencesClient(conn).GiveBack(ctx, req)
	})
}

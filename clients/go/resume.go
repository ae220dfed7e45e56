package beacon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"google.golang.org/grpc"
)

// ErrClosed: the handle was closed.
var ErrClosed = errors.New("beacon: closed")

// silentFor is how long a watch may hear nothing before it probes its beacon: an idle watch
// hears a progress notice every few seconds (the beacons' watch.progress_ms, 5 s by
// default), so a second more of silence is a beacon worth asking about. A stopped process
// keeps its connection open and its HTTP/2 pings unanswered; grpc-go pings no oftener than
// every 10 s, so the probe leaves it sooner.
var silentFor = 6 * time.Second

// resuming runs a watch's server stream (a listing, then notices) on a goroutine, resumed
// across leader changes from the log index after the last one heard: every change is told
// once, in order. Only when the beacon no longer keeps changes that old (COMPACTED) does
// it list again. A watch gives follow, which opens the stream from start (0: with a
// listing), takes what comes, and returns the error that ended it.
type resuming[E any] struct {
	c      *Client
	events chan E
	follow func(ctx context.Context, conn *grpc.ClientConn, start uint64, relist bool) error
	// ends says which errors end the watch (by default: those not worth retrying).
	ends func(err error) bool

	mu sync.Mutex
	// began: a first answer came (later streams resume); answered: on this stream.
	began, answered bool
	index           uint64
	resumes         int
	resyncs         int
	err             error
	listed          chan struct{}
	once            sync.Once

	// heard is when the stream under way last brought anything (UnixNano).
	heard atomic.Int64

	stop context.CancelFunc
	done chan struct{}
}

func newResuming[E any](c *Client) *resuming[E] {
	return &resuming[E]{
		c: c,
		ends: func(err error) bool {
			var typed *Error
			return errors.As(err, &typed) && !typed.retryable() && !typed.silent()
		},
		events: make(chan E, 1024),
		listed: make(chan struct{}),
		done:   make(chan struct{}),
	}
}

func (w *resuming[E]) start() {
	ctx, stop := context.WithCancel(context.Background())
	w.stop = stop
	go w.run(ctx)
}

// tell hands an event to the reader, waiting while the reader is behind (the beacon then
// holds what follows, within its limits).
func (w *resuming[E]) tell(ctx context.Context, e E) error {
	select {
	case w.events <- e:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchSilence probes the stream's beacon at on a fresh connection once the stream has been
// silent for silentFor, and leaves a beacon that does not answer (a stopped process): hung
// is set, the stream cut and the watch resumes at the next beacon. It ends with the stream.
func (w *resuming[E]) watchSilence(stream context.Context, at string, cut context.CancelFunc, hung *atomic.Bool) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stream.Done():
			return
		case <-tick.C:
		}
		if time.Since(time.Unix(0, w.heard.Load())) < silentFor {
			continue
		}
		if w.c.answers(stream, at, 500*time.Millisecond) {
			w.heard.Store(time.Now().UnixNano())
			continue
		}
		if stream.Err() != nil {
			return
		}
		w.c.log.Warn("watch leaves a silent beacon", "beacon", at, "silent_for", silentFor)
		hung.Store(true)
		cut()
		return
	}
}

// at moves the watch's log position (a notice's index, a listing's): the stream is heard.
func (w *resuming[E]) at(index uint64) {
	w.heard.Store(time.Now().UnixNano())
	w.mu.Lock()
	w.index = max(w.index, index)
	w.mu.Unlock()
}

// isListed notes that the first listing is in.
func (w *resuming[E]) isListed() { w.once.Do(func() { close(w.listed) }) }

func (w *resuming[E]) run(ctx context.Context) {
	defer close(w.done)
	defer close(w.events)
	defer w.isListed()
	pause := 10 * time.Millisecond
	relist := false
	for ctx.Err() == nil {
		w.c.connect(ctx, w.c.cfg.Timeout)
		at := w.c.Current()
		conn, err := w.c.conn(at)
		if err != nil {
			w.end(err)
			return
		}
		w.mu.Lock()
		start := uint64(0)
		if w.began && !relist {
			start = w.index + 1
		}
		w.mu.Unlock()
		stream, cut := context.WithCancel(ctx)
		var hung atomic.Bool
		w.heard.Store(time.Now().UnixNano())
		go w.watchSilence(stream, at, cut, &hung)
		err = errorOf(w.follow(w.c.outgoing(stream), conn, start, relist), at)
		cut()
		if ctx.Err() != nil {
			return
		}
		if hung.Load() {
			err = &Error{Status: codes.DeadlineExceeded, Beacon: at, Message: fmt.Sprintf(
				"beacon at %s went silent on the watch for over %v and did not answer a fresh connection", at, silentFor)}
		}
		w.mu.Lock()
		if w.answered {
			w.answered, relist = false, false
			pause = 10 * time.Millisecond
		}
		w.mu.Unlock()
		if errors.Is(err, ErrCompacted) {
			// Away longer than the beacon keeps changes: list again.
			relist = true
			continue
		}
		var typed *Error
		if errors.As(err, &typed) && typed.silent() {
			w.c.suspect(at)
		}
		if w.ends(err) {
			w.end(err)
			return
		}
		w.c.next()
		if sleep(ctx, pause) != nil {
			return
		}
		pause = min(pause*2, 500*time.Millisecond)
	}
}

// first notes a stream's first answer: a resume from start (> 0), or a listing (again,
// when relist).
func (w *resuming[E]) first(start uint64, relist bool) {
	w.heard.Store(time.Now().UnixNano())
	w.mu.Lock()
	switch {
	case start > 0:
		w.resumes++
	case relist:
		w.resyncs++
	}
	w.began, w.answered = true, true
	w.mu.Unlock()
}

func (w *resuming[E]) end(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	w.c.log.Warn("watch ended", "err", err)
}

// next is the next event; the error that ended the watch once it ended.
func (w *resuming[E]) next(ctx context.Context) (E, error) {
	var zero E
	select {
	case e, ok := <-w.events:
		if ok {
			return e, nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.err != nil {
			return zero, w.err
		}
		return zero, ErrClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// waitListed waits until the first listing is in; the error that ended the watch before.
func (w *resuming[E]) waitListed(ctx context.Context) error {
	select {
	case <-w.listed:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *resuming[E]) close() {
	w.stop()
	// Drain what the goroutine may be waiting to hand over, so it ends.
	for range w.events {
	}
	<-w.done
}

// counts: the log index, resumes and relistings.
func (w *resuming[E]) counts() (uint64, int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index, w.resumes, w.resyncs
}

// begin starts the watch and waits for its first listing; on an error the watch is closed.
func (w *resuming[E]) begin(ctx context.Context) error {
	w.start()
	if err := w.waitListed(ctx); err != nil {
		w.close()
		return err
	}
	return nil
}

// tellAll hands events over in order.
func (w *resuming[E]) tellAll(ctx context.Context, events []E) error {
	for _, e := range events {
		if err := w.tell(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// relisted compares a listing made again (after COMPACTED) with what the watch knew: what
// is new, what changed, and what is gone.
func relisted[K comparable, V any](known, now map[K]V, changed func(before, after V) bool) (added, updated, removed []V) {
	for k, v := range now {
		before, ok := known[k]
		switch {
		case !ok:
			added = append(added, v)
		case changed(before, v):
			updated = append(updated, v)
		}
	}
	for k, v := range known {
		if _, ok := now[k]; !ok {
			removed = append(removed, v)
		}
	}
	return added, updated, removed
}

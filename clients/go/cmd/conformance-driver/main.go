// Command conformance-driver drives the Go client for beacon's client conformance suite
// (tests/conformance.rs): commands in on stdin, answers and events out on stdout, one per
// line, the same protocol every client's driver speaks (docs/clients.md).
//
// Each command line is words separated by spaces; each gets one answer line, `ok ...` or
// `err KIND message`. Events that come on their own (a lease lost, a watch's change) are
// lines that start with `event`. Lines go out whole, one at a time.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	beacon "example.invalid/beacon/clients/go"
	"example.invalid/beacon/clients/go/pb/registrypb"
	"google.golang.org/grpc"
)

type driver struct {
	out     sync.Mutex
	client  *beacon.Client
	regs    map[uint32]*beacon.Registration
	seqs    map[string]*beacon.Sequence
	watches []func()
}

func (d *driver) say(format string, args ...any) {
	d.out.Lock()
	defer d.out.Unlock()
	fmt.Printf(format+"\n", args...)
}

// kind is the conformance suite's name for err's kind.
func kind(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{
		{beacon.ErrTooLarge, "TooLarge"}, {beacon.ErrBusy, "Busy"}, {beacon.ErrCompacted, "Compacted"},
		{beacon.ErrLeaseLost, "LeaseLost"}, {beacon.ErrNotLeader, "NotLeader"}, {beacon.ErrNotFound, "NotFound"},
		{beacon.ErrAlreadyExists, "AlreadyExists"}, {beacon.ErrFailedPrecondition, "FailedPrecondition"},
		{beacon.ErrInvalidArgument, "InvalidArgument"}, {beacon.ErrResourceExhausted, "ResourceExhausted"},
		{beacon.ErrDeadlineExceeded, "DeadlineExceeded"}, {context.DeadlineExceeded, "DeadlineExceeded"},
		{beacon.ErrUnavailable, "Unavailable"},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "Other"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (d *driver) run(words []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	arg := func(i int) string {
		if i < len(words) {
			return words[i]
		}
		return ""
	}
	num := func(i int) uint64 { n, _ := strconv.ParseUint(arg(i), 10, 64); return n }
	if words[0] != "connect" && d.client == nil {
		return "", fmt.Errorf("connect first")
	}
	switch words[0] {
	case "connect":
		cfg := beacon.Config{Endpoints: strings.Split(arg(1), ",")}
		if t := num(2); t > 0 {
			cfg.RetryFor = time.Duration(t) * time.Millisecond
		}
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c, err := beacon.New(cfg)
		if err != nil {
			return "", err
		}
		d.client = c
		return "", nil
	case "register":
		var reg *beacon.Registration
		reg, err := d.client.Register(ctx, arg(1), arg(2), beacon.RegisterOptions{
			Metadata: arg(3),
			OnLost: func(why string) {
				d.say("event lost %d %s", reg.NodeID, oneLine(why))
			},
		})
		if err != nil {
			return "", err
		}
		d.regs[reg.NodeID] = reg
		return fmt.Sprintf("%d %d %d %d", reg.NodeID, reg.Token.Term, reg.Token.Index, reg.Lease.Milliseconds()), nil
	case "holds":
		reg := d.regs[uint32(num(1))]
		if reg == nil {
			return "", fmt.Errorf("no registration %s here", arg(1))
		}
		return strconv.FormatBool(reg.Holds()), nil
	case "unregister":
		reg := d.regs[uint32(num(1))]
		if reg == nil {
			return "", fmt.Errorf("no registration %s here", arg(1))
		}
		delete(d.regs, uint32(num(1)))
		return "", reg.Close(ctx)
	case "watch":
		w, err := d.client.Watch(ctx, []string{arg(2)}, beacon.Any)
		if err != nil {
			return "", err
		}
		id := arg(1)
		go func() {
			for {
				e, err := w.Next(context.Background())
				if err != nil {
					return
				}
				d.say("event node %s %s %d", id, e.Kind, e.Node.NodeID)
			}
		}()
		d.watches = append(d.watches, w.Close)
		return "", nil
	case "numbers":
		s := d.seqs[arg(1)]
		if s == nil {
			err := d.client.CreateSequence(ctx, arg(1), 0, num(3))
			if err != nil && !errors.Is(err, beacon.ErrAlreadyExists) {
				return "", err
			}
			if s, err = d.client.Sequence(ctx, arg(1), beacon.SequenceOptions{}); err != nil {
				return "", err
			}
			d.seqs[arg(1)] = s
		}
		var got []string
		for i := uint64(0); i < num(2); i++ {
			n, err := s.Next(ctx)
			if err != nil {
				return strings.Join(got, " "), err
			}
			got = append(got, strconv.FormatUint(n, 10))
		}
		return strings.Join(got, " "), nil
	case "config_watch":
		w, err := d.client.ConfigWatch(ctx, []string{arg(2)})
		if err != nil {
			return "", err
		}
		id := arg(1)
		go func() {
			for {
				e, err := w.Next(context.Background())
				if err != nil {
					return
				}
				if e.Deleted != "" {
					d.say("event config %s deleted %s", id, e.Deleted)
				} else {
					d.say("event config %s put %s %d %s", id, e.Document.GetKey(), e.Document.GetRevision(), e.Document.GetValue())
				}
			}
		}()
		d.watches = append(d.watches, w.Close)
		return "", nil
	case "config_put":
		rev, err := d.client.ConfigPut(ctx, arg(1), []byte(arg(2)), beacon.PutOptions{})
		return strconv.FormatUint(rev, 10), err
	case "put_large":
		_, err := d.client.ConfigPut(ctx, arg(1), make([]byte, num(2)), beacon.PutOptions{})
		return "", err
	case "bench":
		if arg(1) != "alloc" && arg(1) != "renew" {
			return "", fmt.Errorf("bench alloc|renew, not %q", arg(1))
		}
		return bench(ctx, d.client, arg(1), time.Duration(num(2))*time.Second, int(num(3))), nil
	case "quit":
		for _, stop := range d.watches {
			stop()
		}
		for _, reg := range d.regs {
			reg.Close(ctx)
		}
		for name, s := range d.seqs {
			s.Close(ctx)
			delete(d.seqs, name)
		}
		d.client.Close()
		d.client = nil
		return "", io.EOF
	}
	return "", fmt.Errorf("unknown command %q", words[0])
}

// benchAddr is the address of a bench command's registration n of caller: distinct for each
// pair (and from the cases' addresses, under 10.0).
func benchAddr(caller, n int) string {
	hi := n / 60_000
	return fmt.Sprintf("10.%d.%d.%d:%d", 100+caller%150, hi/256%256, hi%256, 1024+n%60_000)
}

// bench runs callers goroutines sharing the client for d: alloc allocates node IDs
// (Register through the client's failover and back-off), renew renews one registration each
// with reports back to back on a KeepAlive stream of its own. It answers
// `DONE ERRORS P50_US P99_US`.
func bench(ctx context.Context, c *beacon.Client, what string, d time.Duration, callers int) string {
	deadline := time.Now().Add(d)
	var mu sync.Mutex
	var took []int64
	errs := 0
	register := func(ctx context.Context, caller, n int) (*registrypb.NodeInfo, error) {
		var node *registrypb.NodeInfo
		err := c.Do(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
			reply, err := registrypb.NewRegistryClient(conn).Register(ctx, &registrypb.RegisterRequest{
				NodeType: "BENCH", Addr: benchAddr(caller, n)})
			node = reply.GetNode()
			return err
		})
		return node, err
	}
	alloc := func(caller int) ([]int64, int) {
		var mine []int64
		failed := 0
		for n := 0; time.Now().Before(deadline); n++ {
			started := time.Now()
			if _, err := register(ctx, caller, n); err != nil {
				failed++
				continue
			}
			mine = append(mine, time.Since(started).Microseconds())
		}
		return mine, failed
	}
	renew := func(caller int) ([]int64, int) {
		var mine []int64
		node, err := register(ctx, caller, 1<<24)
		if err != nil {
			return nil, 1
		}
		report := &registrypb.NodeReport{NodeId: node.GetNodeId(), Addr: node.GetAddr(), Term: node.GetTerm(), Index: node.GetIndex()}
		err = c.Do(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
			// The stream outlives an attempt's bound: a context of its own until the deadline.
			ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			defer cancel()
			stream, err := registrypb.NewRegistryClient(conn).KeepAlive(ctx)
			if err != nil {
				return err
			}
			for time.Now().Before(deadline) {
				started := time.Now()
				if err := stream.Send(report); err != nil {
					return err
				}
				if _, err := stream.Recv(); err != nil {
					return err
				}
				mine = append(mine, time.Since(started).Microseconds())
			}
			return nil
		})
		if err != nil {
			return mine, 1
		}
		return mine, 0
	}
	var wg sync.WaitGroup
	for caller := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := alloc
			if what == "renew" {
				run = renew
			}
			mine, failed := run(caller)
			mu.Lock()
			took = append(took, mine...)
			errs += failed
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(took)
	at := func(q float64) int64 {
		if len(took) == 0 {
			return 0
		}
		return took[min(int(float64(len(took))*q), len(took)-1)]
	}
	return fmt.Sprintf("%d %d %d %d", len(took), errs, at(0.5), at(0.99))
}

func main() {
	d := &driver{regs: map[uint32]*beacon.Registration{}, seqs: map[string]*beacon.Sequence{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) == 0 {
			continue
		}
		answer, err := d.run(words)
		switch {
		case errors.Is(err, io.EOF):
			d.say("ok")
			return
		case err != nil:
			d.say("err %s %s", kind(err), oneLine(err.Error()))
		case answer == "":
			d.say("ok")
		default:
			d.say("ok %s", answer)
		}
	}
}

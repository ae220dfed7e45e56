package beacon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"example.invalid/beacon/clients/go/pb/registrypb"
)

// next waits for the next event of w within d.
func nextNode(t *testing.T, w *Watch, d time.Duration) NodeEvent {
	t.Helper()
	e, err := w.Next(within(t, d))
	if err != nil {
		t.Fatalf("no event within %v: %v", d, err)
	}
	return e
}

func TestALoneBeaconRegistersDiscoversNumbersAndConfigures(t *testing.T) {
	c := startCluster(t, 1, map[string]any{"lease_ms": 2000})
	cl := c.client(t)
	ctx := within(t, 30*time.Second)

	w, err := cl.Watch(ctx, []string{"LOGIC"}, Serving)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	reg, err := cl.Register(ctx, "LOGIC", "10.0.1.1:8080", RegisterOptions{Metadata: `{"zone":"a"}`})
	if err != nil {
		t.Fatal(err)
	}
	if e := nextNode(t, w, 5*time.Second); e.Kind != Added || e.Node.NodeID != reg.NodeID || e.Node.Metadata != `{"zone":"a"}` {
		t.Fatalf("the watch saw %v %+v, not registration %d added", e.Kind, e.Node, reg.NodeID)
	}
	nodes, err := cl.Nodes(ctx, "LOGIC", Any, 0)
	if err != nil || len(nodes) != 1 || nodes[0].NodeID != reg.NodeID || nodes[0].Token != reg.Token {
		t.Fatalf("listed %+v (%v)", nodes, err)
	}
	// Held over several leases by the keep-alive alone.
	time.Sleep(3 * reg.Lease)
	if !reg.Holds() {
		t.Fatalf("the lease lapsed: %s", reg.LostReason())
	}

	if err := cl.CreateSequence(ctx, "orders", 0, 0); err != nil {
		t.Fatal(err)
	}
	seq, err := cl.Sequence(ctx, "orders", SequenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(0)
	for i := 0; i < 2000; i++ {
		n, err := seq.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n <= last {
			t.Fatalf("number %d after %d", n, last)
		}
		last = n
	}
	seq.Close(ctx)

	cw, err := cl.ConfigWatch(ctx, []string{"cluster/"})
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	rev, err := cl.ConfigPut(ctx, "cluster/limits", []byte(`{"rps": 10}`), PutOptions{JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := cw.Next(within(t, 5*time.Second))
	if err != nil || ev.Document.GetKey() != "cluster/limits" || ev.Document.GetRevision() != rev {
		t.Fatalf("config watch saw %+v (%v)", ev, err)
	}
	stale := rev - 1
	if _, err := cl.ConfigPut(ctx, "cluster/limits", []byte(`{"rps": 20}`), PutOptions{IfRevision: &stale}); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("a write at a stale revision: %v", err)
	}
	docs, err := cl.ConfigGet(ctx, "cluster/limits", false)
	if err != nil || len(docs) != 1 || string(docs[0].GetValue()) != `{"rps": 10}` {
		t.Fatalf("got %v (%v)", docs, err)
	}

	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if e := nextNode(t, w, 5*time.Second); e.Kind != Removed || e.Node.NodeID != reg.NodeID {
		t.Fatalf("the watch saw %v %+v, not the registration removed", e.Kind, e.Node)
	}
}

func TestRefusalsAreTypedErrors(t *testing.T) {
	c := startCluster(t, 1, nil)
	cl, err := New(Config{Endpoints: c.addrs, RetryFor: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := within(t, 20*time.Second)

	_, err = cl.Sequence(ctx, "no-such-sequence", SequenceOptions{})
	var typed *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &typed) || typed.Reason != "UNKNOWN_SEQUENCE" || typed.Code != 30 {
		t.Fatalf("an unknown sequence: %#v", err)
	}
	if err := cl.CreateSequence(ctx, "once", 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := cl.CreateSequence(ctx, "once", 0, 20); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("made again with other settings: %v", err)
	}
	if _, err := cl.Register(ctx, "LOGIC", "not an address", RegisterOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a bad address: %v", err)
	}
	// A request naming a registration by a token that is not its own changes nothing.
	reg, err := cl.Register(ctx, "LOGIC", "10.0.5.1:8080", RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	req := &registrypb.UnregisterRequest{NodeId: reg.NodeID, Term: reg.Token.Term, Index: reg.Token.Index + 7}
	_, err = call(ctx, cl, 0, func(ctx context.Context, conn *grpc.ClientConn) (*registrypb.UnregisterReply, error) {
		return registrypb.NewRegistryClient(conn).Unregister(ctx, req)
	})
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrFailedPrecondition) || !errors.As(err, &typed) || typed.Reason != "NOT_HOLDER" {
		t.Fatalf("an unregister by another token: %v", err)
	}
	if !reg.Holds() {
		t.Fatal("the registration was harmed")
	}
	// Over the frame limit: a clear TooLarge, and the beacon serves on.
	big := make([]byte, 5<<20)
	_, err = cl.ConfigPut(ctx, "cluster/big", big, PutOptions{})
	if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrResourceExhausted) {
		t.Fatalf("a 5 MiB value: %v", err)
	}
	if _, err := cl.ConfigPut(ctx, "cluster/small", []byte("x"), PutOptions{}); err != nil {
		t.Fatalf("the beacon serves on after the large one: %v", err)
	}
	fmt.Println("over the frame limit:", err)
	if _, err := New(Config{}); err == nil {
		t.Fatal("a client of no beacon")
	}
	// Nothing listens: said at once, not after RetryFor.
	ports := freePorts(t, 2)
	nobody, _ := New(Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])}, RetryFor: 30 * time.Second})
	defer nobody.Close()
	started := time.Now()
	_, err = nobody.Nodes(ctx, "", Any, 0)
	if !errors.As(err, &typed) || typed.Status != codes.Unavailable || time.Since(started) > 10*time.Second {
		t.Fatalf("no beacon listening: %v after %v", err, time.Since(started))
	}
}

func TestALeaseAndAWatchHoldThroughALeaderKill(t *testing.T) {
	c := startCluster(t, 3, map[string]any{"lease_ms": 2000, "id_reuse_delay_ms": 3000})
	cl := c.client(t)
	ctx := within(t, 60*time.Second)
	lost := make(chan string, 1)
	reg, err := cl.Register(ctx, "LOGIC", "10.0.2.1:8080", RegisterOptions{OnLost: func(why string) { lost <- why }})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	w, err := cl.Watch(ctx, []string{"LOGIC"}, Serving)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if e := nextNode(t, w, 5*time.Second); e.Kind != Present || e.Node.NodeID != reg.NodeID {
		t.Fatalf("listed %v %+v", e.Kind, e.Node)
	}
	seq := func() *Sequence {
		if err := cl.CreateSequence(ctx, "ids", 0, 100); err != nil {
			t.Fatal(err)
		}
		s, err := cl.Sequence(ctx, "ids", SequenceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	seen := map[uint64]bool{}
	var mu sync.Mutex
	take := func(n int) {
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					v, err := seq.Next(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if seen[v] {
						t.Errorf("number %d twice", v)
					}
					seen[v] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	take(200)

	leader := c.leader()
	c.kill(leader)
	// Changes while the watch finds the next leader: each told once, in order.
	var made []uint32
	for i := 0; i < 3; i++ {
		r, err := cl.Register(ctx, "LOGIC", fmt.Sprintf("10.0.2.%d:8080", i+2), RegisterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(ctx)
		made = append(made, r.NodeID)
	}
	take(200)
	for i, id := range made {
		e := nextNode(t, w, 10*time.Second)
		if e.Kind != Added || e.Node.NodeID != id {
			t.Fatalf("change %d: %v %d, not %d added", i, e.Kind, e.Node.NodeID, id)
		}
	}
	if resumes, resyncs := w.Resumes(); resumes < 1 || resyncs != 0 {
		t.Fatalf("resumes %d, listings again %d: a watch resumes from its index", resumes, resyncs)
	}
	if _, err := w.Next(within(t, 500*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an event beyond those made: %v", err)
	}
	// Three leases past the kill, the lease still holds.
	time.Sleep(3 * reg.Lease)
	select {
	case why := <-lost:
		t.Fatalf("the lease was lost: %s", why)
	default:
	}
	if !reg.Holds() {
		t.Fatal("the lease is not confirmed")
	}
	seq.Close(ctx)
}

func TestAStoppedBeaconCostsTheServiceNothing(t *testing.T) {
	// Leases of 3 s: an election on a loaded machine fits in one with room to spare.
	c := startCluster(t, 3, map[string]any{"lease_ms": 3000, "id_reuse_delay_ms": 3000})
	leader := c.leader()
	follower := (leader + 1) % 3
	cl := c.client(t, c.addrs[follower])
	ctx := within(t, 90*time.Second)
	lost := make(chan string, 1)
	reg, err := cl.Register(ctx, "LOGIC", "10.0.7.1:8080", RegisterOptions{OnLost: func(why string) { lost <- why }})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	slowest := func(span time.Duration) time.Duration {
		var worst time.Duration
		for end := time.Now().Add(span); time.Now().Before(end); {
			started := time.Now()
			if _, err := cl.ConfigPut(ctx, "cluster/probe", []byte("x"), PutOptions{}); err != nil {
				t.Fatal(err)
			}
			worst = max(worst, time.Since(started))
		}
		return worst
	}
	c.stop(follower)
	if worst := slowest(6 * time.Second); worst > 2*time.Second {
		t.Fatalf("a call waited %v on the stopped follower", worst)
	}
	c.cont(follower)
	leader = c.leader()
	c.stop(leader)
	time.Sleep(6 * time.Second)
	c.cont(leader)
	select {
	case why := <-lost:
		t.Fatalf("the lease was lost: %s", why)
	default:
	}
	// A fresh client whose first beacon is stopped registers without waiting for it.
	leader = c.leader()
	follower = (leader + 1) % 3
	c.stop(follower)
	defer c.cont(follower)
	if _, err := cl.ConfigPut(ctx, "cluster/probe", []byte("settled"), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	fresh := c.client(t, c.addrs[follower])
	again, err := fresh.Register(ctx, "LOGIC", "10.0.7.2:8080", RegisterOptions{})
	took := time.Since(started)
	if err != nil {
		t.Fatal(err)
	}
	again.Close(ctx)
	t.Logf("a fresh client past a stopped first beacon: %v", took)
	if took > 2*time.Second {
		t.Fatalf("a fresh client took %v past the stopped first beacon", took)
	}
	if !reg.Holds() {
		t.Fatalf("the lease is not confirmed: %s", reg.LostReason())
	}
}

func TestSnowflakeIDsAreUniqueAndDecodeToTheNodeID(t *testing.T) {
	c := startCluster(t, 1, map[string]any{"lease_ms": 2000})
	cl := c.client(t)
	ctx := within(t, 30*time.Second)
	reg, err := cl.Register(ctx, "ORDERS", "10.0.3.1:8080", RegisterOptions{Snowflake: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	if _, err := NewSnowflake(&Registration{NodeID: 1}); err == nil {
		t.Fatal("a snowflake on a registration that reserves no time")
	}
	gen, err := NewSnowflake(reg)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	last := uint64(0)
	for i := 0; i < 5000; i++ {
		id, err := gen.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] || id <= last {
			t.Fatalf("id %d after %d", id, last)
		}
		seen[id], last = true, id
		if _, worker, _ := DecodeSnowflake(id); worker != reg.NodeID {
			t.Fatalf("id %d decodes to worker %d, not %d", id, worker, reg.NodeID)
		}
	}
}

func TestChecksTakeAServiceOutOfDiscoveryAndBack(t *testing.T) {
	c := startCluster(t, 1, map[string]any{"lease_ms": 2000})
	cl := c.client(t)
	ctx := within(t, 60*time.Second)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	reg, err := cl.Register(ctx, "LOGIC", addr, RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	w, err := cl.Watch(ctx, []string{"LOGIC"}, Serving)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if e := nextNode(t, w, 5*time.Second); e.Kind != Present {
		t.Fatalf("%v", e.Kind)
	}
	if _, err := reg.RunChecks([]Check{TCPCheck{Addr: addr}}, 100*time.Millisecond, 2); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if e := nextNode(t, w, 10*time.Second); e.Kind != Removed || e.Node.NodeID != reg.NodeID {
		t.Fatalf("the port closed: %v %+v", e.Kind, e.Node)
	}
	nodes, err := cl.Nodes(ctx, "LOGIC", OnlyCritical, 0)
	if err != nil || len(nodes) != 1 || nodes[0].Health != Critical {
		t.Fatalf("critical ones: %+v (%v)", nodes, err)
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if e := nextNode(t, w, 20*time.Second); e.Kind != Added || e.Node.NodeID != reg.NodeID {
		t.Fatalf("the port open again: %v %+v", e.Kind, e.Node)
	}
}

func TestHysteresisReportsAStatusOnceItHeld(t *testing.T) {
	h := &hysteresis{threshold: 3}
	var got []bool
	for _, s := range []Health{Critical, Critical, Passing, Critical, Critical, Critical, Critical} {
		got = append(got, h.observe(s))
	}
	want := []bool{false, false, false, false, false, true, false}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reported %v, want %v", got, want)
	}
}

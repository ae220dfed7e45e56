package beacon

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"example.invalid/beacon/clients/go/pb/assignpb"
)

// until polls cond every 20 ms for d, failing with what when it never holds.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("within %v: %s", d, what)
}

// kinds reads the events a holds now (each within a moment).
func kinds(a *Assignments) []string {
	var got []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		e, err := a.Next(ctx)
		cancel()
		if err != nil {
			return got
		}
		got = append(got, e.Kind.String())
	}
}

func TestASlotGoesToTheStandbyWhenItsHolderEnds(t *testing.T) {
	c := startCluster(t, 3, map[string]any{"lease_ms": 2000, "id_reuse_delay_ms": 3000})
	cl := c.client(t)
	ctx := within(t, 60*time.Second)
	if _, err := cl.CreateSlotGroup(ctx, "robots", "ROBOT", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AddResource(ctx, &assignpb.AddResource{Name: "arm-0", SlotGroup: "robots", Slot: 0}); err != nil {
		t.Fatal(err)
	}
	a, err := cl.Register(ctx, "ROBOT", "10.0.3.1:9000", RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	heldA, err := cl.Assignments(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer heldA.Close()
	until(t, 10*time.Second, "the slot and its resource go to the first", func() bool {
		return heldA.Slots()["robots"] != nil && heldA.Resources()["arm-0"] != nil
	})
	granted := heldA.Slots()["robots"]
	b, err := cl.Register(ctx, "ROBOT", "10.0.3.2:9000", RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	heldB, err := cl.Assignments(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer heldB.Close()
	time.Sleep(500 * time.Millisecond)
	if len(heldB.Slots()) != 0 {
		t.Fatal("the standby holds a slot while its holder lives")
	}
	// The leader dies; the watches resume at the next one from where they were.
	c.kill(c.leader())
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, 15*time.Second, "the slot and its resource go to the standby", func() bool {
		return heldB.Slots()["robots"] != nil && heldB.Resources()["arm-0"] != nil
	})
	got := strings.Join(kinds(heldB), " ")
	if !strings.Contains(got, "slot_granted") || !strings.Contains(got, "added") {
		t.Fatalf("the standby was told %q", got)
	}
	now := heldB.Slots()["robots"]
	if !(FencingToken{granted.GetTerm(), granted.GetIndex()}).Less(FencingToken{now.GetTerm(), now.GetIndex()}) {
		t.Fatalf("the standby's token %v is not after the first's %v", now, granted)
	}
}

func TestAWorkerRunsEveryTaskOnceAndResultsComeBack(t *testing.T) {
	c := startCluster(t, 3, map[string]any{"lease_ms": 2000, "id_reuse_delay_ms": 3000})
	cl := c.client(t)
	ctx := within(t, 90*time.Second)
	if err := cl.CreateQueue(ctx, "thumbs", QueueOptions{AttemptTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	reg, err := cl.Register(ctx, "THUMBS", "10.0.4.1:9000", RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	var mu sync.Mutex
	var ran []string
	worker := cl.Worker(reg, []string{"thumbs"}, 4, func(ctx context.Context, task *Task) ([]byte, error) {
		mu.Lock()
		ran = append(ran, task.GetName())
		mu.Unlock()
		if string(task.GetPayload()) == "bad" {
			return nil, &TaskFailure{Message: "cannot read it", Retry: false}
		}
		return bytes.ToUpper(task.GetPayload()), nil
	})
	defer worker.Stop()
	var want []string
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("img-%d", i)
		want = append(want, name)
		if _, err := cl.Submit(ctx, "thumbs", name, []byte(fmt.Sprintf("photo %d", i)), SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Submit(ctx, "thumbs", "img-bad", []byte("bad"), SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	// The leader dies halfway: what is running goes on, reports reach the next leader.
	for i := 0; i < 40; i++ {
		if i == 20 {
			c.kill(c.leader())
		}
		task, err := cl.Wait(within(t, 20*time.Second), "thumbs", fmt.Sprintf("img-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if task.GetState() != "completed" || string(task.GetResult()) != fmt.Sprintf("PHOTO %d", i) {
			t.Fatalf("task %d: %s %q", i, task.GetState(), task.GetResult())
		}
	}
	failed, err := cl.Wait(within(t, 20*time.Second), "thumbs", "img-bad")
	if err != nil || failed.GetState() != "failed" || !strings.Contains(failed.GetError(), "cannot read it") {
		t.Fatalf("the bad one: %v (%v)", failed, err)
	}
	mu.Lock()
	got := append([]string(nil), ran...)
	mu.Unlock()
	sort.Strings(got)
	want = append(want, "img-bad")
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ran %v, want each once: %v", got, want)
	}
	// A submit repeated with its ID returns the task it made, finished, and runs nothing.
	first, err := cl.Submit(ctx, "thumbs", "img-once", []byte("once"), SubmitOptions{SubmitID: 77})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Wait(within(t, 20*time.Second), "thumbs", "img-once"); err != nil {
		t.Fatal(err)
	}
	again, err := cl.Submit(ctx, "thumbs", "img-once", []byte("once"), SubmitOptions{SubmitID: 77})
	if err != nil || again.GetState() != "completed" || again.GetSeq() != first.GetSeq() {
		t.Fatalf("the same submit again: %v (%v)", again, err)
	}
	if _, err := cl.Wait(within(t, time.Second), "thumbs", "no-such-task"); err == nil {
		t.Fatal("waited for a task that is not there")
	}
}

func TestALockGoesToTheNextContenderWithAHigherToken(t *testing.T) {
	c := startCluster(t, 1, map[string]any{"lease_ms": 2000})
	cl := c.client(t)
	ctx := within(t, 30*time.Second)
	first, err := cl.AcquireLock(ctx, "nightly-report", "10.0.6.1:9000", "")
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		lock *Lock
		err  error
	}
	second := make(chan got, 1)
	go func() {
		l, err := cl.AcquireLock(ctx, "nightly-report", "10.0.6.2:9000", "")
		second <- got{l, err}
	}()
	select {
	case g := <-second:
		t.Fatalf("a second contender got the lock while the first held it: %+v", g)
	case <-time.After(700 * time.Millisecond):
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g := <-second
	if g.err != nil {
		t.Fatal(g.err)
	}
	defer g.lock.Release(ctx)
	if !first.Token.Less(g.lock.Token) {
		t.Fatalf("the next holder's token %v is not above the first's %v", g.lock.Token, first.Token)
	}
	if _, err := cl.AcquireLock(ctx, "not a name", "10.0.6.3:9000", ""); err == nil {
		t.Fatal("a lock name with spaces")
	}
}

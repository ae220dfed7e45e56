package beacon

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"example.invalid/beacon/clients/go/pb/taskspb"
)

// Task is a task as the leader says it.
type Task = taskspb.TaskInfo

// QueueOptions are a queue's settings (0: the cluster's defaults).
type QueueOptions struct {
	AttemptTimeout time.Duration
	MaxAttempts    uint32
}

// CreateQueue makes task queue name; made again with the same settings it is as it was.
func (c *Client) CreateQueue(ctx context.Context, name string, opts QueueOptions) error {
	req := &taskspb.CreateQueue{Name: name, TimeoutMs: uint64(opts.AttemptTimeout.Milliseconds()), MaxAttempts: opts.MaxAttempts}
	_, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*taskspb.QueueReply, error) {
		return taskspb.NewTasksClient(conn).CreateQueue(ctx, req)
	})
	return err
}

// SubmitOptions are a submission's optional fields.
type SubmitOptions struct {
	Priority       int32
	Delay          time.Duration
	AttemptTimeout time.Duration
	MaxAttempts    uint32
	// SubmitID makes a submit the process may repeat (after a restart) count once; a fresh
	// random one when 0. The call retries a submit whose answer a failover lost with the
	// same ID: a task it made that finished meanwhile is returned as it is, not run again.
	SubmitID uint64
}

// Submit submits task name with payload to queue; a task of that name pending or running
// is returned instead.
func (c *Client) Submit(ctx context.Context, queue, name string, payload []byte, opts SubmitOptions) (*Task, error) {
	id := opts.SubmitID
	for id == 0 {
		id = rand.Uint64()
	}
	req := &taskspb.Submit{
		Queue: queue, Name: name, Payload: payload, Priority: opts.Priority,
		DelayMs:     uint64(opts.Delay.Milliseconds()),
		TimeoutMs:   uint64(opts.AttemptTimeout.Milliseconds()),
		MaxAttempts: opts.MaxAttempts, SubmitId: id,
	}
	reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*taskspb.TaskReply, error) {
		return taskspb.NewTasksClient(conn).Submit(ctx, req)
	})
	return reply.GetTask(), err
}

// Task is task name of queue as it stands.
func (c *Client) Task(ctx context.Context, queue, name string) (*Task, error) {
	req := &taskspb.GetTask{Queue: queue, Name: name}
	reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*taskspb.TaskReply, error) {
		return taskspb.NewTasksClient(conn).Get(ctx, req)
	})
	return reply.GetTask(), err
}

// Wait waits (within ctx) until task name of queue has finished and returns it: its State
// is "completed", "failed", "dead" or "cancelled". It follows the leader's stream of the
// queue's finished tasks, opened again on another beacon if it breaks.
func (c *Client) Wait(ctx context.Context, queue, name string) (*Task, error) {
	var found *Task
	err := c.doStream(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		s, err := taskspb.NewTasksClient(conn).WatchQueue(ctx, &taskspb.WatchQueue{Queue: queue, Names: []string{name}})
		if err != nil {
			return err
		}
		for {
			ev, err := s.Recv()
			if err != nil {
				return err
			}
			finished := ev.GetNotice().GetFinished()
			if st := ev.GetStart(); st != nil {
				finished = st.GetFinished()
				for _, u := range st.GetUnknown() {
					if u == name {
						return &Error{Status: codes.NotFound, Message: fmt.Sprintf("queue `%s` has no task `%s`", queue, name)}
					}
				}
			}
			for _, t := range finished {
				if t.GetName() == name {
					found = t
					return nil
				}
			}
		}
	})
	return found, err
}

// TaskFailure is what a handler returns to fail an attempt: with Retry the task runs
// again later (until its attempts are used up), else it fails for good. Any other error
// fails the attempt and is retried.
type TaskFailure struct {
	Message string
	Retry   bool
}

func (f *TaskFailure) Error() string { return f.Message }

// Handler runs one task: its result completes the task, an error fails the attempt.
type Handler func(ctx context.Context, task *Task) ([]byte, error)

// endedKept: how many attempts that ended here a worker remembers.
const endedKept = 4096

type attemptKey struct {
	queue, name string
	term, index uint64
}

// Worker serves queues on a registration, capacity tasks at once, over the Serve stream
// (opened again on another beacon when it breaks). Stop it when done.
type Worker struct {
	c        *Client
	reg      *Registration
	queues   []string
	capacity uint32
	handler  Handler

	mu        sync.Mutex
	running   map[attemptKey]bool
	ended     map[attemptKey]bool
	endedList []attemptKey
	completed int
	refused   []error
	lost      []*Task
	outbox    chan *taskspb.WorkerRequest

	slots chan struct{}
	stop  context.CancelFunc
	done  chan struct{}
	tasks sync.WaitGroup
	once  sync.Once
}

// Worker starts serving queues on reg with handler, capacity tasks at once (1 when 0).
func (c *Client) Worker(reg *Registration, queues []string, capacity uint32, handler Handler) *Worker {
	capacity = max(capacity, 1)
	ctx, stop := context.WithCancel(context.Background())
	w := &Worker{
		c: c, reg: reg, queues: queues, capacity: capacity, handler: handler,
		running: map[attemptKey]bool{}, ended: map[attemptKey]bool{},
		slots: make(chan struct{}, capacity), stop: stop, done: make(chan struct{}),
	}
	go w.run(ctx)
	return w
}

// Completed counts the results the leader accepted.
func (w *Worker) Completed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.completed
}

// Lost are the tasks taken from this worker (timed out, cancelled, the lease lost).
func (w *Worker) Lost() []*Task {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*Task(nil), w.lost...)
}

// Stop ends the worker and waits for the handlers under way.
func (w *Worker) Stop() {
	w.once.Do(func() {
		w.stop()
		<-w.done
		w.tasks.Wait()
	})
}

func (w *Worker) run(ctx context.Context) {
	defer close(w.done)
	work := &taskspb.Work{NodeId: w.reg.NodeID, Term: w.reg.Token.Term, Index: w.reg.Token.Index, Queues: w.queues, Capacity: w.capacity}
	pause := 10 * time.Millisecond
	for ctx.Err() == nil {
		select {
		case <-w.reg.Lost():
			return
		default:
		}
		err := w.serve(ctx, work)
		if ctx.Err() != nil || errors.Is(err, ErrLeaseLost) {
			return
		}
		w.c.log.Debug("worker stream ended", "node_id", w.reg.NodeID, "err", err)
		w.c.next()
		if sleep(ctx, pause) != nil {
			return
		}
		pause = min(pause*2, 500*time.Millisecond)
	}
}

// serve runs one Serve stream.
func (w *Worker) serve(ctx context.Context, work *taskspb.Work) error {
	at := w.c.Current()
	conn, err := w.c.conn(at)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(w.c.outgoing(ctx))
	defer cancel()
	s, err := taskspb.NewTasksClient(conn).Serve(ctx)
	if err != nil {
		return errorOf(err, at)
	}
	if err := s.Send(&taskspb.WorkerRequest{Request: &taskspb.WorkerRequest_Work{Work: work}}); err != nil {
		return errorOf(err, at)
	}
	outbox := make(chan *taskspb.WorkerRequest, 64)
	w.mu.Lock()
	w.outbox = outbox
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		if w.outbox == outbox {
			w.outbox = nil
		}
		w.mu.Unlock()
	}()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.reg.Lost():
				cancel()
				return
			case req := <-outbox:
				if s.Send(req) != nil {
					return
				}
			}
		}
	}()
	for {
		ev, err := s.Recv()
		if err != nil {
			return errorOf(err, at)
		}
		switch {
		case ev.GetStart() != nil:
			w.begin(ctx, ev.GetStart().GetRunning())
		case ev.GetNotice() != nil:
			w.begin(ctx, ev.GetNotice().GetStarted())
			w.mu.Lock()
			w.lost = append(w.lost, ev.GetNotice().GetLost()...)
			w.mu.Unlock()
		case ev.GetReported() != nil:
			if ev.GetReported().GetTask().GetState() == "completed" {
				w.mu.Lock()
				w.completed++
				w.mu.Unlock()
			}
		case ev.GetRefused() != nil:
			w.mu.Lock()
			w.refused = append(w.refused, &Error{Code: int(ev.GetRefused().GetCode()), Message: ev.GetRefused().GetMsg()})
			w.mu.Unlock()
		}
	}
}

// begin runs the tasks the leader started here, each once: the leader may list one as
// running here again while its report is on its way (a new leader answering the stream
// before the report reached it).
func (w *Worker) begin(ctx context.Context, tasks []*Task) {
	for _, t := range tasks {
		key := attemptKey{t.GetQueue(), t.GetName(), t.GetRun().GetTerm(), t.GetRun().GetIndex()}
		w.mu.Lock()
		if w.running[key] || w.ended[key] {
			w.mu.Unlock()
			continue
		}
		w.running[key] = true
		w.mu.Unlock()
		w.tasks.Add(1)
		go w.attempt(t, key)
	}
}

func (w *Worker) attempt(t *Task, key attemptKey) {
	defer w.tasks.Done()
	w.slots <- struct{}{}
	defer func() { <-w.slots }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.reg.Lost():
			cancel()
		case <-ctx.Done():
		}
	}()
	result, err := w.handler(ctx, t)
	var req *taskspb.WorkerRequest
	if err == nil {
		req = &taskspb.WorkerRequest{Request: &taskspb.WorkerRequest_Complete{Complete: &taskspb.Complete{
			Queue: t.GetQueue(), Name: t.GetName(), Term: key.term, Index: key.index, Result: result}}}
	} else {
		retry := true
		var f *TaskFailure
		if errors.As(err, &f) {
			retry = f.Retry
		}
		req = &taskspb.WorkerRequest{Request: &taskspb.WorkerRequest_Fail{Fail: &taskspb.Fail{
			Queue: t.GetQueue(), Name: t.GetName(), Term: key.term, Index: key.index, Error: err.Error(), Retry: retry}}}
	}
	w.mu.Lock()
	delete(w.running, key)
	w.ended[key] = true
	w.endedList = append(w.endedList, key)
	if len(w.endedList) > endedKept {
		delete(w.ended, w.endedList[0])
		w.endedList = w.endedList[1:]
	}
	outbox := w.outbox
	w.mu.Unlock()
	if outbox != nil {
		select {
		case outbox <- req:
			return
		default:
		}
	}
	// No stream, or its queue is full: report on its own.
	report, cancelReport := context.WithTimeout(context.Background(), w.c.cfg.RetryFor)
	defer cancelReport()
	var callErr error
	if c := req.GetComplete(); c != nil {
		_, callErr = call(report, w.c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*taskspb.TaskReply, error) {
			return taskspb.NewTasksClient(conn).Complete(ctx, c)
		})
		if callErr == nil {
			w.mu.Lock()
			w.completed++
			w.mu.Unlock()
		}
	} else {
		_, callErr = call(report, w.c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*taskspb.TaskReply, error) {
			return taskspb.NewTasksClient(conn).Fail(ctx, req.GetFail())
		})
	}
	if callErr != nil {
		w.mu.Lock()
		w.refused = append(w.refused, callErr)
		w.mu.Unlock()
	}
}

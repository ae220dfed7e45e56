package beacon

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"example.invalid/beacon/clients/go/pb/assignpb"
)

// Resource and SlotHeld are what a registration holds, as the leader says.
type (
	Resource = assignpb.ResourceInfo
	SlotHeld = assignpb.SlotHeld
)

// AddResource adds a resource that the leader assigns to a service of nodeType (weight 0:
// 1), or, with slotGroup, binds it to that group's slot.
func (c *Client) AddResource(ctx context.Context, r *assignpb.AddResource) (*Resource, error) {
	reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*assignpb.ResourceReply, error) {
		return assignpb.NewAssignmentsClient(conn).Add(ctx, r)
	})
	return reply.GetResource(), err
}

// CreateSlotGroup makes a group of count slots held by services of nodeType, one each, the
// others standing by.
func (c *Client) CreateSlotGroup(ctx context.Context, name, nodeType string, count uint32) (*assignpb.SlotGroupInfo, error) {
	req := &assignpb.CreateGroup{Name: name, NodeType: nodeType, Count: count}
	reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*assignpb.GroupReply, error) {
		return assignpb.NewAssignmentsClient(conn).CreateGroup(ctx, req)
	})
	return reply.GetGroup(), err
}

// AssignmentKind is what happened to something a registration holds.
type AssignmentKind int

const (
	// ResourceAdded: start it. ResourceRemoved: stop it.
	ResourceAdded AssignmentKind = iota
	ResourceRemoved
	// SlotGranted: the slot is this service's. SlotGone: no longer.
	SlotGranted
	SlotGone
	// SlotRevoking: this service is draining and a standby waits for the slot: stop what
	// it runs, then [Assignments.ReleaseSlot].
	SlotRevoking
	// AssignmentsLost: the registration's lease is lost: stop everything.
	AssignmentsLost
)

func (k AssignmentKind) String() string {
	return [...]string{"added", "removed", "slot_granted", "slot_gone", "slot_revoking", "lost"}[k]
}

// AssignmentEvent is one change of what a registration holds: Resource for the resource
// kinds, Slot for the slot kinds.
type AssignmentEvent struct {
	Kind     AssignmentKind
	Resource *Resource
	Slot     *SlotHeld
}

// Assignments follows what a registration holds, resources and slots, from the leader's
// stream (resumed on another beacon when it breaks, telling only the difference). When
// the lease is lost one AssignmentsLost event comes and the watch ends.
type Assignments struct {
	w   *resuming[AssignmentEvent]
	c   *Client
	reg *Registration

	mu        sync.Mutex
	resources map[string]*Resource
	slots     map[string]*SlotHeld
}

// Assignments follows what reg holds. It returns once the first answer is in.
func (c *Client) Assignments(ctx context.Context, reg *Registration) (*Assignments, error) {
	a := &Assignments{w: newResuming[AssignmentEvent](c), c: c, reg: reg,
		resources: map[string]*Resource{}, slots: map[string]*SlotHeld{}}
	// What a service holds is taken away only by the leader's word: only the lease's end
	// ends the watch, anything else is waited out on another beacon.
	a.w.ends = func(err error) bool { return errors.Is(err, ErrLeaseLost) }
	a.w.follow = func(ctx context.Context, conn *grpc.ClientConn, start uint64, relist bool) error {
		select {
		case <-reg.Lost():
			return a.lose(ctx)
		default:
		}
		// A lost lease ends the stream at once: the leader's notices say only what moved.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-reg.Lost():
				cancel()
			case <-ctx.Done():
			}
		}()
		req := &assignpb.WatchAssignments{NodeId: reg.NodeID, Term: reg.Token.Term, Index: reg.Token.Index, StartIndex: start}
		s, err := assignpb.NewAssignmentsClient(conn).Watch(ctx, req)
		if err != nil {
			return a.failed(ctx, err)
		}
		for {
			ev, err := s.Recv()
			if err != nil {
				return a.failed(ctx, err)
			}
			if st := ev.GetStart(); st != nil {
				a.w.first(start, relist)
				err = a.listed(ctx, st, start)
				a.w.isListed()
			} else {
				err = a.notice(ctx, ev.GetNotice())
			}
			if err != nil {
				return err
			}
		}
	}
	if err := a.w.begin(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// failed: a lost lease ends the watch with one AssignmentsLost event; anything else is
// waited out on another beacon (see ends).
func (a *Assignments) failed(ctx context.Context, err error) error {
	select {
	case <-a.reg.Lost():
		return a.lose(ctx)
	default:
	}
	if errors.Is(errorOf(err, ""), ErrLeaseLost) {
		return a.lose(ctx)
	}
	return err
}

// lose empties what is held, tells it, and ends the watch.
func (a *Assignments) lose(ctx context.Context) error {
	a.mu.Lock()
	a.resources, a.slots = map[string]*Resource{}, map[string]*SlotHeld{}
	a.mu.Unlock()
	_ = a.w.tell(ctx, AssignmentEvent{Kind: AssignmentsLost})
	return &Error{Reason: "NO_LEASE", Message: "the registration's lease is lost: " + a.reg.LostReason()}
}

// slotEvents are the events of slot now held where was was held before (or nil).
func slotEvents(was, now *SlotHeld) []AssignmentEvent {
	if was == nil || was.GetSlot() != now.GetSlot() || was.GetTerm() != now.GetTerm() || was.GetIndex() != now.GetIndex() {
		var events []AssignmentEvent
		if was != nil {
			events = append(events, AssignmentEvent{Kind: SlotGone, Slot: was})
		}
		events = append(events, AssignmentEvent{Kind: SlotGranted, Slot: now})
		if now.GetRevoking() {
			events = append(events, AssignmentEvent{Kind: SlotRevoking, Slot: now})
		}
		return events
	}
	if now.GetRevoking() && !was.GetRevoking() {
		return []AssignmentEvent{{Kind: SlotRevoking, Slot: now}}
	}
	return nil
}

func (a *Assignments) listed(ctx context.Context, st *assignpb.WatchAssignmentsReply, start uint64) error {
	if start > 0 {
		return nil
	}
	nowR, nowS := map[string]*Resource{}, map[string]*SlotHeld{}
	for _, r := range st.GetHeld() {
		nowR[r.GetName()] = r
	}
	for _, s := range st.GetSlots() {
		nowS[s.GetGroup()] = s
	}
	a.mu.Lock()
	oldR, oldS := a.resources, a.slots
	a.resources, a.slots = nowR, nowS
	a.mu.Unlock()
	var events []AssignmentEvent
	added, _, removed := relisted(oldR, nowR, func(x, y *Resource) bool { return !proto.Equal(x, y) })
	for _, r := range removed {
		events = append(events, AssignmentEvent{Kind: ResourceRemoved, Resource: r})
	}
	for g, s := range oldS {
		if _, ok := nowS[g]; !ok {
			events = append(events, AssignmentEvent{Kind: SlotGone, Slot: s})
		}
	}
	for g, s := range nowS {
		events = append(events, slotEvents(oldS[g], s)...)
	}
	for _, r := range added {
		events = append(events, AssignmentEvent{Kind: ResourceAdded, Resource: r})
	}
	a.w.at(st.GetIndex())
	return a.w.tellAll(ctx, events)
}

func (a *Assignments) notice(ctx context.Context, n *assignpb.AssignmentNotice) error {
	a.mu.Lock()
	before := map[string]*SlotHeld{}
	for g, s := range a.slots {
		before[g] = s
	}
	for _, s := range n.GetSlotsGone() {
		delete(a.slots, s.GetGroup())
	}
	for _, s := range n.GetSlotsHeld() {
		a.slots[s.GetGroup()] = s
	}
	for _, r := range n.GetGone() {
		delete(a.resources, r.GetName())
	}
	for _, r := range n.GetHeld() {
		a.resources[r.GetName()] = r
	}
	a.mu.Unlock()
	var events []AssignmentEvent
	for _, s := range n.GetSlotsGone() {
		// A slot let go with ReleaseSlot was told gone then.
		if _, ok := before[s.GetGroup()]; ok {
			events = append(events, AssignmentEvent{Kind: SlotGone, Slot: s})
		}
	}
	for _, s := range n.GetSlotsHeld() {
		events = append(events, slotEvents(before[s.GetGroup()], s)...)
	}
	for _, r := range n.GetGone() {
		events = append(events, AssignmentEvent{Kind: ResourceRemoved, Resource: r})
	}
	for _, r := range n.GetHeld() {
		events = append(events, AssignmentEvent{Kind: ResourceAdded, Resource: r})
	}
	if err := a.w.tellAll(ctx, events); err != nil {
		return err
	}
	a.w.at(n.GetIndex())
	return nil
}

// Next is the next change; the error that ended the watch once it ended.
func (a *Assignments) Next(ctx context.Context) (AssignmentEvent, error) { return a.w.next(ctx) }

// Resources are the resources held now, by name.
func (a *Assignments) Resources() map[string]*Resource {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]*Resource, len(a.resources))
	for k, v := range a.resources {
		out[k] = v
	}
	return out
}

// Slots are the slots held now, by group.
func (a *Assignments) Slots() map[string]*SlotHeld {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]*SlotHeld, len(a.slots))
	for k, v := range a.slots {
		out[k] = v
	}
	return out
}

// Release lets resource name go (after a revoking mark: a rebalance moves it on).
func (a *Assignments) Release(ctx context.Context, name string) error {
	a.mu.Lock()
	held := a.resources[name]
	a.mu.Unlock()
	if held == nil {
		return nil
	}
	req := &assignpb.Release{Name: name, Term: held.GetHolder().GetTerm(), Index: held.GetHolder().GetIndex()}
	_, err := call(ctx, a.c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*assignpb.ResourceReply, error) {
		return assignpb.NewAssignmentsClient(conn).Release(ctx, req)
	})
	return err
}

// ReleaseSlot lets this service's slot of group go (after SlotRevoking, or of its own
// accord): it goes at once to the oldest standby in rotation, with its resources.
func (a *Assignments) ReleaseSlot(ctx context.Context, group string) error {
	a.mu.Lock()
	held := a.slots[group]
	a.mu.Unlock()
	if held == nil {
		return nil
	}
	req := &assignpb.ReleaseSlot{Group: group, Slot: held.GetSlot(), Term: held.GetTerm(), Index: held.GetIndex()}
	_, err := call(ctx, a.c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*assignpb.GroupReply, error) {
		return assignpb.NewAssignmentsClient(conn).ReleaseSlot(ctx, req)
	})
	if err != nil {
		return err
	}
	a.mu.Lock()
	ours := a.slots[group] == held
	if ours {
		delete(a.slots, group)
	}
	a.mu.Unlock()
	if ours {
		return a.w.tell(ctx, AssignmentEvent{Kind: SlotGone, Slot: held})
	}
	return nil
}

// Close ends the watch.
func (a *Assignments) Close() { a.w.close() }

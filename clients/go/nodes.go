package beacon

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"example.invalid/beacon/clients/go/pb/registrypb"
)

// HealthFilter says which registrations a listing or a watch follows.
type HealthFilter int

const (
	// Serving: passing or warning, not draining (the ones to send work to); the watch's
	// default.
	Serving HealthFilter = iota
	// Any: every registration whatever its health.
	Any
	// OnlyPassing, OnlyWarning, OnlyCritical, OnlyDraining: one health each.
	OnlyPassing
	OnlyWarning
	OnlyCritical
	OnlyDraining
)

func (f HealthFilter) pb() registrypb.HealthFilter {
	switch f {
	case Any:
		return registrypb.HealthFilter_FILTER_ANY
	case OnlyPassing:
		return registrypb.HealthFilter_FILTER_PASSING
	case OnlyWarning:
		return registrypb.HealthFilter_FILTER_WARNING
	case OnlyCritical:
		return registrypb.HealthFilter_FILTER_CRITICAL
	case OnlyDraining:
		return registrypb.HealthFilter_FILTER_DRAINING
	}
	return registrypb.HealthFilter_FILTER_SERVING
}

// Node is a registered service as listings and watches give it.
type Node struct {
	NodeID     uint32
	NodeType   string
	Addr       string
	AccessAddr string
	Metadata   string
	Token      FencingToken
	Health     Health
	Draining   bool
	Note       string
	// Info is the message as the beacon sent it.
	Info *registrypb.NodeInfo
}

func nodeOf(n *registrypb.NodeInfo) Node {
	return Node{
		NodeID:     n.GetNodeId(),
		NodeType:   n.GetNodeType(),
		Addr:       n.GetAddr(),
		AccessAddr: n.GetAccessAddr(),
		Metadata:   n.GetMetadata(),
		Token:      FencingToken{n.GetTerm(), n.GetIndex()},
		Health:     Health(n.GetHealth().GetStatus()),
		Draining:   n.GetHealth().GetDraining(),
		Note:       n.GetHealth().GetNote(),
		Info:       n,
	}
}

// Serving reports whether the node is in rotation (passing or warning, not draining).
func (n Node) Serving() bool { return n.Health != Critical && !n.Draining }

// Nodes lists the registered services of nodeType (every type when ""), those health
// admits, read in pages of page entries (all at once when 0), each page linearizable on
// its own.
func (c *Client) Nodes(ctx context.Context, nodeType string, health HealthFilter, page uint32) ([]Node, error) {
	var out []Node
	from := uint32(0)
	for {
		req := &registrypb.NodesRequest{NodeType: nodeType, Limit: page, FromNodeId: from, Health: health.pb()}
		reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*registrypb.NodesReply, error) {
			return registrypb.NewRegistryClient(conn).Nodes(ctx, req)
		})
		if err != nil {
			return nil, err
		}
		for _, e := range reply.GetNodes() {
			if e.GetNode() != nil {
				out = append(out, nodeOf(e.GetNode()))
			}
		}
		if page == 0 || reply.GetNextNodeId() == 0 {
			return out, nil
		}
		from = reply.GetNextNodeId()
	}
}

// EventKind is what happened to a node.
type EventKind int

const (
	// Present: in the first listing.
	Present EventKind = iota
	// Added, Updated, Removed: a change, as it committed.
	Added
	Updated
	Removed
)

func (k EventKind) String() string {
	return [...]string{"present", "added", "updated", "removed"}[k]
}

// NodeEvent is one change a [Watch] tells.
type NodeEvent struct {
	Kind EventKind
	Node Node
}

// Watch is discovery: the services of some types that a filter admits, present at first,
// then each change once, in order, across leader changes. Close it when done.
type Watch struct {
	w     *resuming[NodeEvent]
	types []string
	// known: the live ones by node ID, as the watch's goroutine sees them.
	known map[uint32]Node
}

// Watch follows the services of types (every type when none) that health admits. Going
// out of what the filter admits (critical, drained) comes as Removed, and back as Added.
// It returns once the first listing is in, or with the error that refused it.
func (c *Client) Watch(ctx context.Context, types []string, health HealthFilter) (*Watch, error) {
	w := &Watch{w: newResuming[NodeEvent](c), types: types, known: map[uint32]Node{}}
	w.w.follow = func(ctx context.Context, conn *grpc.ClientConn, start uint64, relist bool) error {
		req := &registrypb.WatchRequest{NodeTypes: types, StartIndex: start, Health: health.pb()}
		s, err := registrypb.NewRegistryClient(conn).Watch(ctx, req)
		if err != nil {
			return err
		}
		// A first answer too large for one message comes in pages: the answer with `more`,
		// then notices marked `listing` until one says no more follow.
		var listing *registrypb.WatchReply
		for {
			ev, err := s.Recv()
			if err != nil {
				return err
			}
			switch {
			case ev.GetStart() != nil:
				if ev.GetStart().GetMore() {
					listing = ev.GetStart()
					continue
				}
				if err := w.listed(ctx, ev.GetStart(), start, relist); err != nil {
					return err
				}
			case listing != nil && ev.GetNotice().GetListing():
				listing.Nodes = append(listing.Nodes, ev.GetNotice().GetAddNodes()...)
				if !ev.GetNotice().GetMore() {
					if err := w.listed(ctx, listing, start, relist); err != nil {
						return err
					}
					listing = nil
				}
			default:
				if err := w.notice(ctx, ev.GetNotice()); err != nil {
					return err
				}
			}
		}
	}
	if err := w.w.begin(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Watch) listed(ctx context.Context, reply *registrypb.WatchReply, start uint64, relist bool) error {
	w.w.first(start, relist)
	defer w.w.isListed()
	if start > 0 {
		// A resume lists nothing: the changes from start on follow.
		return nil
	}
	now := map[uint32]Node{}
	for _, n := range reply.GetNodes() {
		now[n.GetNodeId()] = nodeOf(n)
	}
	var events []NodeEvent
	if !relist {
		for _, n := range reply.GetNodes() {
			events = append(events, NodeEvent{Present, now[n.GetNodeId()]})
		}
	} else {
		// Listed again after COMPACTED: told as the changes between what was known and now.
		added, updated, removed := relisted(w.known, now, func(a, b Node) bool {
			return !proto.Equal(a.Info, b.Info)
		})
		for _, n := range added {
			events = append(events, NodeEvent{Added, n})
		}
		for _, n := range updated {
			events = append(events, NodeEvent{Updated, n})
		}
		for _, n := range removed {
			events = append(events, NodeEvent{Removed, n})
		}
	}
	w.known = now
	w.w.at(reply.GetIndex())
	return w.w.tellAll(ctx, events)
}

func (w *Watch) notice(ctx context.Context, n *registrypb.NodeNotice) error {
	var events []NodeEvent
	for _, info := range n.GetAddNodes() {
		node := nodeOf(info)
		w.known[node.NodeID] = node
		events = append(events, NodeEvent{Added, node})
	}
	for _, info := range n.GetUpdateNodes() {
		node := nodeOf(info)
		w.known[node.NodeID] = node
		events = append(events, NodeEvent{Updated, node})
	}
	for _, info := range n.GetDelNodes() {
		delete(w.known, info.GetNodeId())
		events = append(events, NodeEvent{Removed, nodeOf(info)})
	}
	if err := w.w.tellAll(ctx, events); err != nil {
		return err
	}
	// The index moves once its changes are handed over: a resume from after it misses none.
	w.w.at(n.GetIndex())
	return nil
}

// Next is the next event; the error that ended the watch once it ended ([ErrClosed] after
// Close).
func (w *Watch) Next(ctx context.Context) (NodeEvent, error) { return w.w.next(ctx) }

// Index is the log position the watch is as of.
func (w *Watch) Index() uint64 { i, _, _ := w.w.counts(); return i }

// Resumes counts the streams resumed from an index; Resyncs the listings made again after
// COMPACTED.
func (w *Watch) Resumes() (resumes, resyncs int) { _, r, s := w.w.counts(); return r, s }

// Close ends the watch.
func (w *Watch) Close() { w.w.close() }

// String names the watch in logs.
func (w *Watch) String() string { return fmt.Sprintf("watch of %v", w.types) }

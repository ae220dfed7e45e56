package beacon

import (
	"context"

	"google.golang.org/grpc"

	"example.invalid/beacon/clients/go/pb/configspb"
)

// Document is a config document.
type Document = configspb.Document

// ConfigGet is the document key ([ErrNotFound] when there is none), or with prefix every
// document whose key starts with it.
func (c *Client) ConfigGet(ctx context.Context, key string, prefix bool) ([]*Document, error) {
	req := &configspb.GetRequest{Key: key, Prefix: prefix}
	reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*configspb.GetReply, error) {
		return configspb.NewConfigsClient(conn).Get(ctx, req)
	})
	return reply.GetDocuments(), err
}

// PutOptions are a config write's optional fields.
type PutOptions struct {
	// IfRevision writes only if the document is at that revision (0: only if it does not
	// exist); otherwise [ErrFailedPrecondition] and nothing is written. Nil: unconditional.
	IfRevision *uint64
	// JSON: the value is a JSON document (checked by the beacons).
	JSON bool
	// Path names the file the value is, for services that read their config as files.
	Path string
}

// ConfigPut writes document key; it returns the revision of the write.
func (c *Client) ConfigPut(ctx context.Context, key string, value []byte, opts PutOptions) (uint64, error) {
	return c.configWrite(ctx, key, opts.IfRevision, &configspb.Op{Key: key, Value: value, Json: opts.JSON, Path: opts.Path})
}

// ConfigDelete deletes document key (only at revision ifRevision, when not nil); it
// returns the revision of the delete.
func (c *Client) ConfigDelete(ctx context.Context, key string, ifRevision *uint64) (uint64, error) {
	return c.configWrite(ctx, key, ifRevision, &configspb.Op{Key: key, Delete: true})
}

func (c *Client) configWrite(ctx context.Context, key string, ifRevision *uint64, op *configspb.Op) (uint64, error) {
	req := &configspb.WriteRequest{Ops: []*configspb.Op{op}}
	if ifRevision != nil {
		req.Checks = []*configspb.Check{{Key: key, Revision: *ifRevision}}
	}
	reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*configspb.WriteReply, error) {
		return configspb.NewConfigsClient(conn).Write(ctx, req)
	})
	return reply.GetRevision(), err
}

// ConfigEvent is one change a [ConfigWatch] tells: a document put (Document set), or a
// key deleted (Deleted set). Listed marks the documents of the first listing.
type ConfigEvent struct {
	Document *Document
	Deleted  string
	Listed   bool
	// Index is the log index of the change (of the listing, for Listed).
	Index uint64
}

// ConfigWatch follows the documents under some prefixes: each one at first, then each
// change once, in order, across leader changes.
type ConfigWatch struct {
	w     *resuming[ConfigEvent]
	known map[string]*Document
}

// ConfigWatch follows the documents under prefixes (every one when none). It returns once
// the first listing is in, or with the error that refused it (a prefix no key can start
// with is [ErrInvalidArgument]).
func (c *Client) ConfigWatch(ctx context.Context, prefixes []string) (*ConfigWatch, error) {
	w := &ConfigWatch{w: newResuming[ConfigEvent](c), known: map[string]*Document{}}
	w.w.follow = func(ctx context.Context, conn *grpc.ClientConn, start uint64, relist bool) error {
		req := &configspb.WatchRequest{Prefixes: prefixes, StartIndex: start}
		s, err := configspb.NewConfigsClient(conn).Watch(ctx, req)
		if err != nil {
			return err
		}
		for {
			ev, err := s.Recv()
			if err != nil {
				return err
			}
			if st := ev.GetStart(); st != nil {
				if err := w.listed(ctx, st, start, relist); err != nil {
					return err
				}
				continue
			}
			if err := w.notice(ctx, ev.GetNotice()); err != nil {
				return err
			}
		}
	}
	if err := w.w.begin(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *ConfigWatch) listed(ctx context.Context, reply *configspb.WatchReply, start uint64, relist bool) error {
	w.w.first(start, relist)
	defer w.w.isListed()
	if start > 0 {
		return nil
	}
	now := map[string]*Document{}
	for _, d := range reply.GetDocuments() {
		now[d.GetKey()] = d
	}
	var events []ConfigEvent
	if !relist {
		for _, d := range reply.GetDocuments() {
			events = append(events, ConfigEvent{Document: d, Listed: true, Index: reply.GetIndex()})
		}
	} else {
		// Listed again after COMPACTED: told as the changes between what was known and now.
		added, updated, removed := relisted(w.known, now, func(a, b *Document) bool {
			return a.GetRevision() != b.GetRevision()
		})
		for _, d := range append(added, updated...) {
			events = append(events, ConfigEvent{Document: d, Index: reply.GetIndex()})
		}
		for _, d := range removed {
			events = append(events, ConfigEvent{Deleted: d.GetKey(), Index: reply.GetIndex()})
		}
	}
	w.known = now
	w.w.at(reply.GetIndex())
	return w.w.tellAll(ctx, events)
}

func (w *ConfigWatch) notice(ctx context.Context, n *configspb.ConfigNotice) error {
	for _, d := range n.GetPut() {
		w.known[d.GetKey()] = d
		if err := w.w.tell(ctx, ConfigEvent{Document: d, Index: n.GetIndex()}); err != nil {
			return err
		}
	}
	for _, key := range n.GetDeleted() {
		delete(w.known, key)
		if err := w.w.tell(ctx, ConfigEvent{Deleted: key, Index: n.GetIndex()}); err != nil {
			return err
		}
	}
	w.w.at(n.GetIndex())
	return nil
}

// Next is the next event; the error that ended the watch once it ended.
func (w *ConfigWatch) Next(ctx context.Context) (ConfigEvent, error) { return w.w.next(ctx) }

// Index is the log position the watch is as of.
func (w *ConfigWatch) Index() uint64 { i, _, _ := w.w.counts(); return i }

// Resumes counts the streams resumed from an index, and the listings made again.
func (w *ConfigWatch) Resumes() (resumes, resyncs int) { _, r, s := w.w.counts(); return r, s }

// Close ends the watch.
func (w *ConfigWatch) Close() { w.w.close() }

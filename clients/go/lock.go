package beacon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"

	"example.invalid/beacon/clients/go/pb/assignpb"
)

// Lock is a named lock (or a leadership won), built on a slot group of one slot: the group
// is the lock, its node type (`lock.NAME`) is what contenders register as, and the slot
// goes to the oldest live contender. Holding it is holding a lease: a holder that dies or is
// cut off loses it within a lease, and the next contender in line gets it at the leader's
// next tick. Every grant carries a fencing token that rises with each holder: pass it to
// what the lock guards, and have that refuse a token below the highest seen.
type Lock struct {
	Name string
	// Token is the grant's fencing token.
	Token FencingToken
	// Registration is the contender's registration that holds it.
	Registration *Registration

	held *Assignments
}

// LockType is the node type contenders for lock name register as.
func LockType(name string) string { return "lock." + name }

// AcquireLock waits (within ctx) until lock name is this contender's; addr is the
// contender's own address (who holds the lock, as others see it) and metadata its
// registration's (an election's proposal, say). The lock is made when missing, which
// needs the admin role where roles apply.
func (c *Client) AcquireLock(ctx context.Context, name, addr, metadata string) (*Lock, error) {
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return nil, fmt.Errorf("beacon: `%s` is not a lock name: use characters from A-Z a-z 0-9 . _ -", name)
	}
	if err := c.ensureLock(ctx, name); err != nil {
		return nil, err
	}
	reg, err := c.Register(ctx, LockType(name), addr, RegisterOptions{Metadata: metadata})
	if err != nil {
		return nil, err
	}
	held, err := c.Assignments(ctx, reg)
	if err != nil {
		reg.Close(ctx)
		return nil, err
	}
	lock := &Lock{Name: name, Registration: reg, held: held}
	for {
		if s := held.Slots()[name]; s != nil {
			lock.Token = FencingToken{s.GetTerm(), s.GetIndex()}
			return lock, nil
		}
		e, err := held.Next(ctx)
		if err != nil {
			lock.Release(context.Background())
			return nil, err
		}
		if e.Kind == AssignmentsLost {
			lock.Release(context.Background())
			return nil, &Error{Reason: "NO_LEASE", Message: "the contender's lease was lost while waiting: " + reg.LostReason()}
		}
	}
}

// ensureLock makes sure lock name exists as a one-slot group of its lock type.
func (c *Client) ensureLock(ctx context.Context, name string) error {
	req := &assignpb.GroupsRequest{Name: name}
	reply, err := call(ctx, c, 0, func(ctx context.Context, conn *grpc.ClientConn) (*assignpb.GroupsReply, error) {
		return assignpb.NewAssignmentsClient(conn).Groups(ctx, req)
	})
	if err != nil {
		return err
	}
	for _, v := range reply.GetGroups() {
		g := v.GetGroup()
		if g.GetName() != name {
			continue
		}
		if g.GetNodeType() == LockType(name) && len(g.GetSlots()) == 1 {
			return nil
		}
		return fmt.Errorf("beacon: slot group `%s` exists with node type %s and %d slots: it is not lock `%s`",
			name, g.GetNodeType(), len(g.GetSlots()), name)
	}
	_, err = c.CreateSlotGroup(ctx, name, LockType(name), 1)
	if errors.Is(err, ErrAlreadyExists) {
		// Made by another contender meanwhile, or a group of that name that is no lock.
		return c.ensureLock(ctx, name)
	}
	return err
}

// Lost waits until the lock is lost (its lease ran out, or the slot was taken away) and
// says why: stop acting as its holder at once.
func (l *Lock) Lost(ctx context.Context) (string, error) {
	for {
		e, err := l.held.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return "", err
			}
			return err.Error(), nil
		}
		switch {
		case e.Kind == SlotGone && e.Slot.GetGroup() == l.Name:
			return "the lock was taken away", nil
		case e.Kind == AssignmentsLost:
			return "the lease was lost: " + l.Registration.LostReason(), nil
		}
	}
}

// Release lets the lock go: the next contender in line gets it at once.
func (l *Lock) Release(ctx context.Context) error {
	l.held.Close()
	return l.Registration.Close(ctx)
}

package beacon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// SnowflakeEpochMs is the epoch of snowflake IDs: 2024-01-01T00:00:00Z, as beacon's Rust
// and Python clients and nebcli use.
const SnowflakeEpochMs = 1_704_067_200_000

// Snowflake layout: 1 sign bit, 41 bits of milliseconds since the epoch, 10 of worker (the
// node ID), 12 of sequence.
const (
	snowflakeWorkerBits = 10
	snowflakeSeqBits    = 12
)

// Snowflake makes time-ordered 64-bit IDs locally on a registration's node ID, never
// repeated: it generates only while the lease holds, never past the timestamp the leader
// committed for it (the registration is made with RegisterOptions.Snowflake, so its
// reports reserve time ahead), and never before the previous holder of the node ID stopped
// (ClockFloorMs). A clock that steps back by up to MaxBackward is waited out.
type Snowflake struct {
	reg *Registration
	// MaxBackward is how far back the clock may step and be waited out (default 5 ms).
	MaxBackward time.Duration

	mu     sync.Mutex
	lastMs uint64
	seq    uint64
}

// NewSnowflake makes a generator on reg.
func NewSnowflake(reg *Registration) (*Snowflake, error) {
	if reg.NodeID >= 1<<snowflakeWorkerBits {
		return nil, fmt.Errorf("beacon: node ID %d does not fit %d worker bits", reg.NodeID, snowflakeWorkerBits)
	}
	if !reg.snowflake {
		return nil, fmt.Errorf("beacon: register with RegisterOptions.Snowflake, so that reports reserve time")
	}
	return &Snowflake{
		reg:         reg,
		MaxBackward: 5 * time.Millisecond,
		lastMs:      reg.ClockFloorMs,
		// The first ID moves past the floor's millisecond.
		seq: 1<<snowflakeSeqBits - 1,
	}, nil
}

// Next is the next ID. It waits (within ctx) for the keep-alive's next reservation when
// the clock has run past the last one.
func (s *Snowflake) Next(ctx context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if !s.reg.Holds() {
			why := s.reg.LostReason()
			if why == "" {
				why = "the lease is unconfirmed"
			}
			return 0, &Error{Status: codes.FailedPrecondition, Reason: "NO_LEASE",
				Message: fmt.Sprintf("node ID %d is not held: %s", s.reg.NodeID, why)}
		}
		now := uint64(time.Now().UnixMilli())
		var wait time.Duration
		switch {
		case now < s.lastMs:
			back := time.Duration(s.lastMs-now) * time.Millisecond
			if back > s.MaxBackward {
				return 0, &Error{Status: codes.FailedPrecondition, Message: fmt.Sprintf(
					"the clock stepped back %v, more than %v: refusing rather than repeating IDs", back, s.MaxBackward)}
			}
			wait = back
		case now == s.lastMs && s.seq >= 1<<snowflakeSeqBits-1:
			wait = 200 * time.Microsecond
		case now > s.reg.reservedMs():
			// Past what the leader committed: wait for the next report's reservation.
			wait = 5 * time.Millisecond
		default:
			if now == s.lastMs {
				s.seq++
			} else {
				s.seq = 0
			}
			s.lastMs = now
			return (now-SnowflakeEpochMs)<<(snowflakeWorkerBits+snowflakeSeqBits) |
				uint64(s.reg.NodeID)<<snowflakeSeqBits | s.seq, nil
		}
		if err := sleep(ctx, wait); err != nil {
			return 0, err
		}
	}
}

// DecodeSnowflake gives an ID's time (ms since the Unix epoch), worker and sequence.
func DecodeSnowflake(id uint64) (ms uint64, worker uint32, seq uint32) {
	ms = id>>(snowflakeWorkerBits+snowflakeSeqBits) + SnowflakeEpochMs
	worker = uint32(id>>snowflakeSeqBits) & (1<<snowflakeWorkerBits - 1)
	seq = uint32(id) & (1<<snowflakeSeqBits - 1)
	return
}

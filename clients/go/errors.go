package beacon

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The kinds of refusal, for [errors.Is]. An [*Error] is its gRPC status's kind, and the
// more precise kind its beacon reason names (a NO_LEASE refusal is both [ErrLeaseLost] and
// [ErrFailedPrecondition]).
var (
	// ErrUnavailable: no beacon could answer now (no leader, no majority, none reachable).
	ErrUnavailable = errors.New("beacon: unavailable")
	// ErrNotLeader: the beacon asked does not lead. Calls follow the leader by themselves;
	// this reaches the caller only when no leader was found within RetryFor.
	ErrNotLeader = errors.New("beacon: not the leader")
	// ErrNotFound: what the call names does not exist (a sequence, queue, task, resource).
	ErrNotFound = errors.New("beacon: not found")
	// ErrAlreadyExists: something of that name exists with other settings.
	ErrAlreadyExists = errors.New("beacon: already exists")
	// ErrFailedPrecondition: the call does not fit the state (a stale fencing token, a
	// finished task, a config revision that moved on).
	ErrFailedPrecondition = errors.New("beacon: failed precondition")
	// ErrLeaseLost: the registration no longer holds its node ID (NO_LEASE, NOT_HOLDER, or
	// no beacon confirmed its lease for a whole lease): stop using the ID.
	ErrLeaseLost = errors.New("beacon: lease lost")
	// ErrResourceExhausted: a limit was reached (every node ID in use, too many sequences).
	ErrResourceExhausted = errors.New("beacon: resource exhausted")
	// ErrTooLarge: a message or value over a size limit (FRAME_TOO_LARGE, TOO_LARGE,
	// CONFIG_TOO_LARGE); sending it again never helps.
	ErrTooLarge = errors.New("beacon: too large")
	// ErrBusy: the beacon is over its limits; [Error.RetryAfter] says when to come back.
	// Calls retry it by themselves within RetryFor.
	ErrBusy = errors.New("beacon: busy")
	// ErrAborted: a compare-and-swap lost (a slot claimed at a version that moved on).
	ErrAborted = errors.New("beacon: aborted")
	// ErrInvalidArgument: the request itself is wrong (a bad address, name or size).
	ErrInvalidArgument = errors.New("beacon: invalid argument")
	// ErrUnauthenticated: no credential, or one the cluster does not know.
	ErrUnauthenticated = errors.New("beacon: unauthenticated")
	// ErrPermissionDenied: the identity's role may not do this.
	ErrPermissionDenied = errors.New("beacon: permission denied")
	// ErrDeadlineExceeded: no answer in time; a write may or may not have taken effect.
	ErrDeadlineExceeded = errors.New("beacon: deadline exceeded")
	// ErrCompacted: a watch asked to resume from a log index older than the beacons keep
	// changes for. Watches list again by themselves.
	ErrCompacted = errors.New("beacon: compacted")
)

// Error is a call a beacon refused, or that could not reach one.
type Error struct {
	// Status is the gRPC status code.
	Status codes.Code
	// Reason is beacon's own reason (NOT_LEADER, NO_QUORUM, BUSY, NO_LEASE, ...), empty when
	// the refusal did not come from a beacon (the connection failed).
	Reason string
	// Code is beacon's numeric error code (0 without one).
	Code int
	// Leader is the leader's address when the beacon named it.
	Leader string
	// RetryAfter is how long a BUSY beacon asked the caller to wait.
	RetryAfter time.Duration
	// Message says what and where.
	Message string
	// Beacon is the address the call went to, when known.
	Beacon string
}

func (e *Error) Error() string {
	what := e.Reason
	if what == "" {
		what = strings.ToUpper(e.Status.String())
	}
	if e.Beacon != "" {
		return fmt.Sprintf("beacon at %s: %s: %s", e.Beacon, what, e.Message)
	}
	return fmt.Sprintf("beacon: %s: %s", what, e.Message)
}

var byReason = map[string]error{
	"NOT_LEADER":       ErrNotLeader,
	"NO_LEASE":         ErrLeaseLost,
	"NOT_HOLDER":       ErrLeaseLost,
	"FRAME_TOO_LARGE":  ErrTooLarge,
	"TOO_LARGE":        ErrTooLarge,
	"CONFIG_TOO_LARGE": ErrTooLarge,
	"COMPACTED":        ErrCompacted,
	"BUSY":             ErrBusy,
}

var byStatus = map[codes.Code]error{
	codes.Unavailable:        ErrUnavailable,
	codes.NotFound:           ErrNotFound,
	codes.AlreadyExists:      ErrAlreadyExists,
	codes.FailedPrecondition: ErrFailedPrecondition,
	codes.ResourceExhausted:  ErrResourceExhausted,
	codes.Aborted:            ErrAborted,
	codes.InvalidArgument:    ErrInvalidArgument,
	codes.Unauthenticated:    ErrUnauthenticated,
	codes.PermissionDenied:   ErrPermissionDenied,
	codes.DeadlineExceeded:   ErrDeadlineExceeded,
}

// Is reports whether e is of kind target (one of the Err values of this package).
func (e *Error) Is(target error) bool {
	if k, ok := byReason[e.Reason]; ok && k == target {
		return true
	}
	if k, ok := byStatus[e.Status]; ok && k == target {
		return true
	}
	return false
}

// retryable: worth trying again elsewhere or later (every beacon write is safe to retry).
func (e *Error) retryable() bool {
	switch e.Reason {
	case "NOT_LEADER", "NO_QUORUM", "LEADER_CHANGED", "UNAVAILABLE", "BUSY":
		return true
	case "":
		return e.Status == codes.Unavailable
	}
	return false
}

// silent: the beacon gave no answer in time (the attempt's deadline passed, or its
// connection's pings went unanswered).
func (e *Error) silent() bool {
	if e.Status == codes.DeadlineExceeded {
		return true
	}
	text := strings.ToLower(e.Message)
	return e.Status == codes.Unavailable && e.Reason == "" &&
		(strings.Contains(text, "keepalive") || strings.Contains(text, "ping timeout") ||
			strings.Contains(text, "timeout") || strings.Contains(text, "timed out"))
}

// refused: nothing listens at the address.
func (e *Error) refused() bool {
	return e.Status == codes.Unavailable && e.Reason == "" &&
		strings.Contains(strings.ToLower(e.Message), "connection refused")
}

// errorOf is the typed error of a failed call to beacon `at`; nil stays nil, and an error
// that is already an [*Error] (or a context's) is returned as it is.
func errorOf(err error, at string) error {
	if err == nil {
		return nil
	}
	var typed *Error
	if errors.As(err, &typed) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Status: st.Code(), Message: st.Message(), Beacon: at}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != "beacon" {
			continue
		}
		e.Reason = info.GetReason()
		e.Code, _ = strconv.Atoi(info.GetMetadata()["code"])
		e.Leader = info.GetMetadata()["leader"]
		if ms, err := strconv.Atoi(info.GetMetadata()["retry_after_ms"]); err == nil {
			e.RetryAfter = time.Duration(ms) * time.Millisecond
		}
	}
	return e
}

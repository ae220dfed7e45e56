"""Typed errors: every refusal from a beacon is a BeaconError carrying beacon's own code
(`reason`, e.g. "NO_QUORUM", and `beacon_code`, e.g. 18) besides the gRPC status code."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

# Reasons worth retrying elsewhere or later: the cluster is electing, cannot reach a
# majority, or leadership moved during the call. Every beacon write is safe to retry.
RETRYABLE = {"NOT_LEADER", "NO_QUORUM", "LEADER_CHANGED", "UNAVAILABLE", "BUSY"}


class BeaconError(Exception):
    """A call a beacon refused, or that could not reach one."""

    def __init__(self, message: str, status: grpc.StatusCode | None = None,
                 reason: str = "", beacon_code: int = 0, leader: str = "",
                 retry_after_ms: int = 0):
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.beacon_code = beacon_code
        self.leader = leader
        self.retry_after_ms = retry_after_ms

    @property
    def retryable(self) -> bool:
        if self.reason:
            return self.reason in RETRYABLE
        return self.status in (grpc.StatusCode.UNAVAILABLE, None)

    def __str__(self) -> str:
        what = self.reason or (self.status.name if self.status else "UNREACHABLE")
        return f"{what}: {self.message}"


class Unavailable(BeaconError):
    """No beacon could answer now (no leader, no majority, none reachable): retry later."""


class NotFound(BeaconError):
    """What the call names does not exist (a sequence, queue, task, resource, group)."""


class AlreadyExists(BeaconError):
    """Something of that name exists with other settings."""


class FailedPrecondition(BeaconError):
    """The call does not fit the state: a stale fencing token, a finished task."""


class LeaseLost(FailedPrecondition):
    """The registration named no longer holds its node ID (NO_LEASE, NOT_HOLDER): stop
    using the ID."""


class ResourceExhausted(BeaconError):
    """A limit was reached (every node ID in use, too many sequences, ...)."""


class TooLarge(ResourceExhausted):
    """A message or value over a size limit (reasons FRAME_TOO_LARGE: a whole message over
    the beacons' `max_frame_bytes`; TOO_LARGE: a task payload or result over
    `tasks.max_payload_bytes`; CONFIG_TOO_LARGE: a config value over
    `configs.max_value_bytes`). The message names the limit; sending it again never helps."""


class Busy(ResourceExhausted):
    """The beacon is over its limits (reason BUSY: too much under way at once, from this
    client or from all): retry after `retry_after_ms`, with jitter. The client does so by
    itself within `retry_for`."""


class Aborted(BeaconError):
    """A compare-and-swap lost (a slot claimed at a version that moved on): read and retry."""


class InvalidArgument(BeaconError):
    """The request itself is wrong (a bad address, name or size)."""


class Unauthenticated(BeaconError):
    """No credential, or one the cluster does not know."""


class PermissionDenied(BeaconError):
    """The identity's role may not do this."""


class DeadlineExceeded(BeaconError):
    """No answer within the call's timeout; a write may or may not have taken effect."""


class Compacted(BeaconError):
    """A watch asked to resume from a log index older than the beacon keeps changes for
    (reason COMPACTED; the message names the oldest): list again and watch from there."""


_BY_STATUS = {
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}

# Refusals told apart by beacon's own reason, whatever their gRPC status.
_BY_REASON = {
    "NO_LEASE": LeaseLost,
    "NOT_HOLDER": LeaseLost,
    "FRAME_TOO_LARGE": TooLarge,
    "TOO_LARGE": TooLarge,
    "CONFIG_TOO_LARGE": TooLarge,
    "COMPACTED": Compacted,
    "BUSY": Busy,
}


def from_rpc_error(error: grpc.RpcError) -> BeaconError:
    """The typed error of a failed call."""
    status = error.code() if hasattr(error, "code") else None
    message = error.details() if hasattr(error, "details") else str(error)
    reason, code, leader, retry_after_ms = "", 0, "", 0
    try:
        rich = rpc_status.from_call(error)
    except Exception:  # a status without details, or details that do not parse
        rich = None
    if rich is not None:
        for detail in rich.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Is(info.DESCRIPTOR) and detail.Unpack(info) and info.domain == "beacon":
                reason = info.reason
                code = int(info.metadata.get("code", "0"))
                leader = info.metadata.get("leader", "")
                retry_after_ms = int(info.metadata.get("retry_after_ms", "0") or 0)
    cls = _BY_REASON.get(reason) or _BY_STATUS.get(status, BeaconError)
    return cls(message or "", status, reason, code, leader, retry_after_ms)


def silent(err: BeaconError) -> bool:
    """Whether `err` says the beacon gave no answer in time: the attempt's deadline passed,
    or its connection's pings went unanswered (grpc then fails the call UNAVAILABLE with
    `keepalive watchdog timeout` or `ping timeout`)."""
    if err.status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return True
    text = err.message.lower()
    return (err.status == grpc.StatusCode.UNAVAILABLE and not err.reason
            and any(w in text for w in ("keepalive", "ping timeout", "timeout", "timed out")))


def connection_refused(err: BeaconError) -> bool:
    """Whether `err` says nothing listens at the address (the connection was refused, not
    lost or timed out)."""
    return (err.status == grpc.StatusCode.UNAVAILABLE and not err.reason
            and "connection refused" in err.message.lower())


def from_reply(reply) -> BeaconError:
    """The typed error of an ErrorReply carried in a stream (a refused report)."""
    return BeaconError(reply.msg, None, "", reply.code, reply.leader)

"""One registered service, as listings and watches both give it."""

from __future__ import annotations

import json

from ._pb import registry_pb2

# The wire's health statuses by name, and back.
STATUSES = {
    "passing": registry_pb2.HEALTH_PASSING,
    "warning": registry_pb2.HEALTH_WARNING,
    "critical": registry_pb2.HEALTH_CRITICAL,
}
STATUS_NAMES = {v: k for k, v in STATUSES.items()}

# What listings and watches may keep, by health.
FILTERS = {
    "any": registry_pb2.FILTER_ANY,
    "serving": registry_pb2.FILTER_SERVING,
    "passing": registry_pb2.FILTER_PASSING,
    "warning": registry_pb2.FILTER_WARNING,
    "critical": registry_pb2.FILTER_CRITICAL,
    "draining": registry_pb2.FILTER_DRAINING,
}


def status_of(name: str) -> int:
    """The wire's status for `name` (`passing`, `warning`, `critical`); ValueError else."""
    try:
        return STATUSES[name.lower()]
    except KeyError:
        raise ValueError(f"health status {name!r}: give passing, warning or critical") from None


def filter_of(name: str) -> int:
    """The wire's health filter for `name`; ValueError for another."""
    try:
        return FILTERS[name.lower()]
    except KeyError:
        raise ValueError(
            f"health filter {name!r}: give one of {', '.join(FILTERS)}") from None


class Node:
    """A registered service: the same type from `Client.nodes()` and from `Client.watch()`.

    Its registration's fields are attributes: `node_id`, `node_type`, `addr`,
    `access_addr`, `worker_num`, `metadata` (the JSON text; `meta` parses it),
    `registered_ms`, `term` and `index` (the `fencing_token`), `owner`, `health` (the
    message; `status`, `draining` and `serving` read it). A listing also
    says `is_online` (False while an expired ID is in quarantine), `last_seen_ms`,
    `quarantine_ms` and the latest load `report`; from a watch, which tells only live
    registrations, `is_online` is True and the others are None. `info` is the protobuf
    message itself (`registry_pb2.NodeInfo`)."""

    __slots__ = ("info", "is_online", "last_seen_ms", "quarantine_ms", "report")

    def __init__(self, info, *, is_online: bool = True, last_seen_ms: int | None = None,
                 quarantine_ms: int | None = None, report=None):
        self.info = info
        self.is_online = is_online
        self.last_seen_ms = last_seen_ms
        self.quarantine_ms = quarantine_ms
        self.report = report

    @classmethod
    def of_entry(cls, entry) -> "Node":
        """A listing's `NodeEntry`."""
        return cls(
            entry.node,
            is_online=entry.is_online,
            last_seen_ms=entry.last_seen_ms if entry.HasField("last_seen_ms") else None,
            quarantine_ms=entry.quarantine_ms if entry.HasField("quarantine_ms") else None,
            report=entry.report if entry.HasField("report") else None,
        )

    def __getattr__(self, name: str):
        # Only reached for names that are not slots: the registration's own fields.
        return getattr(self.info, name)

    @property
    def fencing_token(self) -> tuple[int, int]:
        return (self.info.term, self.info.index)

    @property
    def status(self) -> str:
        """`passing`, `warning` or `critical` (passing when nothing was said)."""
        return STATUS_NAMES.get(self.info.health.status, f"status {self.info.health.status}")

    @property
    def draining(self) -> bool:
        """Whether an operator took it out of rotation (maintenance)."""
        return self.info.health.draining

    @property
    def serving(self) -> bool:
        """In rotation: passing or warning, not draining (what discovery gives by default)."""
        return self.status != "critical" and not self.draining

    @property
    def meta(self) -> dict:
        """The metadata, parsed (`{}` when there is none)."""
        return json.loads(self.info.metadata) if self.info.metadata else {}

    def __eq__(self, other) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return (self.info, self.is_online) == (other.info, other.is_online)

    def __hash__(self) -> int:
        return hash((self.info.node_id, self.info.term, self.info.index))

    def __repr__(self) -> str:
        state = "" if self.is_online else ", offline"
        if self.is_online and not (self.status == "passing" and not self.draining):
            state = f", {self.status}" + (", draining" if self.draining else "")
        return (f"Node({self.info.node_id}, {self.info.node_type} at {self.info.addr}"
                f"{state})")

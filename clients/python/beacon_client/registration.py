"""A registration kept alive in the background over the `KeepAlive` stream.

The lease is trusted only as far as a beacon confirmed it: each report's reply extends it to
one lease after the report was *sent*, so the service gives its ID up no later than the
leader does. A report unanswered for a quarter of the lease (the beacon stopped, or the
leader behind it did) ends the stream there: the beacon is tried last for a while and the
reports go on through the next one, so a hung beacon costs a lease nothing. A beacon that
answers LEADER_CHANGED (the leader it relayed to stopped leading) is asked again at once: it
knows the next leader, or leads itself. The lease is lost when the leader says the registration is gone (NO_LEASE,
NOT_HOLDER), or when no beacon has confirmed it for a whole lease (the cluster unreachable,
its leader stopped): `lost` is set and `on_lost(why)` called, once."""

from __future__ import annotations

import collections
import threading
import time
from typing import Callable

import grpc

from . import errors
from ._pb import registry_pb2


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Registration:
    def __init__(self, client, reply, request, *, on_lost: Callable[[str], None] | None = None,
                 snowflake: bool = False):
        node = reply.node
        self.client = client
        self.node_id: int = node.node_id
        self.node_type: str = node.node_type
        self.addr: str = node.addr
        self.fencing_token: tuple[int, int] = (node.term, node.index)
        self.lease_ms: int = reply.lease_ms
        self.warnings = list(reply.warnings)
        # Snowflake IDs: generate only after clock_floor_ms, and never past what a report
        # reserved and the leader committed.
        self.clock_floor_ms: int = reply.clock_floor_ms
        self.id_range = (reply.id_first, reply.id_last)
        self._snowflake = snowflake
        self._reserved_ms = 0
        self.lost = threading.Event()
        self.lost_reason: str = ""
        self._on_lost = on_lost
        # What else follows this lease (an assignments watch), told when it is lost.
        self._lost_listeners: list[Callable[[], None]] = []
        self._stop = threading.Event()
        # The health the service's checks found (wire status, note), once it says; a change
        # wakes the keep-alive to report at once.
        self._health: tuple[int, str] | None = None
        self._kick = threading.Event()
        self._checkers: list = []
        self._lock = threading.Lock()
        self._confirmed_until = time.monotonic() + self.lease_ms / 1000
        self._interval = self.lease_ms / 4000
        # How long one report may wait for its answer at one beacon.
        self._attempt = max(self.lease_ms / 4000, 0.05)
        self._thread = threading.Thread(
            target=self._run, name=f"beacon-keepalive-{self.node_id}", daemon=True)
        self._thread.start()

    # -- what the service asks -----------------------------------------------------------

    @property
    def confirmed_until(self) -> float:
        """Until when (time.monotonic()) the lease is known to hold."""
        with self._lock:
            return self._confirmed_until

    def holds(self) -> bool:
        """Whether the lease is known to hold now: check before each use of the ID if the
        service must never use it past its lease."""
        return not self.lost.is_set() and time.monotonic() < self.confirmed_until

    def reserved_ms(self) -> int:
        """The highest timestamp a snowflake generator on this registration may use."""
        with self._lock:
            return self._reserved_ms

    def set_health(self, status: str, note: str = "") -> None:
        """Sets the health every report carries from now on (`passing`, `warning` or
        `critical`, with why), and reports at once: what the service's own checks find. The
        leader writes it only when the status changes; discovery leaves a critical service
        out. An operator's drain stays the operator's."""
        from .nodes import status_of
        with self._lock:
            self._health = (status_of(status), note)
        self._kick.set()

    def run_checks(self, checks: list, *, interval: float = 1.0, threshold: int = 3):
        """Runs `checks` (`TcpCheck`, `HttpCheck`, `GrpcCheck`, `CallbackCheck`) every
        `interval` seconds beside the service and reports the worst of their statuses as its
        health once it has held for `threshold` rounds in a row (so one slow answer does not
        take the service out of discovery). Returns the `Checker`; `close()` stops it."""
        from .checks import Checker
        checker = Checker(checks, self.set_health, interval=interval, threshold=threshold)
        self._checkers.append(checker)
        return checker

    def config(self) -> "ConfigWatch":
        """This service's configuration (see `Client.service_config`): its effective
        settings at once, then each change."""
        return self.client.service_config(self.node_type, self.addr, self.node_id)

    def close(self, *, release: bool = True, last_clock_ms: int = 0) -> None:
        """Stops the keep-alive and ends the registration: with `release`, the ID is free at
        once (the service has stopped using it)."""
        for checker in self._checkers:
            checker.stop()
        self._stop.set()
        self._kick.set()
        self._thread.join(timeout=self.lease_ms / 1000 + 1)
        if self.lost.is_set():
            return
        request = registry_pb2.UnregisterRequest(
            node_id=self.node_id, addr=self.addr, term=self.fencing_token[0],
            index=self.fencing_token[1], release=release, clock_ms=last_clock_ms)
        try:
            self.client.call("registry", "Unregister", request, retry_for=self.lease_ms / 1000)
        except errors.LeaseLost:
            pass

    def __enter__(self) -> "Registration":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the keep-alive ------------------------------------------------------------------

    def _when_lost(self, listener: Callable[[], None]) -> None:
        """Calls `listener` once the lease is lost (at once if it already is)."""
        with self._lock:
            if not self.lost.is_set():
                self._lost_listeners.append(listener)
                return
        listener()

    def _lose(self, why: str) -> None:
        with self._lock:
            if self.lost.is_set():
                return
            self.lost_reason = why
            self.lost.set()
            listeners, self._lost_listeners = self._lost_listeners, []
        for listener in listeners:
            listener()
        if self._on_lost is not None:
            try:
                self._on_lost(why)
            except Exception:  # a callback's failure is the service's, not ours
                pass

    def _report(self) -> registry_pb2.NodeReport:
        report = registry_pb2.NodeReport(
            node_id=self.node_id, addr=self.addr, term=self.fencing_token[0],
            index=self.fencing_token[1])
        with self._lock:
            health = self._health
        if health is not None:
            # Cut to what a beacon takes (256 bytes): a report refused for its note would
            # not renew the lease.
            status, note = health
            report.health = status
            report.health_note = note.encode()[:256].decode(errors="ignore")
        if self._snowflake:
            # Two report intervals ahead: generation stops on its own within two missed
            # reports, well inside the lease.
            report.clock_ms = wall_ms() + int(2 * self._interval * 1000)
        return report

    def _run(self) -> None:
        pause = 0.01
        # Whether the last stream ended on LEADER_CHANGED from its beacon, taken there again.
        again = False
        while not self._stop.is_set() and not self.lost.is_set():
            sent: collections.deque[float] = collections.deque()
            holder: list = []
            unanswered = threading.Event()
            beacon = self.client.current

            def requests():
                scheduled = False
                while not self._stop.is_set() and not self.lost.is_set():
                    if time.monotonic() >= self.confirmed_until:
                        self._lose(
                            f"no beacon confirmed the lease for a whole lease ({self.lease_ms} ms)")
                        break
                    now = time.monotonic()
                    sent.append(now)
                    report = self._report()
                    # On schedule with over half the lease left (a retry comes a report
                    # later): the answer may wait for the leader's next heartbeat.
                    report.routine = (scheduled and not report.clock_ms
                                      and self.confirmed_until - now > self.lease_ms / 2000)
                    yield report
                    # Until the next report, watch that this one is answered in time.
                    scheduled = True
                    while not self._stop.is_set() and time.monotonic() < now + self._interval:
                        if sent and time.monotonic() - sent[0] > self._attempt:
                            unanswered.set()
                            break
                        if self._kick.is_set():
                            self._kick.clear()
                            scheduled = False
                            break
                        self._kick.wait(min(self._attempt / 4, self._interval))
                    if unanswered.is_set():
                        break
                if holder:
                    holder[0].cancel()

            try:
                stub = self.client.stub("registry")
                call = stub.KeepAlive(requests(), metadata=self.client.metadata)
                holder.append(call)
                for reply in call:
                    at = sent.popleft() if sent else time.monotonic()
                    with self._lock:
                        self._confirmed_until = max(self._confirmed_until,
                                                    at + self.lease_ms / 1000)
                        if reply.clock_ms:
                            self._reserved_ms = max(self._reserved_ms, reply.clock_ms)
                    pause = 0.01
                    again = False
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.CANCELLED and not unanswered.is_set():
                    continue
                err = errors.from_rpc_error(e)
                if isinstance(err, errors.LeaseLost):
                    self._lose(str(err))
                    return
                if err.reason == "LEADER_CHANGED" and not unanswered.is_set() and not again:
                    # The beacon answered: the leader it carried the report to leads no
                    # more. It knows the next one, or leads itself: the same beacon again,
                    # at once (once; a second time, the next one).
                    again = True
                    continue
                if unanswered.is_set() or errors.silent(err):
                    # The beacon (or the leader behind it) stopped answering: the next one
                    # at once, and this one last for a while.
                    self.client.suspect(beacon)
                    self.client.next_beacon()
                    continue
            # The beacon went away or cannot answer now: the next one, after a pause.
            if unanswered.is_set():
                self.client.suspect(beacon)
            self.client.next_beacon()
            self._stop.wait(pause)
            pause = min(pause * 2, self._interval)

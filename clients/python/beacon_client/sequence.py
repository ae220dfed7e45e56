"""Unique numbers: a named sequence through a double buffer of segments (seed 001's
design), and snowflake IDs made locally on a registration's node ID."""

from __future__ import annotations

import threading
import time

from . import errors
from ._pb import sequence_pb2


class Sequence:
    """Numbers of sequence `name`, never handed out twice across the cluster.

    Each segment `[start, end]` comes from the leader, committed before it is answered; the
    next segment is fetched in the background once `prefetch_at` of the current one is used,
    so `next()` is a local increment almost always. If no beacon answers, it keeps serving
    what it holds; only when both segments are used up does `next()` wait, at most
    `wait_for` seconds, then raise `Unavailable`. Safe from any number of threads. `close()`
    hands the unused tail of the last segment back."""

    def __init__(self, client, name: str, *, count: int = 0, prefetch_at: float = 0.2,
                 wait_for: float = 3.0):
        self.client = client
        self.name = name
        self.count = count
        self.prefetch_at = prefetch_at
        self.wait_for = wait_for
        self.fetches = 0
        self.failures = 0
        self.waits = 0
        self._lock = threading.Condition()
        self._current: list[int] | None = None  # [next, end, index]
        self._spare: list[int] | None = None
        self._fetching = False
        self._error: Exception | None = None
        self._fetch_sync()

    def _request(self):
        return sequence_pb2.NextSegment(name=self.name, count=self.count)

    def _segment(self) -> list[int]:
        """The next segment: `[next, end, index, first]`."""
        reply = self.client.call("sequences", "Next", self._request())
        s = reply.segment
        return [s.start, s.end, s.index, s.start]

    def _fetch_sync(self) -> None:
        segment = self._segment()
        with self._lock:
            self.fetches += 1
            self._current = segment

    def _prefetch(self) -> None:
        try:
            segment = self._segment()
        except Exception as e:  # kept until both buffers run dry
            with self._lock:
                self.failures += 1
                self._error = e
                self._fetching = False
                self._lock.notify_all()
            return
        with self._lock:
            self.fetches += 1
            self._spare = segment
            self._error = None
            self._fetching = False
            self._lock.notify_all()

    def _start_fetch(self) -> None:
        self._fetching = True
        threading.Thread(target=self._prefetch, name="beacon-sequence", daemon=True).start()

    def next(self) -> int:
        """The next number."""
        deadline = None
        with self._lock:
            while True:
                cur = self._current
                if cur is not None and cur[0] <= cur[1]:
                    n = cur[0]
                    cur[0] += 1
                    used = cur[0] - cur[3]
                    size = cur[1] - cur[3] + 1
                    if (self._spare is None and not self._fetching
                            and used >= self.prefetch_at * size):
                        self._start_fetch()
                    return n
                if self._spare is not None:
                    self._current, self._spare = self._spare, None
                    continue
                if not self._fetching:
                    self._start_fetch()
                if deadline is None:
                    self.waits += 1
                    deadline = time.monotonic() + self.wait_for
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.Unavailable(
                        f"both segments of sequence `{self.name}` are used up and no new one "
                        f"came within {self.wait_for} s: {self._error}")
                self._lock.wait(left)

    def close(self) -> None:
        """Hands back the unused tail of the last segment (accepted while it is the
        sequence's last), so a restart burns no numbers."""
        with self._lock:
            tail = self._spare or self._current
            self._current = self._spare = None
        if tail is None or tail[0] > tail[1]:
            return
        try:
            self.client.call("sequences", "GiveBack", sequence_pb2.GiveBack(
                name=self.name, start=tail[0], end=tail[1], index=tail[2]), retry_for=1.0)
        except errors.BeaconError:
            pass  # not the last segment any more, or nobody answers: the tail is burnt


# Snowflake IDs: 1 sign bit, 41 bits of milliseconds since EPOCH_MS, 10 bits of worker (the
# node ID), 12 bits of sequence: the layout beacon's Rust client and nebcli use.
EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def decode(snowflake: int, layout: tuple[int, int, int] = (41, 10, 12),
           epoch_ms: int = EPOCH_MS) -> dict:
    """The time (ms since the Unix epoch), worker and sequence of a snowflake ID."""
    _, worker_bits, seq_bits = layout
    return {
        "ms": (snowflake >> (worker_bits + seq_bits)) + epoch_ms,
        "worker": (snowflake >> seq_bits) & ((1 << worker_bits) - 1),
        "sequence": snowflake & ((1 << seq_bits) - 1),
    }


class Snowflake:
    """Time-ordered 64-bit IDs made locally on a registration's node ID, never repeated:
    it generates only while the lease holds, never past the timestamp the leader committed
    for it (the registration must be made with `snowflake=True`, so its reports reserve
    time ahead), and never before the previous holder of the node ID stopped
    (`clock_floor_ms`). A clock that steps back by up to `max_backward_ms` is waited out."""

    def __init__(self, registration, *, layout: tuple[int, int, int] = (41, 10, 12),
                 epoch_ms: int = EPOCH_MS, max_backward_ms: int = 5):
        time_bits, worker_bits, seq_bits = layout
        if time_bits + worker_bits + seq_bits != 63:
            raise ValueError("a layout's bits add up to 63 (41,10,12 by default)")
        if registration.node_id >= 1 << worker_bits:
            raise ValueError(
                f"node ID {registration.node_id} does not fit {worker_bits} worker bits")
        if not registration._snowflake:
            raise ValueError("register with snowflake=True, so that reports reserve time")
        self.registration = registration
        self.layout = layout
        self.epoch_ms = epoch_ms
        self.max_backward_ms = max_backward_ms
        self._lock = threading.Lock()
        self._last_ms = max(registration.clock_floor_ms, 0)
        self._seq = (1 << seq_bits) - 1  # the first ID moves past the floor's millisecond

    @property
    def last_ms(self) -> int:
        return self._last_ms

    def next_id(self, wait_for: float = 3.0) -> int:
        _, worker_bits, seq_bits = self.layout
        deadline = time.monotonic() + wait_for
        with self._lock:
            while True:
                if not self.registration.holds():
                    raise errors.LeaseLost(
                        f"node ID {self.registration.node_id} is not held: "
                        f"{self.registration.lost_reason or 'the lease is unconfirmed'}")
                now = time.time_ns() // 1_000_000
                if now < self._last_ms:
                    if self._last_ms - now > self.max_backward_ms:
                        raise errors.BeaconError(
                            f"the clock stepped back {self._last_ms - now} ms, more than "
                            f"{self.max_backward_ms} ms: refusing rather than repeating IDs")
                    time.sleep((self._last_ms - now) / 1000)
                    continue
                if now == self._last_ms and self._seq >= (1 << seq_bits) - 1:
                    time.sleep(0.0002)
                    continue
                if now > self.registration.reserved_ms():
                    # Past what the leader committed: wait for the next report's reservation.
                    if time.monotonic() > deadline:
                        raise errors.Unavailable(
                            "no clock reservation confirmed by the leader: snowflake IDs wait "
                            "for the keep-alive")
                    time.sleep(0.005)
                    continue
                self._seq = self._seq + 1 if now == self._last_ms else 0
                self._last_ms = now
                return ((now - self.epoch_ms) << (worker_bits + seq_bits)) | (
                    self.registration.node_id << seq_bits) | self._seq

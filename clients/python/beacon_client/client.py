"""The connection to a beacon cluster: a list of beacons, any of which takes any call (a
follower relays what only the leader can answer), with failover to the next on a beacon
that is down or cannot answer now."""

from __future__ import annotations

import random
import threading
import time
from typing import Callable, Iterable, Sequence as Seq, TypeVar

import grpc

from . import errors
from ._pb import (
    assign_pb2_grpc,
    beacon_pb2,
    beacon_pb2_grpc,
    configs_pb2,
    configs_pb2_grpc,
    registry_pb2,
    registry_pb2_grpc,
    sequence_pb2_grpc,
    tasks_pb2,
    tasks_pb2_grpc,
)

T = TypeVar("T")

# Seconds a beacon that did not answer in time is tried last: longer than an election takes.
SUSPECT_FOR = 5.0

# What this process learned of beacons that did not answer in time: every Client reads and
# writes it, so that one made afresh after a failure does not pay again for what another
# paid to learn. Address -> until when (time.monotonic()) it is tried last.
_SUSPECTS: dict[str, float] = {}
_SUSPECTS_LOCK = threading.Lock()


def suspected(beacon: str) -> bool:
    """Whether `beacon` did not answer in time lately (any client of this process saw it)."""
    with _SUSPECTS_LOCK:
        return _SUSPECTS.get(beacon, 0.0) > time.monotonic()


class _Hung(Exception):
    """An attempt's beacon went silent and did not answer a fresh connection either."""

    def __init__(self, beacon: str, silent: float, probe: float):
        super().__init__(
            f"beacon at {beacon} stopped answering: silent for {silent * 1000:.0f} ms, and a "
            f"fresh connection got no answer within {probe * 1000:.0f} ms")
        self.beacon = beacon


_STUBS = {
    "cluster": beacon_pb2_grpc.ClusterStub,
    "registry": registry_pb2_grpc.RegistryStub,
    "sequences": sequence_pb2_grpc.SequencesStub,
    "assignments": assign_pb2_grpc.AssignmentsStub,
    "tasks": tasks_pb2_grpc.TasksStub,
    "configs": configs_pb2_grpc.ConfigsStub,
}


class Client:
    """A cluster of beacons.

    `beacons` are `host:port` addresses of the client ports. `token` authenticates (sent as
    `authorization: Bearer TOKEN`); `root_certificates` (PEM bytes of the cluster's CA) turns
    TLS on, with `certificate_chain` and `private_key` for a client certificate. `timeout`
    bounds each attempt at one beacon; `retry_for` how long a call keeps trying other
    beacons while the cluster cannot answer (an election, a lost majority, a beacon that
    stopped answering). Every half `ping_interval` a call waits on a silent beacon, it checks
    that the beacon still answers a fresh connection (within another half): one that does
    not is taken for hung, the call moves on to the next beacon at once, and every client of
    the process tries it last for a while (`SUSPECT_FOR` seconds); a slow one is waited for,
    up to `timeout`. So a hung beacon costs a call about one `ping_interval` (1 s by
    default), whatever `timeout` is. A new connection dials the
    next beacon too when the one before has not answered within `attempt_delay` (0.1 s),
    and takes the first to answer (happy eyeballs over beacons): a hung first beacon costs a
    fresh client a tenth of a second. A registration's keep-alive moves on after a quarter
    of its lease without an answer. `consistency` is how fresh reads
    must be: `"linearizable"` (the default: every write acknowledged before the read is in
    its answer, or the call fails) or `"serializable"` (the called beacon's replica as it
    is, at once; sent as `beacon-consistency` metadata).
    """

    def __init__(self, beacons: Seq[str], *, token: str | None = None,
                 root_certificates: bytes | None = None,
                 certificate_chain: bytes | None = None, private_key: bytes | None = None,
                 timeout: float = 5.0, retry_for: float = 10.0,
                 consistency: str = "linearizable", ping_interval: float = 1.0,
                 attempt_delay: float = 0.1):
        if isinstance(beacons, str):
            beacons = [b for b in beacons.split(",") if b]
        if not beacons:
            raise ValueError("give at least one beacon address (host:port)")
        self.beacons = list(beacons)
        self.timeout = timeout
        self.retry_for = retry_for
        self._metadata = [("authorization", f"Bearer {token}")] if token else []
        if consistency not in ("linearizable", "serializable"):
            raise ValueError(
                f"consistency is 'linearizable' or 'serializable', not {consistency!r}")
        if consistency == "serializable":
            self._metadata.append(("beacon-consistency", "serializable"))
        self._credentials = None
        if root_certificates is not None:
            self._credentials = grpc.ssl_channel_credentials(
                root_certificates, private_key, certificate_chain)
        self.ping_interval = ping_interval
        self.attempt_delay = attempt_delay
        ping_ms = max(int(ping_interval * 1000), 50)
        # HTTP/2 PINGs on every connection, with or without calls: a stopped beacon is
        # noticed within two intervals, and its calls fail over instead of waiting out their
        # deadline. beacon's server allows pings at any rate.
        self._options = [
            ("grpc.keepalive_time_ms", ping_ms),
            ("grpc.keepalive_timeout_ms", ping_ms),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            # Reconnect to a beacon that comes back soon, not after grpc's default minute;
            # and give a connection that takes no answer (a stopped beacon accepts, then
            # says nothing) up after a ping interval, not grpc's default 20 s.
            ("grpc.max_reconnect_backoff_ms", 2_000),
            ("grpc.min_reconnect_backoff_ms", ping_ms),
            # A client's connections are its own: grpc would otherwise share one with every
            # client of the process dialling the same beacon, and a client made afresh after
            # a failure would be handed the connection to a hung beacon, still open.
            ("grpc.use_local_subchannel_pool", 1),
        ]
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._current = 0
        # When `connect` last stopped watching a channel's state.
        self._watched_at = 0.0
        # The beacon that last answered a call, and when: while it answered within a ping
        # interval, a call goes straight to it (see `_retrying`).
        self._answered: tuple[str, float] = ("", 0.0)

    # -- connections ---------------------------------------------------------------------

    def channel(self, beacon: str | None = None) -> grpc.Channel:
        """The channel to `beacon` (by default the one in use)."""
        with self._lock:
            beacon = beacon or self.beacons[self._current]
            ch = self._channels.get(beacon)
            if ch is None:
                if self._credentials is None:
                    ch = grpc.insecure_channel(beacon, options=self._options)
                else:
                    ch = grpc.secure_channel(beacon, self._credentials, options=self._options)
                self._channels[beacon] = ch
            return ch

    def stub(self, service: str, beacon: str | None = None):
        """A generated stub (`registry`, `sequences`, `assignments`, `tasks`, `configs`,
        `cluster`) on the beacon in use."""
        return _STUBS[service](self.channel(beacon))

    @property
    def metadata(self) -> list[tuple[str, str]]:
        return list(self._metadata)

    def next_beacon(self) -> str:
        """Moves on to the next beacon of the list (after one failed), passing over those
        that lately did not answer in time unless every one did; returns it."""
        with self._lock:
            n = len(self.beacons)
            for step in range(1, n + 1):
                i = (self._current + step) % n
                if not suspected(self.beacons[i]):
                    self._current = i
                    break
            else:
                self._current = (self._current + 1) % n
            return self.beacons[self._current]

    def suspect(self, beacon: str | None = None) -> None:
        """Notes that `beacon` (by default the one in use) did not answer in time: every
        client of this process tries it last for `SUSPECT_FOR` seconds."""
        with self._lock:
            beacon = beacon or self.beacons[self._current]
        now = time.monotonic()
        with _SUSPECTS_LOCK:
            for b in [b for b, until in _SUSPECTS.items() if until <= now]:
                del _SUSPECTS[b]
            _SUSPECTS[beacon] = now + SUSPECT_FOR

    def _dial_order(self) -> list[str]:
        """The list in order from the beacon in use, those not suspected before those that
        are."""
        with self._lock:
            n = len(self.beacons)
            order = [self.beacons[(self._current + k) % n] for k in range(n)]
        return [b for b in order if not suspected(b)] + [b for b in order if suspected(b)]

    def connect(self, limit: float | None = None) -> str | None:
        """Makes the beacon in use one whose connection is up: the current one if its
        channel is connected, else the first to connect of it and the next ones, each dialled
        `attempt_delay` after the one before, or at once after one fails (happy eyeballs over
        beacons). Waits `limit` at most (`ping_interval` by default) for one to connect, and
        no longer once every one dialled has failed; returns the beacon, or None when none
        connected (the call then goes to the current one and fails as it will)."""
        limit = self.ping_interval if limit is None else limit
        deadline = time.monotonic() + limit
        order = self._dial_order()
        settled = threading.Condition()
        ready: list[str] = []
        failed: set[str] = set()
        watched: list[tuple[grpc.Channel, Callable]] = []

        def watcher(beacon: str):
            def on_state(state: grpc.ChannelConnectivity) -> None:
                with settled:
                    if state == grpc.ChannelConnectivity.READY:
                        ready.append(beacon)
                    elif state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                                   grpc.ChannelConnectivity.SHUTDOWN):
                        failed.add(beacon)
                    else:
                        return
                    settled.notify_all()
            return on_state

        try:
            started = 0
            with settled:
                while not ready:
                    now = time.monotonic()
                    if now >= deadline:
                        break
                    if started < len(order):
                        beacon = order[started]
                        started += 1
                        ch = self.channel(beacon)
                        callback = watcher(beacon)
                        watched.append((ch, callback))
                        settled.release()
                        try:
                            ch.subscribe(callback, try_to_connect=True)
                        finally:
                            settled.acquire()
                        if ready:
                            break
                        # The next beacon after the delay, or at once when every one dialled
                        # so far has failed.
                        wait_until = min(deadline, time.monotonic() + self.attempt_delay)
                        while (not ready and len(failed) < started
                               and time.monotonic() < wait_until):
                            settled.wait(wait_until - time.monotonic())
                        continue
                    if len(failed) >= started:
                        break
                    settled.wait(deadline - now)
        finally:
            for ch, callback in watched:
                ch.unsubscribe(callback)
            with self._lock:
                self._watched_at = time.monotonic()
            # grpc polls a channel for a moment after it is no longer watched, and that poll
            # fails loudly on a channel freed under it (a client dropped without `close`):
            # keep the channels for that moment.
            keep = threading.Timer(0.3, lambda kept=[ch for ch, _ in watched]: kept.clear())
            keep.daemon = True
            keep.start()
        if not ready:
            return None
        with self._lock:
            self._current = self.beacons.index(ready[0]) if ready[0] in self.beacons else self._current
        return ready[0]

    def answers(self, beacon: str, limit: float) -> bool:
        """Whether `beacon` answers a health check on a fresh connection (its own, not the
        shared one in doubt) within `limit`: the liveness probe of a beacon silent on a
        call. Any answer counts, a refusal too; only silence does not."""
        if self._credentials is None:
            ch = grpc.insecure_channel(beacon, options=self._options)
        else:
            ch = grpc.secure_channel(beacon, self._credentials, options=self._options)
        check = ch.unary_unary("/grpc.health.v1.Health/Check")
        try:
            check(b"", timeout=limit, metadata=self._metadata, wait_for_ready=True)
            return True
        except grpc.RpcError as e:
            return e.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED,
                                    grpc.StatusCode.UNAVAILABLE)
        finally:
            ch.close()

    def watched(self, future, beacon: str):
        """The result of call `future` (a grpc future) sent to `beacon`, waited for while the
        beacon answers: after each half `ping_interval` of silence it is probed with a fresh
        connection (`answers`, within another half), and a beacon that does not answer ends
        the wait at once (`_Hung`) instead of at the call's deadline: a hung beacon costs a
        call about one `ping_interval`."""
        started = time.monotonic()
        half = max(self.ping_interval / 2, 0.05)
        while True:
            try:
                return future.result(timeout=half)
            except grpc.FutureTimeoutError:
                if not self.answers(beacon, half):
                    future.cancel()
                    raise _Hung(beacon, time.monotonic() - started, half) from None

    @property
    def current(self) -> str:
        """The beacon calls go to now."""
        with self._lock:
            return self.beacons[self._current]

    def close(self) -> None:
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
            # grpc polls a channel that `connect` watched for a moment after it stops
            # watching, and that poll fails loudly on a channel closed under it: close
            # those once it is done.
            wait = self._watched_at + 0.3 - time.monotonic()

        def close_all() -> None:
            for ch in channels:
                ch.close()
        if wait > 0:
            timer = threading.Timer(wait, close_all)
            timer.daemon = True
            timer.start()
        else:
            close_all()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- calls ---------------------------------------------------------------------------

    def call(self, service: str, method: str, request, *, timeout: float | None = None,
             retry_for: float | None = None):
        """Calls `service.method` with `request`, on the next beacon whenever one cannot
        answer now, until `retry_for` has passed; raises a typed `BeaconError`. Each attempt
        is bounded by `timeout` and by what is left of `retry_for`, and leaves a hung beacon
        within about one `ping_interval` (see `watched`)."""
        def attempt(stub, beacon: str, left: float):
            future = getattr(stub, method).future(
                request, timeout=min(timeout or self.timeout, max(left, 0.05)),
                metadata=self._metadata)
            return self.watched(future, beacon)
        return self._retrying(attempt, service, retry_for)

    def retrying(self, attempt: Callable[[object], T], service: str,
                 retry_for: float | None = None) -> T:
        """Runs `attempt(stub)` with failover, as `call` does."""
        return self._retrying(lambda stub, _beacon, _left: attempt(stub), service, retry_for)

    def _retrying(self, attempt: Callable[[object, str, float], T], service: str,
                  retry_for: float | None = None) -> T:
        deadline = time.monotonic() + (self.retry_for if retry_for is None else retry_for)
        pause = 0.01
        # Beacons where nothing listens: known at once, and once every beacon of the list
        # is one, waiting longer helps nobody.
        refused: set[str] = set()
        while True:
            # A connection up first: past a hung or dead beacon to the first that answers,
            # however long a busy machine takes to answer (within the attempt's bound). A
            # beacon that answered a call within the last ping interval is taken as up (a
            # call that finds it down is retried like any other): watching a channel's state
            # costs grpc a thread, which doubled what a call costs.
            by, at = self._answered
            if by != self.current or time.monotonic() - at > self.ping_interval:
                self.connect(min(self.timeout, max(deadline - time.monotonic(), 0.05)))
            beacon = self.current
            try:
                answer = attempt(self.stub(service), beacon, deadline - time.monotonic())
                self._answered = (beacon, time.monotonic())
                return answer
            except _Hung as hung:
                # Every beacon write is safe to retry; try the next one at once.
                self.suspect(beacon)
                if time.monotonic() + pause > deadline:
                    raise errors.DeadlineExceeded(str(hung), grpc.StatusCode.DEADLINE_EXCEEDED) from None
                self.next_beacon()
                continue
            except grpc.RpcError as e:
                err = errors.from_rpc_error(e)
                if errors.silent(err):
                    # No answer in time, or the connection's pings went unanswered: a hung
                    # beacon. Every beacon write is safe to retry; try the next one.
                    self.suspect(beacon)
                    if time.monotonic() + pause > deadline:
                        raise err from None
                    self.next_beacon()
                    continue
                if isinstance(err, errors.Busy):
                    # Over the beacon's limits: the same beacon, after the wait it asked
                    # for, spread by jitter so that a herd does not come back at once.
                    wait = max(err.retry_after_ms, 5) / 1000 * (0.5 + random.random())
                    if time.monotonic() + wait > deadline:
                        raise err from None
                    time.sleep(wait)
                    continue
                if errors.connection_refused(err):
                    refused.add(beacon)
                    if refused.issuperset(self.beacons):
                        raise errors.Unavailable(
                            f"nothing listens at {', '.join(self.beacons)} (connection refused): "
                            "start the beacons, or give the client their client ports",
                            err.status) from None
                if not err.retryable or time.monotonic() + pause > deadline:
                    raise err from None
            self.next_beacon()
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, 0.5)

    # -- the cluster ---------------------------------------------------------------------

    def status(self, beacon: str | None = None) -> beacon_pb2.BeaconStatus:
        """One beacon's view of the cluster (what `nebcli show beacon` shows)."""
        stub = self.stub("cluster", beacon)
        try:
            return stub.Status(beacon_pb2.BeaconStatusRequest(), timeout=self.timeout,
                               metadata=self._metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    # -- the registry --------------------------------------------------------------------

    def register(self, node_type: str, addr: str, *, metadata: str | dict = "",
                 access_addr: str = "", workers: int = 0,
                 on_lost: Callable[[str], None] | None = None,
                 snowflake: bool = False) -> "Registration":
        """Registers a service and keeps its lease alive in the background (see
        `Registration`). `on_lost(why)` is called once if the lease is lost."""
        from .registration import Registration
        import json
        if isinstance(metadata, dict):
            metadata = json.dumps(metadata)
        request = registry_pb2.RegisterRequest(
            node_type=node_type, addr=addr, access_addr=access_addr, worker_num=workers,
            metadata=metadata)
        reply = self.call("registry", "Register", request)
        return Registration(self, reply, request, on_lost=on_lost, snowflake=snowflake)

    def nodes(self, node_type: str = "", page: int = 0, *, health: str = "any") -> list["Node"]:
        """The registered services (of one type), as this cluster's beacons see them: each
        a `Node` (`node_id`, `addr`, `is_online`, `status`, ...), the type a watch yields
        too. `health` keeps some of them: `any` (the default: every one, quarantined IDs
        too), `serving` (passing or warning, not draining: the ones to send work to),
        `passing`, `warning`, `critical` or `draining`. With `page`, the list is read in
        pages of that many entries, cut on the beacon, so that a registry of any size comes
        in bounded replies (each page linearizable on its own)."""
        from .nodes import Node, filter_of
        wanted = filter_of(health)
        found, start = [], 0
        while True:
            reply = self.call("registry", "Nodes", registry_pb2.NodesRequest(
                node_type=node_type, limit=page, from_node_id=start, health=wanted))
            found.extend(Node.of_entry(e) for e in reply.nodes)
            if not page or not reply.next_node_id:
                return found
            start = reply.next_node_id

    def watch(self, node_types: Iterable[str] = (), *, health: str = "serving") -> "Watch":
        """Discovery: an iterator of `(kind, node)` for the services of these types (all when
        none) that are in rotation (passing or warning, not draining; `health="any"` for
        every one): `present` for each at first, then `added`, `updated`, `removed` as they
        commit, across leader changes. One that goes critical or is drained comes as
        `removed`, and as `added` when it is back."""
        from .discovery import Watch
        return Watch(self, list(node_types), health)

    def set_health(self, node_id: int, status: str | None = None, *,
                   draining: bool | None = None, note: str = "") -> "Node":
        """An operator sets registration `node_id`'s health (`passing`, `warning`,
        `critical`) and/or its drain (role admin); returns it once the change is committed.
        `drain()` and `undrain()` say the same for maintenance."""
        from .nodes import Node, status_of
        request = registry_pb2.SetHealthRequest(node_id=node_id, note=note)
        if status is not None:
            request.status = status_of(status)
        if draining is not None:
            request.draining = draining
        return Node(self.call("registry", "SetHealth", request).node)

    def drain(self, node_id: int, note: str = "") -> "Node":
        """Takes registration `node_id` out of rotation for maintenance (role admin): it
        keeps its ID and its lease; discovery leaves it out and it gets no new work."""
        return self.set_health(node_id, draining=True, note=note)

    def undrain(self, node_id: int) -> "Node":
        """Puts a drained registration back into rotation (role admin)."""
        return self.set_health(node_id, draining=False)

    def holds(self, node_id: int) -> list:
        """What registration `node_id` still holds, one line per thing (`resource site-1`,
        `slot robots/0`, `task q/t1`); empty when nothing, or when no live registration has
        that ID. A drain is done when it is empty."""
        return list(self.call("registry", "Holds",
                              registry_pb2.HoldsRequest(node_id=node_id)).holds)

    # -- config documents ----------------------------------------------------------------

    def config_get(self, key: str, *, prefix: bool = False) -> list:
        """The document `key` (raises `NotFound` when there is none), or with `prefix` every
        document whose key starts with it."""
        return list(self.call("configs", "Get",
                              configs_pb2.GetRequest(key=key, prefix=prefix)).documents)

    def config_put(self, key: str, value: bytes | str, *, if_rev: int | None = None,
                   json: bool = False, path: str = "") -> int:
        """Writes document `key`; returns its revision. `if_rev` writes only if the document
        is at that revision (0: only if it does not exist), else raises `FailedPrecondition`
        and writes nothing."""
        if isinstance(value, str):
            value = value.encode()
        checks = [] if if_rev is None else [configs_pb2.Check(key=key, revision=if_rev)]
        op = configs_pb2.Op(key=key, value=value, json=json, path=path)
        return self.call("configs", "Write",
                         configs_pb2.WriteRequest(checks=checks, ops=[op])).revision

    def config_delete(self, key: str, *, if_rev: int | None = None) -> int:
        """Deletes document `key`; returns the revision of the delete."""
        checks = [] if if_rev is None else [configs_pb2.Check(key=key, revision=if_rev)]
        op = configs_pb2.Op(key=key, delete=True)
        return self.call("configs", "Write",
                         configs_pb2.WriteRequest(checks=checks, ops=[op])).revision

    def config_watch(self, prefixes: Iterable[str] = ()) -> "ConfigWatch":
        """The documents under `prefixes` (all when none), then each change (see
        `ConfigWatch`). A prefix no key can start with (keys start with `cluster/`,
        `type/`, `node/`, `id/`, `file/` or `beacon/`) raises `InvalidArgument` at once, as
        the beacons refuse it."""
        from .configs import ConfigWatch, check_prefix
        if isinstance(prefixes, str):
            prefixes = [prefixes]
        prefixes = list(prefixes)
        for prefix in prefixes:
            check_prefix(prefix)
        return ConfigWatch(self, prefixes=prefixes)

    def service_config(self, node_type: str, addr: str, node_id: int = 0) -> "ConfigWatch":
        """What the service of type `node_type` at `addr` (with node ID `node_id`, when it
        has one) is configured with, once listed (within `retry_for`): its `effective()` settings (its node ID's over its
        address's over its type's over the cluster's) and `files()`, kept current, and an
        iterator of each change."""
        from .configs import ConfigWatch
        watch = ConfigWatch(self, service=(node_type, addr, node_id))
        try:
            watch.wait_listed(self.retry_for)
        except BaseException:
            watch.close()
            raise
        return watch

    # -- sequences, slots, tasks ---------------------------------------------------------

    def sequence(self, name: str, **kwargs) -> "Sequence":
        """Unique numbers from named sequence `name`, from a double buffer of segments."""
        from .sequence import Sequence
        return Sequence(self, name, **kwargs)

    def create_sequence(self, name: str, *, start: int = 0, step: int = 0):
        from ._pb import sequence_pb2
        return self.call("sequences", "Create",
                         sequence_pb2.CreateSequence(name=name, start=start, step=step))

    def create_queue(self, name: str, *, attempt_timeout_ms: int = 0, max_attempts: int = 0):
        return self.call("tasks", "CreateQueue", tasks_pb2.CreateQueue(
            name=name, timeout_ms=attempt_timeout_ms, max_attempts=max_attempts)).queue

    def submit(self, queue: str, name: str, payload: bytes = b"", *, priority: int = 0,
               delay_ms: int = 0, attempt_timeout_ms: int = 0, max_attempts: int = 0,
               submit_id: int = 0):
        """Submits a task; a task of that name pending or running is returned instead.

        The call retries a submit whose answer a failover lost, with the same `submit_id`
        (a fresh random one when 0): a task it made that finished meanwhile is returned as
        it is, not run again. Pass your own to make a submit your process may repeat (after
        a restart) count once."""
        return self.call("tasks", "Submit", tasks_pb2.Submit(
            queue=queue, name=name, payload=payload, priority=priority, delay_ms=delay_ms,
            timeout_ms=attempt_timeout_ms, max_attempts=max_attempts,
            submit_id=submit_id or random.getrandbits(64) or 1)).task

    def task(self, queue: str, name: str):
        return self.call("tasks", "Get", tasks_pb2.GetTask(queue=queue, name=name)).task

    def wait(self, queue: str, name: str, timeout: float = 30.0):
        """Waits until task `name` of `queue` has finished; returns it (its `state` is
        `completed`, `failed`, `dead` or `cancelled`). Raises `DeadlineExceeded`."""
        from .tasks import wait
        return wait(self, queue, name, timeout)

    def worker(self, registration: "Registration", queues: Seq[str],
               handler: Callable, *, capacity: int = 1) -> "Worker":
        """A worker serving `queues` on `registration`: `handler(task)` returns the result
        (bytes) or raises (`TaskFailure(retry=...)`)."""
        from .tasks import Worker
        return Worker(self, registration, list(queues), handler, capacity)

    def assignments(self, registration: "Registration",
                    on_change: Callable | None = None) -> "Assignments":
        """What `registration` holds (resources and slots), kept up to date; `on_change(event)`
        is called for each change."""
        from .assignments import Assignments
        return Assignments(self, registration, on_change)

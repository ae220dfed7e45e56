"""Discovery: the services of some node types, then each change, across leader changes."""

from __future__ import annotations

import queue
import threading
from typing import Iterator

import grpc

from . import errors
from ._pb import registry_pb2


class Watch:
    """An iterator of `(kind, node)`: `present` for each service found at first, then
    `added`, `updated` or `removed` as changes commit. When the stream breaks (the leader
    changed, a beacon went away) it resumes on another beacon from the log index after the
    last one it heard, so every change is told once, in order; only when that beacon no longer
    keeps changes that old (COMPACTED) does it list again and yield the difference. `index` is
    the log position the set is as of (progress notices move it while nothing changes);
    `resumes` and `resyncs` count both kinds of recovery. `close()` ends it."""

    def __init__(self, client, node_types: list[str]):
        self.client = client
        self.node_types = node_types
        self.index = 0
        self.resumes = 0
        self.resyncs = 0
        self.known: dict[int, object] = {}
        self._events: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._call = None
        self._thread = threading.Thread(target=self._run, name="beacon-watch", daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[tuple[str, object]]:
        return self

    def __next__(self) -> tuple[str, object]:
        return self.next()

    def next(self, timeout: float | None = None) -> tuple[str, object]:
        """The next event; raises `StopIteration` once closed, `queue.Empty` after `timeout`,
        or the error that ended the watch."""
        item = self._events.get(timeout=timeout)
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        if self._call is not None:
            self._call.cancel()
        self._events.put(StopIteration())

    def _run(self) -> None:
        pause = 0.01
        first = True
        resume = False
        while not self._stop.is_set():
            try:
                stub = self.client.stub("registry")
                start_index = self.index + 1 if resume else 0
                self._call = stub.Watch(
                    registry_pb2.WatchRequest(node_types=self.node_types,
                                              start_index=start_index),
                    metadata=self.client.metadata)
                for event in self._call:
                    kind = event.WhichOneof("event")
                    if kind == "start":
                        self._start(event.start, first)
                        first = False
                        resume = True
                    else:
                        self._notice(event.notice)
                    pause = 0.01
            except grpc.RpcError as e:
                if self._stop.is_set():
                    return
                err = errors.from_rpc_error(e)
                if isinstance(err, errors.Compacted):
                    # Away longer than the beacon keeps changes: list again.
                    resume = False
                    continue
                if not err.retryable:
                    self._events.put(err)
                    return
            self.client.next_beacon()
            self._stop.wait(pause)
            pause = min(pause * 2, 0.5)

    def _start(self, start, first: bool) -> None:
        if start.resumed:
            # The changes from our index on follow: the set stands.
            self.resumes += 1
            return
        if not first:
            self.resyncs += 1
        now = {n.node_id: n for n in start.nodes}
        if first:
            for node in now.values():
                self._events.put(("present", node))
        else:
            for node_id, node in now.items():
                before = self.known.get(node_id)
                if before is None:
                    self._events.put(("added", node))
                elif before != node:
                    self._events.put(("updated", node))
            for node_id, node in self.known.items():
                if node_id not in now:
                    self._events.put(("removed", node))
        self.known = now
        self.index = start.index

    def _notice(self, notice) -> None:
        for node in notice.add_nodes:
            self.known[node.node_id] = node
            self._events.put(("added", node))
        for node in notice.update_nodes:
            self.known[node.node_id] = node
            self._events.put(("updated", node))
        for node in notice.del_nodes:
            self.known.pop(node.node_id, None)
            self._events.put(("removed", node))
        self.index = max(self.index, notice.index)

"""A watch's server stream (a listing, then notices), run in a thread and resumed across
leader changes from the log index after the last one heard."""

from __future__ import annotations

import queue
import threading
from typing import Iterator

import grpc

from . import errors


class ResumingStream:
    """The iterator a watch is: events a subclass makes of the stream's first answer
    (`_listed`) and of each notice (`_notice`). When the stream breaks (the leader changed, a
    beacon went away) it resumes on another beacon from the log index after the last one
    heard, so every change is told once, in order; only when that beacon no longer keeps
    changes that old (COMPACTED) does it list again, and `_listed` yields the difference.
    `index` is the log position the watch is as of (progress notices move it while nothing
    changes); `resumes` and `resyncs` count both kinds of recovery. `close()` ends it."""

    def __init__(self, client, service: str):
        self.client = client
        self.index = 0
        self.resumes = 0
        self.resyncs = 0
        self._service = service
        self._events: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._call = None
        self._thread = threading.Thread(target=self._run, name=f"beacon-{service}-watch",
                                        daemon=True)

    def _begin(self) -> None:
        self._thread.start()

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        return self.next()

    def next(self, timeout: float | None = None):
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

    # What a subclass says.

    def _request(self, start_index: int):
        """The watch request, from `start_index` (0: from a listing)."""
        raise NotImplementedError

    def _listed(self, start, first: bool) -> None:
        """The first answer's listing: the first one, or a fresh one after COMPACTED."""
        raise NotImplementedError

    def _notice(self, notice) -> None:
        raise NotImplementedError

    def _tell(self, event) -> None:
        self._events.put(event)

    def _run(self) -> None:
        pause = 0.01
        first = True
        resume = False
        while not self._stop.is_set():
            try:
                stub = self.client.stub(self._service)
                start_index = self.index + 1 if resume else 0
                self._call = stub.Watch(self._request(start_index),
                                        metadata=self.client.metadata)
                for event in self._call:
                    if event.WhichOneof("event") == "start":
                        self._start(event.start, first)
                        first = False
                        resume = True
                    else:
                        self._notice(event.notice)
                        self.index = max(self.index, event.notice.index)
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
            # The changes from our index on follow: what is known stands.
            self.resumes += 1
            return
        if not first:
            self.resyncs += 1
        self._listed(start, first)
        self.index = start.index

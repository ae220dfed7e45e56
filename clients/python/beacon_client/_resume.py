"""A watch's server stream (a listing, then notices), run in a thread and resumed across
leader changes from the log index after the last one heard."""

from __future__ import annotations

import queue
import threading
import time
from typing import Iterator

import grpc

from . import errors

# Seconds a watch may hear nothing before it probes its beacon: longer than the beacons'
# progress interval (`watch.progress_ms`, 5 s by default), with a second to spare.
SILENT_FOR = 6.0


class Resuming:
    """A watch's server stream run in a thread: `_request` makes the request, `_listed`
    takes the stream's first answer and `_notice` each notice. When the stream breaks (the
    leader changed, a beacon went away) it resumes on another beacon from the log index
    after the last one heard, so every change is told once, in order; only when that beacon
    no longer keeps changes that old (COMPACTED) does it list again, and `_listed` tells the
    difference. `index` is the log position the watch is as of (progress notices move it
    while nothing changes); `resumes` and `resyncs` count both kinds of recovery. `close()`
    ends it."""

    def __init__(self, client, service: str):
        self.client = client
        self.index = 0
        self.resumes = 0
        self.resyncs = 0
        self._service = service
        self._stop = threading.Event()
        # Set once the first listing is in, or the watch ended before it (`_ended`).
        self._listed_once = threading.Event()
        self._ended: errors.BeaconError | None = None
        self._call = None
        self._thread = threading.Thread(target=self._run, name=f"beacon-{service}-watch",
                                        daemon=True)

    def _begin(self) -> None:
        self._thread.start()

    def _watch_silence(self, call, beacon: str, hung: threading.Event) -> None:
        """Watches `call` for silence: an idle watch hears a progress notice every few seconds
        (`watch.progress_ms`, 5 s by default), so one silent for longer than `SILENT_FOR`
        probes its beacon on a fresh connection, and a beacon that does not answer (a stopped
        process, whose connection stays open) is left: `hung` is set and the call cancelled,
        and the watch resumes at the next beacon."""
        self._heard = time.monotonic()

        def watch() -> None:
            while not self._stop.is_set() and call.is_active():
                time.sleep(0.5)
                if time.monotonic() - self._heard < SILENT_FOR:
                    continue
                if self.client.answers(beacon, 0.5):
                    self._heard = time.monotonic()
                    continue
                self.client.suspect(beacon)
                hung.set()
                call.cancel()
                return
        threading.Thread(target=watch, name="beacon-watch-silence", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        if self._call is not None:
            self._call.cancel()

    def wait_listed(self, timeout: float) -> None:
        """Waits until the first listing is in (what the watch follows is known as of
        `index`); raises the error that ended the watch before it, or `Unavailable` when no
        beacon listed it within `timeout`."""
        if not self._listed_once.wait(timeout):
            raise errors.Unavailable(
                f"no beacon answered the watch within {timeout * 1000:.0f} ms")
        if self._ended is not None:
            raise self._ended

    # What a subclass says.

    def _request(self, start_index: int):
        """The watch request, from `start_index` (0: from a listing)."""
        raise NotImplementedError

    def _listed(self, start, first: bool) -> None:
        """The first answer's listing: the first one, or a fresh one after COMPACTED."""
        raise NotImplementedError

    def _notice(self, notice) -> None:
        raise NotImplementedError

    def _may_go_on(self) -> bool:
        """Asked before each attempt: `False` ends the watch."""
        return True

    def _failed(self, err: errors.BeaconError) -> bool:
        """The stream broke with `err` (not COMPACTED): `True` resumes on another beacon,
        `False` ends the watch."""
        return err.retryable

    def _run(self) -> None:
        pause = 0.01
        first = True
        resume = False
        while not self._stop.is_set():
            if not self._may_go_on():
                return
            hung = threading.Event()
            try:
                stub = self.client.stub(self._service)
                start_index = self.index + 1 if resume else 0
                self._call = stub.Watch(self._request(start_index),
                                        metadata=self.client.metadata)
                self._watch_silence(self._call, self.client.current, hung)
                # A first answer too large for one message comes in pages: the answer with
                # `more`, then notices marked `listing` until one says no more follow.
                listing = None
                for event in self._call:
                    self._heard = time.monotonic()
                    if event.WhichOneof("event") == "start":
                        if getattr(event.start, "more", False):
                            listing = event.start
                            continue
                        self._start(event.start, first)
                        first = False
                        resume = True
                    elif listing is not None and getattr(event.notice, "listing", False):
                        listing.nodes.extend(event.notice.add_nodes)
                        if not event.notice.more:
                            self._start(listing, first)
                            listing, first, resume = None, False, True
                    else:
                        self._notice(event.notice)
                        self.index = max(self.index, event.notice.index)
                    pause = 0.01
            except grpc.RpcError as e:
                if self._stop.is_set():
                    return
                if hung.is_set():
                    # Its beacon went silent and did not answer a fresh connection: the
                    # next one at once.
                    self.client.next_beacon()
                    continue
                err = errors.from_rpc_error(e)
                if isinstance(err, errors.Compacted):
                    # Away longer than the beacon keeps changes: list again.
                    resume = False
                    continue
                if not self._failed(err):
                    self._ended = err
                    self._listed_once.set()
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
        self._listed_once.set()


class ResumingStream(Resuming):
    """A [`Resuming`] watch that is an iterator of the events a subclass makes of the
    listing and of each notice (`_tell`); the error that ends the watch is raised from
    `next()`."""

    def __init__(self, client, service: str):
        super().__init__(client, service)
        self._events: queue.Queue = queue.Queue()

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
        super().close()
        self._events.put(StopIteration())

    def _tell(self, event) -> None:
        self._events.put(event)

    def _failed(self, err: errors.BeaconError) -> bool:
        if not err.retryable:
            self._events.put(err)
            return False
        return True

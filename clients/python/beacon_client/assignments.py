"""What one registration holds, resources and slots, pushed by the leader as it changes."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import grpc

from . import errors
from ._pb import assign_pb2


@dataclass
class Event:
    """`kind` is `added` / `removed` (a resource: start it / stop it), `slot_granted` /
    `slot_gone` (a slot), or `lost` (the registration's lease is lost: stop everything);
    `item` is the ResourceInfo or SlotHeld."""

    kind: str
    item: object = None


class Assignments:
    """Follows what `registration` holds: `resources` (name to ResourceInfo) and `slots`
    (group to SlotHeld) are kept up to date from the leader's stream, which it opens again
    on another beacon when it breaks, telling only the difference; `on_change(event)` is
    called for each change, from a background thread. When the lease is lost, one `lost`
    event comes and both are emptied."""

    def __init__(self, client, registration, on_change: Callable[[Event], None] | None = None):
        self.client = client
        self.registration = registration
        self.on_change = on_change
        self.resources: dict[str, object] = {}
        self.slots: dict[str, object] = {}
        self.index = 0
        # Times a broken stream resumed from `index` (a new leader, a broken connection).
        self.resumes = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._call = None
        self._thread = threading.Thread(target=self._run, name="beacon-assignments", daemon=True)
        self._thread.start()

    def release(self, name: str) -> None:
        """Lets resource `name` go (after a `revoking` mark: a rebalance moves it on)."""
        with self._lock:
            held = self.resources.get(name)
        if held is None:
            return
        self.client.call("assignments", "Release", assign_pb2.Release(
            name=name, term=held.holder.term, index=held.holder.index))

    def close(self) -> None:
        self._stop.set()
        if self._call is not None:
            self._call.cancel()

    def _tell(self, kind: str, item=None) -> None:
        if self.on_change is not None:
            try:
                self.on_change(Event(kind, item))
            except Exception:
                pass

    def _run(self) -> None:
        reg = self.registration
        pause = 0.01
        # After the first answer a broken stream resumes from the index after the last one
        # heard (every change once); when that is compacted, it starts afresh.
        resume = False
        while not self._stop.is_set():
            if reg.lost.is_set():
                self._lose()
                return
            request = assign_pb2.WatchAssignments(
                node_id=reg.node_id, term=reg.fencing_token[0], index=reg.fencing_token[1],
                start_index=self.index + 1 if resume else 0)
            try:
                self._call = self.client.stub("assignments").Watch(
                    request, metadata=self.client.metadata)
                for event in self._call:
                    if event.WhichOneof("event") == "start":
                        if event.start.resumed:
                            self.resumes += 1
                        else:
                            self._start(event.start)
                        resume = True
                    else:
                        self._notice(event.notice)
                    pause = 0.01
            except grpc.RpcError as e:
                if self._stop.is_set():
                    return
                err = errors.from_rpc_error(e)
                if isinstance(err, errors.LeaseLost):
                    self._lose()
                    return
                if isinstance(err, errors.Compacted):
                    resume = False
                    continue
            self.client.next_beacon()
            self._stop.wait(pause)
            pause = min(pause * 2, 0.5)

    def _lose(self) -> None:
        with self._lock:
            self.resources.clear()
            self.slots.clear()
        self._tell("lost")

    def _start(self, start) -> None:
        now_r = {r.name: r for r in start.held}
        now_s = {s.group: s for s in start.slots}
        with self._lock:
            old_r, old_s = self.resources, self.slots
            self.resources, self.slots, self.index = now_r, now_s, start.index
        for name, r in old_r.items():
            if name not in now_r:
                self._tell("removed", r)
        for group, s in old_s.items():
            if group not in now_s or now_s[group].slot != s.slot:
                self._tell("slot_gone", s)
        for group, s in now_s.items():
            if group not in old_s or old_s[group].slot != s.slot:
                self._tell("slot_granted", s)
        for name, r in now_r.items():
            if name not in old_r:
                self._tell("added", r)

    def _notice(self, notice) -> None:
        with self._lock:
            for s in notice.slots_gone:
                self.slots.pop(s.group, None)
            for s in notice.slots_held:
                self.slots[s.group] = s
            for r in notice.gone:
                self.resources.pop(r.name, None)
            for r in notice.held:
                self.resources[r.name] = r
            self.index = max(self.index, notice.index)
        for s in notice.slots_gone:
            self._tell("slot_gone", s)
        for s in notice.slots_held:
            self._tell("slot_granted", s)
        for r in notice.gone:
            self._tell("removed", r)
        for r in notice.held:
            self._tell("added", r)

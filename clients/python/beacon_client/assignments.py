"""What one registration holds, resources and slots, pushed by the leader as it changes."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from . import errors
from ._resume import Resuming
from ._pb import assign_pb2


@dataclass
class Event:
    """`kind` is `added` / `removed` (a resource: start it / stop it), `slot_granted` /
    `slot_gone` (a slot), `slot_revoking` (this service is draining and a standby waits for
    the slot: stop what it runs, then `release_slot(group)`), or `lost` (the registration's
    lease is lost: stop everything); `item` is the ResourceInfo or SlotHeld."""

    kind: str
    item: object = None


class Assignments(Resuming):
    """Follows what `registration` holds: `resources` (name to ResourceInfo) and `slots`
    (group to SlotHeld) are kept up to date from the leader's stream, which resumes on
    another beacon when it breaks (see `Resuming`: `index`, `resumes`, `resyncs`), telling
    only the difference; `on_change(event)` is called for each change, from a background
    thread. When the lease is lost, one `lost` event comes and both are emptied."""

    def __init__(self, client, registration, on_change: Callable[[Event], None] | None = None):
        super().__init__(client, "assignments")
        self.registration = registration
        self.on_change = on_change
        self.resources: dict[str, object] = {}
        self.slots: dict[str, object] = {}
        self._lock = threading.Lock()
        self._begin()
        # A lost lease ends the stream at once: the leader's notices say only what moved.
        registration._when_lost(self._interrupt)

    def _interrupt(self) -> None:
        if self._call is not None:
            self._call.cancel()

    def release(self, name: str) -> None:
        """Lets resource `name` go (after a `revoking` mark: a rebalance moves it on)."""
        with self._lock:
            held = self.resources.get(name)
        if held is None:
            return
        self.client.call("assignments", "Release", assign_pb2.Release(
            name=name, term=held.holder.term, index=held.holder.index))

    def release_slot(self, group: str) -> None:
        """Lets this service's slot of `group` go (after a `slot_revoking` event, or of its
        own accord): it goes at once to the oldest standby in rotation, with the resources
        bound to it."""
        with self._lock:
            held = self.slots.get(group)
        if held is None:
            return
        self.client.call("assignments", "ReleaseSlot", assign_pb2.ReleaseSlot(
            group=group, slot=held.slot, term=held.term, index=held.index))
        with self._lock:
            # The watch may have told it gone already.
            ours = self.slots.get(group) is held
            if ours:
                del self.slots[group]
        if ours:
            self._emit("slot_gone", held)

    def _slot_events(self, was, now) -> list:
        """The events of slot `now` held, where `was` was held before (or None)."""
        if was is None or (was.slot, was.term, was.index) != (now.slot, now.term, now.index):
            gone = [] if was is None else [("slot_gone", was)]
            return gone + [("slot_granted", now)] + ([("slot_revoking", now)] if now.revoking else [])
        if now.revoking and not was.revoking:
            return [("slot_revoking", now)]
        return []

    def _emit(self, kind: str, item=None) -> None:
        if self.on_change is not None:
            try:
                self.on_change(Event(kind, item))
            except Exception:
                pass

    def _request(self, start_index: int):
        reg = self.registration
        return assign_pb2.WatchAssignments(
            node_id=reg.node_id, term=reg.fencing_token[0], index=reg.fencing_token[1],
            start_index=start_index)

    def _may_go_on(self) -> bool:
        if self.registration.lost.is_set():
            self._lose()
            return False
        return True

    def _failed(self, err: errors.BeaconError) -> bool:
        # Anything but a lost lease is waited out on another beacon: what this service
        # holds is only ever taken away by the leader's word.
        if isinstance(err, errors.LeaseLost):
            self._lose()
            return False
        return True

    def _lose(self) -> None:
        with self._lock:
            self.resources.clear()
            self.slots.clear()
        self._emit("lost")

    def _listed(self, start, first: bool) -> None:
        now_r = {r.name: r for r in start.held}
        now_s = {s.group: s for s in start.slots}
        with self._lock:
            old_r, old_s = self.resources, self.slots
            self.resources, self.slots = now_r, now_s
        for name, r in old_r.items():
            if name not in now_r:
                self._emit("removed", r)
        for group, s in old_s.items():
            if group not in now_s:
                self._emit("slot_gone", s)
        for group, s in now_s.items():
            for kind, item in self._slot_events(old_s.get(group), s):
                self._emit(kind, item)
        for name, r in now_r.items():
            if name not in old_r:
                self._emit("added", r)

    def _notice(self, notice) -> None:
        with self._lock:
            before = dict(self.slots)
            for s in notice.slots_gone:
                self.slots.pop(s.group, None)
            for s in notice.slots_held:
                self.slots[s.group] = s
            for r in notice.gone:
                self.resources.pop(r.name, None)
            for r in notice.held:
                self.resources[r.name] = r
        for s in notice.slots_gone:
            # A slot let go with `release_slot` was told gone then.
            if s.group in before:
                self._emit("slot_gone", s)
        for s in notice.slots_held:
            for kind, item in self._slot_events(before.get(s.group), s):
                self._emit(kind, item)
        for r in notice.gone:
            self._emit("removed", r)
        for r in notice.held:
            self._emit("added", r)

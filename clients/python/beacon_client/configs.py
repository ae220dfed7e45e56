"""Config documents: a service's effective configuration, then each change, across leader
changes (the config store's `Watch`)."""

from __future__ import annotations

import threading

from . import errors
from ._pb import configs_pb2
from ._resume import ResumingStream

# The scopes every config key starts with.
SCOPES = ("cluster/", "type/", "node/", "id/", "file/", "beacon/")


def check_prefix(prefix: str) -> None:
    """Raises `InvalidArgument` unless some key could start with `prefix` (the rule the
    beacons apply to a watch's prefixes)."""
    if prefix == "" or any(s.startswith(prefix) or prefix.startswith(s) for s in SCOPES):
        return
    raise errors.InvalidArgument(
        f"`{prefix}` is not a config key prefix: no key starts with it (keys start with "
        + ", ".join(SCOPES) + ")")


def effective(documents, node_type: str, addr: str, node_id: int = 0) -> dict[str, bytes]:
    """For each NAME, the value of the most specific of `id/NODE_ID/NAME`,
    `node/ADDR/NAME`, `type/TYPE/NAME` and `cluster/NAME` among `documents`."""
    ranked: dict[str, tuple[int, bytes]] = {}
    # No registration is node ID 0: its prefix matches no key.
    scopes = ((f"id/{node_id}/", 4), (f"node/{addr}/", 3), (f"type/{node_type}/", 2),
              ("cluster/", 1))
    for d in documents:
        for prefix, rank in scopes:
            if d.key.startswith(prefix):
                name = d.key[len(prefix):]
                if name not in ranked or ranked[name][0] < rank:
                    ranked[name] = (rank, d.value)
                break
    return {name: value for name, (_, value) in ranked.items()}


class ConfigWatch(ResumingStream):
    """An iterator of `(kind, document)`: `present` for each document found at first, then
    `put` (the document as written, with its `revision`) or `deleted` (a document holding only
    its `key` and the revision of the delete) as writes commit, each once, in order, across
    leader changes (see `ResumingStream`: `index`, `resumes`, `resyncs`, `close()`).

    A service's watch (`Client.service_config`) follows the documents that concern it:
    `effective()` is its configuration, node over type over cluster, and `files()` the custom
    files. A watch that starts after a write lists it: nothing is pushed and forgotten."""

    def __init__(self, client, prefixes: list[str] | None = None,
                 service: tuple[str, str, int] | None = None):
        super().__init__(client, "configs")
        self.prefixes = list(prefixes or [])
        self.service = service
        self._known: dict[str, object] = {}
        self._lock = threading.Lock()
        self._begin()

    def documents(self) -> dict[str, object]:
        """The documents known, by key, as of `index`."""
        with self._lock:
            return dict(self._known)

    def effective(self) -> dict[str, bytes]:
        """The service's settings, by name (on a watch of prefixes: the cluster's)."""
        node_type, addr, node_id = self.service or ("", "", 0)
        return effective(self.documents().values(), node_type, addr, node_id)

    def files(self) -> dict[str, tuple[str, bytes]]:
        """The custom files, by name: `(path, content)`."""
        return {d.key[len("file/"):]: (d.path, d.value)
                for d in self.documents().values() if d.key.startswith("file/")}

    def _request(self, start_index: int):
        scope = None
        if self.service is not None:
            node_type, addr, node_id = self.service
            scope = configs_pb2.ServiceScope(node_type=node_type, addr=addr, node_id=node_id)
        return configs_pb2.WatchRequest(prefixes=self.prefixes, service=scope,
                                        start_index=start_index)

    def _listed(self, start, first: bool) -> None:
        now = {d.key: d for d in start.documents}
        with self._lock:
            before, self._known = self._known, now
        if first:
            for d in now.values():
                self._tell(("present", d))
            return
        for key, d in now.items():
            if before.get(key) != d:
                self._tell(("put", d))
        for key in before:
            if key not in now:
                self._tell(("deleted", configs_pb2.Document(key=key, revision=start.index)))

    def _notice(self, notice) -> None:
        with self._lock:
            for d in notice.put:
                self._known[d.key] = d
            for key in notice.deleted:
                self._known.pop(key, None)
        for d in notice.put:
            self._tell(("put", d))
        for key in notice.deleted:
            self._tell(("deleted", configs_pb2.Document(key=key, revision=notice.index)))

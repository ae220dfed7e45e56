"""Discovery: the services of some node types, then each change, across leader changes."""

from __future__ import annotations

from ._pb import registry_pb2
from ._resume import ResumingStream
from .nodes import Node, filter_of


class Watch(ResumingStream):
    """An iterator of `(kind, node)`, each node a `Node` (as `Client.nodes()` lists them):
    `present` for each service found at first, then `added`, `updated` or `removed` as
    changes commit, each once, in order, across leader changes (see `ResumingStream`:
    `index`, `resumes`, `resyncs`, `close()`). `known` holds the live ones by node ID.

    `health` says which it follows (`serving`, the default: passing or warning and not
    draining; `any`, `passing`, `warning`, `critical`, `draining`): one that leaves what it
    follows (goes critical, is drained) comes as `removed`, and as `added` when back."""

    def __init__(self, client, node_types: list[str], health: str = "serving"):
        self._health = filter_of(health)
        super().__init__(client, "registry")
        self.node_types = node_types
        self.known: dict[int, object] = {}
        self._begin()

    def _request(self, start_index: int):
        return registry_pb2.WatchRequest(node_types=self.node_types, start_index=start_index,
                                          health=self._health)

    def _listed(self, start, first: bool) -> None:
        now = {n.node_id: Node(n) for n in start.nodes}
        if first:
            for node in now.values():
                self._tell(("present", node))
        else:
            for node_id, node in now.items():
                before = self.known.get(node_id)
                if before is None:
                    self._tell(("added", node))
                elif before != node:
                    self._tell(("updated", node))
            for node_id, node in self.known.items():
                if node_id not in now:
                    self._tell(("removed", node))
        self.known = now

    def _notice(self, notice) -> None:
        for info in notice.add_nodes:
            node = self.known[info.node_id] = Node(info)
            self._tell(("added", node))
        for info in notice.update_nodes:
            node = self.known[info.node_id] = Node(info)
            self._tell(("updated", node))
        for info in notice.del_nodes:
            self.known.pop(info.node_id, None)
            self._tell(("removed", Node(info)))

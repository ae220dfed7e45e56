from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HealthStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HEALTH_PASSING: _ClassVar[HealthStatus]
    HEALTH_WARNING: _ClassVar[HealthStatus]
    HEALTH_CRITICAL: _ClassVar[HealthStatus]

class HealthFilter(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILTER_ANY: _ClassVar[HealthFilter]
    FILTER_SERVING: _ClassVar[HealthFilter]
    FILTER_PASSING: _ClassVar[HealthFilter]
    FILTER_WARNING: _ClassVar[HealthFilter]
    FILTER_CRITICAL: _ClassVar[HealthFilter]
    FILTER_DRAINING: _ClassVar[HealthFilter]
HEALTH_PASSING: HealthStatus
HEALTH_WARNING: HealthStatus
HEALTH_CRITICAL: HealthStatus
FILTER_ANY: HealthFilter
FILTER_SERVING: HealthFilter
FILTER_PASSING: HealthFilter
FILTER_WARNING: HealthFilter
FILTER_CRITICAL: HealthFilter
FILTER_DRAINING: HealthFilter

class RegistryEntry(_message.Message):
    __slots__ = ("register", "update", "unregister", "expire", "release", "clock")
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    UNREGISTER_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    register: NodeInfo
    update: NodeInfo
    unregister: int
    expire: int
    release: int
    clock: ClockMark
    def __init__(self, register: _Optional[_Union[NodeInfo, _Mapping]] = ..., update: _Optional[_Union[NodeInfo, _Mapping]] = ..., unregister: _Optional[int] = ..., expire: _Optional[int] = ..., release: _Optional[int] = ..., clock: _Optional[_Union[ClockMark, _Mapping]] = ...) -> None: ...

class ClockMark(_message.Message):
    __slots__ = ("node_id", "ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    MS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    ms: int
    def __init__(self, node_id: _Optional[int] = ..., ms: _Optional[int] = ...) -> None: ...

class RegistrySnapshot(_message.Message):
    __slots__ = ("last_node_id", "nodes", "quarantined", "clocks")
    LAST_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    CLOCKS_FIELD_NUMBER: _ClassVar[int]
    last_node_id: int
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    quarantined: _containers.RepeatedCompositeFieldContainer[Tombstone]
    clocks: _containers.RepeatedCompositeFieldContainer[ClockMark]
    def __init__(self, last_node_id: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., quarantined: _Optional[_Iterable[_Union[Tombstone, _Mapping]]] = ..., clocks: _Optional[_Iterable[_Union[ClockMark, _Mapping]]] = ...) -> None: ...

class RegistryHeartbeat(_message.Message):
    __slots__ = ("last_node_id", "added_node_id", "removed_node_id")
    LAST_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDED_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REMOVED_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    last_node_id: int
    added_node_id: _containers.RepeatedScalarFieldContainer[int]
    removed_node_id: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, last_node_id: _Optional[int] = ..., added_node_id: _Optional[_Iterable[int]] = ..., removed_node_id: _Optional[_Iterable[int]] = ...) -> None: ...

class RegistryHello(_message.Message):
    __slots__ = ("id_first", "id_last")
    ID_FIRST_FIELD_NUMBER: _ClassVar[int]
    ID_LAST_FIELD_NUMBER: _ClassVar[int]
    id_first: int
    id_last: int
    def __init__(self, id_first: _Optional[int] = ..., id_last: _Optional[int] = ...) -> None: ...

class Tombstone(_message.Message):
    __slots__ = ("node", "remaining_ms")
    NODE_FIELD_NUMBER: _ClassVar[int]
    REMAINING_MS_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    remaining_ms: int
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., remaining_ms: _Optional[int] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("node_id", "node_type", "addr", "access_addr", "worker_num", "metadata", "registered_ms", "term", "index", "owner", "health")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    ACCESS_ADDR_FIELD_NUMBER: _ClassVar[int]
    WORKER_NUM_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_MS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    node_type: str
    addr: str
    access_addr: str
    worker_num: int
    metadata: str
    registered_ms: int
    term: int
    index: int
    owner: str
    health: Health
    def __init__(self, node_id: _Optional[int] = ..., node_type: _Optional[str] = ..., addr: _Optional[str] = ..., access_addr: _Optional[str] = ..., worker_num: _Optional[int] = ..., metadata: _Optional[str] = ..., registered_ms: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., owner: _Optional[str] = ..., health: _Optional[_Union[Health, _Mapping]] = ...) -> None: ...

class Health(_message.Message):
    __slots__ = ("status", "draining", "note", "since_ms")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    status: HealthStatus
    draining: bool
    note: str
    since_ms: int
    def __init__(self, status: _Optional[_Union[HealthStatus, str]] = ..., draining: _Optional[bool] = ..., note: _Optional[str] = ..., since_ms: _Optional[int] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("node_type", "addr", "access_addr", "worker_num", "metadata")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    ACCESS_ADDR_FIELD_NUMBER: _ClassVar[int]
    WORKER_NUM_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    node_type: str
    addr: str
    access_addr: str
    worker_num: int
    metadata: str
    def __init__(self, node_type: _Optional[str] = ..., addr: _Optional[str] = ..., access_addr: _Optional[str] = ..., worker_num: _Optional[int] = ..., metadata: _Optional[str] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("node", "lease_ms", "beacons", "leader", "subscribe", "clock_floor_ms", "id_first", "id_last", "previous", "warnings")
    NODE_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    BEACONS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FLOOR_MS_FIELD_NUMBER: _ClassVar[int]
    ID_FIRST_FIELD_NUMBER: _ClassVar[int]
    ID_LAST_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    lease_ms: int
    beacons: _containers.RepeatedScalarFieldContainer[str]
    leader: str
    subscribe: _containers.RepeatedScalarFieldContainer[str]
    clock_floor_ms: int
    id_first: int
    id_last: int
    previous: NodeInfo
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., lease_ms: _Optional[int] = ..., beacons: _Optional[_Iterable[str]] = ..., leader: _Optional[str] = ..., subscribe: _Optional[_Iterable[str]] = ..., clock_floor_ms: _Optional[int] = ..., id_first: _Optional[int] = ..., id_last: _Optional[int] = ..., previous: _Optional[_Union[NodeInfo, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class FreeIdRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class FreeIdReply(_message.Message):
    __slots__ = ("node_id", "was")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    WAS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    was: NodeInfo
    def __init__(self, node_id: _Optional[int] = ..., was: _Optional[_Union[NodeInfo, _Mapping]] = ...) -> None: ...

class SetHealthRequest(_message.Message):
    __slots__ = ("node_id", "status", "draining", "note")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    status: HealthStatus
    draining: bool
    note: str
    def __init__(self, node_id: _Optional[int] = ..., status: _Optional[_Union[HealthStatus, str]] = ..., draining: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class SetHealthReply(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ...) -> None: ...

class UnregisterRequest(_message.Message):
    __slots__ = ("node_id", "addr", "term", "index", "release", "clock_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    CLOCK_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    addr: str
    term: int
    index: int
    release: bool
    clock_ms: int
    def __init__(self, node_id: _Optional[int] = ..., addr: _Optional[str] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., release: _Optional[bool] = ..., clock_ms: _Optional[int] = ...) -> None: ...

class UnregisterReply(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ...) -> None: ...

class LoadStats(_message.Message):
    __slots__ = ("load", "connect", "recv_num", "recv_byte", "send_num", "send_byte")
    LOAD_FIELD_NUMBER: _ClassVar[int]
    CONNECT_FIELD_NUMBER: _ClassVar[int]
    RECV_NUM_FIELD_NUMBER: _ClassVar[int]
    RECV_BYTE_FIELD_NUMBER: _ClassVar[int]
    SEND_NUM_FIELD_NUMBER: _ClassVar[int]
    SEND_BYTE_FIELD_NUMBER: _ClassVar[int]
    load: int
    connect: int
    recv_num: int
    recv_byte: int
    send_num: int
    send_byte: int
    def __init__(self, load: _Optional[int] = ..., connect: _Optional[int] = ..., recv_num: _Optional[int] = ..., recv_byte: _Optional[int] = ..., send_num: _Optional[int] = ..., send_byte: _Optional[int] = ...) -> None: ...

class NodeReport(_message.Message):
    __slots__ = ("node_id", "addr", "node", "worker", "term", "index", "clock_ms", "health", "health_note", "routine")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CLOCK_MS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    HEALTH_NOTE_FIELD_NUMBER: _ClassVar[int]
    ROUTINE_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    addr: str
    node: LoadStats
    worker: _containers.RepeatedCompositeFieldContainer[LoadStats]
    term: int
    index: int
    clock_ms: int
    health: HealthStatus
    health_note: str
    routine: bool
    def __init__(self, node_id: _Optional[int] = ..., addr: _Optional[str] = ..., node: _Optional[_Union[LoadStats, _Mapping]] = ..., worker: _Optional[_Iterable[_Union[LoadStats, _Mapping]]] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., clock_ms: _Optional[int] = ..., health: _Optional[_Union[HealthStatus, str]] = ..., health_note: _Optional[str] = ..., routine: _Optional[bool] = ...) -> None: ...

class NodeReportReply(_message.Message):
    __slots__ = ("node_id", "lease_ms", "term", "index", "clock_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CLOCK_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    lease_ms: int
    term: int
    index: int
    clock_ms: int
    def __init__(self, node_id: _Optional[int] = ..., lease_ms: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., clock_ms: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("node_types", "start_index", "health")
    NODE_TYPES_FIELD_NUMBER: _ClassVar[int]
    START_INDEX_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    node_types: _containers.RepeatedScalarFieldContainer[str]
    start_index: int
    health: HealthFilter
    def __init__(self, node_types: _Optional[_Iterable[str]] = ..., start_index: _Optional[int] = ..., health: _Optional[_Union[HealthFilter, str]] = ...) -> None: ...

class WatchReply(_message.Message):
    __slots__ = ("index", "nodes", "resumed", "more")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    index: int
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    resumed: bool
    more: bool
    def __init__(self, index: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., resumed: _Optional[bool] = ..., more: _Optional[bool] = ...) -> None: ...

class NodeNotice(_message.Message):
    __slots__ = ("index", "add_nodes", "del_nodes", "update_nodes", "listing", "more")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ADD_NODES_FIELD_NUMBER: _ClassVar[int]
    DEL_NODES_FIELD_NUMBER: _ClassVar[int]
    UPDATE_NODES_FIELD_NUMBER: _ClassVar[int]
    LISTING_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    index: int
    add_nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    del_nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    update_nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    listing: bool
    more: bool
    def __init__(self, index: _Optional[int] = ..., add_nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., del_nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., update_nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., listing: _Optional[bool] = ..., more: _Optional[bool] = ...) -> None: ...

class NodesRequest(_message.Message):
    __slots__ = ("node_type", "addr", "node_id", "limit", "from_node_id", "health")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    node_type: str
    addr: str
    node_id: int
    limit: int
    from_node_id: int
    health: HealthFilter
    def __init__(self, node_type: _Optional[str] = ..., addr: _Optional[str] = ..., node_id: _Optional[int] = ..., limit: _Optional[int] = ..., from_node_id: _Optional[int] = ..., health: _Optional[_Union[HealthFilter, str]] = ...) -> None: ...

class NodeEntry(_message.Message):
    __slots__ = ("node", "is_online", "last_seen_ms", "report", "workers", "quarantine_ms")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IS_ONLINE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    QUARANTINE_MS_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    is_online: bool
    last_seen_ms: int
    report: LoadStats
    workers: _containers.RepeatedCompositeFieldContainer[LoadStats]
    quarantine_ms: int
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., is_online: _Optional[bool] = ..., last_seen_ms: _Optional[int] = ..., report: _Optional[_Union[LoadStats, _Mapping]] = ..., workers: _Optional[_Iterable[_Union[LoadStats, _Mapping]]] = ..., quarantine_ms: _Optional[int] = ...) -> None: ...

class NodesReply(_message.Message):
    __slots__ = ("node", "is_leader", "index", "nodes", "stale", "next_node_id", "total")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    NEXT_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    node: str
    is_leader: bool
    index: int
    nodes: _containers.RepeatedCompositeFieldContainer[NodeEntry]
    stale: str
    next_node_id: int
    total: int
    def __init__(self, node: _Optional[str] = ..., is_leader: _Optional[bool] = ..., index: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodeEntry, _Mapping]]] = ..., stale: _Optional[str] = ..., next_node_id: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class IdsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IdsReply(_message.Message):
    __slots__ = ("first", "last", "last_node_id", "in_use", "quarantined", "index", "stale")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    LAST_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    IN_USE_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    first: int
    last: int
    last_node_id: int
    in_use: int
    quarantined: _containers.RepeatedScalarFieldContainer[int]
    index: int
    stale: str
    def __init__(self, first: _Optional[int] = ..., last: _Optional[int] = ..., last_node_id: _Optional[int] = ..., in_use: _Optional[int] = ..., quarantined: _Optional[_Iterable[int]] = ..., index: _Optional[int] = ..., stale: _Optional[str] = ...) -> None: ...

class HoldsRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class HoldsReply(_message.Message):
    __slots__ = ("node", "holds", "index", "stale")
    NODE_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    holds: _containers.RepeatedScalarFieldContainer[str]
    index: int
    stale: str
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., holds: _Optional[_Iterable[str]] = ..., index: _Optional[int] = ..., stale: _Optional[str] = ...) -> None: ...

class SubscriptionsRequest(_message.Message):
    __slots__ = ("node_type",)
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    node_type: str
    def __init__(self, node_type: _Optional[str] = ...) -> None: ...

class Subscription(_message.Message):
    __slots__ = ("node_type", "subscribe")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    node_type: str
    subscribe: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_type: _Optional[str] = ..., subscribe: _Optional[_Iterable[str]] = ...) -> None: ...

class SubscriptionsReply(_message.Message):
    __slots__ = ("subscriptions",)
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    subscriptions: _containers.RepeatedCompositeFieldContainer[Subscription]
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[Subscription, _Mapping]]] = ...) -> None: ...

class NodeEvent(_message.Message):
    __slots__ = ("start", "notice")
    START_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    start: WatchReply
    notice: NodeNotice
    def __init__(self, start: _Optional[_Union[WatchReply, _Mapping]] = ..., notice: _Optional[_Union[NodeNotice, _Mapping]] = ...) -> None: ...

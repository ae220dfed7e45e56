from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AssignEntry(_message.Message):
    __slots__ = ("add", "delete", "place", "revoke", "create_group", "delete_group", "grant", "revoke_slots")
    ADD_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    PLACE_FIELD_NUMBER: _ClassVar[int]
    REVOKE_FIELD_NUMBER: _ClassVar[int]
    CREATE_GROUP_FIELD_NUMBER: _ClassVar[int]
    DELETE_GROUP_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    REVOKE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    add: ResourceInfo
    delete: str
    place: Placements
    revoke: Names
    create_group: SlotGroupInfo
    delete_group: str
    grant: Grants
    revoke_slots: SlotNames
    def __init__(self, add: _Optional[_Union[ResourceInfo, _Mapping]] = ..., delete: _Optional[str] = ..., place: _Optional[_Union[Placements, _Mapping]] = ..., revoke: _Optional[_Union[Names, _Mapping]] = ..., create_group: _Optional[_Union[SlotGroupInfo, _Mapping]] = ..., delete_group: _Optional[str] = ..., grant: _Optional[_Union[Grants, _Mapping]] = ..., revoke_slots: _Optional[_Union[SlotNames, _Mapping]] = ...) -> None: ...

class SlotNames(_message.Message):
    __slots__ = ("slots",)
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    slots: _containers.RepeatedCompositeFieldContainer[SlotName]
    def __init__(self, slots: _Optional[_Iterable[_Union[SlotName, _Mapping]]] = ...) -> None: ...

class SlotName(_message.Message):
    __slots__ = ("group", "slot")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    group: str
    slot: int
    def __init__(self, group: _Optional[str] = ..., slot: _Optional[int] = ...) -> None: ...

class Grants(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("group", "slot", "to")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    group: str
    slot: int
    to: HolderInfo
    def __init__(self, group: _Optional[str] = ..., slot: _Optional[int] = ..., to: _Optional[_Union[HolderInfo, _Mapping]] = ...) -> None: ...

class SlotGroupInfo(_message.Message):
    __slots__ = ("name", "node_type", "slots", "created_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    node_type: str
    slots: _containers.RepeatedCompositeFieldContainer[SlotInfo]
    created_ms: int
    def __init__(self, name: _Optional[str] = ..., node_type: _Optional[str] = ..., slots: _Optional[_Iterable[_Union[SlotInfo, _Mapping]]] = ..., created_ms: _Optional[int] = ...) -> None: ...

class SlotInfo(_message.Message):
    __slots__ = ("holder", "version", "revoking")
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REVOKING_FIELD_NUMBER: _ClassVar[int]
    holder: HolderInfo
    version: int
    revoking: bool
    def __init__(self, holder: _Optional[_Union[HolderInfo, _Mapping]] = ..., version: _Optional[int] = ..., revoking: _Optional[bool] = ...) -> None: ...

class Placements(_message.Message):
    __slots__ = ("placements",)
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    placements: _containers.RepeatedCompositeFieldContainer[Placement]
    def __init__(self, placements: _Optional[_Iterable[_Union[Placement, _Mapping]]] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("name", "to")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    name: str
    to: HolderInfo
    def __init__(self, name: _Optional[str] = ..., to: _Optional[_Union[HolderInfo, _Mapping]] = ...) -> None: ...

class Names(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class AssignSnapshot(_message.Message):
    __slots__ = ("resources", "groups")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[ResourceInfo]
    groups: _containers.RepeatedCompositeFieldContainer[SlotGroupInfo]
    def __init__(self, resources: _Optional[_Iterable[_Union[ResourceInfo, _Mapping]]] = ..., groups: _Optional[_Iterable[_Union[SlotGroupInfo, _Mapping]]] = ...) -> None: ...

class HolderInfo(_message.Message):
    __slots__ = ("node_id", "addr", "registration_term", "registration_index", "term", "index", "since_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_TERM_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    addr: str
    registration_term: int
    registration_index: int
    term: int
    index: int
    since_ms: int
    def __init__(self, node_id: _Optional[int] = ..., addr: _Optional[str] = ..., registration_term: _Optional[int] = ..., registration_index: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., since_ms: _Optional[int] = ...) -> None: ...

class ResourceInfo(_message.Message):
    __slots__ = ("name", "node_type", "weight", "labels", "holder", "revoking", "created_ms", "slot_group", "slot")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    REVOKING_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    SLOT_GROUP_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    name: str
    node_type: str
    weight: int
    labels: _containers.ScalarMap[str, str]
    holder: HolderInfo
    revoking: bool
    created_ms: int
    slot_group: str
    slot: int
    def __init__(self, name: _Optional[str] = ..., node_type: _Optional[str] = ..., weight: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., holder: _Optional[_Union[HolderInfo, _Mapping]] = ..., revoking: _Optional[bool] = ..., created_ms: _Optional[int] = ..., slot_group: _Optional[str] = ..., slot: _Optional[int] = ...) -> None: ...

class AddResource(_message.Message):
    __slots__ = ("name", "node_type", "weight", "labels", "slot_group", "slot")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SLOT_GROUP_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    name: str
    node_type: str
    weight: int
    labels: _containers.ScalarMap[str, str]
    slot_group: str
    slot: int
    def __init__(self, name: _Optional[str] = ..., node_type: _Optional[str] = ..., weight: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., slot_group: _Optional[str] = ..., slot: _Optional[int] = ...) -> None: ...

class DeleteResource(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ResourceReply(_message.Message):
    __slots__ = ("resource",)
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    resource: ResourceInfo
    def __init__(self, resource: _Optional[_Union[ResourceInfo, _Mapping]] = ...) -> None: ...

class ResourcesRequest(_message.Message):
    __slots__ = ("node_type", "limit")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    node_type: str
    limit: int
    def __init__(self, node_type: _Optional[str] = ..., limit: _Optional[int] = ..., **kwargs) -> None: ...

class ResourcesReply(_message.Message):
    __slots__ = ("node", "is_leader", "index", "resources", "now_ms", "stale", "next", "total")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    node: str
    is_leader: bool
    index: int
    resources: _containers.RepeatedCompositeFieldContainer[ResourceInfo]
    now_ms: int
    stale: str
    next: str
    total: int
    def __init__(self, node: _Optional[str] = ..., is_leader: _Optional[bool] = ..., index: _Optional[int] = ..., resources: _Optional[_Iterable[_Union[ResourceInfo, _Mapping]]] = ..., now_ms: _Optional[int] = ..., stale: _Optional[str] = ..., next: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class Rebalance(_message.Message):
    __slots__ = ("node_type",)
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    node_type: str
    def __init__(self, node_type: _Optional[str] = ...) -> None: ...

class RebalanceReply(_message.Message):
    __slots__ = ("moves",)
    MOVES_FIELD_NUMBER: _ClassVar[int]
    moves: _containers.RepeatedCompositeFieldContainer[Move]
    def __init__(self, moves: _Optional[_Iterable[_Union[Move, _Mapping]]] = ...) -> None: ...

class Move(_message.Message):
    __slots__ = ("name", "to")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    name: str
    to: int
    def __init__(self, name: _Optional[str] = ..., to: _Optional[int] = ..., **kwargs) -> None: ...

class Release(_message.Message):
    __slots__ = ("name", "term", "index")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    name: str
    term: int
    index: int
    def __init__(self, name: _Optional[str] = ..., term: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class ReleaseSlot(_message.Message):
    __slots__ = ("group", "slot", "term", "index")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    group: str
    slot: int
    term: int
    index: int
    def __init__(self, group: _Optional[str] = ..., slot: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class WatchAssignments(_message.Message):
    __slots__ = ("node_id", "term", "index", "start_index")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    START_INDEX_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    term: int
    index: int
    start_index: int
    def __init__(self, node_id: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., start_index: _Optional[int] = ...) -> None: ...

class WatchAssignmentsReply(_message.Message):
    __slots__ = ("index", "held", "slots", "resumed")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    index: int
    held: _containers.RepeatedCompositeFieldContainer[ResourceInfo]
    slots: _containers.RepeatedCompositeFieldContainer[SlotHeld]
    resumed: bool
    def __init__(self, index: _Optional[int] = ..., held: _Optional[_Iterable[_Union[ResourceInfo, _Mapping]]] = ..., slots: _Optional[_Iterable[_Union[SlotHeld, _Mapping]]] = ..., resumed: _Optional[bool] = ...) -> None: ...

class SlotHeld(_message.Message):
    __slots__ = ("group", "slot", "version", "term", "index", "revoking")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REVOKING_FIELD_NUMBER: _ClassVar[int]
    group: str
    slot: int
    version: int
    term: int
    index: int
    revoking: bool
    def __init__(self, group: _Optional[str] = ..., slot: _Optional[int] = ..., version: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., revoking: _Optional[bool] = ...) -> None: ...

class AssignmentNotice(_message.Message):
    __slots__ = ("index", "held", "gone", "slots_held", "slots_gone")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_HELD_FIELD_NUMBER: _ClassVar[int]
    SLOTS_GONE_FIELD_NUMBER: _ClassVar[int]
    index: int
    held: _containers.RepeatedCompositeFieldContainer[ResourceInfo]
    gone: _containers.RepeatedCompositeFieldContainer[ResourceInfo]
    slots_held: _containers.RepeatedCompositeFieldContainer[SlotHeld]
    slots_gone: _containers.RepeatedCompositeFieldContainer[SlotHeld]
    def __init__(self, index: _Optional[int] = ..., held: _Optional[_Iterable[_Union[ResourceInfo, _Mapping]]] = ..., gone: _Optional[_Iterable[_Union[ResourceInfo, _Mapping]]] = ..., slots_held: _Optional[_Iterable[_Union[SlotHeld, _Mapping]]] = ..., slots_gone: _Optional[_Iterable[_Union[SlotHeld, _Mapping]]] = ...) -> None: ...

class CreateGroup(_message.Message):
    __slots__ = ("name", "node_type", "count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    node_type: str
    count: int
    def __init__(self, name: _Optional[str] = ..., node_type: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class DeleteGroup(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GroupReply(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: SlotGroupInfo
    def __init__(self, group: _Optional[_Union[SlotGroupInfo, _Mapping]] = ...) -> None: ...

class GroupsRequest(_message.Message):
    __slots__ = ("name", "limit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    name: str
    limit: int
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[int] = ..., **kwargs) -> None: ...

class GroupsReply(_message.Message):
    __slots__ = ("node", "is_leader", "index", "groups", "now_ms", "stale", "next", "total")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    node: str
    is_leader: bool
    index: int
    groups: _containers.RepeatedCompositeFieldContainer[GroupView]
    now_ms: int
    stale: str
    next: str
    total: int
    def __init__(self, node: _Optional[str] = ..., is_leader: _Optional[bool] = ..., index: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[GroupView, _Mapping]]] = ..., now_ms: _Optional[int] = ..., stale: _Optional[str] = ..., next: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class GroupView(_message.Message):
    __slots__ = ("group", "standbys")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    STANDBYS_FIELD_NUMBER: _ClassVar[int]
    group: SlotGroupInfo
    standbys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, group: _Optional[_Union[SlotGroupInfo, _Mapping]] = ..., standbys: _Optional[_Iterable[int]] = ...) -> None: ...

class Claim(_message.Message):
    __slots__ = ("group", "slot", "version", "node_id", "term", "index")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    group: str
    slot: int
    version: int
    node_id: int
    term: int
    index: int
    def __init__(self, group: _Optional[str] = ..., slot: _Optional[int] = ..., version: _Optional[int] = ..., node_id: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class Reassign(_message.Message):
    __slots__ = ("node_type",)
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    node_type: str
    def __init__(self, node_type: _Optional[str] = ...) -> None: ...

class AssignmentEvent(_message.Message):
    __slots__ = ("start", "notice")
    START_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    start: WatchAssignmentsReply
    notice: AssignmentNotice
    def __init__(self, start: _Optional[_Union[WatchAssignmentsReply, _Mapping]] = ..., notice: _Optional[_Union[AssignmentNotice, _Mapping]] = ...) -> None: ...

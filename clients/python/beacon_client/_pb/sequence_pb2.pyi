from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SequenceEntry(_message.Message):
    __slots__ = ("put", "delete", "advance", "give_back")
    PUT_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    ADVANCE_FIELD_NUMBER: _ClassVar[int]
    GIVE_BACK_FIELD_NUMBER: _ClassVar[int]
    put: SequenceInfo
    delete: str
    advance: Segment
    give_back: Segment
    def __init__(self, put: _Optional[_Union[SequenceInfo, _Mapping]] = ..., delete: _Optional[str] = ..., advance: _Optional[_Union[Segment, _Mapping]] = ..., give_back: _Optional[_Union[Segment, _Mapping]] = ...) -> None: ...

class SequenceSnapshot(_message.Message):
    __slots__ = ("sequences",)
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    sequences: _containers.RepeatedCompositeFieldContainer[SequenceInfo]
    def __init__(self, sequences: _Optional[_Iterable[_Union[SequenceInfo, _Mapping]]] = ...) -> None: ...

class SequenceInfo(_message.Message):
    __slots__ = ("name", "max", "step", "segments", "last_ms", "last_index", "created_ms", "last_start")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    LAST_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_START_FIELD_NUMBER: _ClassVar[int]
    name: str
    max: int
    step: int
    segments: int
    last_ms: int
    last_index: int
    created_ms: int
    last_start: int
    def __init__(self, name: _Optional[str] = ..., max: _Optional[int] = ..., step: _Optional[int] = ..., segments: _Optional[int] = ..., last_ms: _Optional[int] = ..., last_index: _Optional[int] = ..., created_ms: _Optional[int] = ..., last_start: _Optional[int] = ...) -> None: ...

class Segment(_message.Message):
    __slots__ = ("name", "start", "end", "index", "wall_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    WALL_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    start: int
    end: int
    index: int
    wall_ms: int
    def __init__(self, name: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ..., index: _Optional[int] = ..., wall_ms: _Optional[int] = ...) -> None: ...

class CreateSequence(_message.Message):
    __slots__ = ("name", "start", "step")
    NAME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    name: str
    start: int
    step: int
    def __init__(self, name: _Optional[str] = ..., start: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...

class ChangeSequence(_message.Message):
    __slots__ = ("name", "step", "start")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    name: str
    step: int
    start: int
    def __init__(self, name: _Optional[str] = ..., step: _Optional[int] = ..., start: _Optional[int] = ...) -> None: ...

class DeleteSequence(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class SequenceReply(_message.Message):
    __slots__ = ("sequence",)
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    sequence: SequenceInfo
    def __init__(self, sequence: _Optional[_Union[SequenceInfo, _Mapping]] = ...) -> None: ...

class NextSegment(_message.Message):
    __slots__ = ("name", "count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class SegmentReply(_message.Message):
    __slots__ = ("segment", "step", "max_step")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    MAX_STEP_FIELD_NUMBER: _ClassVar[int]
    segment: Segment
    step: int
    max_step: int
    def __init__(self, segment: _Optional[_Union[Segment, _Mapping]] = ..., step: _Optional[int] = ..., max_step: _Optional[int] = ...) -> None: ...

class GiveBack(_message.Message):
    __slots__ = ("name", "start", "end", "index")
    NAME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    name: str
    start: int
    end: int
    index: int
    def __init__(self, name: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class SequencesRequest(_message.Message):
    __slots__ = ("name", "limit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    name: str
    limit: int
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[int] = ..., **kwargs) -> None: ...

class SequencesReply(_message.Message):
    __slots__ = ("node", "is_leader", "index", "sequences", "now_ms", "stale", "next", "total")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    node: str
    is_leader: bool
    index: int
    sequences: _containers.RepeatedCompositeFieldContainer[SequenceInfo]
    now_ms: int
    stale: str
    next: str
    total: int
    def __init__(self, node: _Optional[str] = ..., is_leader: _Optional[bool] = ..., index: _Optional[int] = ..., sequences: _Optional[_Iterable[_Union[SequenceInfo, _Mapping]]] = ..., now_ms: _Optional[int] = ..., stale: _Optional[str] = ..., next: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

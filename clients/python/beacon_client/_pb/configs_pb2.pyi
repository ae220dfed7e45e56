from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigEntry(_message.Message):
    __slots__ = ("write",)
    WRITE_FIELD_NUMBER: _ClassVar[int]
    write: ConfigWrite
    def __init__(self, write: _Optional[_Union[ConfigWrite, _Mapping]] = ...) -> None: ...

class ConfigSnapshot(_message.Message):
    __slots__ = ("documents",)
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ...) -> None: ...

class ConfigWrite(_message.Message):
    __slots__ = ("revision", "wall_ms", "checks", "ops")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    WALL_MS_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    revision: int
    wall_ms: int
    checks: _containers.RepeatedCompositeFieldContainer[Check]
    ops: _containers.RepeatedCompositeFieldContainer[Op]
    def __init__(self, revision: _Optional[int] = ..., wall_ms: _Optional[int] = ..., checks: _Optional[_Iterable[_Union[Check, _Mapping]]] = ..., ops: _Optional[_Iterable[_Union[Op, _Mapping]]] = ...) -> None: ...

class Check(_message.Message):
    __slots__ = ("key", "revision")
    KEY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    key: str
    revision: int
    def __init__(self, key: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class Op(_message.Message):
    __slots__ = ("key", "value", "json", "path", "delete")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    json: bool
    path: str
    delete: bool
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., json: _Optional[bool] = ..., path: _Optional[str] = ..., delete: _Optional[bool] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("key", "value", "json", "path", "revision", "created", "version", "wall_ms", "history")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WALL_MS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    json: bool
    path: str
    revision: int
    created: int
    version: int
    wall_ms: int
    history: _containers.RepeatedCompositeFieldContainer[Past]
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., json: _Optional[bool] = ..., path: _Optional[str] = ..., revision: _Optional[int] = ..., created: _Optional[int] = ..., version: _Optional[int] = ..., wall_ms: _Optional[int] = ..., history: _Optional[_Iterable[_Union[Past, _Mapping]]] = ...) -> None: ...

class Past(_message.Message):
    __slots__ = ("revision", "value", "wall_ms")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    WALL_MS_FIELD_NUMBER: _ClassVar[int]
    revision: int
    value: bytes
    wall_ms: int
    def __init__(self, revision: _Optional[int] = ..., value: _Optional[bytes] = ..., wall_ms: _Optional[int] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("checks", "ops")
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    checks: _containers.RepeatedCompositeFieldContainer[Check]
    ops: _containers.RepeatedCompositeFieldContainer[Op]
    def __init__(self, checks: _Optional[_Iterable[_Union[Check, _Mapping]]] = ..., ops: _Optional[_Iterable[_Union[Op, _Mapping]]] = ...) -> None: ...

class WriteReply(_message.Message):
    __slots__ = ("revision", "deleted")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    revision: int
    deleted: int
    def __init__(self, revision: _Optional[int] = ..., deleted: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("key", "prefix")
    KEY_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    key: str
    prefix: bool
    def __init__(self, key: _Optional[str] = ..., prefix: _Optional[bool] = ...) -> None: ...

class GetReply(_message.Message):
    __slots__ = ("documents", "index", "node")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    index: int
    node: str
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., index: _Optional[int] = ..., node: _Optional[str] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class HistoryReply(_message.Message):
    __slots__ = ("history", "index")
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    history: _containers.RepeatedCompositeFieldContainer[Past]
    index: int
    def __init__(self, history: _Optional[_Iterable[_Union[Past, _Mapping]]] = ..., index: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("prefixes", "service", "start_index")
    PREFIXES_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    START_INDEX_FIELD_NUMBER: _ClassVar[int]
    prefixes: _containers.RepeatedScalarFieldContainer[str]
    service: ServiceScope
    start_index: int
    def __init__(self, prefixes: _Optional[_Iterable[str]] = ..., service: _Optional[_Union[ServiceScope, _Mapping]] = ..., start_index: _Optional[int] = ...) -> None: ...

class ServiceScope(_message.Message):
    __slots__ = ("node_type", "addr", "node_id")
    NODE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_type: str
    addr: str
    node_id: int
    def __init__(self, node_type: _Optional[str] = ..., addr: _Optional[str] = ..., node_id: _Optional[int] = ...) -> None: ...

class WatchReply(_message.Message):
    __slots__ = ("documents", "index", "resumed")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    index: int
    resumed: bool
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., index: _Optional[int] = ..., resumed: _Optional[bool] = ...) -> None: ...

class ConfigNotice(_message.Message):
    __slots__ = ("index", "put", "deleted")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    index: int
    put: _containers.RepeatedCompositeFieldContainer[Document]
    deleted: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, index: _Optional[int] = ..., put: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., deleted: _Optional[_Iterable[str]] = ...) -> None: ...

class ConfigEvent(_message.Message):
    __slots__ = ("start", "notice")
    START_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    start: WatchReply
    notice: ConfigNotice
    def __init__(self, start: _Optional[_Union[WatchReply, _Mapping]] = ..., notice: _Optional[_Union[ConfigNotice, _Mapping]] = ...) -> None: ...

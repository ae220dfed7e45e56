from . import beacon_pb2 as _beacon_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TasksEntry(_message.Message):
    __slots__ = ("create_queue", "delete_queue", "submit", "start", "finish", "serve", "retire", "requeue", "purge")
    CREATE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    DELETE_QUEUE_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    FINISH_FIELD_NUMBER: _ClassVar[int]
    SERVE_FIELD_NUMBER: _ClassVar[int]
    RETIRE_FIELD_NUMBER: _ClassVar[int]
    REQUEUE_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    create_queue: QueueInfo
    delete_queue: str
    submit: TaskInfo
    start: Starts
    finish: Finishes
    serve: WorkerInfo
    retire: Retire
    requeue: TaskKeys
    purge: TaskKeys
    def __init__(self, create_queue: _Optional[_Union[QueueInfo, _Mapping]] = ..., delete_queue: _Optional[str] = ..., submit: _Optional[_Union[TaskInfo, _Mapping]] = ..., start: _Optional[_Union[Starts, _Mapping]] = ..., finish: _Optional[_Union[Finishes, _Mapping]] = ..., serve: _Optional[_Union[WorkerInfo, _Mapping]] = ..., retire: _Optional[_Union[Retire, _Mapping]] = ..., requeue: _Optional[_Union[TaskKeys, _Mapping]] = ..., purge: _Optional[_Union[TaskKeys, _Mapping]] = ...) -> None: ...

class Starts(_message.Message):
    __slots__ = ("starts",)
    STARTS_FIELD_NUMBER: _ClassVar[int]
    starts: _containers.RepeatedCompositeFieldContainer[StartInfo]
    def __init__(self, starts: _Optional[_Iterable[_Union[StartInfo, _Mapping]]] = ...) -> None: ...

class StartInfo(_message.Message):
    __slots__ = ("queue", "name", "run")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    run: RunInfo
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., run: _Optional[_Union[RunInfo, _Mapping]] = ...) -> None: ...

class Finishes(_message.Message):
    __slots__ = ("finishes",)
    FINISHES_FIELD_NUMBER: _ClassVar[int]
    finishes: _containers.RepeatedCompositeFieldContainer[FinishInfo]
    def __init__(self, finishes: _Optional[_Iterable[_Union[FinishInfo, _Mapping]]] = ...) -> None: ...

class FinishInfo(_message.Message):
    __slots__ = ("queue", "name", "has_token", "term", "index", "to", "not_before_ms", "result", "error", "at_ms")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    HAS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    has_token: bool
    term: int
    index: int
    to: int
    not_before_ms: int
    result: bytes
    error: str
    at_ms: int
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., has_token: _Optional[bool] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., to: _Optional[int] = ..., not_before_ms: _Optional[int] = ..., result: _Optional[bytes] = ..., error: _Optional[str] = ..., at_ms: _Optional[int] = ...) -> None: ...

class Retire(_message.Message):
    __slots__ = ("workers", "finishes")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    FINISHES_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerRef]
    finishes: _containers.RepeatedCompositeFieldContainer[FinishInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerRef, _Mapping]]] = ..., finishes: _Optional[_Iterable[_Union[FinishInfo, _Mapping]]] = ...) -> None: ...

class WorkerRef(_message.Message):
    __slots__ = ("node_id", "term", "index")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    term: int
    index: int
    def __init__(self, node_id: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class TaskKeys(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[TaskKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[TaskKey, _Mapping]]] = ...) -> None: ...

class TaskKey(_message.Message):
    __slots__ = ("queue", "name")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class TasksSnapshot(_message.Message):
    __slots__ = ("queues", "tasks", "workers")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ..., tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ..., workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("name", "timeout_ms", "max_attempts", "created_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    timeout_ms: int
    max_attempts: int
    created_ms: int
    def __init__(self, name: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ..., created_ms: _Optional[int] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("id", "queues", "capacity")
    ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    id: WorkerRef
    queues: _containers.RepeatedScalarFieldContainer[str]
    capacity: int
    def __init__(self, id: _Optional[_Union[WorkerRef, _Mapping]] = ..., queues: _Optional[_Iterable[str]] = ..., capacity: _Optional[int] = ...) -> None: ...

class RunInfo(_message.Message):
    __slots__ = ("worker", "term", "index", "started_ms")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    worker: WorkerRef
    term: int
    index: int
    started_ms: int
    def __init__(self, worker: _Optional[_Union[WorkerRef, _Mapping]] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., started_ms: _Optional[int] = ...) -> None: ...

class TaskInfo(_message.Message):
    __slots__ = ("queue", "name", "payload", "priority", "timeout_ms", "max_attempts", "submitted_ms", "seq", "not_before_ms", "attempt", "state", "run", "result", "error", "finished_ms", "has_ended", "ended_term", "ended_index", "submit_id")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_MS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISHED_MS_FIELD_NUMBER: _ClassVar[int]
    HAS_ENDED_FIELD_NUMBER: _ClassVar[int]
    ENDED_TERM_FIELD_NUMBER: _ClassVar[int]
    ENDED_INDEX_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_ID_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    payload: bytes
    priority: int
    timeout_ms: int
    max_attempts: int
    submitted_ms: int
    seq: int
    not_before_ms: int
    attempt: int
    state: str
    run: RunInfo
    result: bytes
    error: str
    finished_ms: int
    has_ended: bool
    ended_term: int
    ended_index: int
    submit_id: int
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., payload: _Optional[bytes] = ..., priority: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ..., submitted_ms: _Optional[int] = ..., seq: _Optional[int] = ..., not_before_ms: _Optional[int] = ..., attempt: _Optional[int] = ..., state: _Optional[str] = ..., run: _Optional[_Union[RunInfo, _Mapping]] = ..., result: _Optional[bytes] = ..., error: _Optional[str] = ..., finished_ms: _Optional[int] = ..., has_ended: _Optional[bool] = ..., ended_term: _Optional[int] = ..., ended_index: _Optional[int] = ..., submit_id: _Optional[int] = ...) -> None: ...

class CreateQueue(_message.Message):
    __slots__ = ("name", "timeout_ms", "max_attempts")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    timeout_ms: int
    max_attempts: int
    def __init__(self, name: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ...) -> None: ...

class DeleteQueue(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class QueueReply(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: QueueInfo
    def __init__(self, queue: _Optional[_Union[QueueInfo, _Mapping]] = ...) -> None: ...

class Submit(_message.Message):
    __slots__ = ("queue", "name", "payload", "priority", "timeout_ms", "max_attempts", "delay_ms", "submit_id")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_ID_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    payload: bytes
    priority: int
    timeout_ms: int
    max_attempts: int
    delay_ms: int
    submit_id: int
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., payload: _Optional[bytes] = ..., priority: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ..., delay_ms: _Optional[int] = ..., submit_id: _Optional[int] = ...) -> None: ...

class TaskReply(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: TaskInfo
    def __init__(self, task: _Optional[_Union[TaskInfo, _Mapping]] = ...) -> None: ...

class GetTask(_message.Message):
    __slots__ = ("queue", "name")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class TasksRequest(_message.Message):
    __slots__ = ("queue", "state", "limit", "brief")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    BRIEF_FIELD_NUMBER: _ClassVar[int]
    queue: str
    state: str
    limit: int
    brief: bool
    def __init__(self, queue: _Optional[str] = ..., state: _Optional[str] = ..., limit: _Optional[int] = ..., brief: _Optional[bool] = ...) -> None: ...

class TasksReply(_message.Message):
    __slots__ = ("node", "is_leader", "index", "tasks", "total", "now_ms", "stale")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    node: str
    is_leader: bool
    index: int
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    total: int
    now_ms: int
    stale: str
    def __init__(self, node: _Optional[str] = ..., is_leader: _Optional[bool] = ..., index: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ..., total: _Optional[int] = ..., now_ms: _Optional[int] = ..., stale: _Optional[str] = ...) -> None: ...

class QueuesRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ..., **kwargs) -> None: ...

class QueuesReply(_message.Message):
    __slots__ = ("node", "is_leader", "index", "queues", "now_ms", "stale", "next", "total")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    node: str
    is_leader: bool
    index: int
    queues: _containers.RepeatedCompositeFieldContainer[QueueView]
    now_ms: int
    stale: str
    next: str
    total: int
    def __init__(self, node: _Optional[str] = ..., is_leader: _Optional[bool] = ..., index: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[QueueView, _Mapping]]] = ..., now_ms: _Optional[int] = ..., stale: _Optional[str] = ..., next: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...

class QueueView(_message.Message):
    __slots__ = ("queue", "pending", "running", "completed", "failed", "dead", "cancelled", "oldest_pending_ms", "workers", "capacity")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    OLDEST_PENDING_MS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    queue: QueueInfo
    pending: int
    running: int
    completed: int
    failed: int
    dead: int
    cancelled: int
    oldest_pending_ms: int
    workers: int
    capacity: int
    def __init__(self, queue: _Optional[_Union[QueueInfo, _Mapping]] = ..., pending: _Optional[int] = ..., running: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., dead: _Optional[int] = ..., cancelled: _Optional[int] = ..., oldest_pending_ms: _Optional[int] = ..., workers: _Optional[int] = ..., capacity: _Optional[int] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("queue", "name")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Complete(_message.Message):
    __slots__ = ("queue", "name", "term", "index", "result")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    term: int
    index: int
    result: bytes
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., result: _Optional[bytes] = ...) -> None: ...

class Fail(_message.Message):
    __slots__ = ("queue", "name", "term", "index", "error", "retry")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    term: int
    index: int
    error: str
    retry: bool
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., error: _Optional[str] = ..., retry: _Optional[bool] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("queue", "name", "term", "index")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    queue: str
    name: str
    term: int
    index: int
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ..., term: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class Work(_message.Message):
    __slots__ = ("node_id", "term", "index", "queues", "capacity")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    term: int
    index: int
    queues: _containers.RepeatedScalarFieldContainer[str]
    capacity: int
    def __init__(self, node_id: _Optional[int] = ..., term: _Optional[int] = ..., index: _Optional[int] = ..., queues: _Optional[_Iterable[str]] = ..., capacity: _Optional[int] = ...) -> None: ...

class WorkReply(_message.Message):
    __slots__ = ("index", "running")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    index: int
    running: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    def __init__(self, index: _Optional[int] = ..., running: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ...) -> None: ...

class WorkNotice(_message.Message):
    __slots__ = ("index", "started", "lost")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    index: int
    started: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    lost: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    def __init__(self, index: _Optional[int] = ..., started: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ..., lost: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ...) -> None: ...

class WatchQueue(_message.Message):
    __slots__ = ("queue", "names", "start_index")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    START_INDEX_FIELD_NUMBER: _ClassVar[int]
    queue: str
    names: _containers.RepeatedScalarFieldContainer[str]
    start_index: int
    def __init__(self, queue: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., start_index: _Optional[int] = ...) -> None: ...

class WatchQueueReply(_message.Message):
    __slots__ = ("index", "finished", "unknown", "resumed")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    index: int
    finished: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    unknown: _containers.RepeatedScalarFieldContainer[str]
    resumed: bool
    def __init__(self, index: _Optional[int] = ..., finished: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ..., unknown: _Optional[_Iterable[str]] = ..., resumed: _Optional[bool] = ...) -> None: ...

class QueueNotice(_message.Message):
    __slots__ = ("index", "finished")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    index: int
    finished: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    def __init__(self, index: _Optional[int] = ..., finished: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ...) -> None: ...

class Requeue(_message.Message):
    __slots__ = ("queue", "names")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queue: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...

class Purge(_message.Message):
    __slots__ = ("queue", "names")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queue: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...

class TasksDone(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ...) -> None: ...

class WorkEvent(_message.Message):
    __slots__ = ("start", "notice")
    START_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    start: WorkReply
    notice: WorkNotice
    def __init__(self, start: _Optional[_Union[WorkReply, _Mapping]] = ..., notice: _Optional[_Union[WorkNotice, _Mapping]] = ...) -> None: ...

class QueueEvent(_message.Message):
    __slots__ = ("start", "notice")
    START_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    start: WatchQueueReply
    notice: QueueNotice
    def __init__(self, start: _Optional[_Union[WatchQueueReply, _Mapping]] = ..., notice: _Optional[_Union[QueueNotice, _Mapping]] = ...) -> None: ...

class WorkerRequest(_message.Message):
    __slots__ = ("work", "complete", "fail", "heartbeat")
    WORK_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    work: Work
    complete: Complete
    fail: Fail
    heartbeat: Heartbeat
    def __init__(self, work: _Optional[_Union[Work, _Mapping]] = ..., complete: _Optional[_Union[Complete, _Mapping]] = ..., fail: _Optional[_Union[Fail, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class WorkerEvent(_message.Message):
    __slots__ = ("start", "notice", "reported", "refused")
    START_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    REPORTED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    start: WorkReply
    notice: WorkNotice
    reported: TaskReply
    refused: _beacon_pb2.ErrorReply
    def __init__(self, start: _Optional[_Union[WorkReply, _Mapping]] = ..., notice: _Optional[_Union[WorkNotice, _Mapping]] = ..., reported: _Optional[_Union[TaskReply, _Mapping]] = ..., refused: _Optional[_Union[_beacon_pb2.ErrorReply, _Mapping]] = ...) -> None: ...

from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_PEER: _ClassVar[Role]
    ROLE_CLIENT: _ClassVar[Role]
    ROLE_RELAY: _ClassVar[Role]
ROLE_UNSPECIFIED: Role
ROLE_PEER: Role
ROLE_CLIENT: Role
ROLE_RELAY: Role

class Hello(_message.Message):
    __slots__ = ("cluster", "role", "node", "version", "election", "mode", "beacons", "token", "admin", "peer_challenge", "members_index")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    BEACONS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    PEER_CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_INDEX_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    role: Role
    node: str
    version: int
    election: Election
    mode: str
    beacons: _containers.RepeatedScalarFieldContainer[str]
    token: str
    admin: str
    peer_challenge: bytes
    members_index: int
    def __init__(self, cluster: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., node: _Optional[str] = ..., version: _Optional[int] = ..., election: _Optional[_Union[Election, _Mapping]] = ..., mode: _Optional[str] = ..., beacons: _Optional[_Iterable[str]] = ..., token: _Optional[str] = ..., admin: _Optional[str] = ..., peer_challenge: _Optional[bytes] = ..., members_index: _Optional[int] = ...) -> None: ...

class HelloAck(_message.Message):
    __slots__ = ("cluster", "node", "version", "election", "identity", "role", "admin", "peer_challenge", "peer_proof", "proof_wanted")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    PEER_CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    PEER_PROOF_FIELD_NUMBER: _ClassVar[int]
    PROOF_WANTED_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    node: str
    version: int
    election: Election
    identity: str
    role: str
    admin: str
    peer_challenge: bytes
    peer_proof: bytes
    proof_wanted: bool
    def __init__(self, cluster: _Optional[str] = ..., node: _Optional[str] = ..., version: _Optional[int] = ..., election: _Optional[_Union[Election, _Mapping]] = ..., identity: _Optional[str] = ..., role: _Optional[str] = ..., admin: _Optional[str] = ..., peer_challenge: _Optional[bytes] = ..., peer_proof: _Optional[bytes] = ..., proof_wanted: _Optional[bool] = ...) -> None: ...

class HelloProof(_message.Message):
    __slots__ = ("proof",)
    PROOF_FIELD_NUMBER: _ClassVar[int]
    proof: bytes
    def __init__(self, proof: _Optional[bytes] = ...) -> None: ...

class ErrorReply(_message.Message):
    __slots__ = ("code", "msg", "leader", "retry_after_ms")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MSG_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    code: int
    msg: str
    leader: str
    retry_after_ms: int
    def __init__(self, code: _Optional[int] = ..., msg: _Optional[str] = ..., leader: _Optional[str] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class Election(_message.Message):
    __slots__ = ("is_leader", "term", "log_index", "log_term", "commit", "prev_index", "prev_term", "entries", "snapshot", "reject", "need_snapshot", "fetch", "leader", "sees", "eligible", "beat", "ack_beat", "transfer", "members", "members_index", "voters_digest", "has_renewals", "renewals_after", "renewal_keys", "renewal_table", "renewal_base_term", "renewal_base_seq", "heard_term", "heard_seq", "tells_heard", "has_renewal_bridge", "renewal_bridge_after", "renewal_bridge_keys")
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    PREV_INDEX_FIELD_NUMBER: _ClassVar[int]
    PREV_TERM_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    NEED_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    SEES_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_FIELD_NUMBER: _ClassVar[int]
    BEAT_FIELD_NUMBER: _ClassVar[int]
    ACK_BEAT_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_INDEX_FIELD_NUMBER: _ClassVar[int]
    VOTERS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    HAS_RENEWALS_FIELD_NUMBER: _ClassVar[int]
    RENEWALS_AFTER_FIELD_NUMBER: _ClassVar[int]
    RENEWAL_KEYS_FIELD_NUMBER: _ClassVar[int]
    RENEWAL_TABLE_FIELD_NUMBER: _ClassVar[int]
    RENEWAL_BASE_TERM_FIELD_NUMBER: _ClassVar[int]
    RENEWAL_BASE_SEQ_FIELD_NUMBER: _ClassVar[int]
    HEARD_TERM_FIELD_NUMBER: _ClassVar[int]
    HEARD_SEQ_FIELD_NUMBER: _ClassVar[int]
    TELLS_HEARD_FIELD_NUMBER: _ClassVar[int]
    HAS_RENEWAL_BRIDGE_FIELD_NUMBER: _ClassVar[int]
    RENEWAL_BRIDGE_AFTER_FIELD_NUMBER: _ClassVar[int]
    RENEWAL_BRIDGE_KEYS_FIELD_NUMBER: _ClassVar[int]
    is_leader: int
    term: int
    log_index: int
    log_term: int
    commit: int
    prev_index: int
    prev_term: int
    entries: _containers.RepeatedScalarFieldContainer[bytes]
    snapshot: bytes
    reject: bool
    need_snapshot: bool
    fetch: bool
    leader: str
    sees: int
    eligible: bool
    beat: int
    ack_beat: int
    transfer: bool
    members: Members
    members_index: int
    voters_digest: int
    has_renewals: bool
    renewals_after: int
    renewal_keys: _containers.RepeatedScalarFieldContainer[int]
    renewal_table: RenewalTable
    renewal_base_term: int
    renewal_base_seq: int
    heard_term: int
    heard_seq: int
    tells_heard: bool
    has_renewal_bridge: bool
    renewal_bridge_after: int
    renewal_bridge_keys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, is_leader: _Optional[int] = ..., term: _Optional[int] = ..., log_index: _Optional[int] = ..., log_term: _Optional[int] = ..., commit: _Optional[int] = ..., prev_index: _Optional[int] = ..., prev_term: _Optional[int] = ..., entries: _Optional[_Iterable[bytes]] = ..., snapshot: _Optional[bytes] = ..., reject: _Optional[bool] = ..., need_snapshot: _Optional[bool] = ..., fetch: _Optional[bool] = ..., leader: _Optional[str] = ..., sees: _Optional[int] = ..., eligible: _Optional[bool] = ..., beat: _Optional[int] = ..., ack_beat: _Optional[int] = ..., transfer: _Optional[bool] = ..., members: _Optional[_Union[Members, _Mapping]] = ..., members_index: _Optional[int] = ..., voters_digest: _Optional[int] = ..., has_renewals: _Optional[bool] = ..., renewals_after: _Optional[int] = ..., renewal_keys: _Optional[_Iterable[int]] = ..., renewal_table: _Optional[_Union[RenewalTable, _Mapping]] = ..., renewal_base_term: _Optional[int] = ..., renewal_base_seq: _Optional[int] = ..., heard_term: _Optional[int] = ..., heard_seq: _Optional[int] = ..., tells_heard: _Optional[bool] = ..., has_renewal_bridge: _Optional[bool] = ..., renewal_bridge_after: _Optional[int] = ..., renewal_bridge_keys: _Optional[_Iterable[int]] = ...) -> None: ...

class RenewalTable(_message.Message):
    __slots__ = ("keys", "ages_ms", "has_rest", "rest_age_ms")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    AGES_MS_FIELD_NUMBER: _ClassVar[int]
    HAS_REST_FIELD_NUMBER: _ClassVar[int]
    REST_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[int]
    ages_ms: _containers.RepeatedScalarFieldContainer[int]
    has_rest: bool
    rest_age_ms: int
    def __init__(self, keys: _Optional[_Iterable[int]] = ..., ages_ms: _Optional[_Iterable[int]] = ..., has_rest: _Optional[bool] = ..., rest_age_ms: _Optional[int] = ...) -> None: ...

class LogEntry(_message.Message):
    __slots__ = ("index", "term", "leader_start", "known_commit", "members")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LEADER_START_FIELD_NUMBER: _ClassVar[int]
    KNOWN_COMMIT_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    leader_start: bool
    known_commit: int
    members: Members
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., leader_start: _Optional[bool] = ..., known_commit: _Optional[int] = ..., members: _Optional[_Union[Members, _Mapping]] = ...) -> None: ...

class Members(_message.Message):
    __slots__ = ("voters", "learners", "promoting")
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    PROMOTING_FIELD_NUMBER: _ClassVar[int]
    voters: _containers.RepeatedScalarFieldContainer[str]
    learners: _containers.RepeatedScalarFieldContainer[str]
    promoting: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, voters: _Optional[_Iterable[str]] = ..., learners: _Optional[_Iterable[str]] = ..., promoting: _Optional[_Iterable[str]] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("index", "term", "members")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    members: Members
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., members: _Optional[_Union[Members, _Mapping]] = ...) -> None: ...

class TransferLeaderRequest(_message.Message):
    __slots__ = ("to",)
    TO_FIELD_NUMBER: _ClassVar[int]
    to: str
    def __init__(self, to: _Optional[str] = ...) -> None: ...

class TransferLeaderReply(_message.Message):
    __slots__ = ("leader", "previous")
    LEADER_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    leader: str
    previous: str
    def __init__(self, leader: _Optional[str] = ..., previous: _Optional[str] = ...) -> None: ...

class BeaconStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BeaconStatus(_message.Message):
    __slots__ = ("node", "cluster", "term", "leader", "tick_ms", "uptime_ms", "beacons", "mode", "commit", "index", "log_term", "stale", "version", "cannot_write", "lag", "members_index", "step_gap_worst_ms", "queue_wait_worst_ms")
    NODE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    TICK_MS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_MS_FIELD_NUMBER: _ClassVar[int]
    BEACONS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CANNOT_WRITE_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_INDEX_FIELD_NUMBER: _ClassVar[int]
    STEP_GAP_WORST_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WAIT_WORST_MS_FIELD_NUMBER: _ClassVar[int]
    node: str
    cluster: str
    term: int
    leader: str
    tick_ms: int
    uptime_ms: int
    beacons: _containers.RepeatedCompositeFieldContainer[BeaconEntry]
    mode: str
    commit: int
    index: int
    log_term: int
    stale: str
    version: str
    cannot_write: str
    lag: int
    members_index: int
    step_gap_worst_ms: int
    queue_wait_worst_ms: int
    def __init__(self, node: _Optional[str] = ..., cluster: _Optional[str] = ..., term: _Optional[int] = ..., leader: _Optional[str] = ..., tick_ms: _Optional[int] = ..., uptime_ms: _Optional[int] = ..., beacons: _Optional[_Iterable[_Union[BeaconEntry, _Mapping]]] = ..., mode: _Optional[str] = ..., commit: _Optional[int] = ..., index: _Optional[int] = ..., log_term: _Optional[int] = ..., stale: _Optional[str] = ..., version: _Optional[str] = ..., cannot_write: _Optional[str] = ..., lag: _Optional[int] = ..., members_index: _Optional[int] = ..., step_gap_worst_ms: _Optional[int] = ..., queue_wait_worst_ms: _Optional[int] = ...) -> None: ...

class BeaconEntry(_message.Message):
    __slots__ = ("node", "is_leader", "is_online", "term", "last_seen_ms", "is_self", "stored", "follows", "admin", "role", "promoting", "leaving")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    IS_ONLINE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    IS_SELF_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    FOLLOWS_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PROMOTING_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    node: str
    is_leader: bool
    is_online: bool
    term: int
    last_seen_ms: int
    is_self: bool
    stored: int
    follows: str
    admin: str
    role: str
    promoting: bool
    leaving: bool
    def __init__(self, node: _Optional[str] = ..., is_leader: _Optional[bool] = ..., is_online: _Optional[bool] = ..., term: _Optional[int] = ..., last_seen_ms: _Optional[int] = ..., is_self: _Optional[bool] = ..., stored: _Optional[int] = ..., follows: _Optional[str] = ..., admin: _Optional[str] = ..., role: _Optional[str] = ..., promoting: _Optional[bool] = ..., leaving: _Optional[bool] = ...) -> None: ...

class Relayed(_message.Message):
    __slots__ = ("cmd", "body", "identity", "role", "proof", "cancel")
    CMD_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    cmd: int
    body: bytes
    identity: str
    role: str
    proof: str
    cancel: bool
    def __init__(self, cmd: _Optional[int] = ..., body: _Optional[bytes] = ..., identity: _Optional[str] = ..., role: _Optional[str] = ..., proof: _Optional[str] = ..., cancel: _Optional[bool] = ...) -> None: ...

class ReadIndexRequest(_message.Message):
    __slots__ = ("asker", "term")
    ASKER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    asker: str
    term: int
    def __init__(self, asker: _Optional[str] = ..., term: _Optional[int] = ...) -> None: ...

class ReadIndexReply(_message.Message):
    __slots__ = ("index", "leader", "machines")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    MACHINES_FIELD_NUMBER: _ClassVar[int]
    index: int
    leader: str
    machines: _containers.RepeatedCompositeFieldContainer[MachineIndex]
    def __init__(self, index: _Optional[int] = ..., leader: _Optional[str] = ..., machines: _Optional[_Iterable[_Union[MachineIndex, _Mapping]]] = ...) -> None: ...

class VouchRequest(_message.Message):
    __slots__ = ("leader", "term")
    LEADER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    leader: str
    term: int
    def __init__(self, leader: _Optional[str] = ..., term: _Optional[int] = ...) -> None: ...

class VouchReply(_message.Message):
    __slots__ = ("term",)
    TERM_FIELD_NUMBER: _ClassVar[int]
    term: int
    def __init__(self, term: _Optional[int] = ...) -> None: ...

class MachineIndex(_message.Message):
    __slots__ = ("machine", "index")
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    machine: str
    index: int
    def __init__(self, machine: _Optional[str] = ..., index: _Optional[int] = ...) -> None: ...

class ChangeMembersRequest(_message.Message):
    __slots__ = ("action", "node", "learner")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ADD: _ClassVar[ChangeMembersRequest.Action]
        PROMOTE: _ClassVar[ChangeMembersRequest.Action]
        REMOVE: _ClassVar[ChangeMembersRequest.Action]
    ADD: ChangeMembersRequest.Action
    PROMOTE: ChangeMembersRequest.Action
    REMOVE: ChangeMembersRequest.Action
    ACTION_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    LEARNER_FIELD_NUMBER: _ClassVar[int]
    action: ChangeMembersRequest.Action
    node: str
    learner: bool
    def __init__(self, action: _Optional[_Union[ChangeMembersRequest.Action, str]] = ..., node: _Optional[str] = ..., learner: _Optional[bool] = ...) -> None: ...

class ChangeMembersReply(_message.Message):
    __slots__ = ("members", "index", "leader")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    members: Members
    index: int
    leader: str
    def __init__(self, members: _Optional[_Union[Members, _Mapping]] = ..., index: _Optional[int] = ..., leader: _Optional[str] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BackupStart(_message.Message):
    __slots__ = ("index", "term", "size")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    size: int
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class BackupChunk(_message.Message):
    __slots__ = ("offset", "data")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    offset: int
    data: bytes
    def __init__(self, offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class BackupFile(_message.Message):
    __slots__ = ("cluster", "node", "version", "taken_at_ms", "identity", "snapshot")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TAKEN_AT_MS_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    node: str
    version: str
    taken_at_ms: int
    identity: str
    snapshot: bytes
    def __init__(self, cluster: _Optional[str] = ..., node: _Optional[str] = ..., version: _Optional[str] = ..., taken_at_ms: _Optional[int] = ..., identity: _Optional[str] = ..., snapshot: _Optional[bytes] = ...) -> None: ...

"""beacon's Python client: node IDs with leases, discovery, sequences and snowflake IDs,
slots and resources, task queues, config documents, over beacon's gRPC API.

    from beacon_client import Client

    client = Client(["10.0.0.1:16000", "10.0.0.2:16000", "10.0.0.3:16000"])
    reg = client.register("LOGIC", "10.0.0.5:8080", on_lost=lambda why: print("lost:", why))
    print(reg.node_id, reg.fencing_token)
"""

from .assignments import Assignments, Event
from .checks import CallbackCheck, Check, GrpcCheck, HttpCheck, TcpCheck
from .client import Client
from .configs import ConfigWatch
from .discovery import Watch
from .nodes import Node
from .errors import (
    Aborted,
    AlreadyExists,
    BeaconError,
    Busy,
    Compacted,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    LeaseLost,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    TooLarge,
    Unauthenticated,
    Unavailable,
)
from .registration import Registration
from .sequence import Sequence, Snowflake, decode
from .tasks import TaskFailure, Worker

__all__ = [
    "Aborted", "AlreadyExists", "Assignments", "BeaconError", "Busy", "CallbackCheck", "Check",
    "Client", "Compacted", "ConfigWatch", "GrpcCheck", "HttpCheck", "TcpCheck",
    "DeadlineExceeded",
    "Event", "FailedPrecondition", "InvalidArgument", "LeaseLost", "Node", "NotFound",
    "PermissionDenied", "Registration", "ResourceExhausted", "Sequence", "Snowflake",
    "TaskFailure", "TooLarge", "Unauthenticated", "Unavailable", "Watch", "Worker", "decode",
]

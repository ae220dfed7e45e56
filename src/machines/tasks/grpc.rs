//! Task queues' gRPC service, `beacon.v1.tasks.Tasks` (see [`crate::wire::rpc`]).

use super::wire::{TasksCmd, TasksErrorCode};
use crate::wire::rpc::{Service, service};

pub(crate) const SERVICE: Service = service! {
    "beacon.v1.tasks.Tasks", TasksCmd, TasksErrorCode;
    unary: CreateQueue, DeleteQueue, Submit, Get, List, Queues, Cancel, Complete, Fail, Heartbeat,
        Requeue, Purge;
    stream: Work, WatchQueue;
    mux: Serve = [Work, Complete, Fail, Heartbeat];
};

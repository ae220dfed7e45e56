//! Task queues' gRPC service, `beacon.v1.tasks.Tasks` (see [`crate::wire::rpc`]).

use super::wire::{TasksCmd as C, TasksErrorCode as E};
use crate::wire::rpc::{GrpcCode, Method, Service};

pub(crate) const SERVICE: Service = Service {
    name: "beacon.v1.tasks.Tasks",
    methods: &[
        Method::unary("CreateQueue", C::CreateQueue as u32),
        Method::unary("DeleteQueue", C::DeleteQueue as u32),
        Method::unary("Submit", C::Submit as u32),
        Method::unary("Get", C::Get as u32),
        Method::unary("List", C::List as u32),
        Method::unary("Queues", C::Queues as u32),
        Method::unary("Cancel", C::Cancel as u32),
        Method::unary("Complete", C::Complete as u32),
        Method::unary("Fail", C::Fail as u32),
        Method::unary("Heartbeat", C::Heartbeat as u32),
        Method::stream("Work", C::Work as u32),
        Method::stream("WatchQueue", C::WatchQueue as u32),
        Method::unary("Requeue", C::Requeue as u32),
        Method::unary("Purge", C::Purge as u32),
        Method::mux(
            "Serve",
            &[
                C::Work as u32,
                C::Complete as u32,
                C::Fail as u32,
                C::Heartbeat as u32,
            ],
        ),
    ],
    errors: &[
        (E::UnknownQueue as u32, "UNKNOWN_QUEUE", GrpcCode::NotFound),
        (E::UnknownTask as u32, "UNKNOWN_TASK", GrpcCode::NotFound),
        (
            E::QueueConflict as u32,
            "QUEUE_CONFLICT",
            GrpcCode::AlreadyExists,
        ),
        (
            E::NotTaskHolder as u32,
            "NOT_TASK_HOLDER",
            GrpcCode::FailedPrecondition,
        ),
        (
            E::TooManyTasks as u32,
            "TOO_MANY_TASKS",
            GrpcCode::ResourceExhausted,
        ),
        (
            E::TaskFinished as u32,
            "TASK_FINISHED",
            GrpcCode::FailedPrecondition,
        ),
        (
            E::QueueInUse as u32,
            "QUEUE_IN_USE",
            GrpcCode::FailedPrecondition,
        ),
        (E::TooLarge as u32, "TOO_LARGE", GrpcCode::ResourceExhausted),
    ],
};

//! Task queues' gRPC service, `beacon.v1.tasks.Tasks` (see [`crate::wire::rpc`]).

use super::wire::{TasksCmd as C, TasksErrorCode as E};
use crate::wire::rpc::{Method, Service};

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
    errors: &E::GRPC,
};

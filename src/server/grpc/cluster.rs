//! The core's gRPC service, `beacon.v1.Cluster`, and the gRPC status of each of the core's
//! error codes (each machine declares its own in its `grpc.rs`).

use crate::wire::rpc::{Method, Service};
use crate::wire::{Cmd, ErrorCode as E};

pub(crate) const SERVICE: Service = Service {
    name: "beacon.v1.Cluster",
    methods: &[
        Method::unary("Status", Cmd::BeaconStatus as u32),
        Method::unary("TransferLeader", Cmd::TransferLeader as u32),
        Method::unary("ReadIndex", Cmd::ReadIndex as u32),
        Method::unary("ChangeMembers", Cmd::ChangeMembers as u32),
    ],
    errors: &E::GRPC,
};

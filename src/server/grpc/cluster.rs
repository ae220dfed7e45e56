//! The core's gRPC service, `beacon.v1.Cluster`, and the gRPC status of each of the core's
//! error codes (each machine declares its own in its `grpc.rs`).

use crate::wire::rpc::{Service, service};
use crate::wire::{Cmd, ErrorCode};

pub(crate) const SERVICE: Service = service! {
    "beacon.v1.Cluster", Cmd, ErrorCode;
    unary: Status = BeaconStatus, TransferLeader, ReadIndex, ChangeMembers;
};

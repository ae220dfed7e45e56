//! Work assignment's gRPC service, `beacon.v1.assign.Assignments` (see
//! [`crate::wire::rpc`]).

use super::wire::{AssignCmd, AssignErrorCode};
use crate::wire::rpc::{Service, service};

pub(crate) const SERVICE: Service = service! {
    "beacon.v1.assign.Assignments", AssignCmd, AssignErrorCode;
    unary: Add, Delete, List, Rebalance, Release, CreateGroup, DeleteGroup, Groups, Claim, Reassign, ReleaseSlot;
    stream: Watch;
};

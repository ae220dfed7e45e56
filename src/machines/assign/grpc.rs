//! Work assignment's gRPC service, `beacon.v1.assign.Assignments` (see
//! [`crate::wire::rpc`]).

use super::wire::{AssignCmd as C, AssignErrorCode as E};
use crate::wire::rpc::{Method, Service};

pub(crate) const SERVICE: Service = Service {
    name: "beacon.v1.assign.Assignments",
    methods: &[
        Method::unary("Add", C::Add as u32),
        Method::unary("Delete", C::Delete as u32),
        Method::unary("List", C::List as u32),
        Method::unary("Rebalance", C::Rebalance as u32),
        Method::unary("Release", C::Release as u32),
        Method::stream("Watch", C::Watch as u32),
        Method::unary("CreateGroup", C::CreateGroup as u32),
        Method::unary("DeleteGroup", C::DeleteGroup as u32),
        Method::unary("Groups", C::Groups as u32),
        Method::unary("Claim", C::Claim as u32),
        Method::unary("Reassign", C::Reassign as u32),
        Method::unary("ReleaseSlot", C::ReleaseSlot as u32),
    ],
    errors: &E::GRPC,
};

//! Work assignment's gRPC service, `beacon.v1.assign.Assignments` (see
//! [`crate::wire::rpc`]).

use super::wire::{AssignCmd as C, AssignErrorCode as E};
use crate::wire::rpc::{GrpcCode, Method, Service};

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
    ],
    errors: &[
        (
            E::UnknownResource as u32,
            "UNKNOWN_RESOURCE",
            GrpcCode::NotFound,
        ),
        (
            E::ResourceConflict as u32,
            "RESOURCE_CONFLICT",
            GrpcCode::AlreadyExists,
        ),
        (
            E::NotResourceHolder as u32,
            "NOT_RESOURCE_HOLDER",
            GrpcCode::FailedPrecondition,
        ),
        (
            E::TooManyResources as u32,
            "TOO_MANY_RESOURCES",
            GrpcCode::ResourceExhausted,
        ),
        (E::UnknownGroup as u32, "UNKNOWN_GROUP", GrpcCode::NotFound),
        (
            E::GroupConflict as u32,
            "GROUP_CONFLICT",
            GrpcCode::AlreadyExists,
        ),
        // A compare-and-swap that lost: retry with the version now.
        (E::SlotTaken as u32, "SLOT_TAKEN", GrpcCode::Aborted),
        (
            E::GroupInUse as u32,
            "GROUP_IN_USE",
            GrpcCode::FailedPrecondition,
        ),
    ],
};

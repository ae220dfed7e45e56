//! Work assignment: resources run by live services, at most one owner at a time, moved when
//! their holder's registration ends and rebalanced on request.
//!
//! * [`state`]: the replicated resources and their holders (fencing tokens rising with each
//!   holder; a rebalancing move revokes first).
//! * [`placement`]: the leader's rules as pure functions: least load for new and orphaned
//!   resources, sticky holders, bounded rebalancing.
//!
//! * [`service`]: the leader's side: add, delete, rebalance, release, and moving the
//!   resources of ended registrations on its tick.
//! * [`wire`]: `proto/assign.proto`, its codes, its part of log entries and snapshots.
//! * `rpc`: the server's handlers; [`client`]: its calls; [`cli`]: nebcli's commands.

pub mod checker;
pub mod cli;
pub mod client;
pub mod config;
pub(crate) mod grpc;
mod metrics;
pub mod placement;
pub(crate) mod rpc;
pub mod service;
pub mod state;
pub mod wire;

pub use service::{AssignError, AssignLimits, AssignService, Request, Response};
pub use state::{Assignments, Command, Holder, Placement, Resource};
pub use wire::{AssignCmd, AssignErrorCode};

use crate::machines::{Configurable, Configured};

impl Configurable for Assignments {
    type Section = AssignLimits;
}

impl Configured<AssignLimits> for Assignments {
    fn configured(_section: &AssignLimits) -> Assignments {
        Assignments::default()
    }
}

impl Configured<AssignLimits> for AssignService {
    fn configured(section: &AssignLimits) -> AssignService {
        AssignService::new(section.clone())
    }
}

//! The node-ID registry: services register and get a node ID unique in the cluster, keep it
//! with periodic reports (a lease), and are told who else is alive.
//!
//! * [`state`]: the replicated table of registrations and quarantined IDs.
//! * [`service`]: the leader's side: decisions on requests, leases, expiry.
//! * [`wire`]: `proto/registry.proto` and the registry's parts of log entries, snapshots,
//!   heartbeats and handshakes.
//! * `rpc`: the server's handlers; [`client`]: the client API ([`Registration`], [`Watch`]);
//!   [`cli`]: nebcli's commands; [`checker`]: the workload and invariants the simulations
//!   drive it with.

mod addr_index;
pub mod checker;
pub mod cli;
pub mod client;
pub mod config;
mod damping;
mod dns;
pub(crate) mod grpc;
mod id_slots;
mod leases;
pub mod lives;
mod metrics;
mod pages;
pub(crate) mod rpc;
pub mod service;
pub mod state;
mod thin_str;
pub mod wire;

pub use client::{
    ClockShare, LeaseLost, REPORTS_PER_LEASE, RegisterOptions, Registration, Watch, WatchEvent,
};
pub use config::RegistrySettings;
pub use id_slots::IdMap;
pub use leases::TABLE_PART;
pub use service::{
    Caller, Lease, NodeFilter, NodeView, RegisterRequest, RegistryConfig, RegistryError,
    RegistryService, Report, Request, Response, Target, Unregister,
};
pub use state::{
    ApplyError, Change, Command, Exhausted, FencingToken, Health, HealthFilter, IdRange,
    InvalidRequest, NodeId, NodeRecord, Registry, RegistrySnapshot, Status, Tombstone,
    check_metadata, check_type, parse_service_addr,
};
pub use thin_str::ThinStr;
pub use wire::{LoadStats, RegistryCmd, RegistryErrorCode};

use crate::machines::{Configurable, Configured};

impl Configurable for Registry {
    type Section = RegistrySettings;
}

/// A beacon's registry starts empty and replays its stored state; IDs outside the configured
/// range are judged once the replay is over (see [`Registry::for_replay`]).
impl Configured<RegistrySettings> for Registry {
    fn configured(s: &RegistrySettings) -> Registry {
        Registry::for_replay(s.id_range, s.id_reuse_delay_ms)
    }
}

impl Configured<RegistrySettings> for RegistryService {
    fn configured(s: &RegistrySettings) -> RegistryService {
        RegistryService::new(RegistryConfig {
            lease_ms: s.lease_ms,
            subscriptions: s.subscriptions.clone(),
            damping: s.damping,
            table_part: leases::TABLE_PART,
            routine_waits: s.routine_waits,
        })
    }
}

//! The config store: replicated, versioned documents for the services' configuration
//! (ZooKeeper's znodes, etcd's keys, NebulaBeacon's `node_config`, `node_custom_config` and
//! `custom_config`), kept on the log instead of pushed and forgotten.
//!
//! * [`state`]: the documents, by key (`cluster/…`, `type/TYPE/…`, `node/IP:PORT/…`,
//!   `file/…`), each with its revision (a log index) and its last values; a write applies
//!   whole or not at all.
//! * [`service`]: the leader's checks (keys, sizes, JSON, limits, compare-and-set).
//! * [`wire`]: `proto/configs.proto`, its codes, its part of log entries and snapshots.
//! * `rpc`: the server's handlers; `grpc`: its gRPC service (`beacon.v1.configs.Configs`);
//!   [`client`]: the client API; [`cli`]: nebcli's commands.

pub mod checker;
pub mod cli;
pub mod client;
pub mod config;
mod grpc;
mod metrics;
pub(crate) mod rpc;
pub mod service;
pub mod state;
pub mod wire;

pub use service::{ConfigError, ConfigLimits, ConfigService, Request, Response};
pub use state::{ConfigStore, Document, Op, Past, Write, check_key};
pub use wire::{ConfigCmd, ConfigErrorCode};

use crate::machines::{Configurable, Configured};

impl Configurable for ConfigStore {
    type Section = ConfigLimits;
}

impl Configured<ConfigLimits> for ConfigStore {
    fn configured(section: &ConfigLimits) -> ConfigStore {
        ConfigStore::new(section.history)
    }
}

impl Configured<ConfigLimits> for ConfigService {
    fn configured(section: &ConfigLimits) -> ConfigService {
        ConfigService::new(*section)
    }
}

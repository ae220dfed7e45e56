//! beacon: a small self-hosted cluster coordinator.
//!
//! A few beacon daemons elect a leader with heartbeats ([`election`]), and answer admin
//! queries from `nebcli` over the framed protocol of [`wire`]. The election is sans-IO: it
//! takes time and inputs as arguments and returns actions; [`server`] is the tokio driver that
//! owns sockets, timers and disk.

pub mod client;
pub mod config;
pub mod coordinator;
pub mod data_dir;
pub mod election;
pub mod registry;
pub mod replication;
pub mod server;
pub mod state;
pub mod storage;
pub mod wire;

/// Protobuf messages of `proto/beacon.proto`.
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/beacon.rs"));
}

pub use config::Config;

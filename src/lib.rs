//! beacon: a small self-hosted cluster coordinator.
//!
//! The layers, from the bottom:
//!
//! * [`consensus`]: the sans-IO core. A few beacons elect a leader with heartbeats
//!   ([`consensus::election`], NebulaBeacon's rules) and replicate a log of commands to a
//!   state inside those heartbeats. It is generic over what is replicated and names no
//!   machine; time ([`time`]) and inputs are passed in, and each step returns a
//!   [`consensus::Ready`] that says what to store and what may leave before and after.
//! * [`storage`]: the term, snapshot and log on disk (or in memory, for simulations).
//! * [`wire`]: framing and the core's messages; each machine adds its own part.
//! * [`machines`]: the replicated machines, one folder each (the node-ID registry first), and
//!   the list that composes them into what a beacon replicates.
//! * `server` (the default feature of the same name): the tokio daemon that owns sockets,
//!   timers and disk and drives the core; [`client`]: the client side of the protocol, all a
//!   service links (built without `server`, as the `beacon-client` crate does, the library
//!   compiles none of the daemon's HTTP, metrics and gRPC-server dependencies); [`cli`]: what nebcli's commands share;
//!   [`auth`] and [`allow`]: who may connect, and as what.
//! * [`sim`]: what a machine brings to the simulations (its workload and invariants); the
//!   harness that runs them is in the testkit.

pub mod allow;
pub mod auth;
pub mod backup;
pub mod cli;
pub mod client;
pub mod config;
pub mod consensus;
pub mod data_dir;
pub mod machines;
pub mod net;
#[cfg(feature = "server")]
pub mod server;
pub mod settings;
pub mod sim;
pub mod storage;
pub mod time;
pub mod transport;
pub mod wire;

/// Protobuf messages: `proto/beacon.proto`'s (the core's) at the top, each machine's proto
/// file in a module of its package's name (`pb::registry`). A log entry's command is
/// decoded once and applied at once, so enums of commands are left unboxed.
#[allow(clippy::large_enum_variant)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/pb.rs"));
}

pub use config::Config;

/// This beacon's version (the package version), shown by `show beacon`, `/v1/beacon` and
/// `--version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

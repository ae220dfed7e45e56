//! The sequence issuer: named sequences that hand out numbers in segments, one log entry
//! per segment, never the same number twice (segment mode); and node-ID-based snowflake IDs
//! on the client side (see [`client::Snowflake`]).
//!
//! * [`state`]: the replicated sequences (`max`, `step`) and their commands.
//! * [`service`]: the leader's checks and limits; every answer waits for its commit.
//! * [`wire`]: `proto/sequence.proto`, its command and error codes, its part of log entries
//!   and snapshots.
//! * `rpc`: the server's handlers; [`client`]: the client API (the double-buffered
//!   [`client::Sequence`], [`client::Snowflake`]); [`cli`]: nebcli's commands;
//!   [`checker`]: the workload and invariants the simulations drive it with.

pub mod checker;
pub mod cli;
pub mod client;
pub mod config;
pub(crate) mod grpc;
mod metrics;
pub(crate) mod rpc;
pub mod service;
pub mod state;
pub mod wire;

pub use service::{Request, Response, SequenceError, SequenceLimits, SequenceService};
pub use state::{Command, InvalidSequence, Segment, SequenceRecord, Sequences, check_name};
pub use wire::{SequenceCmd, SequenceErrorCode};

use crate::machines::{Configurable, Configured};

impl Configurable for Sequences {
    type Section = SequenceLimits;
}

impl Configured<SequenceLimits> for Sequences {
    fn configured(_section: &SequenceLimits) -> Sequences {
        Sequences::default()
    }
}

impl Configured<SequenceLimits> for SequenceService {
    fn configured(section: &SequenceLimits) -> SequenceService {
        SequenceService::new(*section)
    }
}

//! The wire protocol: framing, the consensus core's messages, command codes and error codes.
//!
//! Command codes follow NebulaBeacon: odd numbers are requests, a response is the request's
//! code plus one, and 113 is the leader-election heartbeat. The codes here are the core's;
//! each replicated machine has its own range (see [`crate::machines`]).

pub(crate) mod codes;
pub mod envelope;
pub mod field;
pub mod fragment;
pub mod frame;
pub mod rpc;

use codes::codes;
pub use envelope::MachineWire;
pub use frame::{
    FLAG_ERROR, FLAG_MORE, FLAG_ONEWAY, FLAG_SERIALIZABLE, Frame, FrameCodec, FrameError,
};

use std::net::SocketAddr;

use crate::pb;

/// Protocol version carried in `Hello`. Version 2: writes that act on a registration name
/// it by its fencing token, and heartbeats carry the quorum-mode election fields. Version
/// 3: the membership is in the log (`LogEntry.members`, `Snapshot.members`), heartbeats
/// carry the leader's committed membership and a fingerprint of the sender's voters, and
/// the configured lists need no longer match; a change of membership is made only once
/// every member speaks it.
pub const PROTOCOL_VERSION: u32 = 3;

/// The oldest protocol version this beacon still serves. A rolling upgrade runs beacons of
/// two neighbouring versions side by side, so a version that changes the protocol keeps
/// serving the one before it; version 2 is the first with this rule.
pub const OLDEST_PROTOCOL_VERSION: u32 = 2;

/// A request's command code, of the core or of a machine. A response to `code` is `code + 1`.
pub trait Code: Copy + std::fmt::Debug {
    fn code(self) -> u32;

    /// The code of this request's response.
    fn response(self) -> u32 {
        self.code() + 1
    }
}

/// How fresh a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// The answer reflects every write acknowledged before the read was asked, whichever
    /// beacon answers (the read-index method). The default.
    #[default]
    Linearizable,
    /// The answering beacon's replica as it is: at once, possibly behind the leader; the
    /// answer says the log index it reflects.
    Serializable,
}

impl Consistency {
    /// The flags a request's head carries for it.
    pub fn flags(self) -> u8 {
        match self {
            Consistency::Linearizable => 0,
            Consistency::Serializable => FLAG_SERIALIZABLE,
        }
    }

    /// `l`/`linearizable` or `s`/`serializable`, as nebcli and the admin API take it.
    pub fn named(name: &str) -> Option<Consistency> {
        match name {
            "l" | "linearizable" => Some(Consistency::Linearizable),
            "s" | "serializable" => Some(Consistency::Serializable),
            _ => None,
        }
    }

    /// A request frame's consistency (the serializable flag in its head).
    pub fn of_flags(flags: u8) -> Consistency {
        if flags & FLAG_SERIALIZABLE != 0 {
            Consistency::Serializable
        } else {
            Consistency::Linearizable
        }
    }
}

codes! {
    command;
    /// The core's request command codes.
    pub enum Cmd {
        /// Handshake, first frame of every connection (`Hello` / `HelloAck`).
        Hello = 1,
        /// A dialing beacon proves it knows the peer token (`HelloProof` / `HelloAck`).
        HelloProof = 3,
        /// Hand the leadership to another beacon (`TransferLeaderRequest` / `TransferLeaderReply`).
        TransferLeader = 5,
        /// A client's request carried from a follower to the leader (`Relayed`; relay
        /// connections only): answered as the request it carries.
        Relayed = 7,
        /// The leader's read index, once a majority confirmed its leadership
        /// (`ReadIndexRequest` / `ReadIndexReply`): what a follower waits for before a
        /// linearizable read.
        ReadIndex = 9,
        /// A backup of every machine's state at one committed index (`BackupRequest` /
        /// `BackupStart`, then `BackupChunk`s pushed as cmd 13): `nebcli snapshot save`.
        Backup = 11,
        /// Pushed after `BackupStart`, one-way: the next part of the backup file.
        BackupChunk = 13,
        /// Change the membership by one beacon (`ChangeMembersRequest` /
        /// `ChangeMembersReply`): `nebcli member add|promote|remove`, `beacon --join`.
        ChangeMembers = 15,
        /// Whether the beacon asked follows a leader in a term now (`VouchRequest` /
        /// `VouchReply`): a leader of three voters asks its followers instead of running a
        /// confirmation round for its own linearizable reads.
        Vouch = 17,
        /// Beacon-to-beacon heartbeat (`Election`), one-way.
        LeaderElection = 113,
        /// A beacon's view of the beacon cluster (`BeaconStatusRequest` / `BeaconStatus`).
        BeaconStatus = 301,
    }
}

/// A wire message that does not describe a valid core or machine value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{0}")]
    Decode(#[from] prost::DecodeError),
    #[error("{field} `{value}` is not an ip:port address")]
    BadAddr { field: &'static str, value: String },
    #[error("log entry {index} carries no command")]
    NoCommand { index: u64 },
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("{0}")]
    Invalid(String),
}

/// Parses an address carried in a wire message.
pub fn parse_addr(field: &'static str, value: &str) -> Result<SocketAddr, WireError> {
    value.parse().map_err(|_| WireError::BadAddr {
        field,
        value: value.to_owned(),
    })
}

codes! {
    error;
    /// The core's codes carried by `ErrorReply`. Each machine has its own, in its own range
    /// (see [`crate::machines`]); the codes of one cluster never overlap.
    pub enum ErrorCode {
        /// The bytes were not a beacon frame (bad magic, truncated).
        BadFrame = 1 => "BAD_FRAME" InvalidArgument,
        /// The frame's body is over the configured limit.
        FrameTooLarge = 2 => "FRAME_TOO_LARGE" ResourceExhausted,
        /// The command code is not one this beacon knows.
        UnknownCommand = 3 => "UNKNOWN_COMMAND" Unimplemented,
        /// The body did not decode as the command's message, or a field is invalid.
        MalformedBody = 4 => "MALFORMED_BODY" InvalidArgument,
        /// The peer belongs to another cluster.
        WrongCluster = 5 => "WRONG_CLUSTER" FailedPrecondition,
        /// A peer announced an identity that is not a member of this beacon's cluster (or was removed from it).
        UnknownBeacon = 6 => "UNKNOWN_BEACON" FailedPrecondition,
        /// A request arrived before `Hello`.
        HandshakeRequired = 7 => "HANDSHAKE_REQUIRED" FailedPrecondition,
        /// Protocol version not spoken here.
        UnsupportedVersion = 8 => "UNSUPPORTED_VERSION" FailedPrecondition,
        /// The beacon is shutting down or cannot serve the request right now.
        Unavailable = 9 => "UNAVAILABLE" Unavailable,
        /// Writes and watches go to the leader; `ErrorReply.leader` names it when known.
        NotLeader = 10 => "NOT_LEADER" Unavailable,
        /// A field of the request is invalid (an address, a name, a size).
        InvalidRequest = 11 => "INVALID_REQUEST" InvalidArgument,
        /// Leadership moved before the write was acknowledged; retry it.
        LeaderChanged = 16 => "LEADER_CHANGED" Unavailable,
        /// A peer's configuration disagrees with this beacon's (node-ID range, mode).
        ConfigMismatch = 17 => "CONFIG_MISMATCH" FailedPrecondition,
        /// Quorum mode: the leader cannot see a majority, so it cannot write.
        NoQuorum = 18 => "NO_QUORUM" Unavailable,
        /// Who is asking is not established: no credential, or one that does not verify (a
        /// beacon without a certificate from the cluster's CA, an unknown token).
        Unauthenticated = 20 => "UNAUTHENTICATED" Unauthenticated,
        /// Who is asking is known, and may not do this.
        PermissionDenied = 21 => "PERMISSION_DENIED" PermissionDenied,
        /// A watch asked to resume from a log index older than the oldest change kept (the
        /// message names it): list the state again and watch from there.
        Compacted = 23 => "COMPACTED" OutOfRange,
        /// The beacon is over a limit of what it takes at once (`limits`): retry after
        /// `ErrorReply.retry_after_ms`, with jitter.
        Busy = 24 => "BUSY" ResourceExhausted,
    }
}

/// Code a response frame answering request `cmd` is sent with. Requests are odd; for an
/// even (invalid) request code the error still goes out under `cmd + 1` so the client's
/// sequence matching works.
pub fn response_code(cmd: u32) -> u32 {
    cmd.wrapping_add(1)
}

/// An error response to request (`cmd`, `seq`).
pub fn error_frame(cmd: u32, seq: u32, code: impl Into<u32>, msg: impl Into<String>) -> Frame {
    error_frame_to(cmd, seq, code, msg, None)
}

/// An error response naming the leader to ask instead.
pub fn error_frame_to(
    cmd: u32,
    seq: u32,
    code: impl Into<u32>,
    msg: impl Into<String>,
    leader: Option<std::net::SocketAddr>,
) -> Frame {
    error_reply_frame(
        cmd,
        seq,
        &pb::ErrorReply {
            code: code.into(),
            msg: msg.into(),
            leader: leader.map(|l| l.to_string()).unwrap_or_default(),
            retry_after_ms: 0,
        },
    )
}

/// The error response to request `cmd` carrying `reply`.
pub fn error_reply_frame(cmd: u32, seq: u32, reply: &pb::ErrorReply) -> Frame {
    Frame::new(response_code(cmd), seq, FLAG_ERROR, reply)
}

/// Maps a framing error to the code sent back for it.
pub fn error_code_for(err: &FrameError) -> ErrorCode {
    match err {
        FrameError::TooLarge { .. } => ErrorCode::FrameTooLarge,
        FrameError::MalformedBody { .. } => ErrorCode::MalformedBody,
        FrameError::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
        FrameError::BadMagic { .. } | FrameError::Truncated { .. } | FrameError::Io(_) => {
            ErrorCode::BadFrame
        }
    }
}

/// `IdsExhausted` as the docs and the gRPC details write a code's name: `IDS_EXHAUSTED`
/// (for the tests that check the docs against the codes).
#[cfg(test)]
pub(crate) fn shouted(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_nebula_numbering() {
        assert_eq!(Cmd::LeaderElection.code(), 113);
        assert_eq!(Cmd::LeaderElection.response(), 114);
        for cmd in Cmd::ALL {
            assert_eq!(cmd.code() % 2, 1, "{cmd:?} must be odd");
            assert_eq!(Cmd::from_code(cmd.code()), Some(cmd));
        }
        assert_eq!(Cmd::from_code(999), None);
    }

    #[test]
    fn addresses_are_parsed_with_the_field_named() {
        assert_eq!(
            parse_addr("Election.leader", "nowhere")
                .unwrap_err()
                .to_string(),
            "Election.leader `nowhere` is not an ip:port address"
        );
        assert!(parse_addr("x", "127.0.0.1:1").is_ok());
    }

    #[test]
    fn error_codes_round_trip() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(code as u32), Some(code));
        }
        assert_eq!(ErrorCode::from_code(0), None);
    }
}

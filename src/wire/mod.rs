//! The wire protocol: framing, command codes and error codes.
//!
//! Command codes follow NebulaBeacon: odd numbers are requests, a response is the request's
//! code plus one, and 113 is the leader-election heartbeat.

pub mod convert;
pub mod fragment;
pub mod frame;

pub use frame::{FLAG_ERROR, FLAG_MORE, FLAG_ONEWAY, Frame, FrameCodec, FrameError};

use crate::pb;

/// Protocol version carried in `Hello`. Version 2: writes that act on a registration name
/// it by its fencing token, and heartbeats carry the quorum-mode election fields.
pub const PROTOCOL_VERSION: u32 = 2;

/// Request command codes. A response to `cmd` is `cmd + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Cmd {
    /// Handshake, first frame of every connection (`Hello` / `HelloAck`).
    Hello = 1,
    /// A service's periodic report, renewing its lease (`NodeReport` / `NodeReportReply`).
    NodeReport = 101,
    /// Register a service and get its node ID (`RegisterRequest` / `RegisterReply`).
    Register = 103,
    /// Pushed to watchers, one-way: what changed (`NodeNotice`).
    NodeNotice = 105,
    /// Beacon-to-beacon heartbeat (`Election`), one-way.
    LeaderElection = 113,
    /// End a registration (`UnregisterRequest` / `UnregisterReply`).
    Unregister = 115,
    /// Follow the nodes of some types (`WatchRequest` / `WatchReply`, then `NodeNotice`s).
    Watch = 117,
    /// A beacon's view of the beacon cluster (`BeaconStatusRequest` / `BeaconStatus`).
    BeaconStatus = 301,
    /// Registered services (`NodesRequest` / `NodesReply`).
    Nodes = 303,
    /// The node-ID allocator (`IdsRequest` / `IdsReply`).
    Ids = 305,
    /// Configured subscriptions (`SubscriptionsRequest` / `SubscriptionsReply`).
    Subscriptions = 307,
}

impl Cmd {
    pub const ALL: [Cmd; 11] = [
        Cmd::Hello,
        Cmd::NodeReport,
        Cmd::Register,
        Cmd::NodeNotice,
        Cmd::LeaderElection,
        Cmd::Unregister,
        Cmd::Watch,
        Cmd::BeaconStatus,
        Cmd::Nodes,
        Cmd::Ids,
        Cmd::Subscriptions,
    ];

    pub fn code(self) -> u32 {
        self as u32
    }

    /// The code of this request's response.
    pub fn response(self) -> u32 {
        self as u32 + 1
    }

    pub fn from_code(code: u32) -> Option<Cmd> {
        Cmd::ALL.into_iter().find(|c| c.code() == code)
    }
}

/// Codes carried by `ErrorReply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ErrorCode {
    /// The bytes were not a beacon frame (bad magic, truncated).
    BadFrame = 1,
    /// The frame's body is over the configured limit.
    FrameTooLarge = 2,
    /// The command code is not one this beacon knows.
    UnknownCommand = 3,
    /// The body did not decode as the command's message, or a field is invalid.
    MalformedBody = 4,
    /// The peer belongs to another cluster.
    WrongCluster = 5,
    /// A peer announced an identity that is not in this beacon's configured list.
    UnknownBeacon = 6,
    /// A request arrived before `Hello`.
    HandshakeRequired = 7,
    /// Protocol version not spoken here.
    UnsupportedVersion = 8,
    /// The beacon is shutting down or cannot serve the request right now.
    Unavailable = 9,
    /// Writes and watches go to the leader; `ErrorReply.leader` names it when known.
    NotLeader = 10,
    /// A field of the request is invalid (address, node type, metadata).
    InvalidRequest = 11,
    /// Every node ID of the configured range is in use or in quarantine.
    IdsExhausted = 12,
    /// The address is registered under another node type.
    Conflict = 13,
    /// The reporting service holds no registration: it must stop using its ID.
    NoLease = 14,
    /// No registration matches the node ID or address given.
    UnknownTarget = 15,
    /// Leadership moved before the write was acknowledged; retry it.
    LeaderChanged = 16,
    /// A peer's configuration disagrees with this beacon's (node-ID range, mode).
    ConfigMismatch = 17,
    /// Quorum mode: the leader cannot see a majority, so it cannot write.
    NoQuorum = 18,
    /// The registration named by the request's fencing token no longer holds the node ID
    /// (it ended; the ID may have gone to another service): nothing was changed.
    NotHolder = 19,
}

impl ErrorCode {
    const ALL: [ErrorCode; 19] = [
        ErrorCode::BadFrame,
        ErrorCode::FrameTooLarge,
        ErrorCode::UnknownCommand,
        ErrorCode::MalformedBody,
        ErrorCode::WrongCluster,
        ErrorCode::UnknownBeacon,
        ErrorCode::HandshakeRequired,
        ErrorCode::UnsupportedVersion,
        ErrorCode::Unavailable,
        ErrorCode::NotLeader,
        ErrorCode::InvalidRequest,
        ErrorCode::IdsExhausted,
        ErrorCode::Conflict,
        ErrorCode::NoLease,
        ErrorCode::UnknownTarget,
        ErrorCode::LeaderChanged,
        ErrorCode::ConfigMismatch,
        ErrorCode::NoQuorum,
        ErrorCode::NotHolder,
    ];

    pub fn from_code(code: u32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| *c as u32 == code)
    }
}

/// Code a response frame answering request `cmd` is sent with. Requests are odd; for an
/// even (invalid) request code the error still goes out under `cmd + 1` so the client's
/// sequence matching works.
pub fn response_code(cmd: u32) -> u32 {
    cmd.wrapping_add(1)
}

/// An error response to request (`cmd`, `seq`).
pub fn error_frame(cmd: u32, seq: u32, code: ErrorCode, msg: impl Into<String>) -> Frame {
    error_frame_to(cmd, seq, code, msg, None)
}

/// An error response naming the leader to ask instead.
pub fn error_frame_to(
    cmd: u32,
    seq: u32,
    code: ErrorCode,
    msg: impl Into<String>,
    leader: Option<std::net::SocketAddr>,
) -> Frame {
    Frame::new(
        response_code(cmd),
        seq,
        FLAG_ERROR,
        &pb::ErrorReply {
            code: code as u32,
            msg: msg.into(),
            leader: leader.map(|l| l.to_string()).unwrap_or_default(),
        },
    )
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
    fn error_codes_round_trip() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(code as u32), Some(code));
        }
        assert_eq!(ErrorCode::from_code(0), None);
    }
}

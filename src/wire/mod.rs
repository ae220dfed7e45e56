//! The wire protocol: framing, command codes and error codes.
//!
//! Command codes follow NebulaBeacon: odd numbers are requests, a response is the request's
//! code plus one, and 113 is the leader-election heartbeat.

pub mod frame;

pub use frame::{FLAG_ERROR, FLAG_ONEWAY, Frame, FrameCodec, FrameError};

use crate::pb;

/// Protocol version carried in `Hello`.
pub const PROTOCOL_VERSION: u32 = 1;

/// Request command codes. A response to `cmd` is `cmd + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Cmd {
    /// Handshake, first frame of every connection (`Hello` / `HelloAck`).
    Hello = 1,
    /// Beacon-to-beacon heartbeat (`Election`), one-way.
    LeaderElection = 113,
    /// A beacon's view of the beacon cluster (`BeaconStatusRequest` / `BeaconStatus`).
    BeaconStatus = 301,
}

impl Cmd {
    pub const ALL: [Cmd; 3] = [Cmd::Hello, Cmd::LeaderElection, Cmd::BeaconStatus];

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
}

impl ErrorCode {
    const ALL: [ErrorCode; 9] = [
        ErrorCode::BadFrame,
        ErrorCode::FrameTooLarge,
        ErrorCode::UnknownCommand,
        ErrorCode::MalformedBody,
        ErrorCode::WrongCluster,
        ErrorCode::UnknownBeacon,
        ErrorCode::HandshakeRequired,
        ErrorCode::UnsupportedVersion,
        ErrorCode::Unavailable,
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
    Frame::new(
        response_code(cmd),
        seq,
        FLAG_ERROR,
        &pb::ErrorReply {
            code: code as u32,
            msg: msg.into(),
            leader: String::new(),
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

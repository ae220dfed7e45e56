//! The core's gRPC service, `beacon.v1.Cluster`, and the gRPC status of each of the core's
//! error codes (each machine declares its own in its `grpc.rs`).

use crate::wire::rpc::{GrpcCode, Method, Service};
use crate::wire::{Cmd, ErrorCode as E};

pub(crate) const SERVICE: Service = Service {
    name: "beacon.v1.Cluster",
    methods: &[
        Method::unary("Status", Cmd::BeaconStatus as u32),
        Method::unary("TransferLeader", Cmd::TransferLeader as u32),
        Method::unary("ReadIndex", Cmd::ReadIndex as u32),
        Method::unary("ChangeMembers", Cmd::ChangeMembers as u32),
    ],
    errors: &[
        (E::BadFrame as u32, "BAD_FRAME", GrpcCode::InvalidArgument),
        (
            E::FrameTooLarge as u32,
            "FRAME_TOO_LARGE",
            GrpcCode::ResourceExhausted,
        ),
        (
            E::UnknownCommand as u32,
            "UNKNOWN_COMMAND",
            GrpcCode::Unimplemented,
        ),
        (
            E::MalformedBody as u32,
            "MALFORMED_BODY",
            GrpcCode::InvalidArgument,
        ),
        (
            E::WrongCluster as u32,
            "WRONG_CLUSTER",
            GrpcCode::FailedPrecondition,
        ),
        (
            E::UnknownBeacon as u32,
            "UNKNOWN_BEACON",
            GrpcCode::FailedPrecondition,
        ),
        (
            E::HandshakeRequired as u32,
            "HANDSHAKE_REQUIRED",
            GrpcCode::FailedPrecondition,
        ),
        (
            E::UnsupportedVersion as u32,
            "UNSUPPORTED_VERSION",
            GrpcCode::FailedPrecondition,
        ),
        (E::Unavailable as u32, "UNAVAILABLE", GrpcCode::Unavailable),
        (E::NotLeader as u32, "NOT_LEADER", GrpcCode::Unavailable),
        (
            E::InvalidRequest as u32,
            "INVALID_REQUEST",
            GrpcCode::InvalidArgument,
        ),
        (
            E::LeaderChanged as u32,
            "LEADER_CHANGED",
            GrpcCode::Unavailable,
        ),
        (
            E::ConfigMismatch as u32,
            "CONFIG_MISMATCH",
            GrpcCode::FailedPrecondition,
        ),
        (E::NoQuorum as u32, "NO_QUORUM", GrpcCode::Unavailable),
        (
            E::Unauthenticated as u32,
            "UNAUTHENTICATED",
            GrpcCode::Unauthenticated,
        ),
        (
            E::PermissionDenied as u32,
            "PERMISSION_DENIED",
            GrpcCode::PermissionDenied,
        ),
        (E::Compacted as u32, "COMPACTED", GrpcCode::OutOfRange),
        (E::Busy as u32, "BUSY", GrpcCode::ResourceExhausted),
    ],
};

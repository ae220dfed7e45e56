//! Refusals as gRPC statuses: each error code (the core's and each machine's) has its status
//! code (`NO_QUORUM` is `UNAVAILABLE`, `NOT_HOLDER` is `FAILED_PRECONDITION`, ...), and the
//! status carries beacon's own code in its details, as a `google.rpc.ErrorInfo` (reason
//! `NO_QUORUM`, domain `beacon`, metadata `code` and, with `NOT_LEADER`, `leader`) and in the
//! `beacon-code` trailer, so a client in any language can tell one refusal from another.

use std::collections::HashMap;

use tonic::Status;
use tonic_types::{ErrorDetails, StatusExt};

use crate::machines::handle::Reject;
use crate::pb;
use crate::wire::rpc::GrpcCode;

/// The domain of beacon's `ErrorInfo`.
pub(crate) const DOMAIN: &str = "beacon";

/// The name and gRPC status code of error `code`.
pub(crate) fn lookup(code: u32) -> Option<(&'static str, GrpcCode)> {
    std::iter::once(&super::cluster::SERVICE)
        .chain(crate::machines::Dispatch::grpc_services())
        .flat_map(|s| s.errors.iter())
        .find(|(c, _, _)| *c == code)
        .map(|(_, name, grpc)| (*name, *grpc))
}

/// The status of refusal `code` with `msg`.
pub(crate) fn status(code: u32, msg: &str, leader: &str) -> Status {
    let (name, grpc) = lookup(code).unwrap_or(("UNKNOWN", GrpcCode::Unknown));
    let mut metadata = HashMap::from([("code".to_owned(), code.to_string())]);
    if !leader.is_empty() {
        metadata.insert("leader".to_owned(), leader.to_owned());
    }
    let details = ErrorDetails::with_error_info(name, DOMAIN, metadata);
    let mut status = Status::with_error_details(grpc, msg, details);
    if let Ok(value) = code.to_string().parse() {
        status.metadata_mut().insert("beacon-code", value);
    }
    status
}

pub(crate) fn of_reject(reject: &Reject) -> Status {
    let leader = reject.leader.map(|l| l.to_string()).unwrap_or_default();
    status(reject.code, &reject.msg, &leader)
}

pub(crate) fn of_reply(reply: &pb::ErrorReply) -> Status {
    status(reply.code, &reply.msg, &reply.leader)
}

/// The status of an error frame (one that does not decode is a bug of the answering
/// beacon, said as such).
pub(crate) fn of_error_frame(frame: &crate::wire::Frame) -> Status {
    match frame.decode::<pb::ErrorReply>() {
        Ok(reply) => of_reply(&reply),
        Err(e) => Status::internal(format!("an error answer did not decode: {e}")),
    }
}

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
    status_waiting(code, msg, leader, 0)
}

/// [`status`], saying (with `BUSY`) how long to wait before trying again: the ErrorInfo's
/// `retry_after_ms`, and a `retry-after-ms` trailer.
pub(crate) fn status_waiting(code: u32, msg: &str, leader: &str, retry_after_ms: u64) -> Status {
    let (name, grpc) = lookup(code).unwrap_or(("UNKNOWN", GrpcCode::Unknown));
    let mut metadata = HashMap::from([("code".to_owned(), code.to_string())]);
    if !leader.is_empty() {
        metadata.insert("leader".to_owned(), leader.to_owned());
    }
    if retry_after_ms > 0 {
        metadata.insert("retry_after_ms".to_owned(), retry_after_ms.to_string());
    }
    let details = ErrorDetails::with_error_info(name, DOMAIN, metadata);
    let mut status = Status::with_error_details(grpc, msg, details);
    if let Ok(value) = code.to_string().parse() {
        status.metadata_mut().insert("beacon-code", value);
    }
    if retry_after_ms > 0
        && let Ok(value) = retry_after_ms.to_string().parse()
    {
        status.metadata_mut().insert("retry-after-ms", value);
    }
    status
}

/// A request message over `max_frame_bytes`: `FRAME_TOO_LARGE` (`RESOURCE_EXHAUSTED`), as
/// the native protocol says it, naming the limit and the key that sets it.
pub(crate) fn too_large(max: usize) -> Status {
    status(
        crate::wire::ErrorCode::FrameTooLarge as u32,
        &format!(
            "the message is over max_frame_bytes ({max} bytes): send a smaller one, or raise the beacons' `max_frame_bytes`"
        ),
        "",
    )
}

/// `refused` as beacon says it: tonic's decoder refuses a message over its limit with
/// `OUT_OF_RANGE`, which beacon keeps for `COMPACTED` (list again), so that one becomes
/// [`too_large`]. Beacon's own refusals carry `beacon-code` and pass as they are.
pub(crate) fn decoded(refused: Status, max: usize) -> Status {
    if refused.code() == GrpcCode::OutOfRange && refused.metadata().get("beacon-code").is_none() {
        too_large(max)
    } else {
        refused
    }
}

/// [`decoded`] for a response tonic answered with a status before any message (a stream's
/// request over the limit): its `grpc-status` is in the headers.
pub(crate) fn decoded_response(
    response: http::Response<tonic::body::Body>,
    max: usize,
) -> http::Response<tonic::body::Body> {
    let headers = response.headers();
    let out_of_range = headers
        .get("grpc-status")
        .is_some_and(|v| v.as_bytes() == b"11");
    if out_of_range && headers.get("beacon-code").is_none() {
        too_large(max).into_http()
    } else {
        response
    }
}

pub(crate) fn of_reject(reject: &Reject) -> Status {
    of_reply(&reject.to_reply())
}

pub(crate) fn of_reply(reply: &pb::ErrorReply) -> Status {
    status_waiting(reply.code, &reply.msg, &reply.leader, reply.retry_after_ms)
}

/// The status of an error frame (one that does not decode is a bug of the answering
/// beacon, said as such).
pub(crate) fn of_error_frame(frame: &crate::wire::Frame) -> Status {
    match frame.decode::<pb::ErrorReply>() {
        Ok(reply) => of_reply(&reply),
        Err(e) => Status::internal(format!("an error answer did not decode: {e}")),
    }
}

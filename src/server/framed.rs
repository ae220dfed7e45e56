//! A framed connection's own I/O, shared by the native connections ([`super::conn`]), the
//! beacons' links to us ([`super::heard`]) and the relay connections between beacons
//! ([`super::relay`]): reading the next frame (a bad one is logged, counted and answered),
//! and answering a request.

use std::net::SocketAddr;

use futures_util::{SinkExt, StreamExt};
use tokio_util::codec::Framed;
use tracing::{debug, warn};

use super::refusals::Said;
use super::shared::Shared;
use crate::machines::handle::{Handled, Reject};
use crate::transport::Stream;
use crate::wire::{self, ErrorCode, FLAG_ONEWAY, Frame, FrameCodec, FrameError};

/// A connection that carries frames.
pub(super) type Conn = Framed<Stream, FrameCodec>;

/// The next frame, or `None` when the connection is finished (closed, or its bytes were not
/// frames; in that case the error was logged and, where possible, answered).
pub(super) async fn next_frame(
    conn: &mut Conn,
    remote: SocketAddr,
    shared: &Shared,
) -> Option<Frame> {
    match conn.next().await? {
        Ok(frame) => Some(frame),
        Err(FrameError::Io(e)) => {
            debug!(%remote, "connection error: {e}");
            None
        }
        Err(e) => {
            let kind = match &e {
                FrameError::BadMagic { .. } => "bad_magic",
                FrameError::UnsupportedVersion { .. } => "unsupported_version",
                FrameError::TooLarge { .. } => "frame_too_large",
                _ => "bad_frame",
            };
            refused_connection(shared, remote, kind, &format!("bad frame: {e}"));
            let (cmd, seq) = e.request().unwrap_or((0, 0));
            let reply = wire::error_frame(cmd, seq, wire::error_code_for(&e), e.to_string());
            let _ = conn.send(reply).await;
            if let FrameError::TooLarge { len, .. } = e {
                drain(conn, len).await;
            }
            None
        }
    }
}

/// The most of an oversized body read and dropped after refusing it, for how long in all,
/// and how long without a byte before giving up.
const DRAIN_BYTES: usize = 64 << 20;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(5);
const DRAIN_IDLE: std::time::Duration = std::time::Duration::from_millis(200);

/// Reads and drops the body of a frame refused as too large (up to [`DRAIN_BYTES`], for
/// [`DRAIN_TIME`], while it keeps coming), so that the client, still sending it, reads the
/// refusal: a socket closed with unread bytes resets the connection, and the client would
/// see only that.
async fn drain(conn: &mut Conn, len: usize) {
    use tokio::io::AsyncReadExt;
    let mut left = len
        .min(DRAIN_BYTES)
        .saturating_sub(conn.read_buffer().len());
    conn.read_buffer_mut().clear();
    let stream = conn.get_mut();
    let mut buf = vec![0u8; 64 << 10];
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        while left > 0 {
            let chunk = left.min(buf.len());
            match tokio::time::timeout(DRAIN_IDLE, stream.read(&mut buf[..chunk])).await {
                Ok(Ok(n)) if n > 0 => left -= n,
                _ => break,
            }
        }
    })
    .await;
}

/// Logs a connection refused for `kind` (`why` in full the first time, then summed up; see
/// [`super::refusals`]) and counts it.
pub(super) fn refused_connection(
    shared: &Shared,
    remote: SocketAddr,
    kind: &'static str,
    why: &str,
) {
    match shared.refused_conns.note(kind, remote.ip()) {
        Said::InFull => warn!(%remote, "{why}"),
        Said::Counted => debug!(%remote, "{why}"),
        Said::Summary(line) => warn!("{line}"),
    }
    shared.metrics.connection_refused(kind);
}

/// Answers `frame` with an error. Returns whether the connection goes on.
///
/// A refused request is logged at debug (it is counted in the metrics): under load, one
/// warning per refusal would bury everything else. At most one warning per
/// [`super::refusals::WARN_EVERY`] says how many were refused since the last and why the
/// latest was. Refused credentials and permissions are an audit line each.
pub(super) async fn reply_error(
    conn: &mut Conn,
    remote: SocketAddr,
    frame: &Frame,
    reject: Reject,
    summed: &super::refusals::Requests,
) -> bool {
    if reject.code == ErrorCode::NotLeader as u32 {
        // Part of normal operation: clients find the leader this way.
        debug!(%remote, cmd = frame.cmd, seq = frame.seq, "redirected: {}", reject.msg);
    } else if reject.code == ErrorCode::Unauthenticated as u32
        || reject.code == ErrorCode::PermissionDenied as u32
    {
        // The audit trail of refused credentials and permissions.
        warn!(%remote, cmd = frame.cmd, seq = frame.seq, code = reject.code, audit = true, "access refused: {}", reject.msg);
    } else {
        debug!(%remote, cmd = frame.cmd, seq = frame.seq, code = reject.code, "request refused: {}", reject.msg);
        if let Some(refused) = summed.note() {
            warn!(%remote, cmd = frame.cmd, code = reject.code, "{refused} requests refused since the last such warning (at most one per {} s); the latest: {}", super::refusals::WARN_EVERY.as_secs(), reject.msg);
        }
    }
    if frame.flags & FLAG_ONEWAY != 0 && !reject.close {
        // The sender expects no answer; the log line is all it gets.
        return true;
    }
    let reply = wire::error_reply_frame(frame.cmd, frame.seq, &reject.to_reply());
    conn.send(reply).await.is_ok() && !reject.close
}

/// Sends what `dispatch` made of `frame`. Returns whether the connection goes on.
pub(super) async fn answer(
    conn: &mut Conn,
    remote: SocketAddr,
    frame: &Frame,
    result: Result<Handled, Reject>,
    shared: &Shared,
) -> bool {
    match result {
        Ok(Handled::OneWay) => true,
        Ok(Handled::Reply(reply)) if !fits(&reply, shared) => {
            let reject = Reject::new(
                ErrorCode::FrameTooLarge,
                format!(
                    "the reply to cmd {} is {} bytes, over max_frame_bytes ({}): ask for \
                     less (one node type, one address) or raise max_frame_bytes",
                    frame.cmd,
                    reply.body.len(),
                    shared.config.max_frame_bytes
                ),
            );
            reply_error(conn, remote, frame, reject, &shared.refusals).await
        }
        Ok(Handled::Reply(reply)) => feed(conn, remote, reply).await,
        Ok(Handled::Stream { .. }) => unreachable!("streams are started by `conn.rs`"),
        Err(reject) => reply_error(conn, remote, frame, reject, &shared.refusals).await,
    }
}

/// Whether `reply` is within `max_frame_bytes`, so that it may be sent.
pub(super) fn fits(reply: &Frame, shared: &Shared) -> bool {
    reply.body.len() <= shared.config.max_frame_bytes
}

/// Queues `reply`: written out at the top of the loop, with the replies to whatever else the
/// client sent together with it. Returns whether the connection goes on.
pub(super) async fn feed(conn: &mut Conn, remote: SocketAddr, reply: Frame) -> bool {
    match conn.feed(reply).await {
        Ok(()) => true,
        Err(e) => {
            debug!(%remote, "cannot send reply: {e}");
            false
        }
    }
}

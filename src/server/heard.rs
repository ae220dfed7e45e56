//! Inbound peer traffic: a peer's heartbeats (cmd 113, which carry the log) go from its
//! link straight to the driver. They are not requests: no admission, no role, no request
//! metrics, and no client path (`dispatch.rs`) on the way. Outbound links are `peer.rs`.
//!
//! A link is read on the core's own thread once its handshake is done (on the edges): a
//! follower's acknowledgement wakes the leader's core and nothing else, and waits behind no
//! client's request on the edges' threads. What is bulk work (a snapshot's fragments, a
//! message over [`BULK_BYTES`]) is handed back to the edges, and so is anything but a
//! heartbeat.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::SinkExt;
use tracing::warn;

use super::dispatch::{Peer, dispatch};
use super::framed::{Conn, answer, next_frame, reply_error};
use super::peer::BULK_BYTES;
use super::shared::Shared;
use crate::machines::State;
use crate::machines::handle::Reject;
use crate::pb;
use crate::wire::ErrorCode;
use crate::wire::envelope::message_from_pb;
use crate::wire::fragment::{FragmentError, MAX_MESSAGE_BYTES, Reassembly};
use crate::wire::{Cmd, Code, FLAG_MORE, Frame};

/// Serves beacon `node`'s link to us until it ends: read on the core's thread
/// ([`Shared::on_core`]), with what the core's side hands back done here.
pub(super) async fn serve(
    mut conn: Conn,
    remote: SocketAddr,
    node: SocketAddr,
    shared: &Arc<Shared>,
) {
    let mut parts = Reassembly::new(MAX_MESSAGE_BYTES);
    loop {
        let on_core = shared.clone();
        let served = shared.on_core(async move {
            let listened = match conn.get_mut().rebind() {
                Ok(()) => listen(&mut conn, remote, node, &on_core).await,
                Err(e) => {
                    warn!(%remote, peer = %node, "cannot move the link to the core's thread: {e}; closing it (the peer dials again)");
                    None
                }
            };
            (conn, listened)
        });
        let Some((back, Some(frame))) = served.await else {
            return;
        };
        conn = back;
        if !for_edges(&mut conn, remote, node, frame, &mut parts, shared).await {
            return;
        }
    }
}

/// Reads `node`'s heartbeats and hands them to the driver, until a frame that is not a whole
/// heartbeat of modest size comes (returned, for the edges) or the link ends (`None`).
async fn listen(
    conn: &mut Conn,
    remote: SocketAddr,
    node: SocketAddr,
    shared: &Shared,
) -> Option<Frame> {
    loop {
        let frame = tokio::select! {
            _ = shared.shutdown.cancelled() => return None,
            frame = next_frame(conn, remote, shared) => frame?,
        };
        if frame.cmd != Cmd::LeaderElection.code()
            || frame.flags & FLAG_MORE != 0
            || frame.body.len() > BULK_BYTES
        {
            return Some(frame);
        }
        if !heard(conn, remote, node, &frame, shared).await {
            return None;
        }
    }
}

/// Does on the edges what the core's side handed back, `frame`: the fragments of a message
/// larger than a frame are read here until it is whole, then it is handled as it would
/// have been on the core's thread (a heartbeat), or as a request. Returns whether the link
/// goes on.
async fn for_edges(
    conn: &mut Conn,
    remote: SocketAddr,
    node: SocketAddr,
    mut frame: Frame,
    parts: &mut Reassembly,
    shared: &Shared,
) -> bool {
    let peer = Peer::Beacon(node);
    let whole = loop {
        match reassemble(parts, frame.clone()) {
            Ok(Some(whole)) => break whole,
            Ok(None) => {}
            Err(reject) => {
                return reply_error(conn, remote, &frame, reject, &shared.refusals).await;
            }
        }
        frame = tokio::select! {
            _ = shared.shutdown.cancelled() => return false,
            next = next_frame(conn, remote, shared) => match next {
                Some(next) => next,
                None => return false,
            },
        };
    };
    let goes_on = if whole.cmd == Cmd::LeaderElection.code() {
        heard(conn, remote, node, &whole, shared).await
    } else {
        let result = dispatch(&whole, &peer, None, shared).await;
        answer(conn, remote, &whole, result, shared).await
    };
    goes_on && conn.flush().await.is_ok()
}

/// Passes `frame` through the link's reassembly: the fragments of a message larger than a
/// frame (a snapshot) come out as one frame once whole.
fn reassemble(parts: &mut Reassembly, frame: Frame) -> Result<Option<Frame>, Reject> {
    parts.push(frame).map_err(|e| {
        let code = match e {
            FragmentError::TooLarge { .. } => ErrorCode::FrameTooLarge,
            FragmentError::Interleaved { .. } => ErrorCode::BadFrame,
        };
        Reject::close(code, e.to_string())
    })
}

/// Hands the heartbeat `frame` to the driver, or answers why it is refused. Returns whether
/// the link goes on.
async fn heard(
    conn: &mut Conn,
    remote: SocketAddr,
    node: SocketAddr,
    frame: &Frame,
    shared: &Shared,
) -> bool {
    match heartbeat(node, frame, shared).await {
        Ok(()) => true,
        Err(reject) => reply_error(conn, remote, frame, reject, &shared.refusals).await,
    }
}

/// Hands `frame`, a heartbeat from beacon `node`, to the driver; a malformed one is refused
/// (the link goes on). A beacon no longer a member (a change removed it while it was linked,
/// perhaps while it was hung) is refused and its link closed: it dials again, and the
/// handshake tells it why, where its heartbeats would otherwise be ignored here every tick
/// for as long as it runs.
async fn heartbeat(node: SocketAddr, frame: &Frame, shared: &Shared) -> Result<(), Reject> {
    if let Some(refused) = shared.driver.refuse_non_member(node, None) {
        return Err(refused);
    }
    let msg: pb::Election = frame.decode()?;
    let msg = message_from_pb::<State>(msg).map_err(Reject::malformed)?;
    shared.peers.peer_message(node, msg).await;
    Ok(())
}

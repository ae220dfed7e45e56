//! The leader's side of a relay connection: each relayed call dispatched as its client's own.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use tokio_stream::StreamMap;
use tracing::info;

use super::super::dispatch::{self, Peer};
use super::super::framed::{self, Conn};
use super::super::shared::Shared;
use crate::auth::{Identity, Proof, Role};
use crate::machines::handle::{Handled, Reject};
use crate::pb;
use crate::wire::{self, Cmd, Code, ErrorCode, Frame};

/// Calls one relay connection carries at once; more wait to be read.
const IN_FLIGHT: usize = 4096;

/// Serves a relay connection from `node`: each `Relayed` request is dispatched as its
/// client's own, concurrently, and answered under its `seq`.
pub(in crate::server) async fn serve(
    conn: &mut Conn,
    remote: SocketAddr,
    node: SocketAddr,
    shared: &Shared,
) {
    let mut calls = FuturesUnordered::new();
    let mut streams: StreamMap<u32, RelayedStream> = StreamMap::new();
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            frame = framed::next_frame(conn, remote, shared), if calls.len() < IN_FLIGHT => {
                let Some(frame) = frame else {
                    info!(peer = %node, "relay connection closed");
                    return;
                };
                match relayed(&frame) {
                    Ok((relayed, _)) if relayed.cancel => {
                        streams.remove(&frame.seq);
                    }
                    Ok((relayed, identity)) => {
                        let inner = Frame {
                            cmd: relayed.cmd,
                            seq: frame.seq,
                            flags: 0,
                            body: relayed.body.into(),
                        };
                        calls.push(async move {
                            let started = std::time::Instant::now();
                            let peer = Peer::Client(identity);
                            let result = dispatch::dispatch(&inner, &peer, None, shared).await;
                            (inner, result, started)
                        });
                    }
                    Err(reject) => {
                        if !framed::reply_error(conn, remote, &frame, reject, &shared.refusals).await {
                            return;
                        }
                    }
                }
            }
            Some((inner, result, started)) = calls.next() => {
                dispatch::record(shared, inner.cmd, &result, started);
                let sent = match result {
                    Ok(Handled::Reply(reply)) => conn.send(reply).await.is_ok(),
                    Ok(Handled::OneWay) => true,
                    Ok(Handled::Stream { reply, pushes, ended }) => {
                        let tail = futures_util::stream::once(async move { Err(ended) });
                        let pushes: RelayedStream =
                            Box::pin(pushes.map(Ok).chain(tail));
                        streams.insert(inner.seq, pushes);
                        conn.send(reply).await.is_ok()
                    }
                    Err(reject) => {
                        framed::reply_error(conn, remote, &inner, reject, &shared.refusals).await
                    }
                };
                if !sent {
                    return;
                }
            }
            Some((seq, pushed)) = streams.next() => {
                let frame = match pushed {
                    Ok(frame) => Frame { seq, ..frame },
                    // The stream ended: this beacon stopped leading, or the watcher fell
                    // behind.
                    Err(ended) => {
                        streams.remove(&seq);
                        let (code, why) = ended.why();
                        let leader = shared.core_status().await.ok()
                            .and_then(|s| s.leader)
                            .and_then(|l| l.parse().ok());
                        wire::error_frame_to(0, seq, code, why, leader)
                    }
                };
                if conn.send(frame).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The frames of a relayed stream, then `Err(why it ended)`.
type RelayedStream = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<Frame, crate::machines::handle::StreamEnd>> + Send>,
>;

/// The `Relayed` message `frame` carries and the identity it names.
fn relayed(frame: &Frame) -> Result<(pb::Relayed, Option<Arc<Identity>>), Reject> {
    if frame.cmd != Cmd::Relayed.code() {
        return Err(Reject::new(
            ErrorCode::UnknownCommand,
            format!(
                "cmd {} on a relay connection, which carries Relayed (cmd 7) only",
                frame.cmd
            ),
        ));
    }
    let relayed: pb::Relayed = frame.decode()?;
    if relayed.identity.is_empty() {
        return Ok((relayed, None));
    }
    let role = Role::named(&relayed.role).ok_or_else(|| {
        Reject::new(
            ErrorCode::MalformedBody,
            format!("Relayed.role `{}` is not a role", relayed.role),
        )
    })?;
    let proof = Proof::named(&relayed.proof).ok_or_else(|| {
        Reject::new(
            ErrorCode::MalformedBody,
            format!("Relayed.proof `{}` is not a proof", relayed.proof),
        )
    })?;
    let identity = Identity {
        name: relayed.identity.clone(),
        role,
        proof,
    };
    Ok((relayed, Some(Arc::new(identity))))
}

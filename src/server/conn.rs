//! One inbound connection: the handshake, then requests until the peer leaves.
//!
//! Bad input never takes the daemon down: a frame that cannot be parsed is answered with an
//! error (when its head was readable), logged with the remote address, and the connection is
//! closed because the byte stream cannot be resynchronised. A well-framed request that is
//! wrong (unknown command, undecodable body, heartbeat from a client) gets an error reply and
//! the connection stays open.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;
use tracing::{debug, info, warn};

use super::Shared;
use super::driver::{ConnId, next_conn_id};
use crate::pb;
use crate::wire::{
    self, Cmd, ErrorCode, FLAG_ONEWAY, Frame, FrameCodec, FrameError, PROTOCOL_VERSION,
};

/// A connection must say `Hello` within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Who is on the other end, once the handshake is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    Beacon(SocketAddr),
    Client,
}

/// A request that is answered with an error; the connection goes on unless `close`.
struct Reject {
    code: ErrorCode,
    msg: String,
    close: bool,
}

impl Reject {
    fn keep(code: ErrorCode, msg: impl Into<String>) -> Self {
        Reject {
            code,
            msg: msg.into(),
            close: false,
        }
    }
    fn close(code: ErrorCode, msg: impl Into<String>) -> Self {
        Reject {
            code,
            msg: msg.into(),
            close: true,
        }
    }
}

type Conn = Framed<TcpStream, FrameCodec>;

pub(crate) async fn serve(stream: TcpStream, remote: SocketAddr, shared: Arc<Shared>) {
    stream.set_nodelay(true).ok();
    let mut conn = Framed::new(stream, FrameCodec::new(shared.config.max_frame_bytes));
    let id: ConnId = next_conn_id();
    let peer = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut conn, remote, &shared))
        .await
    {
        Ok(Some(peer)) => peer,
        Ok(None) => return,
        Err(_) => {
            warn!(%remote, "no Hello within {HANDSHAKE_TIMEOUT:?}: connection closed");
            return;
        }
    };
    if let Peer::Beacon(node) = peer {
        shared.driver.peer_connected(node, id).await;
    }
    serve_requests(&mut conn, remote, peer, &shared).await;
    if let Peer::Beacon(node) = peer {
        shared.driver.peer_disconnected(node, id).await;
    }
}

/// Reads frames until a valid `Hello`. Returns `None` when the connection should close.
async fn handshake(conn: &mut Conn, remote: SocketAddr, shared: &Shared) -> Option<Peer> {
    loop {
        let frame = next_frame(conn, remote).await?;
        if frame.cmd != Cmd::Hello.code() {
            let msg = format!(
                "cmd {} before the handshake: send Hello (cmd {}) first",
                frame.cmd,
                Cmd::Hello.code()
            );
            if !reply_error(
                conn,
                remote,
                &frame,
                Reject::keep(ErrorCode::HandshakeRequired, msg),
            )
            .await
            {
                return None;
            }
            continue;
        }
        let result = match frame.decode::<pb::Hello>() {
            Ok(hello) => accept_hello(hello, shared),
            Err(e) => Err(Reject::close(ErrorCode::MalformedBody, e.to_string())),
        };
        match result {
            Ok((peer, ack, initial)) => {
                let sent = conn
                    .send(Frame::new(Cmd::Hello.response(), frame.seq, 0, &ack))
                    .await;
                if let Err(e) = sent {
                    debug!(%remote, "cannot answer Hello: {e}");
                    return None;
                }
                if let (Peer::Beacon(node), Some(hb)) = (peer, initial) {
                    info!(peer = %node, %remote, "beacon connected");
                    shared.driver.heartbeat(node, hb).await;
                }
                return Some(peer);
            }
            Err(reject) => {
                reply_error(conn, remote, &frame, reject).await;
                return None;
            }
        }
    }
}

/// Checks a `Hello`; returns who it is, the acknowledgement, and the heartbeat it carried.
fn accept_hello(
    hello: pb::Hello,
    shared: &Shared,
) -> Result<(Peer, pb::HelloAck, Option<pb::Election>), Reject> {
    let config = &shared.config;
    if hello.version != PROTOCOL_VERSION {
        return Err(Reject::close(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is not supported (this beacon speaks {PROTOCOL_VERSION})",
                hello.version
            ),
        ));
    }
    let wrong_cluster = || {
        Reject::close(
            ErrorCode::WrongCluster,
            format!(
                "wrong cluster: this beacon serves cluster `{}`, the peer is in `{}`",
                config.cluster, hello.cluster
            ),
        )
    };
    let mut ack = pb::HelloAck {
        cluster: config.cluster.clone(),
        node: config.node.to_string(),
        version: PROTOCOL_VERSION,
        election: None,
    };
    match pb::Role::try_from(hello.role) {
        Ok(pb::Role::Peer) => {
            if hello.cluster != config.cluster {
                return Err(wrong_cluster());
            }
            let node: SocketAddr = hello.node.parse().map_err(|_| {
                Reject::close(
                    ErrorCode::MalformedBody,
                    format!("Hello.node `{}` is not an ip:port address", hello.node),
                )
            })?;
            if node == config.node {
                return Err(Reject::close(
                    ErrorCode::UnknownBeacon,
                    format!("Hello.node `{node}` is this beacon's own address"),
                ));
            }
            if !config.beacons.contains(&node) {
                return Err(Reject::close(
                    ErrorCode::UnknownBeacon,
                    format!(
                        "beacon `{node}` is not in this beacon's configured list; check the `beacon` lists agree"
                    ),
                ));
            }
            ack.election = Some(shared.current.borrow().clone());
            Ok((
                Peer::Beacon(node),
                ack,
                Some(hello.election.unwrap_or_default()),
            ))
        }
        Ok(pb::Role::Client) => {
            if !hello.cluster.is_empty() && hello.cluster != config.cluster {
                return Err(wrong_cluster());
            }
            Ok((Peer::Client, ack, None))
        }
        _ => Err(Reject::close(
            ErrorCode::MalformedBody,
            format!("Hello.role {} is not a known role", hello.role),
        )),
    }
}

async fn serve_requests(conn: &mut Conn, remote: SocketAddr, peer: Peer, shared: &Shared) {
    loop {
        let frame = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            frame = next_frame(conn, remote) => match frame {
                Some(frame) => frame,
                None => return,
            },
        };
        match dispatch(&frame, peer, shared).await {
            Ok(None) => {}
            Ok(Some(reply)) => {
                if let Err(e) = conn.send(reply).await {
                    debug!(%remote, "cannot send reply: {e}");
                    return;
                }
            }
            Err(reject) => {
                if !reply_error(conn, remote, &frame, reject).await {
                    return;
                }
            }
        }
    }
}

/// Handles one request; `Ok(None)` for one-way messages.
async fn dispatch(frame: &Frame, peer: Peer, shared: &Shared) -> Result<Option<Frame>, Reject> {
    let malformed = |e: FrameError| Reject::keep(ErrorCode::MalformedBody, e.to_string());
    match Cmd::from_code(frame.cmd) {
        Some(Cmd::LeaderElection) => {
            let Peer::Beacon(node) = peer else {
                return Err(Reject::keep(
                    ErrorCode::UnknownCommand,
                    "heartbeats (cmd 113) are accepted from beacons only",
                ));
            };
            let hb: pb::Election = frame.decode().map_err(malformed)?;
            shared.driver.heartbeat(node, hb).await;
            Ok(None)
        }
        Some(Cmd::BeaconStatus) => {
            let _req: pb::BeaconStatusRequest = frame.decode().map_err(malformed)?;
            let status =
                shared.driver.status().await.ok_or_else(|| {
                    Reject::close(ErrorCode::Unavailable, "beacon is shutting down")
                })?;
            Ok(Some(Frame::new(
                Cmd::BeaconStatus.response(),
                frame.seq,
                0,
                &status,
            )))
        }
        Some(Cmd::Hello) => Err(Reject::keep(
            ErrorCode::MalformedBody,
            "duplicate Hello: this connection has already completed its handshake",
        )),
        None if frame.cmd.is_multiple_of(2) => Err(Reject::keep(
            ErrorCode::UnknownCommand,
            format!(
                "cmd {} (seq {}) is a response code; requests use odd codes",
                frame.cmd, frame.seq
            ),
        )),
        None => Err(Reject::keep(
            ErrorCode::UnknownCommand,
            format!("unknown command {} (seq {})", frame.cmd, frame.seq),
        )),
    }
}

/// The next frame, or `None` when the connection is finished (closed, or its bytes were not
/// frames; in that case the error was logged and, where possible, answered).
async fn next_frame(conn: &mut Conn, remote: SocketAddr) -> Option<Frame> {
    match conn.next().await? {
        Ok(frame) => Some(frame),
        Err(FrameError::Io(e)) => {
            debug!(%remote, "connection error: {e}");
            None
        }
        Err(e) => {
            warn!(%remote, "bad frame: {e}");
            let (cmd, seq) = e.request().unwrap_or((0, 0));
            let reply = wire::error_frame(cmd, seq, wire::error_code_for(&e), e.to_string());
            let _ = conn.send(reply).await;
            None
        }
    }
}

/// Answers `frame` with an error. Returns whether the connection goes on.
async fn reply_error(conn: &mut Conn, remote: SocketAddr, frame: &Frame, reject: Reject) -> bool {
    warn!(%remote, cmd = frame.cmd, seq = frame.seq, code = ?reject.code, "request refused: {}", reject.msg);
    if frame.flags & FLAG_ONEWAY != 0 && !reject.close {
        // The sender expects no answer; the log line is all it gets.
        return true;
    }
    let reply = wire::error_frame(frame.cmd, frame.seq, reject.code, reject.msg);
    conn.send(reply).await.is_ok() && !reject.close
}

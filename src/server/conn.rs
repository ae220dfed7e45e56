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

use futures_util::future::join_all;
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;
use tracing::{debug, info, warn};

use tokio::sync::mpsc;

use super::driver::{ConnId, next_conn_id};
use super::{Shared, service};
use crate::pb;
use crate::replication::PeerMessage;
use crate::wire::convert::message_from_pb;
use crate::wire::fragment::{FragmentError, MAX_MESSAGE_BYTES, Reassembly};
use crate::wire::{
    self, Cmd, ErrorCode, FLAG_MORE, FLAG_ONEWAY, Frame, FrameCodec, FrameError, PROTOCOL_VERSION,
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
pub(super) struct Reject {
    pub(super) code: ErrorCode,
    pub(super) msg: String,
    pub(super) close: bool,
    /// The leader to ask instead (with `NotLeader`).
    pub(super) leader: Option<SocketAddr>,
}

impl Reject {
    pub(super) fn keep(code: ErrorCode, msg: impl Into<String>) -> Self {
        Reject {
            code,
            msg: msg.into(),
            close: false,
            leader: None,
        }
    }
    pub(super) fn close(code: ErrorCode, msg: impl Into<String>) -> Self {
        Reject {
            close: true,
            ..Reject::keep(code, msg)
        }
    }
    pub(super) fn with_leader(self, leader: Option<SocketAddr>) -> Self {
        Reject { leader, ..self }
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
                if let (Peer::Beacon(node), Some(msg)) = (peer, initial) {
                    info!(peer = %node, %remote, "beacon connected");
                    if let Some(up) = shared.peer_up.get(&node) {
                        up.notify_one();
                    }
                    shared.driver.peer_message(node, msg).await;
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

/// Checks a `Hello`; returns who it is, the acknowledgement, and the state it carried.
fn accept_hello(
    hello: pb::Hello,
    shared: &Shared,
) -> Result<(Peer, pb::HelloAck, Option<PeerMessage>), Reject> {
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
            let range = config.id_range;
            if (hello.id_first, hello.id_last) != (range.first, range.last) {
                return Err(Reject::close(
                    ErrorCode::ConfigMismatch,
                    format!(
                        "beacon `{node}` allocates node IDs from {}..={} but this beacon from {range}; every beacon of a cluster needs the same `id_range`",
                        hello.id_first, hello.id_last
                    ),
                ));
            }
            let ours = config.beacon_names();
            if hello.beacons != ours {
                return Err(Reject::close(
                    ErrorCode::ConfigMismatch,
                    format!(
                        "beacon `{node}` is configured with the beacons [{}] but this beacon with [{}]; every beacon of a cluster needs the same `beacon` list",
                        hello.beacons.join(", "),
                        ours.join(", ")
                    ),
                ));
            }
            if hello.mode != config.mode.as_str() {
                return Err(Reject::close(
                    ErrorCode::ConfigMismatch,
                    format!(
                        "beacon `{node}` runs in mode `{}` but this beacon in `{}`; every beacon of a cluster needs the same `mode`",
                        hello.mode, config.mode
                    ),
                ));
            }
            let initial = message_from_pb(hello.election.unwrap_or_default()).map_err(|e| {
                Reject::close(ErrorCode::MalformedBody, format!("Hello.election: {e}"))
            })?;
            ack.election = Some(shared.current.borrow().1.clone());
            Ok((Peer::Beacon(node), ack, Some(initial)))
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

/// A watch this connection holds: notices are pushed as they come.
struct Watching {
    /// The `seq` of the watch request, repeated on the error that ends the watch.
    seq: u32,
    notices: mpsc::Receiver<pb::NodeNotice>,
}

async fn next_notice(watching: &mut Option<Watching>) -> Option<pb::NodeNotice> {
    match watching {
        Some(w) => w.notices.recv().await,
        None => std::future::pending().await,
    }
}

/// Passes `frame` through the connection's reassembly: fragments (a snapshot larger than a
/// frame) are accepted from beacons only and come out as one frame once whole.
fn reassemble(parts: &mut Reassembly, frame: Frame, peer: Peer) -> Result<Option<Frame>, Reject> {
    if frame.flags & FLAG_MORE != 0 && !matches!(peer, Peer::Beacon(_)) {
        return Err(Reject::keep(
            ErrorCode::FrameTooLarge,
            format!(
                "frame cmd {} seq {} is a fragment (flag 0x04): only beacons may send \
                 messages larger than a frame",
                frame.cmd, frame.seq
            ),
        ));
    }
    parts.push(frame).map_err(|e| {
        let code = match e {
            FragmentError::TooLarge { .. } => ErrorCode::FrameTooLarge,
            FragmentError::Interleaved { .. } => ErrorCode::BadFrame,
        };
        Reject::close(code, e.to_string())
    })
}

async fn serve_requests(conn: &mut Conn, remote: SocketAddr, peer: Peer, shared: &Shared) {
    let mut watching: Option<Watching> = None;
    let mut parts = Reassembly::new(MAX_MESSAGE_BYTES);
    loop {
        // A client that pipelines (many registrations over one connection) gets the replies
        // to what it sent together in one write: they go out once no whole request is left
        // in the read buffer.
        if !wire::frame::holds_frame(conn.read_buffer())
            && let Err(e) = conn.flush().await
        {
            debug!(%remote, "cannot send replies: {e}");
            return;
        }
        let frame = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            notice = next_notice(&mut watching) => {
                let sent = match notice {
                    Some(notice) => conn.send(Frame::new(Cmd::NodeNotice.code(), 0, FLAG_ONEWAY, &notice)).await,
                    None => {
                        // The driver ended the watch: this beacon stopped leading.
                        let seq = watching.take().map_or(0, |w| w.seq);
                        let leader = shared.driver.status().await.and_then(|s| s.leader).and_then(|l| l.parse().ok());
                        let msg = "this beacon stopped leading: watch again at the leader";
                        conn.send(wire::error_frame_to(Cmd::Watch.code(), seq, ErrorCode::NotLeader, msg, leader)).await
                    }
                };
                if let Err(e) = sent {
                    debug!(%remote, "cannot send a notice: {e}");
                    return;
                }
                continue;
            }
            frame = next_frame(conn, remote) => match frame {
                Some(frame) => frame,
                None => return,
            },
        };
        let frame = match reassemble(&mut parts, frame.clone(), peer) {
            Ok(Some(whole)) => whole,
            Ok(None) => continue,
            Err(reject) => {
                if !reply_error(conn, remote, &frame, reject).await {
                    return;
                }
                continue;
            }
        };
        if frame.cmd == Cmd::Watch.code() {
            match watch(&frame, shared).await {
                Ok((reply, notices)) => {
                    watching = Some(Watching {
                        seq: frame.seq,
                        notices,
                    });
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
            continue;
        }
        // Node reports queued back to back (a client renewing many registrations over one
        // connection) go to the driver together and are answered in order: the batch costs
        // the driver one wake-up, not one per report.
        let mut batch = vec![frame];
        if batch[0].cmd == Cmd::NodeReport.code() {
            // Only whole, well-formed reports (not fragments), which the codec hands over
            // at once and without error.
            while batch.len() < REPORT_BATCH
                && wire::frame::ready_frame(conn.read_buffer(), shared.config.max_frame_bytes)
                    .is_some_and(|(flags, cmd)| {
                        flags & FLAG_MORE == 0 && cmd == Cmd::NodeReport.code()
                    })
            {
                match conn.next().now_or_never() {
                    Some(Some(Ok(next))) => batch.push(next),
                    _ => break,
                }
            }
        }
        let results = join_all(batch.iter().map(|f| dispatch(f, peer, shared))).await;
        for (frame, result) in batch.iter().zip(results) {
            if !answer(conn, remote, frame, result, shared).await {
                return;
            }
        }
    }
}

/// Most node reports taken from the read buffer for one batch.
const REPORT_BATCH: usize = 256;

/// Sends what `dispatch` made of `frame`. Returns whether the connection goes on.
async fn answer(
    conn: &mut Conn,
    remote: SocketAddr,
    frame: &Frame,
    result: Result<Option<Frame>, Reject>,
    shared: &Shared,
) -> bool {
    match result {
        Ok(None) => true,
        Ok(Some(reply)) if reply.body.len() > shared.config.max_frame_bytes => {
            let reject = Reject::keep(
                ErrorCode::FrameTooLarge,
                format!(
                    "the reply to cmd {} is {} bytes, over max_frame_bytes ({}): ask for \
                     less (one node type, one address) or raise max_frame_bytes",
                    frame.cmd,
                    reply.body.len(),
                    shared.config.max_frame_bytes
                ),
            );
            reply_error(conn, remote, frame, reject).await
        }
        Ok(Some(reply)) => {
            // Written out at the top of the loop, with the replies to whatever else the
            // client sent together with this.
            match conn.feed(reply).await {
                Ok(()) => true,
                Err(e) => {
                    debug!(%remote, "cannot send reply: {e}");
                    false
                }
            }
        }
        Err(reject) => reply_error(conn, remote, frame, reject).await,
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
            let msg: pb::Election = frame.decode().map_err(malformed)?;
            let msg = message_from_pb(msg)
                .map_err(|e| Reject::keep(ErrorCode::MalformedBody, e.to_string()))?;
            shared.driver.peer_message(node, msg).await;
            Ok(None)
        }
        Some(Cmd::Register) => {
            let req = frame.decode().map_err(malformed)?;
            reply(frame, &service::register(shared, req).await?)
        }
        Some(Cmd::NodeReport) => {
            let req = frame.decode().map_err(malformed)?;
            reply(frame, &service::report(shared, req).await?)
        }
        Some(Cmd::Unregister) => {
            let req = frame.decode().map_err(malformed)?;
            reply(frame, &service::unregister(shared, req).await?)
        }
        Some(Cmd::Nodes) => {
            let req = frame.decode().map_err(malformed)?;
            reply(frame, &service::nodes(shared, req).await?)
        }
        Some(Cmd::Ids) => {
            let _req: pb::IdsRequest = frame.decode().map_err(malformed)?;
            reply(frame, &service::ids(shared).await?)
        }
        Some(Cmd::Subscriptions) => {
            let req = frame.decode().map_err(malformed)?;
            reply(frame, &service::subscriptions(shared, req)?)
        }
        Some(Cmd::NodeNotice) => Err(Reject::keep(
            ErrorCode::UnknownCommand,
            "node notices (cmd 105) are sent by beacons to watchers, not to beacons",
        )),
        Some(Cmd::Watch) => unreachable!("handled by serve_requests"),
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

fn reply(frame: &Frame, msg: &impl prost::Message) -> Result<Option<Frame>, Reject> {
    Ok(Some(Frame::new(
        wire::response_code(frame.cmd),
        frame.seq,
        0,
        msg,
    )))
}

/// Starts a watch (leader only): the reply frame with the current set, and the notices.
async fn watch(
    frame: &Frame,
    shared: &Shared,
) -> Result<(Frame, mpsc::Receiver<pb::NodeNotice>), Reject> {
    let req: pb::WatchRequest = frame
        .decode()
        .map_err(|e| Reject::keep(ErrorCode::MalformedBody, e.to_string()))?;
    for t in &req.node_types {
        crate::registry::check_type(t)?;
    }
    let (reply, notices) = shared
        .driver
        .watch(req.node_types.into_iter().collect())
        .await
        .ok_or_else(|| Reject::close(ErrorCode::Unavailable, "beacon is shutting down"))??;
    let frame = Frame::new(Cmd::Watch.response(), frame.seq, 0, &reply);
    Ok((frame, notices))
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
    if reject.code == ErrorCode::NotLeader {
        // Part of normal operation: clients find the leader this way.
        debug!(%remote, cmd = frame.cmd, seq = frame.seq, "redirected: {}", reject.msg);
    } else {
        warn!(%remote, cmd = frame.cmd, seq = frame.seq, code = ?reject.code, "request refused: {}", reject.msg);
    }
    if frame.flags & FLAG_ONEWAY != 0 && !reject.close {
        // The sender expects no answer; the log line is all it gets.
        return true;
    }
    let reply = wire::error_frame_to(frame.cmd, frame.seq, reject.code, reject.msg, reject.leader);
    conn.send(reply).await.is_ok() && !reject.close
}

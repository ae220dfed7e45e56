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
use tokio::sync::mpsc;
use tokio_util::codec::Framed;
use tracing::{debug, info, warn};

use super::handle::{ConnId, Handled, Reject, next_conn_id, reply};
use super::shared::Shared;
use crate::auth::{Identity, Role};
use crate::machines::{self, State};
use crate::pb;
use crate::transport::{self, Stream};
use crate::wire::envelope::message_from_pb;
use crate::wire::fragment::{FragmentError, MAX_MESSAGE_BYTES, Reassembly};
use crate::wire::{
    self, Cmd, Code, ErrorCode, FLAG_MORE, FLAG_ONEWAY, Frame, FrameCodec, FrameError,
    PROTOCOL_VERSION,
};

/// A connection must say `Hello` within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Who is on the other end, once the handshake is done.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Peer {
    Beacon(SocketAddr),
    /// A client, and who it is when this beacon requires authentication (key `auth`).
    Client(Option<Arc<Identity>>),
}

/// What the connection itself says of the other end.
struct Credentials {
    tls: bool,
    /// It presented a certificate the cluster's CA verified, with this name.
    certificate: Option<String>,
    /// That certificate.
    der: Option<rustls::pki_types::CertificateDer<'static>>,
}

type Conn = Framed<Stream, FrameCodec>;

/// A new connection: TLS first when configured (a failed or unfinished TLS handshake, say
/// plaintext sent to a TLS port, is logged and closed), then [`serve`].
pub(crate) async fn accept(tcp: TcpStream, remote: SocketAddr, shared: Arc<Shared>) {
    tcp.set_nodelay(true).ok();
    let stream = match &shared.tls {
        None => Stream::Plain(tcp),
        Some(tls) => {
            // Closed before a byte was sent: a port probe, not worth a warning.
            let mut first = [0u8; 1];
            if let Ok(Ok(0)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, tcp.peek(&mut first)).await {
                debug!(%remote, "closed before the TLS handshake");
                return;
            }
            let config = tls.accept.current();
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, transport::tls::accept(tcp, config)).await
            {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    warn!(%remote, "TLS handshake failed: {e}; connection closed");
                    return;
                }
                Err(_) => {
                    warn!(%remote, "no TLS handshake within {HANDSHAKE_TIMEOUT:?}; connection closed");
                    return;
                }
            }
        }
    };
    serve(stream, remote, shared).await
}

async fn serve(stream: Stream, remote: SocketAddr, shared: Arc<Shared>) {
    let credentials = Credentials {
        tls: stream.is_tls(),
        certificate: stream
            .peer_verified()
            .then(|| stream.peer_certificate_name().unwrap_or_default()),
        der: stream.peer_certificate(),
    };
    let mut conn = Framed::new(stream, FrameCodec::new(shared.config.max_frame_bytes));
    let id: ConnId = next_conn_id();
    let peer = match tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        handshake(&mut conn, remote, &credentials, &shared),
    )
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
    serve_requests(&mut conn, remote, &peer, &shared).await;
    if let Peer::Beacon(node) = peer {
        shared.driver.peer_disconnected(node, id).await;
    }
}

/// Reads frames until a valid `Hello`. Returns `None` when the connection should close.
async fn handshake(
    conn: &mut Conn,
    remote: SocketAddr,
    credentials: &Credentials,
    shared: &Shared,
) -> Option<Peer> {
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
                None,
            )
            .await
            {
                return None;
            }
            continue;
        }
        let result = match frame.decode::<pb::Hello>() {
            Ok(hello) => accept_hello(hello, &frame.body, credentials, shared),
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
                if let (Peer::Beacon(node), Some(msg)) = (&peer, initial) {
                    let node = *node;
                    info!(peer = %node, %remote, "beacon connected");
                    if let Some(up) = shared.peer_up.get(&node) {
                        up.notify_one();
                    }
                    shared.driver.peer_message(node, msg).await;
                }
                return Some(peer);
            }
            Err(reject) => {
                count_refusal(shared, reject.code);
                reply_error(conn, remote, &frame, reject, None).await;
                return None;
            }
        }
    }
}

/// Counts a refusal of credentials or permissions in the metrics.
fn count_refusal(shared: &Shared, code: u32) {
    if code == ErrorCode::Unauthenticated as u32 {
        shared.metrics.refused("unauthenticated");
    } else if code == ErrorCode::PermissionDenied as u32 {
        shared.metrics.refused("permission_denied");
    }
}

/// The result label of an answer: `OK`, or its error code's name (a machine's own codes by
/// number).
fn result_code(result: &Result<Handled, Reject>) -> String {
    match result {
        Ok(_) => "OK".into(),
        Err(reject) => match ErrorCode::from_code(reject.code) {
            Some(code) => format!("{code:?}"),
            None => reject.code.to_string(),
        },
    }
}

/// Checks a `Hello` (`body` is the whole message, with the machines' fields); returns who it
/// is, the acknowledgement, and the state it carried.
fn accept_hello(
    hello: pb::Hello,
    body: &[u8],
    credentials: &Credentials,
    shared: &Shared,
) -> Result<(Peer, pb::HelloAck, Option<crate::consensus::Message<State>>), Reject> {
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
        identity: String::new(),
        role: String::new(),
        admin: String::new(),
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
            if shared.tls.as_ref().is_some_and(|t| t.verifies_peers()) {
                let Some(der) = &credentials.der else {
                    return Err(Reject::close(
                        ErrorCode::Unauthenticated,
                        format!(
                            "`{node}` says it is a beacon but presented no certificate signed by this cluster's CA (key `tls.ca`)"
                        ),
                    ));
                };
                if !transport::tls::certificate_names(der, node.ip()) {
                    return Err(Reject::close(
                        ErrorCode::Unauthenticated,
                        format!(
                            "`{node}` says it is a beacon but its certificate (`{}`) is not for {}",
                            credentials.certificate.as_deref().unwrap_or("?"),
                            node.ip()
                        ),
                    ));
                }
            }
            if let Some(expected) = &config.auth.peer_token
                && !expected.accepts(&hello.token)
            {
                return Err(Reject::close(
                    ErrorCode::Unauthenticated,
                    format!(
                        "`{node}` says it is a beacon but its Hello does not carry this cluster's `auth.peer_token`"
                    ),
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
            machines::rpc::check_hello(config, node, body)?;
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
            let initial =
                message_from_pb::<State>(hello.election.unwrap_or_default()).map_err(|e| {
                    Reject::close(ErrorCode::MalformedBody, format!("Hello.election: {e}"))
                })?;
            ack.election = Some(shared.current.borrow().1.clone());
            ack.admin = config.admin_url().unwrap_or_default();
            shared.note_peer_admin(node, &hello.admin);
            Ok((Peer::Beacon(node), ack, Some(initial)))
        }
        Ok(pb::Role::Client) => {
            if !hello.cluster.is_empty() && hello.cluster != config.cluster {
                return Err(wrong_cluster());
            }
            if !config.auth.enabled() {
                return Ok((Peer::Client(None), ack, None));
            }
            let who = config
                .auth
                .authenticate(
                    &hello.token,
                    credentials.tls,
                    credentials.certificate.as_deref(),
                    config.node,
                )
                .map_err(|e| Reject::close(ErrorCode::Unauthenticated, e.to_string()))?;
            ack.identity = who.name.clone();
            ack.role = who.role.to_string();
            Ok((Peer::Client(Some(Arc::new(who))), ack, None))
        }
        _ => Err(Reject::close(
            ErrorCode::MalformedBody,
            format!("Hello.role {} is not a known role", hello.role),
        )),
    }
}

/// A stream this connection holds (a watch): frames are pushed as they come.
struct Streaming {
    /// The request that started it, repeated on the error that ends it.
    cmd: u32,
    seq: u32,
    pushes: mpsc::Receiver<Frame>,
    /// What the error that ends it says.
    ended: &'static str,
}

async fn next_push(streaming: &mut Option<Streaming>) -> Option<Frame> {
    match streaming {
        Some(s) => s.pushes.recv().await,
        None => std::future::pending().await,
    }
}

/// Passes `frame` through the connection's reassembly: fragments (a snapshot larger than a
/// frame) are accepted from beacons only and come out as one frame once whole.
fn reassemble(parts: &mut Reassembly, frame: Frame, peer: &Peer) -> Result<Option<Frame>, Reject> {
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

async fn serve_requests(conn: &mut Conn, remote: SocketAddr, peer: &Peer, shared: &Shared) {
    let mut streaming: Option<Streaming> = None;
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
            push = next_push(&mut streaming) => {
                let sent = match push {
                    Some(frame) => conn.send(frame).await,
                    None => {
                        // The driver ended the stream: this beacon stopped leading.
                        let s = streaming.take().expect("streaming");
                        let leader = shared.driver.status().await.ok().and_then(|s| s.leader).and_then(|l| l.parse().ok());
                        conn.send(wire::error_frame_to(s.cmd, s.seq, ErrorCode::NotLeader, s.ended, leader)).await
                    }
                };
                if let Err(e) = sent {
                    debug!(%remote, "cannot send a pushed frame: {e}");
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
                if !reply_error(conn, remote, &frame, reject, Some(&shared.refusals)).await {
                    return;
                }
                continue;
            }
        };
        // Requests of a kind that batches (node reports) queued back to back (a client
        // renewing many registrations over one connection) go to the driver together and are
        // answered in order: the batch costs the driver one wake-up, not one per request.
        let mut batch = vec![frame];
        if machines::rpc::batches(batch[0].cmd) {
            let cmd = batch[0].cmd;
            // Only whole, well-formed requests (not fragments), which the codec hands over
            // at once and without error.
            while batch.len() < BATCH
                && wire::frame::ready_frame(conn.read_buffer(), shared.config.max_frame_bytes)
                    .is_some_and(|(flags, next)| flags & FLAG_MORE == 0 && next == cmd)
            {
                match conn.next().now_or_never() {
                    Some(Some(Ok(next))) => batch.push(next),
                    _ => break,
                }
            }
        }
        let started = std::time::Instant::now();
        let results = join_all(batch.iter().map(|f| dispatch(f, peer, shared))).await;
        for (frame, result) in batch.iter().zip(results) {
            // Heartbeats on a peer's inbound link are not requests.
            if !matches!(peer, Peer::Beacon(_)) {
                let code = result_code(&result);
                if let Err(reject) = &result {
                    count_refusal(shared, reject.code);
                }
                let command = machines::rpc::name(frame.cmd)
                    .or_else(|| Cmd::from_code(frame.cmd).map(|c| format!("{c:?}")))
                    .unwrap_or_else(|| "unknown".into());
                shared.metrics.request(&command, &code, started.elapsed());
            }
            let result = match result {
                Ok(Handled::Stream {
                    reply,
                    pushes,
                    ended,
                }) => {
                    streaming = Some(Streaming {
                        cmd: frame.cmd,
                        seq: frame.seq,
                        pushes,
                        ended,
                    });
                    Ok(Handled::Reply(reply))
                }
                other => other,
            };
            if !answer(conn, remote, frame, result, shared).await {
                return;
            }
        }
    }
}

/// Most requests taken from the read buffer for one batch.
const BATCH: usize = 256;

/// Sends what `dispatch` made of `frame`. Returns whether the connection goes on.
async fn answer(
    conn: &mut Conn,
    remote: SocketAddr,
    frame: &Frame,
    result: Result<Handled, Reject>,
    shared: &Shared,
) -> bool {
    match result {
        Ok(Handled::OneWay) => true,
        Ok(Handled::Reply(reply)) if reply.body.len() > shared.config.max_frame_bytes => {
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
            reply_error(conn, remote, frame, reject, Some(&shared.refusals)).await
        }
        Ok(Handled::Reply(reply)) => {
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
        Ok(Handled::Stream { .. }) => unreachable!("streams are started by serve_requests"),
        Err(reject) => reply_error(conn, remote, frame, reject, Some(&shared.refusals)).await,
    }
}

/// Handles one request: the core's commands here, every other by the machine that owns it.
async fn dispatch(frame: &Frame, peer: &Peer, shared: &Shared) -> Result<Handled, Reject> {
    let identity = match peer {
        Peer::Client(Some(who)) => Some(who.as_ref()),
        _ => None,
    };
    if let Some(who) = identity {
        permit(frame.cmd, who)?;
    }
    match Cmd::from_code(frame.cmd) {
        Some(Cmd::LeaderElection) => {
            let Peer::Beacon(node) = *peer else {
                return Err(Reject::keep(
                    ErrorCode::UnknownCommand,
                    "heartbeats (cmd 113) are accepted from beacons only",
                ));
            };
            let msg: pb::Election = frame.decode()?;
            let msg = message_from_pb::<State>(msg).map_err(Reject::malformed)?;
            shared.driver.peer_message(node, msg).await;
            Ok(Handled::OneWay)
        }
        Some(Cmd::BeaconStatus) => {
            let _req: pb::BeaconStatusRequest = frame.decode()?;
            reply(frame, &shared.status().await?)
        }
        Some(Cmd::Hello) => Err(Reject::keep(
            ErrorCode::MalformedBody,
            "duplicate Hello: this connection has already completed its handshake",
        )),
        None => match machines::rpc::serve(frame, &shared.ctx(identity)).await {
            Some(handled) => handled,
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
        },
    }
}

/// Whether `who` may send `cmd`: the role the command needs (each machine names its own).
pub(crate) fn permit(cmd: u32, who: &Identity) -> Result<(), Reject> {
    let needs = match Cmd::from_code(cmd) {
        Some(Cmd::BeaconStatus | Cmd::Hello) => Role::Read,
        Some(_) => Role::Admin,
        None => machines::rpc::role(cmd).unwrap_or(Role::Read),
    };
    if who.role >= needs {
        return Ok(());
    }
    Err(Reject::keep(
        ErrorCode::PermissionDenied,
        format!("{who} may not send cmd {cmd}: it needs role `{needs}`"),
    ))
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
///
/// A refused request (`summed` given) is logged at debug (it is counted in the metrics):
/// under load, one warning per refusal would bury everything else. At most one warning per
/// [`REFUSAL_WARN_EVERY`] says how many were refused since the last and why the latest was.
/// A refused handshake is a warning each time, and refused credentials an audit line.
async fn reply_error(
    conn: &mut Conn,
    remote: SocketAddr,
    frame: &Frame,
    reject: Reject,
    summed: Option<&Refusals>,
) -> bool {
    if reject.code == ErrorCode::NotLeader as u32 {
        // Part of normal operation: clients find the leader this way.
        debug!(%remote, cmd = frame.cmd, seq = frame.seq, "redirected: {}", reject.msg);
    } else if reject.code == ErrorCode::Unauthenticated as u32
        || reject.code == ErrorCode::PermissionDenied as u32
    {
        // The audit trail of refused credentials and permissions.
        warn!(%remote, cmd = frame.cmd, seq = frame.seq, code = reject.code, audit = true, "access refused: {}", reject.msg);
    } else if let Some(summed) = summed {
        debug!(%remote, cmd = frame.cmd, seq = frame.seq, code = reject.code, "request refused: {}", reject.msg);
        if let Some(refused) = summed.note() {
            warn!(%remote, cmd = frame.cmd, code = reject.code, "{refused} requests refused since the last such warning (at most one per {} s); the latest: {}", REFUSAL_WARN_EVERY.as_secs(), reject.msg);
        }
    } else {
        warn!(%remote, cmd = frame.cmd, seq = frame.seq, code = reject.code, "request refused: {}", reject.msg);
    }
    if frame.flags & FLAG_ONEWAY != 0 && !reject.close {
        // The sender expects no answer; the log line is all it gets.
        return true;
    }
    let reply = wire::error_frame_to(frame.cmd, frame.seq, reject.code, reject.msg, reject.leader);
    conn.send(reply).await.is_ok() && !reject.close
}

/// How often refused requests are summed up in a warning.
pub(crate) const REFUSAL_WARN_EVERY: Duration = Duration::from_secs(10);

/// Counts refused requests between warnings.
#[derive(Default)]
pub(crate) struct Refusals {
    state: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

impl Refusals {
    /// Notes one refusal; returns how many to report when a warning is due now.
    pub(crate) fn note(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (last, count) = &mut *state;
        *count += 1;
        let due = last.is_none_or(|at| at.elapsed() >= REFUSAL_WARN_EVERY);
        if !due {
            return None;
        }
        *last = Some(std::time::Instant::now());
        Some(std::mem::take(count))
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn refusals_are_summed_between_warnings() {
        let r = Refusals::default();
        assert_eq!(r.note(), Some(1), "the first warns at once");
        for _ in 0..99 {
            assert_eq!(r.note(), None, "then none until the period is over");
        }
        // Pretend the period is over: the next warning counts everything since the last.
        r.state.lock().unwrap().0 = Some(std::time::Instant::now() - REFUSAL_WARN_EVERY);
        assert_eq!(r.note(), Some(100));
    }
}

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

use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;
use tracing::{debug, info, warn};

use super::dispatch::{self, Peer, count_refusal, dispatch};
use super::driver::{ConnId, next_conn_id};
use super::framed::{Conn, answer, feed, fits, next_frame, refused_connection, reply_error};
use super::refusals::Said;
use super::shared::Shared;
use crate::machines::handle::{CoreExt, Handled, Reject};
use crate::machines::{self, State};
use crate::pb;
use crate::transport::{self, Stream};
use crate::wire::envelope::message_from_pb;
use crate::wire::{
    self, Cmd, Code, ErrorCode, FLAG_MORE, FLAG_ONEWAY, Frame, FrameCodec, OLDEST_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
};

/// A connection must say `Hello` within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the connection itself says of the other end.
struct Credentials {
    tls: bool,
    /// It presented a certificate the cluster's CA verified, with this name.
    certificate: Option<String>,
    /// That certificate.
    der: Option<rustls::pki_types::CertificateDer<'static>>,
}

/// A new connection: TLS first when configured (a failed or unfinished TLS handshake, say
/// plaintext sent to a TLS port, is logged and closed), then [`serve`].
pub(crate) async fn accept(tcp: TcpStream, remote: SocketAddr, shared: Arc<Shared>) {
    tcp.set_nodelay(true).ok();
    // Closed before a byte was sent: a port probe, not worth a warning.
    let mut first = [0u8; 1];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tcp.peek(&mut first)).await {
        Ok(Ok(0)) => {
            debug!(%remote, "closed before a byte was sent");
            return;
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            debug!(%remote, "connection error: {e}");
            return;
        }
        Err(_) => {
            let why = format!("nothing sent within {HANDSHAKE_TIMEOUT:?}: connection closed");
            return refused_connection(&shared, remote, "handshake_timeout", &why);
        }
    }
    let stream = match &shared.tls {
        // The HTTP/2 preface (`PRI * HTTP/2.0`) opens a gRPC connection.
        None if first[0] == b'P' => {
            return super::grpc::serve(tcp, remote, false, None, shared).await;
        }
        None => Stream::Plain(tcp),
        Some(tls) => {
            let config = tls.accept.current();
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, transport::tls::accept(tcp, config)).await
            {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    let why = format!("TLS handshake failed: {e}; connection closed");
                    let kind = super::refusals::tls_kind(&why);
                    return refused_connection(&shared, remote, kind, &why);
                }
                Err(_) => {
                    let why =
                        format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}; connection closed");
                    return refused_connection(&shared, remote, "tls_timeout", &why);
                }
            }
        }
    };
    if stream.negotiated_h2() {
        let certificate = stream
            .peer_verified()
            .then(|| stream.peer_certificate_name().unwrap_or_default());
        return super::grpc::serve(stream, remote, true, certificate, shared).await;
    }
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
            let why = format!("no Hello within {HANDSHAKE_TIMEOUT:?}: connection closed");
            return refused_connection(&shared, remote, "handshake_timeout", &why);
        }
    };
    if let Peer::Relay(node) = peer {
        return super::relay::serve(&mut conn, remote, node, &shared).await;
    }
    if let Peer::Beacon(node) = peer {
        shared.peers.peer_connected(node, id).await;
        super::heard::serve(conn, remote, node, &shared).await;
        shared.peers.peer_disconnected(node, id).await;
        return;
    }
    serve_requests(&mut conn, remote, id, &peer, &shared).await;
}

/// Reads frames until a valid `Hello`. Returns `None` when the connection should close.
async fn handshake(
    conn: &mut Conn,
    remote: SocketAddr,
    credentials: &Credentials,
    shared: &Shared,
) -> Option<Peer> {
    loop {
        let frame = next_frame(conn, remote, shared).await?;
        if frame.cmd != Cmd::Hello.code() {
            let msg = format!(
                "cmd {} before the handshake: send Hello (cmd {}) first",
                frame.cmd,
                Cmd::Hello.code()
            );
            refused_connection(shared, remote, "handshake_required", &msg);
            if frame.flags & FLAG_ONEWAY == 0 {
                let reply =
                    wire::error_frame(frame.cmd, frame.seq, ErrorCode::HandshakeRequired, msg);
                if conn.send(reply).await.is_err() {
                    return None;
                }
            }
            continue;
        }
        let result = match frame.decode::<pb::Hello>() {
            Ok(hello) => accept_hello(hello, &frame.body, credentials, shared),
            Err(e) => Err(Reject::close(ErrorCode::MalformedBody, e.to_string())),
        };
        // A client (not a beacon, which proves itself apart) from an address the cluster's
        // allowlist does not admit is refused here, with why.
        let result = match result {
            Ok(accepted) if matches!(accepted.peer, Peer::Client(_)) => shared
                .driver
                .admit(remote.ip(), "client address")
                .map(|()| accepted),
            other => other,
        };
        let result = match result {
            Ok(accepted) => match (&accepted.peer, &accepted.proof) {
                (Peer::Beacon(node) | Peer::Relay(node), Some(theirs)) => {
                    prove_peer(conn, remote, frame.seq, *node, theirs, shared)
                        .await
                        .map(|()| accepted)
                }
                _ => Ok(accepted),
            },
            Err(e) => Err(e),
        };
        match result {
            Ok(Accepted {
                peer, ack, initial, ..
            }) => {
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
                    shared.peer_up(node).notify_one();
                    shared.peers.peer_message(node, msg).await;
                }
                return Some(peer);
            }
            Err(reject) => {
                count_refusal(shared, reject.code);
                let kind = handshake_refusal_kind(reject.code);
                let audit = reject.code == ErrorCode::Unauthenticated as u32;
                match shared.refused_conns.note(kind, remote.ip()) {
                    Said::InFull if audit => {
                        warn!(%remote, code = reject.code, audit = true, "access refused: {}", reject.msg)
                    }
                    Said::InFull => {
                        warn!(%remote, code = reject.code, "handshake refused: {}", reject.msg)
                    }
                    Said::Counted => {
                        debug!(%remote, code = reject.code, "handshake refused: {}", reject.msg)
                    }
                    Said::Summary(line) => warn!(audit, "{line}"),
                }
                shared.metrics.connection_refused(kind);
                answer_refusal(conn, &frame, reject).await;
                return None;
            }
        }
    }
}

/// A `Hello` taken: who it is, the acknowledgement, the state it carried, and, for a peer
/// that must prove the peer token, its challenge.
struct Accepted {
    peer: Peer,
    ack: pb::HelloAck,
    initial: Option<crate::consensus::Message<State>>,
    proof: Option<Vec<u8>>,
}

impl Accepted {
    fn client(who: Option<Arc<crate::auth::Identity>>, ack: pb::HelloAck) -> Accepted {
        Accepted {
            peer: Peer::Client(who),
            ack,
            initial: None,
            proof: None,
        }
    }
}

/// A peer that did not show it knows the peer token.
fn not_proven(node: SocketAddr) -> Reject {
    Reject::close(
        ErrorCode::Unauthenticated,
        format!(
            "`{node}` says it is a beacon but did not prove it knows this cluster's `auth.peer_token`"
        ),
    )
}

/// The peer-token exchange's second half at the acceptor: answers the dialer's challenge
/// with our proof and our own challenge, and checks the dialer's proof over it.
async fn prove_peer(
    conn: &mut Conn,
    remote: SocketAddr,
    seq: u32,
    node: SocketAddr,
    theirs: &[u8],
    shared: &Shared,
) -> Result<(), Reject> {
    let config = &shared.config;
    let token = config.auth.peer_token.as_ref().expect("asked for a proof");
    let ours = crate::auth::challenge();
    let me = config.node.to_string();
    let first = pb::HelloAck {
        cluster: config.cluster.clone(),
        node: me.clone(),
        version: PROTOCOL_VERSION,
        peer_challenge: ours.clone(),
        peer_proof: token.prove("acceptor", theirs, &ours, &config.cluster, &me),
        proof_wanted: true,
        ..Default::default()
    };
    conn.send(Frame::new(Cmd::Hello.response(), seq, 0, &first))
        .await
        .map_err(|e| Reject::close(ErrorCode::Unavailable, e.to_string()))?;
    let Some(frame) = next_frame(conn, remote, shared).await else {
        return Err(Reject::close(
            ErrorCode::Unauthenticated,
            format!("`{node}` closed the connection instead of proving the peer token"),
        ));
    };
    if frame.cmd != Cmd::HelloProof.code() {
        return Err(not_proven(node));
    }
    let proof: pb::HelloProof = frame.decode()?;
    let name = node.to_string();
    if !token.verify(
        &proof.proof,
        "dialer",
        &ours,
        theirs,
        &config.cluster,
        &name,
    ) {
        return Err(not_proven(node));
    }
    Ok(())
}

/// Checks a `Hello` (`body` is the whole message, with the machines' fields); returns who it
/// is, the acknowledgement, and the state it carried.
fn accept_hello(
    hello: pb::Hello,
    body: &[u8],
    credentials: &Credentials,
    shared: &Shared,
) -> Result<Accepted, Reject> {
    let config = &shared.config;
    if !(OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&hello.version) {
        let (than, fix) = if hello.version > PROTOCOL_VERSION {
            ("newer", "upgrade this beacon, one version at a time")
        } else {
            ("older", "upgrade the peer first")
        };
        return Err(Reject::close(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is {than} than this beacon (version {}) speaks (protocol versions {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}): {fix}",
                hello.version,
                crate::VERSION
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
        ..Default::default()
    };
    match pb::Role::try_from(hello.role) {
        Ok(role @ (pb::Role::Peer | pb::Role::Relay)) => {
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
            let proof = match &config.auth.peer_token {
                None => None,
                // An older beacon sends the token itself.
                Some(expected) if !hello.token.is_empty() => {
                    if !expected.accepts(&hello.token) {
                        return Err(not_proven(node));
                    }
                    warn!(peer = %node, "the peer token came in clear from an older beacon: upgrade it, so the token no longer crosses the network");
                    None
                }
                Some(_) if (8..=64).contains(&hello.peer_challenge.len()) => {
                    Some(hello.peer_challenge.clone())
                }
                Some(_) => return Err(not_proven(node)),
            };
            if let Some(refused) = shared
                .driver
                .refuse_non_member(node, Some(hello.members_index))
            {
                return Err(refused);
            }
            machines::Dispatch::check_hello(&config.machines, node, body)?;
            shared.note_peer_version(node, hello.version);
            let ours = config.beacon_names();
            // From protocol 3 the members are in the log: the configured lists are only a
            // new cluster's first membership (on which its beacons must agree), and a
            // beacon that joined, or started after a change, has other ones.
            let first_membership = hello.members_index == 0 && shared.driver.members_index() == 0;
            if (hello.version < 3 || first_membership) && hello.beacons != ours {
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
            if role == pb::Role::Relay {
                info!(peer = %node, "beacon relays its clients' calls here");
                return Ok(Accepted {
                    peer: Peer::Relay(node),
                    ack,
                    initial: None,
                    proof,
                });
            }
            let initial =
                message_from_pb::<State>(hello.election.unwrap_or_default()).map_err(|e| {
                    Reject::close(ErrorCode::MalformedBody, format!("Hello.election: {e}"))
                })?;
            ack.election = Some(shared.current.borrow().election.clone());
            ack.admin = config.admin_url().unwrap_or_default();
            shared.note_peer_admin(node, &hello.admin);
            Ok(Accepted {
                peer: Peer::Beacon(node),
                ack,
                initial: Some(initial),
                proof,
            })
        }
        Ok(pb::Role::Client) => {
            if !hello.cluster.is_empty() && hello.cluster != config.cluster {
                return Err(wrong_cluster());
            }
            let auth = shared.auth.load();
            if !auth.enabled() {
                return Ok(Accepted::client(None, ack));
            }
            let who = auth
                .authenticate(
                    &hello.token,
                    credentials.tls,
                    credentials.certificate.as_deref(),
                    config.node,
                )
                .map_err(|e| Reject::close(ErrorCode::Unauthenticated, e.to_string()))?;
            ack.identity = who.name.clone();
            ack.role = who.role.to_string();
            Ok(Accepted::client(Some(Arc::new(who)), ack))
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
    pushes: crate::machines::handle::Pushes,
    /// What the error that ends it says.
    ended: crate::machines::handle::StreamEnd,
}

async fn next_push(streaming: &mut Option<Streaming>) -> Option<Frame> {
    match streaming {
        Some(s) => s.pushes.recv().await,
        None => std::future::pending().await,
    }
}

/// Serves a client's requests until it leaves (a beacon's link to us is `heard.rs`).
async fn serve_requests(
    conn: &mut Conn,
    remote: SocketAddr,
    id: ConnId,
    peer: &Peer,
    shared: &Shared,
) {
    let client = shared.admission.client(&dispatch::client_key(
        peer,
        format_args!("{id} from {remote}"),
    ));
    let mut streaming: Option<Streaming> = None;
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
                    Some(frame) => {
                        shared.metrics.pushed(frame.cmd);
                        conn.send(frame).await
                    }
                    None => {
                        // The stream ended: this beacon stopped leading, or the watcher fell
                        // behind.
                        let s = streaming.take().expect("streaming");
                        let (code, why) = s.ended.why();
                        let leader = shared.core_status().await.ok().and_then(|s| s.leader).and_then(|l| l.parse().ok());
                        conn.send(wire::error_frame_to(s.cmd, s.seq, code, why, leader)).await
                    }
                };
                if let Err(e) = sent {
                    debug!(%remote, "cannot send a pushed frame: {e}");
                    return;
                }
                continue;
            }
            frame = next_frame(conn, remote, shared) => match frame {
                Some(frame) => frame,
                None => return,
            },
        };
        // Only beacons send messages larger than a frame, on their links (`heard.rs`).
        if frame.flags & FLAG_MORE != 0 {
            let reject = Reject::new(
                ErrorCode::FrameTooLarge,
                format!(
                    "frame cmd {} seq {} is a fragment (flag 0x04): only beacons may send \
                     messages larger than a frame",
                    frame.cmd, frame.seq
                ),
            );
            if !reply_error(conn, remote, &frame, reject, &shared.refusals).await {
                return;
            }
            continue;
        }
        // Requests of a kind that batches (node reports) queued back to back (a client
        // renewing many registrations over one connection) go to the driver together and are
        // answered in order: the batch costs the driver one wake-up, not one per request.
        let mut batch = vec![frame];
        if machines::Dispatch::batches(batch[0].cmd) {
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
        let results = match batch.as_slice() {
            [one] => vec![dispatch(one, peer, Some(&client), shared).await],
            many => dispatch::dispatch_batch(many, peer, Some(&client), shared).await,
        };
        dispatch::record_batch(shared, &batch, &results, started);
        for (frame, result) in batch.iter().zip(results) {
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
                // The common answer (a batch of renewals is all of them) is queued here:
                // going through `answer`, whose future holds every other case's, moved
                // that whole future for each.
                Ok(Handled::Reply(reply)) if fits(&reply, shared) => {
                    if !feed(conn, remote, reply).await {
                        return;
                    }
                    continue;
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

/// The label a refused handshake is counted under.
fn handshake_refusal_kind(code: u32) -> &'static str {
    match ErrorCode::from_code(code) {
        Some(ErrorCode::WrongCluster) => "wrong_cluster",
        Some(ErrorCode::UnknownBeacon) => "unknown_beacon",
        Some(ErrorCode::UnsupportedVersion) => "unsupported_version",
        Some(ErrorCode::ConfigMismatch) => "config_mismatch",
        Some(ErrorCode::Unauthenticated) => "unauthenticated",
        Some(ErrorCode::PermissionDenied) => "ip_not_allowed",
        _ => "bad_handshake",
    }
}

/// Sends the refusal of a handshake (the connection then closes).
async fn answer_refusal(conn: &mut Conn, frame: &Frame, reject: Reject) {
    let reply = wire::error_reply_frame(frame.cmd, frame.seq, &reject.to_reply());
    let _ = conn.send(reply).await;
}

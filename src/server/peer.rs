//! Outbound links: one task per configured peer keeps a connection open and writes our
//! heartbeats to it.
//!
//! The handshake carries our election state and the answer carries the peer's, so a beacon
//! that starts (or reconnects) learns at once who is up and who leads. Failures are retried
//! with a capped exponential backoff; a peer that is down is logged once, not on every retry.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;
use tracing::{debug, info, warn};

use super::driver::{Body, ConnId, Greeting, Outgoing, next_conn_id};
use super::framed::Conn;
use super::shared::Shared;
use crate::machines::{self, State};
use crate::pb;
use crate::transport::{Stream, tls};
use crate::wire::envelope::message_from_pb;
use crate::wire::{
    Cmd, Code, ErrorCode, FLAG_ONEWAY, Frame, FrameCodec, OLDEST_PROTOCOL_VERSION,
    PROTOCOL_VERSION, fragment,
};

const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// Why a connection attempt or an established link ended.
#[derive(Debug, thiserror::Error)]
pub(super) enum LinkError {
    #[error("connect failed: {0}")]
    Connect(std::io::Error),
    #[error("TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("refused our handshake: {0}")]
    Refused(String),
    /// The peer speaks an older protocol only (a rolling upgrade under way).
    #[error("refused our protocol version: {0}")]
    OlderPeer(String),
    #[error(
        "answered as `{answered}` in cluster `{cluster}`; check the `beacon` lists and `cluster` names agree"
    )]
    WrongIdentity { answered: String, cluster: String },
    #[error("{0}")]
    Frame(#[from] crate::wire::FrameError),
    #[error("closed the connection")]
    Closed,
    /// The socket could not be moved to the core's thread (`Stream::rebind`: out of file
    /// descriptors, say).
    #[error("cannot move the link to the core's thread: {0}")]
    Rebind(std::io::Error),
}

pub(crate) async fn run(peer: SocketAddr, shared: Arc<Shared>, mut rx: mpsc::Receiver<Outgoing>) {
    let tick = Duration::from_millis(shared.config.tick_ms);
    // Retry at least every tick (so a restarted peer is reached within the time it takes to
    // be declared online), never more often than FIRST_BACKOFF, never less than every 2 s.
    let max_backoff = tick.clamp(Duration::from_millis(100), Duration::from_secs(2));
    // A write that takes longer than this means the peer is stuck: reconnect.
    let io_timeout = (tick * 2).max(Duration::from_secs(1));
    let mut backoff = FIRST_BACKOFF;
    let mut last_error: Option<String> = None;
    let peer_up = shared.peer_up(peer);
    loop {
        if rx.is_closed() {
            // The peer left the membership: the driver dropped its queue.
            info!(%peer, "no longer a member: link closed");
            return;
        }
        let attempt = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            r = connect(peer, &shared, io_timeout) => r,
        };
        match attempt {
            Ok((conn, id, greeted)) => {
                info!(%peer, "link to peer up");
                last_error = None;
                backoff = FIRST_BACKOFF;
                // What was queued up to the round our greeting is as of is stale: the
                // greeting said it. Anything later is newer than the greeting and goes out.
                let mut first = None;
                while let Ok(queued) = rx.try_recv() {
                    if queued.round > greeted {
                        first = Some(queued.body);
                        break;
                    }
                }
                let (back, ended) = forward_from_core(conn, first, rx, &shared, io_timeout).await;
                let Some(back) = back else {
                    return; // the core's thread is gone: shutting down
                };
                rx = back;
                shared.peers.peer_disconnected(peer, id).await;
                match ended {
                    None => return, // shutdown
                    Some(e) => warn!(%peer, "link to peer down: {e}"),
                }
            }
            Err(e) => {
                let msg = e.to_string();
                if last_error.as_deref() != Some(msg.as_str()) {
                    warn!(%peer, "cannot link to peer: {msg} (retrying)");
                    last_error = Some(msg);
                } else {
                    debug!(%peer, "cannot link to peer: {msg}");
                }
            }
        }
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
            // It dialled us: it is up, try now.
            _ = peer_up.notified() => {}
        }
        backoff = (backoff * 2).min(max_backoff);
    }
}

/// Connects and handshakes; the connection is registered with the driver under the
/// returned id. Also returns the driver round the greeting's state is as of.
async fn connect(
    peer: SocketAddr,
    shared: &Shared,
    io_timeout: Duration,
) -> Result<(Conn, ConnId, u64), LinkError> {
    let (conn, ack, greeted) = dial(peer, shared, pb::Role::Peer, io_timeout).await?;
    shared.note_peer_admin(peer, &ack.admin);
    shared.note_peer_version(peer, ack.version);
    let id = next_conn_id();
    shared.peers.peer_connected(peer, id).await;
    let state = message_from_pb::<State>(ack.election.unwrap_or_default())
        .map_err(|e| LinkError::Refused(format!("its handshake state is invalid: {e}")))?;
    shared.peers.peer_greeting(peer, state).await;
    Ok((conn, id, greeted))
}

/// Connects to `peer` and says who we are, as `role` (a heartbeat link, or a relay of
/// clients' calls): TLS with our certificate when the cluster verifies beacons, our election
/// state, and the peer-token exchange, in which the peer proves itself first. Returns the
/// connection, the peer's acknowledgement and the driver round our greeting is as of.
pub(super) async fn dial(
    peer: SocketAddr,
    shared: &Shared,
    role: pb::Role,
    io_timeout: Duration,
) -> Result<(Conn, pb::HelloAck, u64), LinkError> {
    match dial_as(peer, shared, role, io_timeout, PROTOCOL_VERSION).await {
        // A peer of the version before refuses ours: speak its version (what a rolling
        // upgrade, one version at a time, needs), as it speaks to us.
        Err(LinkError::OlderPeer(why)) => {
            debug!(%peer, "the peer speaks an older protocol ({why}): speaking version {OLDEST_PROTOCOL_VERSION}");
            dial_as(peer, shared, role, io_timeout, OLDEST_PROTOCOL_VERSION).await
        }
        other => other,
    }
}

/// [`dial`], saying protocol `version` in the handshake.
async fn dial_as(
    peer: SocketAddr,
    shared: &Shared,
    role: pb::Role,
    io_timeout: Duration,
    version: u32,
) -> Result<(Conn, pb::HelloAck, u64), LinkError> {
    let at = shared.config.dial.get(&peer).copied().unwrap_or(peer);
    let tcp = tokio::time::timeout(io_timeout, TcpStream::connect(at))
        .await
        .map_err(|_| LinkError::Timeout(io_timeout))?
        .map_err(LinkError::Connect)?;
    tcp.set_nodelay(true).ok();
    // The peer's certificate must name its configured address, wherever `dial` sends us.
    let stream = match shared.tls.as_ref().and_then(|t| t.dial.as_ref()) {
        None => Stream::Plain(tcp),
        Some(dial) => {
            let name = ServerName::IpAddress(peer.ip().into());
            tokio::time::timeout(io_timeout, tls::dial(tcp, dial.current(), name))
                .await
                .map_err(|_| LinkError::Timeout(io_timeout))?
                .map_err(LinkError::Tls)?
        }
    };
    let mut conn = Framed::new(stream, FrameCodec::new(shared.config.max_frame_bytes));
    let Greeting {
        round: greeted,
        election: state,
    } = shared.current.borrow().clone();
    let ours = crate::auth::challenge();
    let hello = pb::Hello {
        cluster: shared.config.cluster.clone(),
        role: role as i32,
        node: shared.config.node.to_string(),
        version,
        election: Some(state),
        mode: shared.config.mode.to_string(),
        beacons: shared.config.beacon_names(),
        // With a peer token, a challenge: the token itself never crosses the network.
        peer_challenge: if shared.config.auth.peer_token.is_some() {
            ours.clone()
        } else {
            Vec::new()
        },
        admin: shared.config.admin_url().unwrap_or_default(),
        members_index: shared.driver.members_index(),
        ..Default::default()
    };
    // Each machine adds what beacons of one cluster must agree on (the registry: its range).
    let mut body = prost::Message::encode_to_vec(&hello);
    machines::Dispatch::hello_fields(&shared.config.machines, &mut body);
    let frame = Frame {
        cmd: Cmd::Hello.code(),
        seq: 1,
        flags: 0,
        body: body.into(),
    };
    let exchange = async {
        conn.send(frame).await?;
        conn.next().await.transpose()
    };
    let reply = tokio::time::timeout(io_timeout, exchange)
        .await
        .map_err(|_| LinkError::Timeout(io_timeout))??
        .ok_or(LinkError::Closed)?;
    if reply.is_error() {
        let err: pb::ErrorReply = reply.decode()?;
        if err.code == ErrorCode::UnsupportedVersion as u32 && version > OLDEST_PROTOCOL_VERSION {
            return Err(LinkError::OlderPeer(err.msg));
        }
        return Err(LinkError::Refused(err.msg));
    }
    let mut ack: pb::HelloAck = reply.decode()?;
    if let Some(token) = &shared.config.auth.peer_token {
        // The peer proves it knows the token before we prove it: a process posing as a
        // beacon learns nothing from us.
        let name = peer.to_string();
        let cluster = &shared.config.cluster;
        let proven = ack.proof_wanted
            && token.verify(
                &ack.peer_proof,
                "acceptor",
                &ours,
                &ack.peer_challenge,
                cluster,
                &name,
            );
        if !proven {
            return Err(LinkError::Refused(format!(
                "`{peer}` did not prove it knows this cluster's auth.peer_token (a beacon without it, or a process posing as one)"
            )));
        }
        let me = shared.config.node.to_string();
        let proof = pb::HelloProof {
            proof: token.prove("dialer", &ack.peer_challenge, &ours, cluster, &me),
        };
        let exchange = async {
            conn.send(Frame::new(Cmd::HelloProof.code(), 2, 0, &proof))
                .await?;
            conn.next().await.transpose()
        };
        let reply = tokio::time::timeout(io_timeout, exchange)
            .await
            .map_err(|_| LinkError::Timeout(io_timeout))??
            .ok_or(LinkError::Closed)?;
        if reply.is_error() {
            let err: pb::ErrorReply = reply.decode()?;
            return Err(LinkError::Refused(err.msg));
        }
        ack = reply.decode()?;
    }
    if ack.node != peer.to_string() || ack.cluster != shared.config.cluster {
        return Err(LinkError::WrongIdentity {
            answered: ack.node,
            cluster: ack.cluster,
        });
    }
    Ok((conn, ack, greeted))
}

/// Messages written to the socket together, at most, when more are queued behind the first:
/// one system call for a burst (a batch's appends and commits) rather than one each, with a
/// bound so a long queue still goes out in steady pieces.
const COALESCED: usize = 64;

/// A body this large (a snapshot, or one still being encoded) is written on the edges,
/// not on the core's thread: copying it into the socket is bulk work. An inbound message
/// this large is read and decoded on the edges too (`heard.rs`).
pub(super) const BULK_BYTES: usize = 1 << 20;

/// How [`forward`] stopped.
enum Forwarded {
    /// The link failed (`Some(error)`) or the beacon is shutting down (`None`).
    Ended(Option<LinkError>),
    /// A bulk body is next: the caller writes it, then forwards again.
    Bulk(Body),
}

/// Forwards the core's messages on `conn` until the link ends, on the core's own thread
/// ([`Shared::on_core`], the socket moved to its I/O driver): the core queues a message and
/// the link writes it on the same thread, so a message wakes no other thread, and the
/// driver lets the links write its early messages before its fsync. The connection was
/// made, and its TLS handshake done, here on the edges; a bulk body is written here too.
/// Returns the queue back, with how the link ended (`None` for the queue: the core's
/// thread is gone).
async fn forward_from_core(
    mut conn: Conn,
    mut first: Option<Body>,
    mut rx: mpsc::Receiver<Outgoing>,
    shared: &Arc<Shared>,
    io_timeout: Duration,
) -> (Option<mpsc::Receiver<Outgoing>>, Option<LinkError>) {
    let mut seq: u32 = 1;
    loop {
        let on_core = shared.clone();
        let served = shared.on_core(async move {
            let ended = match conn.get_mut().rebind() {
                Ok(()) => forward(&mut conn, first, &mut rx, &on_core, io_timeout, &mut seq).await,
                Err(e) => Forwarded::Ended(Some(LinkError::Rebind(e))),
            };
            (conn, rx, seq, ended)
        });
        let Some((c, r, s, ended)) = served.await else {
            return (None, None);
        };
        (conn, rx, seq) = (c, r, s);
        first = None;
        match ended {
            Forwarded::Ended(e) => return (Some(rx), e),
            Forwarded::Bulk(body) => {
                let max = shared.config.max_frame_bytes;
                let written = async {
                    write_body(&mut conn, &mut seq, body, max, io_timeout).await?;
                    timed(io_timeout, conn.flush()).await
                };
                tokio::select! {
                    _ = shared.shutdown.cancelled() => return (Some(rx), None),
                    r = written => if let Err(e) = r {
                        return (Some(rx), Some(e));
                    },
                }
            }
        }
    }
}

/// Whether `body` is bulk work for the edges (see [`BULK_BYTES`]).
fn bulk(body: &Body) -> bool {
    match body {
        Body::Encoding(_) => true,
        Body::Ready(b) => b.len() > BULK_BYTES,
    }
}

/// Writes `first`, then queued heartbeats, until the link fails or shutdown, or a bulk body
/// comes next: what went before it is flushed first, and the caller writes it (a body
/// still being encoded, a snapshot, holds back what follows it, not what went before it).
async fn forward(
    conn: &mut Conn,
    mut first: Option<Body>,
    rx: &mut mpsc::Receiver<Outgoing>,
    shared: &Shared,
    io_timeout: Duration,
    seq: &mut u32,
) -> Forwarded {
    loop {
        let next = async {
            match first.take() {
                Some(hb) => Some(hb),
                None => rx.recv().await.map(|queued| queued.body),
            }
        };
        tokio::select! {
            _ = shared.shutdown.cancelled() => return Forwarded::Ended(None),
            hb = next => {
                let Some(hb) = hb else {
                    return Forwarded::Ended(None);
                };
                // Each write has io_timeout to go: a large snapshot that keeps moving is not
                // cut off, a peer that stops reading is.
                let burst = async {
                    let mut queued = Some(hb);
                    let mut written = 0;
                    while let Some(hb) = queued.take() {
                        if bulk(&hb) {
                            timed(io_timeout, conn.flush()).await?;
                            return Ok(Some(hb));
                        }
                        write_body(conn, seq, hb, shared.config.max_frame_bytes, io_timeout).await?;
                        written += 1;
                        if written < COALESCED {
                            queued = rx.try_recv().ok().map(|next| next.body);
                        }
                    }
                    timed(io_timeout, conn.flush()).await.map(|()| None)
                };
                match burst.await {
                    Err(e) => return Forwarded::Ended(Some(e)),
                    Ok(Some(bulk)) => return Forwarded::Bulk(bulk),
                    Ok(None) => {}
                }
            }
            // Heartbeats are one-way; anything read here is an error report or the close.
            incoming = conn.next() => match incoming {
                None => return Forwarded::Ended(Some(LinkError::Closed)),
                Some(Err(e)) => return Forwarded::Ended(Some(e.into())),
                Some(Ok(frame)) if frame.is_error() => {
                    let msg = frame
                        .decode::<pb::ErrorReply>()
                        .map(|e| e.msg)
                        .unwrap_or_else(|e| e.to_string());
                    warn!("peer reported an error on our link: {msg}");
                }
                Some(Ok(frame)) => debug!(cmd = frame.cmd, "unexpected frame on a heartbeat link"),
            },
        }
    }
}

/// Writes `body` once it is encoded (nothing if its encoding was abandoned), as the next
/// message of the link's sequence `seq`.
async fn write_body(
    conn: &mut Conn,
    seq: &mut u32,
    body: Body,
    max: usize,
    io_timeout: Duration,
) -> Result<(), LinkError> {
    if let Some(body) = body.bytes().await {
        *seq = seq.wrapping_add(1);
        write(conn, *seq, body, max, io_timeout).await?;
    }
    Ok(())
}

/// Puts one message in the connection's write buffer, in fragments when it is over the frame
/// limit (a large snapshot); the buffer goes out when it fills or is flushed.
async fn write(
    conn: &mut Conn,
    seq: u32,
    body: bytes::Bytes,
    max: usize,
    io_timeout: Duration,
) -> Result<(), LinkError> {
    for frame in fragment::split(Cmd::LeaderElection.code(), seq, FLAG_ONEWAY, body, max) {
        timed(io_timeout, conn.feed(frame)).await?;
    }
    Ok(())
}

/// `io`, given up as a timeout after `limit`.
async fn timed<E: Into<LinkError>>(
    limit: Duration,
    io: impl Future<Output = Result<(), E>>,
) -> Result<(), LinkError> {
    match tokio::time::timeout(limit, io).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(LinkError::Timeout(limit)),
    }
}

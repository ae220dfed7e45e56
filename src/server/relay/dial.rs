//! Opening a relay connection to the leader and carrying calls over it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::super::framed::Conn;
use super::super::shared::Shared;
use super::pool::{Pending, RelayCall, RelayConn, Relays, STREAM_QUEUE, lost};
use crate::auth::Identity;
use crate::machines::handle::Reject;
use crate::pb;
use crate::wire::{Cmd, Code, ErrorCode, FLAG_ONEWAY, Frame};

/// Calls one relay connection carries at once; more wait to be sent.
const IN_FLIGHT: usize = 4096;

/// How long a relay connection may take to open.
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

impl Relays {
    /// Carries `cmd` with `body` to `leader` under `identity`'s name; `stream` for a call whose
    /// answer is followed by pushed frames.
    pub(crate) async fn call(
        &self,
        shared: &Shared,
        leader: SocketAddr,
        identity: Option<&Identity>,
        cmd: u32,
        body: bytes::Bytes,
        stream: bool,
    ) -> Result<RelayCall, Reject> {
        let conn = self.conn(shared, leader).await?;
        let seq = conn.seq.fetch_add(1, Ordering::Relaxed).max(1);
        let (tx, frames) = mpsc::channel(if stream { STREAM_QUEUE } else { 1 });
        conn.pending
            .lock()
            .expect("never poisoned")
            .insert(seq, Pending { tx, stream });
        let relayed = pb::Relayed {
            cmd,
            body: body.to_vec(),
            identity: identity.map(|i| i.name.clone()).unwrap_or_default(),
            role: identity.map(|i| i.role.to_string()).unwrap_or_default(),
            proof: identity
                .map(|i| i.proof.as_str().to_owned())
                .unwrap_or_default(),
            cancel: false,
        };
        let call = RelayCall {
            frames,
            seq,
            stream,
            conn: conn.clone(),
        };
        // Closed since it was looked up: `run` marks it closed before it tells the calls
        // waiting on it, so a call added after that is told here (dropping it takes it off).
        if conn.closed.is_cancelled() {
            return Err(lost(leader));
        }
        if conn
            .out
            .send(Frame::new(Cmd::Relayed.code(), seq, 0, &relayed))
            .await
            .is_err()
        {
            return Err(lost(leader));
        }
        Ok(call)
    }

    /// [`Relays::call`], then its answer's first frame (an error frame included); the
    /// call is handed back for a stream's later frames.
    pub(crate) async fn ask(
        &self,
        shared: &Shared,
        leader: SocketAddr,
        identity: Option<&Identity>,
        cmd: u32,
        body: bytes::Bytes,
        stream: bool,
    ) -> Result<(RelayCall, Frame), Reject> {
        let mut call = self
            .call(shared, leader, identity, cmd, body, stream)
            .await?;
        let first = call.frames.recv().await.ok_or_else(|| lost(leader))?;
        Ok((call, first))
    }

    /// Closes the relay connections to every beacon but `leader`, the one this beacon now
    /// knows leads (itself, or another). The calls waiting on them are refused with
    /// `LEADER_CHANGED` (retry) at once: an old leader that hangs keeps its connections open
    /// and answers nothing, so without this they would wait out their clients' deadlines,
    /// a keep-alive's report among them, while a new leader serves. A beacon that merely
    /// knows no leader for a moment (an election under way, or its own view aged by a
    /// stall) closes nothing: the leader may be the same once it hears again, and closing
    /// would end every stream relayed through it, a herd of watchers among them.
    pub(crate) async fn leader_is(&self, leader: SocketAddr) {
        let mut conns = self.conns.lock().await;
        conns.retain(|to, conn| {
            if conn.closed.is_cancelled() {
                return false;
            }
            if *to == leader {
                return true;
            }
            let waiting = conn.pending.lock().expect("never poisoned").len();
            info!(
                old = %to,
                %leader,
                waiting,
                "closing the relay connection to a beacon that leads no more; its calls are told to retry"
            );
            conn.closed.cancel();
            false
        });
    }

    /// The open relay connection to `leader`, if there is one.
    async fn open(&self, leader: SocketAddr) -> Option<Arc<RelayConn>> {
        let mut conns = self.conns.lock().await;
        conns.retain(|_, c| !c.closed.is_cancelled());
        conns.get(&leader).cloned()
    }

    /// The open relay connection to `leader`, opened now if there is none. One call at a
    /// time dials each beacon, and the pool is not held meanwhile: a dial to a leader that
    /// hung just before (the kernel accepts, nothing answers) holds up neither the calls
    /// relayed to another beacon nor [`Relays::leader_is`] for its whole limit.
    async fn conn(&self, shared: &Shared, leader: SocketAddr) -> Result<Arc<RelayConn>, Reject> {
        if let Some(conn) = self.open(leader).await {
            return Ok(conn);
        }
        let turn = self
            .dialing
            .lock()
            .expect("never poisoned")
            .entry(leader)
            .or_default()
            .clone();
        let _turn = turn.lock().await;
        // Opened by the call that dialled before this one.
        if let Some(conn) = self.open(leader).await {
            return Ok(conn);
        }
        // A dial to a leader that hung waits out its limit unless the leadership moves on
        // first: then the call is told to retry at once, as those waiting on an open
        // connection are (`leader_is`). Asked of the replica, which knows of a new leader
        // as soon as the call's own hint did; woken by each change told.
        let mut changes = shared.driver.leader_changes();
        let moved = async {
            loop {
                if let Some(now) = shared.driver.leader().filter(|now| *now != leader) {
                    return now;
                }
                if changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        let dial = super::super::peer::dial(leader, shared, pb::Role::Relay, DIAL_TIMEOUT);
        let dialled = if self.to_followers {
            dial.await
        } else {
            tokio::select! {
                dialled = dial => dialled,
                now = moved => return Err(moved_on(now, leader)),
            }
        };
        let (framed, _, _) = dialled.map_err(|e| {
            Reject::new(
                ErrorCode::Unavailable,
                format!("cannot relay to the leader {leader}: {e}; retry"),
            )
        })?;
        if self.to_followers {
            info!(follower = %leader, "asking a follower to vouch for this leader's reads");
        } else {
            info!(%leader, "relaying clients' calls to the leader");
        }
        let (out, rx) = mpsc::channel(IN_FLIGHT);
        let conn = Arc::new(RelayConn {
            out,
            pending: Mutex::new(HashMap::new()),
            seq: AtomicU32::new(1),
            closed: tokio_util::sync::CancellationToken::new(),
        });
        tokio::spawn(run(
            framed,
            rx,
            conn.clone(),
            leader,
            shared.shutdown.clone(),
        ));
        let mut conns = self.conns.lock().await;
        // Another beacon may have come to lead while this one was dialled: `leader_is` has
        // run for it (or will), and this connection goes as it would have.
        if let Some(now) = shared
            .driver
            .leader()
            .filter(|now| *now != leader && !self.to_followers)
        {
            conn.closed.cancel();
            return Err(moved_on(now, leader));
        }
        conns.insert(leader, conn.clone());
        Ok(conn)
    }
}

/// The refusal of a call whose relay to `leader` was being opened when `now` came to lead.
fn moved_on(now: SocketAddr, leader: SocketAddr) -> Reject {
    Reject::new(
        ErrorCode::LeaderChanged,
        format!("{now} came to lead while the relay to {leader} was being opened; retry"),
    )
}

/// The relay connection's life: writes what the calls send, hands each frame read to its
/// call; once it ends, every waiting call is told (its channel closes).
async fn run(
    framed: Conn,
    mut rx: mpsc::Receiver<Frame>,
    conn: Arc<RelayConn>,
    leader: SocketAddr,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let (mut sink, mut frames) = framed.split();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            // Closed by `Relays::leader_is`: the leader it reaches leads no more.
            _ = conn.closed.cancelled() => break,
            out = rx.recv() => {
                let Some(frame) = out else { break };
                if let Err(e) = sink.send(frame).await {
                    warn!(%leader, "relay connection lost: {e}");
                    break;
                }
            }
            read = frames.next() => {
                let frame = match read {
                    Some(Ok(frame)) => frame,
                    Some(Err(e)) => {
                        warn!(%leader, "relay connection lost: {e}");
                        break;
                    }
                    None => {
                        debug!(%leader, "relay connection closed by the leader");
                        break;
                    }
                };
                deliver(&conn, frame);
            }
        }
    }
    conn.closed.cancel();
    conn.pending.lock().expect("never poisoned").clear();
}

/// Hands `frame` to the call waiting under its `seq`: a unary call's answer ends it, as
/// does an error; a stream that cannot keep up is ended.
fn deliver(conn: &RelayConn, frame: Frame) {
    let mut pending = conn.pending.lock().expect("never poisoned");
    let Some(call) = pending.get(&frame.seq) else {
        return;
    };
    let last = !call.stream || frame.is_error();
    let seq = frame.seq;
    match call.tx.try_send(frame) {
        Ok(()) if !last => {}
        Ok(()) => {
            pending.remove(&seq);
        }
        Err(_) => {
            // Gone, or fell STREAM_QUEUE frames behind: the stream ends here.
            pending.remove(&seq);
            let cancel = pb::Relayed {
                cancel: true,
                ..Default::default()
            };
            let _ = conn
                .out
                .try_send(Frame::new(Cmd::Relayed.code(), seq, FLAG_ONEWAY, &cancel));
        }
    }
}

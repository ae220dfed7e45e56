//! The driver's handle, and what every request handler (the core's, and each machine's in
//! its `rpc.rs`) shares: the events the driver takes, the answer a handler gives, and the
//! refusal it sends instead.
//!
//! A handler reaches the replicated state only through the driver's channel: it submits a
//! request to its machine's service (answered once the core allows), reads the state (a
//! closure run on the driver's task, between steps), or subscribes to committed changes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::consensus::{ConsensusError, Message, Reply, ReplyError, Service};
use crate::machines::{Change, Replica, Routes, Services, State};
use crate::pb;
use crate::time::Millis;
use crate::wire::{ErrorCode, Frame, FrameError, response_code};

/// Follows committed changes on the leader: called with each change once it is committed,
/// in log order; returns whether it wants more. Dropped when this beacon stops leading.
pub(crate) type Subscriber = Box<dyn FnMut(u64, &Change) -> bool + Send>;

/// A read of the replica, run on the driver's task between steps.
pub(crate) type Read = Box<dyn FnOnce(&Replica, Millis) + Send>;

/// A read that may leave a [`Subscriber`] behind.
pub(crate) type Subscribe = Box<dyn FnOnce(&Replica, Millis) -> Option<Subscriber> + Send>;

/// A subscription as the driver takes it: the read, and who to tell once everything the
/// read saw (the state as of the last log position) is committed. The driver drops
/// `committed` if this beacon stops leading first.
pub(crate) struct Subscription {
    pub(crate) start: Subscribe,
    pub(crate) committed: oneshot::Sender<()>,
}

/// How long a subscription's first answer waits for the entries it reflects to commit.
const COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

pub(crate) enum Event {
    Peer {
        from: SocketAddr,
        msg: Message<State>,
        greeting: bool,
    },
    PeerConnected {
        peer: SocketAddr,
        conn: ConnId,
    },
    PeerDisconnected {
        peer: SocketAddr,
        conn: ConnId,
    },
    Status(oneshot::Sender<pb::BeaconStatus>),
    /// Set the state gauges of the metrics now (a scrape is about to read them).
    Metrics(oneshot::Sender<()>),
    Request {
        request: crate::machines::Request,
        reply: oneshot::Sender<Reply<State, Services>>,
    },
    Read(Read),
    Subscribe(Subscription),
}

/// Identifies one connection with a peer (either direction).
pub(crate) type ConnId = u64;

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// A fresh connection id.
pub(crate) fn next_conn_id() -> ConnId {
    NEXT_CONN.fetch_add(1, Ordering::Relaxed)
}

/// A message to a peer, encoded, stamped with the driver round that sent it. A link that
/// comes up greets its peer with the state of some round (see [`Greeting`]) and then drops
/// what was queued in that round or before: the greeting already said it.
pub(crate) type Outgoing = (u64, Bytes);

/// Our state for handshakes, with the driver round it is as of. The driver replaces it at
/// the end of each round, once the round's log changes are stored: a greeting never claims
/// entries that are not on disk yet.
pub(crate) type Greeting = (u64, pb::Election);

/// Cheap handle for talking to the driver task. Every call fails with "shutting down" once
/// the driver has stopped.
#[derive(Clone)]
pub(crate) struct DriverHandle {
    tx: mpsc::Sender<Event>,
}

impl DriverHandle {
    pub(crate) fn new(tx: mpsc::Sender<Event>) -> DriverHandle {
        DriverHandle { tx }
    }

    pub(crate) async fn peer_message(&self, from: SocketAddr, msg: Message<State>) {
        self.peer(from, msg, false).await;
    }

    /// A peer's state from its answer to our handshake (see [`crate::consensus::Input`]).
    pub(crate) async fn peer_greeting(&self, from: SocketAddr, msg: Message<State>) {
        self.peer(from, msg, true).await;
    }

    async fn peer(&self, from: SocketAddr, msg: Message<State>, greeting: bool) {
        let _ = self
            .tx
            .send(Event::Peer {
                from,
                msg,
                greeting,
            })
            .await;
    }

    pub(crate) async fn peer_connected(&self, peer: SocketAddr, conn: ConnId) {
        let _ = self.tx.send(Event::PeerConnected { peer, conn }).await;
    }

    pub(crate) async fn peer_disconnected(&self, peer: SocketAddr, conn: ConnId) {
        let _ = self.tx.send(Event::PeerDisconnected { peer, conn }).await;
    }

    async fn ask<T>(&self, event: impl FnOnce(oneshot::Sender<T>) -> Event) -> Result<T, Reject> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(event(tx)).await.map_err(|_| shutting_down())?;
        rx.await.map_err(|_| shutting_down())
    }

    pub(crate) async fn status(&self) -> Result<pb::BeaconStatus, Reject> {
        self.ask(Event::Status).await
    }

    /// Brings the metrics' state gauges up to date.
    pub(crate) async fn refresh_metrics(&self) -> Result<(), Reject> {
        self.ask(Event::Metrics).await
    }

    /// Submits a request to service `V`; the answer comes once the core allows it (a write
    /// once committed). The outer error is the core's (or a shutdown), the inner `V`'s own.
    pub(crate) async fn submit<V>(
        &self,
        request: V::Request,
    ) -> Result<Result<V::Response, V::Error>, Reject>
    where
        V: Service<State>,
        Services: Routes<State, V>,
    {
        let request = <Services as Routes<State, V>>::request(request);
        let reply = self.ask(|reply| Event::Request { request, reply }).await?;
        let misrouted = || Reject::keep(ErrorCode::Unavailable, "internal error: misrouted answer");
        match reply {
            Ok(r) => Ok(Ok(
                <Services as Routes<State, V>>::response(r).ok_or_else(misrouted)?
            )),
            Err(ReplyError::Consensus(e)) => Err(e.into()),
            Err(ReplyError::Machine(e)) => Ok(Err(
                <Services as Routes<State, V>>::error(e).ok_or_else(misrouted)?
            )),
        }
    }

    /// Runs `f` on the replica between steps and returns what it made.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Replica, Millis) -> T + Send + 'static,
    ) -> Result<T, Reject> {
        self.ask(|tx| {
            Event::Read(Box::new(move |replica, now| {
                let _ = tx.send(f(replica, now));
            }))
        })
        .await
    }

    /// Runs `f` on the replica between steps, when this beacon can serve (it leads and, in
    /// quorum mode, sees a majority and has taken over its state); the [`Subscriber`] it may
    /// leave is told every change committed after that moment. The answer comes back once
    /// everything `f` saw is committed: a first answer never shows a write that a later
    /// leader could lose, and a leader still collecting a majority's state (which it then
    /// takes over whole, telling no subscriber) is never subscribed to.
    pub(crate) async fn subscribe<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Replica, Millis) -> (T, Option<Subscriber>) + Send + 'static,
    ) -> Result<T, Reject> {
        let (committed, barrier) = oneshot::channel();
        let answer = self
            .ask(|tx| {
                Event::Subscribe(Subscription {
                    start: Box::new(move |replica, now| {
                        if let Err(e) = replica.ready_to_serve() {
                            let _ = tx.send(Err(e));
                            return None;
                        }
                        let (answer, subscriber) = f(replica, now);
                        let _ = tx.send(Ok(answer));
                        subscriber
                    }),
                    committed,
                })
            })
            .await??;
        match tokio::time::timeout(COMMIT_WAIT, barrier).await {
            Ok(Ok(())) => Ok(answer),
            Ok(Err(_)) => Err(ConsensusError::LeaderChanged.into()),
            Err(_) => Err(ConsensusError::NotReady.into()),
        }
    }
}

/// What a request handler has at hand.
pub(crate) struct Ctx<'a> {
    pub(crate) config: &'a Config,
    pub(crate) driver: &'a DriverHandle,
    /// Who sent the request, when this beacon requires authentication (key `auth`).
    pub(crate) identity: Option<&'a crate::auth::Identity>,
}

/// A request that is answered with an error; the connection goes on unless `close`.
#[derive(Debug)]
pub(crate) struct Reject {
    /// A core [`ErrorCode`] or a machine's.
    pub(crate) code: u32,
    pub(crate) msg: String,
    pub(crate) close: bool,
    /// The leader to ask instead (with `NotLeader`).
    pub(crate) leader: Option<SocketAddr>,
}

impl Reject {
    pub(crate) fn keep(code: impl Into<u32>, msg: impl Into<String>) -> Self {
        Reject {
            code: code.into(),
            msg: msg.into(),
            close: false,
            leader: None,
        }
    }

    pub(crate) fn close(code: impl Into<u32>, msg: impl Into<String>) -> Self {
        Reject {
            close: true,
            ..Reject::keep(code, msg)
        }
    }

    pub(crate) fn with_leader(self, leader: Option<SocketAddr>) -> Self {
        Reject { leader, ..self }
    }

    /// A body that does not decode as the command's message.
    pub(crate) fn malformed(e: impl std::fmt::Display) -> Self {
        Reject::keep(ErrorCode::MalformedBody, e.to_string())
    }
}

impl From<ConsensusError> for Reject {
    fn from(e: ConsensusError) -> Reject {
        let code = match &e {
            ConsensusError::NotLeader { .. } => ErrorCode::NotLeader,
            ConsensusError::LeaderChanged => ErrorCode::LeaderChanged,
            ConsensusError::NoQuorum { .. } => ErrorCode::NoQuorum,
            ConsensusError::NotReady => ErrorCode::Unavailable,
        };
        let leader = match &e {
            ConsensusError::NotLeader { leader } => *leader,
            _ => None,
        };
        Reject::keep(code, e.to_string()).with_leader(leader)
    }
}

impl From<FrameError> for Reject {
    fn from(e: FrameError) -> Reject {
        Reject::malformed(e)
    }
}

pub(crate) fn shutting_down() -> Reject {
    Reject::close(ErrorCode::Unavailable, "beacon is shutting down")
}

/// Submits `request` to service `V` and returns its answer; its own refusals become replies
/// through `reject` (each machine's codes), the core's keep theirs.
pub(crate) async fn submit<V>(
    ctx: &Ctx<'_>,
    request: V::Request,
    reject: impl FnOnce(V::Error) -> Reject,
) -> Result<V::Response, Reject>
where
    V: Service<State>,
    Services: Routes<State, V>,
{
    ctx.driver.submit::<V>(request).await?.map_err(reject)
}

/// A service answered with a response of another kind than the request asks: a bug,
/// reported as such rather than a panic.
pub(crate) fn unexpected(response: impl std::fmt::Debug) -> Reject {
    Reject::keep(
        ErrorCode::Unavailable,
        format!("internal error: unexpected response {response:?}"),
    )
}

/// Notices queued per watcher; a watcher that falls this far behind is dropped (it
/// watches again and resyncs).
pub(crate) const WATCH_QUEUE: usize = 4096;

/// A watcher's queue of pushed frames.
pub(crate) fn watch_queue() -> (mpsc::Sender<Frame>, mpsc::Receiver<Frame>) {
    mpsc::channel(WATCH_QUEUE)
}

/// Queues `frame` for a watcher of `what`: false once the watcher is gone, or fell
/// [`WATCH_QUEUE`] notices behind and is dropped (it resyncs).
pub(crate) fn push(tx: &mpsc::Sender<Frame>, frame: Frame, what: &str) -> bool {
    match tx.try_send(frame) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            tracing::warn!(
                "a watcher of {what} fell {WATCH_QUEUE} notices behind: dropped (it resyncs)"
            );
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

/// What a handler made of a request.
pub(crate) enum Handled {
    /// The response frame.
    Reply(Frame),
    /// A one-way message: nothing to answer.
    OneWay,
    /// The response frame, then frames pushed as they come (a watch) until the channel
    /// closes (this beacon stopped leading), which ends the stream with a `NotLeader` error
    /// saying `ended`.
    Stream {
        reply: Frame,
        pushes: mpsc::Receiver<Frame>,
        ended: &'static str,
    },
}

/// The response to `frame`, carrying `msg`.
pub(crate) fn reply(frame: &Frame, msg: &impl prost::Message) -> Result<Handled, Reject> {
    Ok(Handled::Reply(Frame::new(
        response_code(frame.cmd),
        frame.seq,
        0,
        msg,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consensus_errors_keep_their_code_and_leader() {
        let leader: SocketAddr = "127.0.0.1:17000".parse().unwrap();
        let r = Reject::from(ConsensusError::NotLeader {
            leader: Some(leader),
        });
        assert_eq!(r.code, ErrorCode::NotLeader as u32);
        assert_eq!(r.leader, Some(leader));
        assert!(r.msg.contains("the leader is 127.0.0.1:17000"));
        let r = Reject::from(ConsensusError::NoQuorum {
            sees: 1,
            needs: 2,
            of: 3,
        });
        assert_eq!((r.code, r.leader), (ErrorCode::NoQuorum as u32, None));
    }
}

//! The driver's handle: what a request handler's ask looks like on the way to the core
//! ([`Ask`]), the two channels it travels on (what keeps things going, taken first, and new
//! work), and [`DriverHandle`], which sends it. The machines reach it as a
//! [`Core`](crate::machines::handle::Core); the daemon's own handlers (leadership and
//! membership changes, peers' checks, metrics) through the methods here.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};

use crate::consensus::{ConsensusError, Reply};
use crate::machines::handle::{Answer, Core, Reject, Subscription, shutting_down};
use crate::machines::view::View;
use crate::machines::watchers::Watchers;
use crate::machines::{Request, Services, State};
use crate::server::admission::Gate;
use crate::wire::ErrorCode;

/// What a request handler (the core's, or a machine's) asks of the driver. Peer traffic
/// has a channel of its own (`peers.rs`).
pub(crate) enum Ask {
    /// Set the state gauges of the metrics now (a scrape is about to read them).
    Metrics(oneshot::Sender<()>),
    Request {
        request: Request,
        reply: oneshot::Sender<Reply<State, Services>>,
    },
    /// Requests that arrived together (node reports queued back to back on one
    /// connection), stepped one by one in this order: one trip through the channel for
    /// all, and one back with their answers, in the same order.
    Requests {
        requests: Vec<Request>,
        reply: oneshot::Sender<Vec<Reply<State, Services>>>,
    },
    Subscribe(Subscription),
    /// A leader transfer ([`crate::consensus::Input::Transfer`]).
    Transfer {
        to: Option<SocketAddr>,
        reply: oneshot::Sender<Result<SocketAddr, crate::consensus::TransferError>>,
    },
    /// A change of membership ([`crate::consensus::Input::ChangeMembers`]).
    ChangeMembers {
        change: crate::consensus::Change,
        reply: oneshot::Sender<Result<crate::consensus::Changed, crate::consensus::ChangeError>>,
    },
    /// A linearizable read's point in the log ([`crate::consensus::Input::ReadIndex`]), for
    /// this beacon's reads or for a follower's (`asker`).
    ReadIndex {
        asker: Option<crate::consensus::Asker>,
        reply: oneshot::Sender<Result<u64, ConsensusError>>,
    },
}

impl Ask {
    /// Whether it keeps what exists going (renewals batched from a connection, a read's
    /// point in the log, the status a scrape reads, a leadership or membership change):
    /// the core takes these before new work, on a channel of their own.
    fn keeps(&self) -> bool {
        !matches!(self, Ask::Request { .. } | Ask::Subscribe(_))
    }
}

/// The two channels to the core: what keeps things going, taken first, and new work.
#[derive(Clone)]
pub(crate) struct AskSenders {
    pub(crate) keep: mpsc::Sender<Asked>,
    pub(crate) new: mpsc::Sender<Asked>,
}

/// An [`Ask`] with when it was queued: the core's beat counts how long each waited before
/// the core took it (`beacon_request_queue_seconds`).
pub(crate) struct Asked {
    pub(crate) at: std::time::Instant,
    pub(crate) ask: Ask,
}

impl From<Ask> for Asked {
    fn from(ask: Ask) -> Asked {
        Asked {
            at: std::time::Instant::now(),
            ask,
        }
    }
}

/// Cheap handle for talking to the driver. Every call fails with "shutting down" once the
/// driver has stopped.
#[derive(Clone)]
pub(crate) struct DriverHandle {
    tx: AskSenders,
    /// Asked before a write joins the core's queue.
    gate: Gate,
    /// The replica, read on the caller's task.
    view: Arc<View>,
    /// The watches of this beacon: their limits, gauges and shared notices.
    watchers: Arc<Watchers>,
    /// The leader this beacon knows, as each change of it is seen.
    leader: watch::Receiver<Option<SocketAddr>>,
    /// Whether a write sent here now would succeed, as each change of it is seen.
    writable: watch::Receiver<bool>,
}

impl DriverHandle {
    pub(crate) fn new(
        tx: AskSenders,
        gate: Gate,
        view: Arc<View>,
        watchers: Arc<Watchers>,
        leader: watch::Receiver<Option<SocketAddr>>,
        writable: watch::Receiver<bool>,
    ) -> DriverHandle {
        DriverHandle {
            tx,
            gate,
            view,
            watchers,
            leader,
            writable,
        }
    }

    /// The leader this beacon knows (itself included, `None` while it knows none), woken on
    /// each change: told from the core's step that saw it, not polled.
    pub(crate) fn leader_changes(&self) -> watch::Receiver<Option<SocketAddr>> {
        self.leader.clone()
    }

    /// The channel `ask` reaches the core on: what keeps things going, or new work.
    fn channel(&self, ask: &Ask) -> &mpsc::Sender<Asked> {
        if ask.keeps() {
            &self.tx.keep
        } else {
            &self.tx.new
        }
    }

    /// Queues `ask` for the core; fails once the driver has stopped.
    async fn send(&self, ask: Ask) -> Result<(), Reject> {
        self.channel(&ask)
            .send(ask.into())
            .await
            .map_err(|_| shutting_down())
    }

    async fn ask<T>(&self, event: impl FnOnce(oneshot::Sender<T>) -> Ask) -> Result<T, Reject> {
        let (tx, rx) = oneshot::channel();
        self.send(event(tx)).await?;
        rx.await.map_err(|_| shutting_down())
    }

    /// Hands the leadership to `to` (or the beacon furthest along); answers with the beacon
    /// that leads once it has taken over.
    pub(crate) async fn transfer(
        &self,
        to: Option<SocketAddr>,
    ) -> Result<Result<SocketAddr, crate::consensus::TransferError>, Reject> {
        self.ask(|reply| Ask::Transfer { to, reply }).await
    }

    /// Why beacon `node` may not exchange heartbeats with this one, if it may not: it is
    /// neither a member here nor one a change not yet committed removed. `theirs` is the log
    /// index of the membership it holds (0: its configured one), when it said (a handshake
    /// says; a heartbeat does not). A beacon whose membership is older than ours was removed
    /// while it could not hear of it (hung, or cut off), and is told so; any other is told
    /// how to become a member.
    pub(crate) fn refuse_non_member(
        &self,
        node: SocketAddr,
        theirs: Option<u64>,
    ) -> Option<Reject> {
        let replica = self.view.read();
        if replica.election().peers().any(|p| p == node) {
            return None;
        }
        let ours = replica.members_index();
        let msg = if theirs.is_none_or(|theirs| theirs < ours) && ours > 0 {
            let holds = theirs.map_or(String::new(), |t| {
                format!(", and it holds the one of index {t}")
            });
            format!(
                "beacon `{node}` is no longer a member of this cluster: the membership of log index {ours} ({}) does not name it{holds}; it was removed, perhaps while it could not hear of it (stopped, hung or cut off): stop it, or to bring it back move its data directory aside and start it with `--join`",
                replica.members()
            )
        } else {
            format!(
                "beacon `{node}` is not a member of this cluster (see `nebcli member list`): add it with `nebcli member add {node}` or start it with `--join`; with no membership change made yet, check the `beacon` and `learners` lists agree"
            )
        };
        Some(Reject::close(ErrorCode::UnknownBeacon, msg))
    }

    /// Whether this beacon can serve writes now (it leads, sees a majority and has taken
    /// over its state).
    pub(crate) fn serving(&self) -> bool {
        self.view.read().ready_to_serve().is_ok()
    }

    /// Whether a write sent to this beacon now would succeed (it leads and can serve, or
    /// follows a leader it can relay to), woken on each change: what gRPC health reports.
    /// Told by the core after the turn that changed it rather than polled, so that a beacon
    /// at rest wakes no task for its health.
    pub(crate) fn writable(&self) -> watch::Receiver<bool> {
        self.writable.clone()
    }

    /// The log index of the membership in effect here (0: the configured one).
    pub(crate) fn members_index(&self) -> u64 {
        self.view.read().members_index()
    }

    /// Changes the membership by one beacon (at the leader); answered once committed.
    pub(crate) async fn change_members(
        &self,
        change: crate::consensus::Change,
    ) -> Result<Result<crate::consensus::Changed, crate::consensus::ChangeError>, Reject> {
        self.ask(|reply| Ask::ChangeMembers { change, reply }).await
    }

    /// The leader this beacon knows now (itself included; `None` while it knows none), as
    /// the replica says: [`DriverHandle::leader_changes`] tells of a change once the step
    /// that made it is carried out, a moment later.
    pub(crate) fn leader(&self) -> Option<SocketAddr> {
        self.view.read().election().leader()
    }

    /// The leader this beacon follows and the term in which it does, now (`None` while it
    /// leads, or knows no leader).
    pub(crate) fn follows(&self) -> Option<(SocketAddr, u64)> {
        let replica = self.view.read();
        let election = replica.election();
        election.followed().map(|leader| (leader, election.term()))
    }

    /// Whether this beacon follows `leader` in `term` now, as the replica says between steps
    /// ([`crate::consensus::Replica::vouches_for`]).
    pub(crate) fn vouches_for(&self, leader: SocketAddr, term: u64) -> bool {
        self.view.read().vouches_for(leader, term)
    }

    /// The leader this beacon knows (itself included) and its term, now.
    pub(crate) fn known_leader(&self) -> (Option<SocketAddr>, u64) {
        let replica = self.view.read();
        let election = replica.election();
        (election.leader(), election.term())
    }

    /// What this beacon, leading, may ask its followers to vouch for instead of a round
    /// ([`crate::consensus::Replica::vouch_wanted`]).
    pub(crate) fn vouch_wanted(&self) -> Option<crate::consensus::Vouch> {
        self.view.read().vouch_wanted()
    }

    /// Brings the metrics' state gauges up to date.
    pub(crate) async fn refresh_metrics(&self) -> Result<(), Reject> {
        self.ask(Ask::Metrics).await
    }
}

impl Core for DriverHandle {
    fn owned(&self) -> Arc<dyn Core> {
        Arc::new(self.clone())
    }

    fn view(&self) -> &View {
        &self.view
    }

    fn watchers(&self) -> &Arc<Watchers> {
        &self.watchers
    }

    fn may_queue(&self) -> Result<(), Reject> {
        (self.gate)()
    }

    fn request(&self, request: Request) -> BoxFuture<'_, Answer> {
        Box::pin(self.ask(|reply| Ask::Request { request, reply }))
    }

    fn requests(
        &self,
        requests: Vec<Request>,
    ) -> BoxFuture<'_, Result<Vec<Reply<State, Services>>, Reject>> {
        Box::pin(async move {
            let (reply, answers) = oneshot::channel();
            // Once the driver has stopped, the ask and its replier are dropped: the answer
            // then says so.
            let _ = self.send(Ask::Requests { requests, reply }).await;
            answers.await.map_err(|_| shutting_down())
        })
    }

    fn start(&self, subscription: Subscription) -> BoxFuture<'_, Result<(), Reject>> {
        Box::pin(self.send(Ask::Subscribe(subscription)))
    }

    fn read_index(
        &self,
        asker: Option<crate::consensus::Asker>,
    ) -> BoxFuture<'_, Result<u64, Reject>> {
        Box::pin(async move {
            // A follower's request that confirms the leadership by itself is answered here,
            // between the driver's steps, not behind the writes queued for it.
            if let Some(index) = asker.and_then(|a| self.view.read().read_index_confirmed(a)) {
                return Ok(index);
            }
            Ok(self.ask(|reply| Ask::ReadIndex { asker, reply }).await??)
        })
    }
}

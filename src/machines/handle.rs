//! What every request handler (the core's, and each machine's in its `rpc.rs`) shares: what
//! it may ask of the core ([`Core`], which the driver's handle in `server/driver/handle.rs`
//! implements, and what is built on it in [`CoreExt`]), the answer a handler gives, and the
//! refusal it sends instead.
//!
//! A handler changes the replicated state only through the core: it submits a request to
//! its machine's service (answered once the core allows) or subscribes to committed
//! changes. It reads the state on its own task, from the driver's `View`
//! (`machines/view.rs`): a read never waits behind the writes queued for the driver.

// The machines' handlers are compiled in every build, the daemon that calls them only with
// the `server` feature: without it (`beacon-client`) part of this module has no caller.
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

use crate::consensus::{ConsensusError, Reply, ReplyError, Service};
use crate::machines::view::{ReadError, View};
pub use crate::machines::watchers::Pushes;
use crate::machines::watchers::Watchers;
use crate::machines::{Change, Replica, Request, Routes, Sections, Services, State};
use crate::pb;
use crate::time::Millis;
use crate::wire::{ErrorCode, Frame, FrameError, response_code};

/// What a [`Subscriber`] is told.
pub(crate) enum Committed<'a> {
    /// The change committed at this log index.
    Change(u64, &'a Change),
    /// Nothing else since the last such call: the log is committed through this index (a
    /// watcher that heard nothing for a while learns how current it is).
    Progress(u64),
}

/// Follows committed changes on the leader: told each change once it is committed, in log
/// order, and progress while idle; returns whether it wants more. Dropped when this beacon
/// stops leading.
pub(crate) type Subscriber = Box<dyn FnMut(Committed<'_>) -> bool + Send>;

/// Where a subscription starts in the history of committed changes the driver keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartPoint {
    /// From the state as it is now (no index asked).
    Now,
    /// From log index `from` on: `count` changes at or after it are owed from the history
    /// first (handed over as a [`Replay`]).
    Replay { from: u64, count: usize },
    /// The index asked is older than the oldest change kept (`oldest`, which a watch may
    /// start from).
    Compacted { asked: u64, oldest: u64 },
}

/// Committed changes with their log indexes, in log order, shared.
pub(crate) type Told<C> = Arc<Vec<(u64, Arc<C>)>>;

/// The changes a resumed watch is owed from the history: a snapshot of the history the
/// driver makes once per point in the log and shares with every watch that resumes there
/// (a herd that comes back at once is served one), walked on the watch's own task, never
/// the core's. `C` is every machine's change in the daemon.
pub(crate) struct Replay<C> {
    pub(crate) changes: Told<C>,
    /// The first of `changes` this watch is owed.
    pub(crate) start: usize,
}

impl<C> Replay<C> {
    /// The changes owed, in log order.
    pub(crate) fn owed(&self) -> &[(u64, Arc<C>)] {
        &self.changes[self.start..]
    }
}

/// A read that may leave a [`Subscriber`] behind, given where in the history it starts and,
/// on a resume, what the history owes it.
pub(crate) type Subscribe = Box<
    dyn FnOnce(&Replica, Millis, StartPoint, Option<Replay<Change>>) -> Option<Subscriber> + Send,
>;

/// A subscription as the driver takes it: the read, the log index to resume from (0: from
/// the state as it is), and who to tell once everything the read saw (the state as of the
/// last log position) is committed. The driver drops `committed` if this beacon stops
/// leading first. On a resume the driver hands the read the history's changes from `from`
/// on ([`Replay`]), and tells the subscriber only what commits after them.
pub(crate) struct Subscription {
    pub(crate) start: Subscribe,
    pub(crate) from: u64,
    pub(crate) committed: oneshot::Sender<()>,
}

/// How long a subscription's first answer waits for the entries it reflects to commit.
const COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A request's answer from the core, or why the core gave none.
pub(crate) type Answer = Result<Reply<State, Services>, Reject>;

/// What a request handler may ask of the core. The driver's handle
/// (`server/driver/handle.rs`) is the one implementation: the machines name the core
/// through this trait, not the daemon that steps it, which they are compiled without in
/// `beacon-client`. Each method is one trip to the core or a look at its [`View`]; what a
/// handler builds from them (a typed submit, a linearizable read, a watch's start) is in
/// [`CoreExt`], the same for every implementation.
pub(crate) trait Core: Send + Sync {
    /// The replica, read on the caller's task.
    fn view(&self) -> &View;

    /// The watches of this beacon: their limits, gauges and shared notices.
    fn watchers(&self) -> &Arc<Watchers>;

    /// Whether new work may join the core's queue now (admission by the wait it would
    /// meet, `server/admission/pace.rs`), asked of each write at the door of the queue.
    fn may_queue(&self) -> Result<(), Reject>;

    /// Steps `request` through the core; answers once the core allows (a write once
    /// committed).
    fn request(&self, request: Request) -> BoxFuture<'_, Answer>;

    /// Steps `requests` through the core in this order, in one trip, and answers each in
    /// the same order; or says why the core answered none (it stopped).
    fn requests(
        &self,
        requests: Vec<Request>,
    ) -> BoxFuture<'_, Result<Vec<Reply<State, Services>>, Reject>>;

    /// Hands `subscription` to the core, which runs its read between two steps; the read
    /// itself answers the caller.
    fn start(&self, subscription: Subscription) -> BoxFuture<'_, Result<(), Reject>>;

    /// This beacon's answer to a linearizable read wanting its point in the log: the
    /// leader's commit index once a majority confirmed its leadership (see
    /// [`crate::consensus::Input::ReadIndex`]); `NOT_LEADER` on a follower. `asker`: the
    /// follower that asks for its own reads, and in which term it follows this beacon.
    fn read_index(
        &self,
        asker: Option<crate::consensus::Asker>,
    ) -> BoxFuture<'_, Result<u64, Reject>>;

    /// A handle of its own, for work that outlives the request (a watch that subscribes
    /// again once its replay is sent, `machines/follow.rs`).
    fn owned(&self) -> Arc<dyn Core>;
}

/// What a handler builds from the core's methods ([`Core`]), for the driver's handle and
/// for `dyn Core` alike.
pub(crate) trait CoreExt: Core {
    /// Refuses `ip` (a client's, or the address a service registers) unless it is a
    /// beacon's or the allowlist admits it (see [`crate::allow`]: the cluster's list, else
    /// this beacon's `ip_allow`); `what` says which it is.
    fn admit(&self, ip: std::net::IpAddr, what: &str) -> Result<(), Reject> {
        let view = self.view();
        if view.admits(ip) {
            return Ok(());
        }
        Err(Reject::new(
            ErrorCode::PermissionDenied,
            format!(
                "{what} {ip} is not in the cluster's allowlist ({}); an admin adds it with `nebcli set ip_white ...` (key `ip_allow` until one is set)",
                view.allowlist()
            ),
        ))
    }

    /// Runs `f` once this replica has applied the log through `index` (a read index), and
    /// answers once every entry it saw that changed `part` of the state (the whole state
    /// with `None`; see [`crate::consensus::Machine::part`]) is committed.
    async fn read_after<T: Send + 'static>(
        &self,
        index: u64,
        part: Option<usize>,
        f: impl FnOnce(&Replica, Millis) -> T + Send + 'static,
    ) -> Result<T, Reject> {
        let view = self.view();
        view.applied(index).await?;
        let (answer, at) = {
            let replica = view.read();
            (f(&replica, view.now()), replica.read_waits_for(part))
        };
        view.committed(at).await?;
        Ok(answer)
    }

    /// Runs `f` for a linearizable read if this beacon leads (`NOT_LEADER` at once on a
    /// follower, which then reads as followers do): it reads at once, then waits for a
    /// majority to confirm, after the read and in the same term, that this beacon still
    /// leads (no other leader can have acknowledged a write before the read; `confirm`
    /// asks: a round, or a follower's word where that and the leader's make a majority), and
    /// for every entry the read saw that changed `part` of the state (the whole state with
    /// `None`) to be committed: a leader applies what it appends, and a read of one machine
    /// need not wait for writes to another that are in flight.
    async fn leader_read<T: Send + 'static>(
        &self,
        part: Option<usize>,
        f: impl FnOnce(&Replica, Millis) -> T + Send + 'static,
        confirm: &dyn Linearize,
    ) -> Result<T, Reject> {
        let view = self.view();
        let (answer, at, term) = {
            let replica = view.read();
            if !replica.is_leader() {
                return Err(replica.not_leader().into());
            }
            replica.ready_to_serve()?;
            let answer = f(&replica, view.now());
            (
                answer,
                replica.read_waits_for(part),
                replica.election().term(),
            )
        };
        confirm.confirm_leading(term).await?;
        if view.read().election().term() != term {
            return Err(ConsensusError::LeaderChanged.into());
        }
        view.committed(at).await?;
        Ok(answer)
    }

    /// Submits a request to service `V`; the answer comes once the core allows it (a write
    /// once committed). The outer error is the core's (or a shutdown), the inner `V`'s own.
    async fn submit<V>(&self, request: V::Request) -> Result<Result<V::Response, V::Error>, Reject>
    where
        V: Service<State>,
        Services: Routes<State, V>,
    {
        routed::<V>(
            self.request(<Services as Routes<State, V>>::request(request))
                .await?,
        )
    }

    /// Runs `f` on this beacon's replica as it is now (a serializable read), on the
    /// caller's task.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Replica, Millis) -> T + Send + 'static,
    ) -> Result<T, Reject> {
        let view = self.view();
        let replica = view.read();
        Ok(f(&replica, view.now()))
    }

    /// Runs `f` on the replica between steps, when this beacon can serve (it leads and, in
    /// quorum mode, sees a majority and has taken over its state); the [`Subscriber`] it may
    /// leave is told every change committed after that moment. The answer comes back once
    /// everything `f` saw is committed: a first answer never shows a write that a later
    /// leader could lose, and a leader still collecting a majority's state (which it then
    /// takes over whole, telling no subscriber) is never subscribed to.
    async fn subscribe<T: Send + 'static>(
        &self,
        from: u64,
        f: impl FnOnce(&Replica, Millis, StartPoint, Option<Replay<Change>>) -> (T, Option<Subscriber>)
        + Send
        + 'static,
    ) -> Result<T, Reject> {
        let (committed, barrier) = oneshot::channel();
        let (tx, answer) = oneshot::channel();
        self.start(Subscription {
            start: Box::new(move |replica, now, since, replay| {
                if let Err(e) = replica.ready_to_serve() {
                    let _ = tx.send(Err(e));
                    return None;
                }
                let (answer, subscriber) = f(replica, now, since, replay);
                let _ = tx.send(Ok(answer));
                subscriber
            }),
            from,
            committed,
        })
        .await?;
        let answer = answer.await.map_err(|_| shutting_down())??;
        match tokio::time::timeout(COMMIT_WAIT, barrier).await {
            Ok(Ok(())) => Ok(answer),
            Ok(Err(_)) => Err(ConsensusError::LeaderChanged.into()),
            Err(_) => Err(ConsensusError::NotReady.into()),
        }
    }
}

impl<C: Core + ?Sized> CoreExt for C {}

impl From<ReadError> for Reject {
    fn from(e: ReadError) -> Reject {
        match e {
            ReadError::Consensus(e) => e.into(),
            ReadError::Stopped => shutting_down(),
        }
    }
}

/// The core's reply to a request for service `V`, as `V`'s own answer: the outer error is
/// the core's, the inner `V`'s.
fn routed<V>(reply: Reply<State, Services>) -> Result<Result<V::Response, V::Error>, Reject>
where
    V: Service<State>,
    Services: Routes<State, V>,
{
    let misrouted = || Reject::new(ErrorCode::Unavailable, "internal error: misrouted answer");
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

/// What a request handler has at hand.
pub struct Ctx<'a> {
    /// This beacon's identity (answers say who answered).
    pub(crate) node: SocketAddr,
    /// Every beacon of the cluster, as `ip:port` (answers tell services where to fail over).
    pub(crate) beacons: &'a [String],
    /// Every machine's section of the configuration.
    pub(crate) sections: &'a Sections,
    pub(crate) driver: &'a dyn Core,
    /// Who sent the request, when this beacon requires authentication (key `auth`).
    pub(crate) identity: Option<&'a crate::auth::Identity>,
    /// How fresh the request's reads must be.
    pub(crate) consistency: Consistency,
    /// What a linearizable read waits for.
    pub(crate) linearize: &'a dyn Linearize,
    /// Whether the request is new work (not a renewal, not a status read): its writes pass
    /// the core's gate ([`Core::may_queue`]).
    pub(crate) new_work: bool,
}

impl Ctx<'_> {
    /// Runs `f` on the replica for a client's read: linearizable by default (the answer
    /// holds every write acknowledged before the read was asked and none that is not
    /// committed, or the read fails with a clear error, never answering stale), or at once
    /// on this beacon's replica as it is when the request asks for serializable reads.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Replica, Millis) -> T + Clone + Send + 'static,
    ) -> Result<T, Reject> {
        self.read_part(None, f).await
    }

    /// Runs `f`, which reads machine `M` alone, for a client's read: as [`Ctx::read`], but a
    /// linearizable read waits only for the writes to `M` it saw to commit, not for writes
    /// to other machines in flight. What it says it reads through is
    /// [`Replica::read_through`] of `M`'s part.
    pub(crate) async fn read_of<M, T>(
        &self,
        f: impl FnOnce(&Replica, Millis) -> T + Clone + Send + 'static,
    ) -> Result<T, Reject>
    where
        M: crate::consensus::Machine,
        State: crate::machines::Part<M>,
        T: Send + 'static,
    {
        self.read_part(Some(<State as crate::machines::Part<M>>::INDEX), f)
            .await
    }

    async fn read_part<T: Send + 'static>(
        &self,
        part: Option<usize>,
        f: impl FnOnce(&Replica, Millis) -> T + Clone + Send + 'static,
    ) -> Result<T, Reject> {
        if self.consistency != Consistency::Linearizable {
            return self.driver.read(f).await;
        }
        // On the leader: read at once, confirm and wait for the commit together.
        let led = tokio::time::timeout(
            READ_WAIT,
            self.driver.leader_read(part, f.clone(), self.linearize),
        )
        .await;
        let leader = match led {
            Ok(Ok(answer)) => return Ok(answer),
            Ok(Err(r)) if r.code == ErrorCode::NotLeader as u32 => r.leader,
            _ => None,
        };
        // Elsewhere (or when the leader could not answer: the way below waits out an
        // election and says why it cannot), the read index first; then one trip to the
        // read once this replica has applied the log through it.
        let index = self.linearize.linearize(leader, part).await?;
        match tokio::time::timeout(READ_WAIT, self.driver.read_after(index, part, f)).await {
            Ok(answer) => answer,
            Err(_) => Err(Reject::new(
                ErrorCode::Unavailable,
                format!(
                    "this beacon did not apply the log through the read index {index}, and commit what it read, within {} ms: it is behind its leader; retry, or ask another beacon",
                    READ_WAIT.as_millis()
                ),
            )),
        }
    }
}

pub use crate::wire::Consistency;

/// Where a linearizable read must read from: the read index (this beacon's own as the
/// leader, its leader's as a follower; `leader` is the leader this beacon just named, asked
/// straight away).
pub trait Linearize: Send + Sync {
    /// The index a read of `part` (the whole state with `None`) must have applied the log
    /// through.
    fn linearize(
        &self,
        leader: Option<SocketAddr>,
        part: Option<usize>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, Reject>> + Send + '_>>;

    /// Confirms, after a read this beacon made as the leader in `term`, that a majority
    /// still follows it in that term: a confirmation round, or where one follower's word
    /// and the leader's make a majority, that word.
    fn confirm_leading(
        &self,
        term: u64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Reject>> + Send + '_>>;
}

/// How long a linearizable read waits for its read index, and then for this replica to
/// apply the log through it and commit what it read.
pub(crate) const READ_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A request that is answered with an error; the connection goes on unless `close`.
#[derive(Debug, Clone)]
pub struct Reject {
    /// A core [`ErrorCode`] or a machine's.
    pub(crate) code: u32,
    pub(crate) msg: String,
    pub(crate) close: bool,
    /// The leader to ask instead (with `NotLeader`).
    pub(crate) leader: Option<SocketAddr>,
    /// How long to wait before trying again (with `Busy`), in milliseconds.
    pub(crate) retry_after_ms: u64,
}

impl Reject {
    /// A refusal answered on a connection that goes on (see [`Reject::close`]).
    pub(crate) fn new(code: impl Into<u32>, msg: impl Into<String>) -> Self {
        Reject {
            code: code.into(),
            msg: msg.into(),
            close: false,
            leader: None,
            retry_after_ms: 0,
        }
    }

    /// The `ErrorReply` that carries this refusal.
    pub(crate) fn to_reply(&self) -> pb::ErrorReply {
        pb::ErrorReply {
            code: self.code,
            msg: self.msg.clone(),
            leader: self.leader.map(|l| l.to_string()).unwrap_or_default(),
            retry_after_ms: self.retry_after_ms,
        }
    }

    pub(crate) fn close(code: impl Into<u32>, msg: impl Into<String>) -> Self {
        Reject {
            close: true,
            ..Reject::new(code, msg)
        }
    }

    pub(crate) fn with_leader(self, leader: Option<SocketAddr>) -> Self {
        Reject { leader, ..self }
    }

    /// A body that does not decode as the command's message.
    pub(crate) fn malformed(e: impl std::fmt::Display) -> Self {
        Reject::new(ErrorCode::MalformedBody, e.to_string())
    }
}

impl From<ConsensusError> for Reject {
    fn from(e: ConsensusError) -> Reject {
        let code = match &e {
            ConsensusError::NotLeader { .. } | ConsensusError::Removed { .. } => {
                ErrorCode::NotLeader
            }
            ConsensusError::LeaderChanged => ErrorCode::LeaderChanged,
            ConsensusError::NoQuorum { .. } => ErrorCode::NoQuorum,
            ConsensusError::NotReady | ConsensusError::HandingOver { .. } => ErrorCode::Unavailable,
        };
        // A removed beacon's hint is a member, not the leader: a client that follows it
        // is sent on again from there, as from any follower.
        let leader = match &e {
            ConsensusError::NotLeader { leader } => *leader,
            ConsensusError::Removed { ask } => Some(*ask),
            _ => None,
        };
        Reject::new(code, e.to_string()).with_leader(leader)
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
    if ctx.new_work {
        ctx.driver.may_queue()?;
    }
    ctx.driver.submit::<V>(request).await?.map_err(reject)
}

/// Submits `requests` to service `V` together, in this order (one trip to the core for
/// all), and returns each answer in order as [`CoreExt::submit`] gives it, `V`'s refusals
/// made replies through `reject`. The answers are routed and refused in one pass: a batch
/// of renewals went through four copies of its answers on the way back.
pub(crate) async fn submit_each<V>(
    ctx: &Ctx<'_>,
    requests: Vec<V::Request>,
    reject: impl Fn(V::Error) -> Reject,
) -> Vec<Result<V::Response, Reject>>
where
    V: Service<State>,
    Services: Routes<State, V>,
{
    let n = requests.len();
    let requests = requests
        .into_iter()
        .map(<Services as Routes<State, V>>::request)
        .collect();
    match ctx.driver.requests(requests).await {
        Ok(answers) => answers
            .into_iter()
            .map(|answer| routed::<V>(answer)?.map_err(&reject))
            .collect(),
        Err(none) => (0..n).map(|_| Err(none.clone())).collect(),
    }
}

/// A service answered with a response of another kind than the request asks: a bug,
/// reported as such rather than a panic.
pub(crate) fn unexpected(response: impl std::fmt::Debug) -> Reject {
    Reject::new(
        ErrorCode::Unavailable,
        format!("internal error: unexpected response {response:?}"),
    )
}

/// Why a stream ended, once its channel closes: this beacon stopped leading (the driver
/// drops every subscriber then), or its watcher fell behind its limits (`watch.queue_bytes`,
/// `watch.queue_notices`).
#[derive(Debug, Clone)]
pub struct StreamEnd {
    leading: &'static str,
    /// The code the end carries when the watcher kept up.
    code: ErrorCode,
    behind: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StreamEnd {
    fn new(leading: &'static str) -> StreamEnd {
        StreamEnd {
            leading,
            code: ErrorCode::NotLeader,
            behind: Default::default(),
        }
    }

    /// The end of a watch: `leading` says it stopped with this beacon's leadership.
    pub(crate) fn watching(leading: &'static str) -> StreamEnd {
        StreamEnd::new(leading)
    }

    /// Set by the watch's queue once its watcher fell behind and was dropped.
    pub(crate) fn behind(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.behind.clone()
    }

    /// The end of a stream of known length (a backup): the client stops reading before it.
    pub(crate) fn finished(why: &'static str) -> StreamEnd {
        StreamEnd {
            code: ErrorCode::Unavailable,
            ..StreamEnd::new(why)
        }
    }

    /// The error that ends the stream, and what it says.
    pub fn why(&self) -> (ErrorCode, &'static str) {
        if self.behind.load(Ordering::Relaxed) {
            (
                ErrorCode::Unavailable,
                "this watcher fell behind (its queue at the beacon reached watch.queue_bytes or watch.queue_notices) and was dropped: resume from the index after the last notice taken",
            )
        } else {
            (self.code, self.leading)
        }
    }
}

/// What a handler made of a request.
pub enum Handled {
    /// The response frame.
    Reply(Frame),
    /// A one-way message: nothing to answer.
    OneWay,
    /// The response frame, then frames pushed as they come (a watch) until the channel
    /// closes, which ends the stream with the error `ended` says (this beacon stopped
    /// leading, or the watcher fell behind).
    Stream {
        reply: Frame,
        pushes: Pushes,
        ended: StreamEnd,
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

/// Query parameters of an admin view.
pub type ViewParams = std::collections::BTreeMap<String, String>;

/// What an admin view answers with: JSON, or the refusal of its request.
pub type ViewAnswer<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<serde_json::Value, Reject>> + Send + 'a>,
>;

/// How an admin view answers.
pub type ViewFn = dyn for<'a> Fn(&'a Ctx<'a>, &'a ViewParams) -> ViewAnswer<'a> + Send + Sync;

/// A JSON view of a machine's state on the admin HTTP API (`GET /v1/...`), answered by the
/// machine's own request handler as a client's request over the wire would be: the admin
/// API checks the caller may send `cmd`, then runs `answer`.
pub struct AdminView {
    /// `/v1/...`.
    pub path: &'static str,
    /// Its query parameters and what it shows, for the documentation.
    pub doc: &'static str,
    /// The request it makes (its role is checked).
    pub cmd: u32,
    pub answer: Box<ViewFn>,
}

impl AdminView {
    /// A view at `path` (doc `doc`) that needs the role of `cmd`, answered by `answer`.
    pub fn new(
        path: &'static str,
        doc: &'static str,
        cmd: impl crate::wire::Code,
        answer: impl for<'a> Fn(&'a Ctx<'a>, &'a ViewParams) -> ViewAnswer<'a> + Send + Sync + 'static,
    ) -> AdminView {
        AdminView {
            path,
            doc,
            cmd: cmd.code(),
            answer: Box::new(answer),
        }
    }
}

/// A reply as the JSON a view shows (the same as nebcli's `-w json`).
pub fn json_of(reply: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(reply).unwrap_or_else(|e| serde_json::json!({"error": e.to_string()}))
}

/// A query parameter, empty when absent.
/// A page of a list kept in name order: at most `limit` (0: all) of the `items` named
/// `from` or after, the name the next page starts at (`""` when this page ends the list),
/// and how many items there are in all. Only the page is mapped (`to_pb`), so what a page
/// costs beyond a walk over names is what its entries cost.
pub fn page<T, P>(
    items: impl Iterator<Item = T>,
    name: impl Fn(&T) -> &str,
    from: &str,
    limit: u32,
    mut to_pb: impl FnMut(T) -> P,
) -> (Vec<P>, String, u64) {
    let limit = match limit {
        0 => usize::MAX,
        n => n as usize,
    };
    let (mut page, mut next, mut total) = (Vec::new(), String::new(), 0u64);
    for item in items {
        total += 1;
        if name(&item) < from {
            continue;
        }
        if page.len() == limit {
            if next.is_empty() {
                next = name(&item).to_owned();
            }
            continue;
        }
        page.push(to_pb(item));
    }
    (page, next, total)
}

/// The page a view asks for: `?limit=N&from=NAME`.
pub fn view_page(params: &ViewParams) -> Result<(u32, String), Reject> {
    Ok((
        view_number(params, "limit")?.unwrap_or(0),
        param(params, "from"),
    ))
}

/// A whole-number parameter of a view, if given.
pub fn view_number(params: &ViewParams, name: &str) -> Result<Option<u32>, Reject> {
    params
        .get(name)
        .map(|v| {
            v.parse::<u32>().map_err(|_| {
                Reject::new(
                    ErrorCode::InvalidRequest,
                    format!("{name} must be a whole number"),
                )
            })
        })
        .transpose()
}

pub fn param(params: &ViewParams, name: &str) -> String {
    params.get(name).cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_a_list_once_and_say_where_the_next_starts() {
        let names = ["a", "b", "c", "d", "e"];
        let page_of = |from: &str, limit| page(names.iter(), |n| n, from, limit, |n| n.to_string());
        assert_eq!(
            page_of("", 2),
            (vec!["a".into(), "b".into()], "c".into(), 5)
        );
        assert_eq!(
            page_of("c", 2),
            (vec!["c".into(), "d".into()], "e".into(), 5)
        );
        assert_eq!(page_of("e", 2), (vec!["e".into()], String::new(), 5));
        // A start between names, past the end, and no limit.
        assert_eq!(page_of("bb", 1), (vec!["c".into()], "d".into(), 5));
        assert_eq!(page_of("z", 1), (vec![], String::new(), 5));
        assert_eq!(page_of("", 0).0.len(), 5);
    }

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

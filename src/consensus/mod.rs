//! The consensus core: everything one beacon decides about leadership and the replicated log,
//! sans-IO, generic over what is replicated.
//!
//! A [`Replica`] composes the [`Election`], the replicated [`Log`], the state it is applied to
//! (a [`Machine`]) and that state's leader-side [`Service`], and, while leading, each
//! follower's progress and the requests waiting for an answer. The driver feeds it [`Input`]s
//! with the time and carries out the returned [`Ready`]; nothing here touches a socket, a
//! clock or a disk, and nothing here names a machine.
//!
//! Writes go through the leader: its service appends commands to the log, which are applied
//! and sent to every follower at once inside the heartbeat. A write is answered when it is
//! *committed*: in quorum mode, stored by a majority and of the leader's own term (or before
//! such an entry); in classic mode, stored by every beacon that is online and keeps up.
//!
//! In quorum mode a newly elected leader first collects the positions of a majority that
//! promised its term, takes over the most advanced state among them (`takeover`), and
//! starts its term with an entry of its own. A leader acts on its own clock only while it
//! knows it still leads (`confirm`): an answer read from its clock (a lease renewal) waits
//! for a majority to confirm the leadership after the request arrived, and after a gap in its
//! steps it lets its service judge nothing until a majority has confirmed it again.

mod app;
mod apply;
pub mod bounds;
mod commit;
mod confirm;
mod durable;
pub mod election;
mod error;
mod following;
mod intake;
mod journal;
mod leading;
mod log;
mod members;
mod membership;
mod message;
mod progress;
mod ready;
mod reconfigure;
mod renewals;
mod replicate;
#[cfg(test)]
mod scenario;
mod takeover;
#[cfg(test)]
mod testing;

use following::Following;
use intake::Intake;
use journal::Journal;
use leading::Leading;
use membership::Membership;
use std::net::SocketAddr;
use takeover::Phase;

pub use app::{Leader, Machine, Outcome, Service};
pub use bounds::{MAX_INDEX, MAX_TERM};
pub use confirm::Counts as RoundCounts;
use election::Election;
pub use election::Promise;
pub use error::{ChangeError, ConsensusError, ReplyError, RestoreError, TransferError};
pub use log::{Entry, Log, Payload, Position};
pub use members::{Change, Members, MembersError};
pub use message::{Append, PeerMessage, Snapshot};
use progress::Followers;
pub use progress::{FollowerView, Progress};
pub use ready::{Changed, Event, Message, Ready, Released, Reply, Store, Stored, TermStored};
pub use renewals::{Bridge, Horizon, Knowledge, RenewalBatch, RenewalTable};

use crate::time::Millis;

/// Identifies a request until its answer.
pub type Token = u64;

/// Most entries carried by one message.
const MAX_ENTRIES_PER_MESSAGE: usize = 256;

/// How far behind the follower it fetches from a new leader may be and still take the
/// entries it lacks, a message's worth at a time, rather than the whole state: a beacon
/// restarted moments before (the leader's last failover) is a few hundred to a few thousand
/// entries behind, which costs a few round trips; a whole state of a million registrations
/// costs hundreds of milliseconds to build, encode and install.
const MAX_ENTRIES_FETCHED: u64 = 16 * MAX_ENTRIES_PER_MESSAGE as u64;

/// The membership a stored state holds: its log's last change, else its snapshot's; `None`
/// when it never changed (the first membership, configured or answered to `--join`, holds).
pub fn stored_members<C, S>(
    snapshot: Option<&Snapshot<S>>,
    entries: &[Entry<C>],
) -> Option<Members> {
    entries
        .iter()
        .rev()
        .find_map(|e| match &e.payload {
            Payload::Members(m) => Some(Members::clone(m)),
            _ => None,
        })
        .or_else(|| snapshot.and_then(|s| s.members.clone()))
}

/// How writes are made safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// NebulaBeacon's behaviour, for two beacons: the elected leader serves writes;
    /// a write is acknowledged once every online, in-sync beacon stored it.
    Classic,
    /// For one, three or more beacons: a leader serves writes only while it sees a majority, only
    /// after it took over the state of a majority, and acknowledges a write once a majority
    /// stored it.
    Quorum,
}

impl Mode {
    /// The default for a cluster of `beacons`: quorum, but for two beacons, which classic
    /// keeps writing when one is down. A lone beacon has no majority to lose, and in quorum
    /// mode it grows by `--join` without a restart.
    pub fn default_for(beacons: usize) -> Mode {
        if beacons == 2 {
            Mode::Classic
        } else {
            Mode::Quorum
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Classic => "classic",
            Mode::Quorum => "quorum",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the core needs of the configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub me: SocketAddr,
    pub mode: Mode,
    /// The voters: the beacons that elect the leader and make its majorities.
    pub beacons: Vec<SocketAddr>,
    /// Learners: beacons that follow the leader and receive the log (and may serve reads),
    /// but never lead and count for no majority. Disjoint from `beacons`.
    pub learners: Vec<SocketAddr>,
    /// The log index of the change of membership `beacons` and `learners` are: 0 for a new
    /// cluster's first membership; for a beacon that joined, the change that added it. A
    /// change older than it (a removed leader still telling of its own, or the start of the
    /// log this beacon fetches) never replaces it: its address may have voted in that older
    /// membership as another machine, and this one must not vote in its place.
    pub members_index: u64,
    pub tick_ms: u64,
    /// Log entries kept for followers that fall behind; older ones cost a snapshot.
    pub log_keep: usize,
    /// Highest term promised by an earlier run, and to whom.
    pub stored: Promise,
    /// Terms dealt by place among the voters ([`Election::with_dealing`]): true but in
    /// the simulation's seeds that show promises alone suffice.
    pub deal_terms: bool,
    /// How long a learner added to be promoted must keep up (hold every committed entry,
    /// online) before the leader makes it a voter; `None`: never on its own (`member
    /// promote` does it).
    pub promote_after_ms: Option<u64>,
    /// The driver stores in the background, beside the steps, and reports each store with
    /// [`Input::Stored`]: this replica then counts its own log only through what was
    /// reported (a leader's commit, a follower's early acknowledgement of a round). `false`
    /// where every store is done before the next step (the lock-step tests): all of the
    /// log is then taken as stored.
    pub stores_reported: bool,
    /// The driver carries out several steps as one batch and calls [`Replica::flush_batch`]
    /// before each carry-out: a leader's messages to its followers (new entries, the commit,
    /// a round) are then built once per batch, not once per step. Under load a batch holds
    /// a client's write and a follower's acknowledgement, which would otherwise each send
    /// every follower a message of its own, each stepped and acknowledged there. `false`
    /// where each step is carried out alone (the lock-step tests).
    pub flush_per_batch: bool,
}

/// Least time a leader waits on a follower that is online but not answering (before classic
/// mode stops holding writes for it, or a snapshot it was sent is sent again): a busy disk's
/// fsync can take longer than two short ticks, and giving up on a follower early costs more
/// than the wait.
const PATIENCE_MS: u64 = 2_000;

/// How long a leader waits on an online follower that makes no progress, at `tick_ms`.
pub fn patience_ms(tick_ms: u64) -> u64 {
    (tick_ms * 2).max(PATIENCE_MS)
}

impl Config {
    /// How long a leader waits on an online follower that makes no progress.
    pub fn patience_ms(&self) -> u64 {
        patience_ms(self.tick_ms)
    }
}

/// Something the outside world tells a replica.
#[derive(Debug, Clone, PartialEq)]
pub enum Input<C, S, R> {
    /// The periodic check, with the wall-clock time (Unix milliseconds) when it was taken:
    /// what a leader stamps on records it makes on its own (a resource placed after its
    /// holder died shows since when), never what it decides on.
    Tick {
        wall_ms: u64,
    },
    Peer {
        from: SocketAddr,
        msg: PeerMessage<C, S>,
    },
    /// `from`'s state in its answer to our handshake (see [`election::Input::Greeting`]).
    Greeting {
        from: SocketAddr,
        msg: PeerMessage<C, S>,
    },
    /// The last connection with `peer` closed.
    PeerDown {
        peer: SocketAddr,
    },
    Request {
        token: Token,
        request: R,
    },
    /// Requests that arrived together (a client's renewals written back to back), each
    /// answered by its token as if stepped one after the other: the step's own work (the
    /// commit, the round, the messages to the followers) is done once for all of them.
    Requests {
        requests: Vec<(Token, R)>,
    },
    /// Hand the leadership to `to` (or, with `None`, to the online beacon furthest along):
    /// for maintenance, without an election gap. The leader stops taking writes, waits
    /// until the target holds every entry, tells it to take over (it leads at once in a
    /// higher term, which every beacon prefers) and steps down when it hears the claim.
    /// Answered by [`Event::Transferred`].
    Transfer {
        token: Token,
        to: Option<SocketAddr>,
    },
    /// A linearizable read wants its point in the log (the read-index method): the leader
    /// takes its commit index now and answers with it ([`Event::ReadIndex`]) once a
    /// majority has confirmed, in a round started after the read arrived, that it still
    /// leads. State applied through that index holds every write acknowledged before the
    /// read arrived, whoever acknowledged it; a leader deposed without knowing it cannot
    /// get the confirmation. Reads that arrive together share one round.
    ///
    /// `asker`: the follower whose reads want it, with the term in which it followed this
    /// leader when it asked (after its reads arrived). That is the follower's confirmation,
    /// as its acknowledgement of a round would be: where this leader and the asker make a
    /// majority (three beacons), the index is given at once, without a round.
    ReadIndex {
        token: Token,
        asker: Option<Asker>,
    },
    /// Change the membership by one beacon (quorum mode, at the leader): answered by
    /// [`Event::MembersChanged`] once the change is committed (see [`members`]).
    ChangeMembers {
        token: Token,
        change: Change,
    },
    /// The driver's store through `through` is durable ([`Config::stores_reported`]): a
    /// leader may count its own copy of those entries towards a commit. A position the
    /// log no longer holds (its tail was cut meanwhile) counts for nothing.
    Stored {
        through: Position,
    },
}

/// A follower asking its leader for a read index for its own reads (see
/// [`Input::ReadIndex`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asker {
    pub from: SocketAddr,
    /// The term in which `from` followed this leader when it asked.
    pub term: u64,
}

/// A leader's read confirmed by a follower's word rather than a round: the leader asks its
/// voting followers, after the reads arrived, whether each follows it in `term` now
/// ([`Replica::vouches_for`]), and one that does is its confirmation, as its acknowledgement
/// of a round would be. A later leader needs a majority that has promised it a later term
/// before it can acknowledge a write; with three voters any majority includes this leader
/// or the follower that vouched, and neither had promised one when it was asked. So no
/// write acknowledged before the reads arrived is missing from `index`, and the reads need
/// no step of either core: the question and its answer are a connection task's each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vouch {
    /// The term the leader leads in, which a follower vouches for.
    pub term: u64,
    /// The read index, given once one follower vouches: the commit index (never below the
    /// entry that began the term).
    pub index: u64,
    /// The voting followers to ask; one that vouches is enough.
    pub voters: Vec<SocketAddr>,
}

/// How long a leader waits for a transfer's target to catch up and take over before it
/// gives up and leads on, in ticks.
const TRANSFER_TICKS: u64 = 20;

/// A leader transfer under way (leader only).
#[derive(Debug, Clone)]
struct Transfer {
    to: SocketAddr,
    token: Token,
    since: Millis,
    /// When the target was last told to take over.
    told: Option<Millis>,
}

/// The input type of a replica of `S` served by `V`.
pub type InputOf<S, V> =
    Input<<S as Machine>::Command, <S as Machine>::Snapshot, <V as Service<S>>::Request>;

/// The sans-IO heart of one beacon, replicating `S` and serving it with `V`.
pub struct Replica<S: Machine, V: Service<S>> {
    cfg: Config,
    election: Election,
    /// The log, the state it is applied to, and how far each is committed and applied.
    journal: Journal<S>,
    service: V,
    leading: Option<Leading<S, V>>,
    /// What a follower keeps of its leader.
    following: Following,
    /// Gaps between steps, the wall clock, peers refused for their bounds.
    intake: Intake,
    /// The membership in effect and what the election was last given.
    membership: Membership,
    /// What the current step asks for.
    ready: Ready<S, V>,
    /// The last index of the log known stored on this beacon's disk
    /// ([`Config::stores_reported`]): never beyond a cut in the log.
    durable: u64,
    /// Confirmation rounds counted over this beacon's life (its metrics).
    round_counts: confirm::Counts,
}

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// A replica starting from `state` (empty) with nothing stored.
    pub fn new(cfg: Config, state: S, service: V) -> Self {
        Self::restore(cfg, state, service, None, Vec::new(), 0)
            .unwrap_or_else(|e| panic!("an empty state always loads: {e}"))
            .0
    }

    /// A replica resuming from stored state: `snapshot` (if any), then `entries` replayed on
    /// `state`. Returns it with notices for the log. Stored state that does not load whole
    /// (entries that do not follow on or do not fit, a state that does not fit the
    /// configuration) is an error: a beacon never drops acknowledged state on its own.
    ///
    /// In quorum mode the entries after `commit` (how far the stored log was known
    /// committed) are appended but not applied: they may be a tail the cluster never
    /// committed (a leader killed just after storing them), which the next leader's log
    /// replaces. They are applied once the leader says they are committed, or all at once
    /// if this beacon leads (see `journal.rs`), and checked then: one that does not fit stops
    /// the beacon. A tail as long as the log keeps is applied here, as in classic mode.
    pub fn restore(
        cfg: Config,
        state: S,
        service: V,
        snapshot: Option<Snapshot<S::Snapshot>>,
        entries: Vec<Entry<S::Command>>,
        commit: u64,
    ) -> Result<(Self, Vec<String>), RestoreError> {
        // Stored membership wins over the configured one.
        let configured = Members::new(cfg.beacons.iter().copied(), cfg.learners.iter().copied());
        let members =
            stored_members(snapshot.as_ref(), &entries).unwrap_or_else(|| configured.clone());
        // A beacon that is no member (removed, or not yet added) is a learner in its map:
        // it never leads.
        let outside = (!members.contains(cfg.me)).then_some(cfg.me);
        let election = Election::with_members(
            cfg.me,
            members.voters.iter().copied(),
            members.learners.iter().copied().chain(outside),
            cfg.stored.term,
        )
        .with_quorum(cfg.mode == Mode::Quorum)
        .with_promise(cfg.stored)
        .with_dealing(cfg.deal_terms);
        let r_members_index = cfg.members_index;
        let mut r = Replica {
            journal: Journal::new(cfg.log_keep, state),
            election,
            service,
            leading: None,
            following: Following::default(),
            intake: Intake::default(),
            membership: Membership::new(members, configured, r_members_index),
            ready: Ready::default(),
            round_counts: confirm::Counts::default(),
            durable: 0,
            cfg,
        };
        let tail = entries.iter().filter(|e| e.index > commit).count();
        let defer = r.cfg.mode == Mode::Quorum && tail < r.cfg.log_keep;
        r.journal.load(snapshot, entries, commit, defer)?;
        // What was loaded was stored.
        r.durable = r.journal.last().index;
        // The election is given the stored membership; what it says is acted on at the
        // first step. A beacon the stored membership leaves the lone voter leads from
        // then on, as a lone voter configured so does: its leadership begins on the clock
        // of its run, with an entry stored as every step's are. (Acted on here, that entry
        // was appended with no store to carry it: the log on disk then skipped an index.)
        let _ = r.synced_members();
        r.ready = Ready::default();
        let mut notices = Vec::new();
        // A lone voter leads from the start. In quorum mode it takes over (and its service
        // starts judging leases) at its first step, on the clock of its run; in classic
        // mode at once, as a lone beacon always has.
        if r.election.is_leader() && r.cfg.mode == Mode::Classic {
            r.become_leader(0);
            notices.extend(r.ready.take_events().into_iter().filter_map(|e| match e {
                Event::Notice(n) => Some(n),
                Event::LeaderChanged { .. }
                | Event::Transferred { .. }
                | Event::ReadIndex { .. }
                | Event::MembersChanged { .. } => None,
            }));
        }
        Ok((r, notices))
    }

    // ---- what the outside may read ---------------------------------------------------------

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn election(&self) -> &Election {
        &self.election
    }

    /// The replicated state, as of [`Replica::applied`].
    pub fn state(&self) -> &S {
        self.journal.state()
    }

    /// The leader-side service (what only a leader keeps is empty elsewhere).
    pub fn service(&self) -> &V {
        &self.service
    }

    /// Why a beacon that does not lead cannot serve: the leader it knows, or, when its
    /// election names itself but it has not started leading yet (its next step does), not
    /// ready: a caller must never be sent on to this beacon itself. A beacon removed from the
    /// cluster hears no leader any more (nobody sends it heartbeats): it sends the caller on
    /// to a voter of the membership that removed it.
    pub fn not_leader(&self) -> ConsensusError {
        match self.election.leader() {
            Some(leader) if leader == self.cfg.me => ConsensusError::NotReady,
            None if self.removed() => self
                .members()
                .voters
                .first()
                .map_or(ConsensusError::NotLeader { leader: None }, |&ask| {
                    ConsensusError::Removed { ask }
                }),
            leader => ConsensusError::NotLeader { leader },
        }
    }

    pub fn is_leader(&self) -> bool {
        self.leading.is_some()
    }

    /// Leading and serving: past the take-over of a majority's state (always in classic
    /// mode).
    pub fn serving(&self) -> bool {
        self.is_leader() && !self.taking_over()
    }

    pub fn mode(&self) -> Mode {
        self.cfg.mode
    }

    /// The last position in this beacon's log (stored; applied through
    /// [`Replica::applied`]).
    pub fn position(&self) -> Position {
        self.journal.last()
    }

    /// Whether the entry at `at` is committed: `Some(true)` once it is, `Some(false)` while
    /// it may yet be, `None` once this replica no longer holds it (another leader's entries
    /// or a snapshot replaced it): a state read at `at` may show writes that never commit.
    pub fn committed(&self, at: Position) -> Option<bool> {
        self.journal.committed(at)
    }

    pub fn commit(&self) -> u64 {
        self.journal.commit()
    }

    /// The term of the entry at `index`, while this replica's log knows it (the last entry
    /// a snapshot replaced included).
    pub fn term_at(&self, index: u64) -> Option<u64> {
        self.journal.log().term_at(index)
    }

    /// The whole state, as of the position it is applied through (for compacting storage
    /// the entries after it are kept beside it: [`Replica::unapplied`]).
    pub fn snapshot(&self, now: Millis) -> Snapshot<S::Snapshot> {
        self.journal.snapshot(now)
    }

    /// The message to greet `peer` with (handshakes): our heartbeat and position, nothing to
    /// append.
    pub fn greeting(&self) -> Message<S> {
        self.bare_message()
    }

    /// The greeting, claiming no entry that is not stored yet ([`Config::stores_reported`]):
    /// what a handshake may be answered with while stores are under way. While the log
    /// does not know the term of its last stored entry (a snapshot was installed and is
    /// not stored yet) it claims nothing: the leader sends what it takes from the start.
    pub fn stored_greeting(&self) -> Message<S> {
        let mut msg = self.bare_message();
        let stored = self.durable_position(None).unwrap_or_default();
        if stored.index < msg.position.index {
            msg.position = stored;
            msg.commit = msg.commit.min(stored.index);
        }
        msg
    }

    /// Log entries worth keeping: `log_keep`, or as many as the state has records when that
    /// is more. A follower further behind gets a snapshot, which writes every record; keeping
    /// at least as many entries as records means a lagging follower never costs more than
    /// one record per entry it missed, and compacting the log on disk (which writes a
    /// snapshot too) costs at most one record per entry appended.
    pub fn entries_to_keep(&self) -> usize {
        self.journal.entries_to_keep(self.cfg.log_keep)
    }

    /// Whether this beacon can serve a request now: it leads, sees a majority (quorum mode)
    /// and has taken over a majority's state; otherwise why not.
    pub fn ready_to_serve(&self) -> Result<(), ConsensusError> {
        self.serving_blocked().map_or(Ok(()), Err)
    }

    /// Whether this beacon leads and has taken over (quorum mode) the state of a majority:
    /// its state then holds every acknowledged write of earlier terms.
    pub fn has_taken_over(&self) -> bool {
        self.leading.is_some() && !self.taking_over()
    }

    /// How far each follower is known to have stored the log (leader only).
    pub fn follower_progress(&self) -> Vec<FollowerView> {
        let Some(leading) = &self.leading else {
            return Vec::new();
        };
        leading.followers.views()
    }

    /// Why a write sent to this beacon now would fail, if it would: a leader that cannot
    /// serve (no majority in sight, still taking over), or a follower that knows no leader
    /// or (quorum mode) sees no majority. `None` means it can write: it serves the write or
    /// forwards it to a leader that can.
    pub fn cannot_write(&self) -> Option<String> {
        if self.leading.is_some() {
            return self.serving_blocked().map(|e| e.to_string());
        }
        self.staleness()
    }

    /// Committed entries this beacon lacks that its leader has announced (0 on a leader).
    pub fn lag(&self) -> u64 {
        if self.leading.is_some() {
            return 0;
        }
        self.following.lag(self.journal.commit())
    }

    /// Why reads from this beacon may be stale, if they may: (quorum mode) this beacon
    /// cannot see a majority, no leader is known, or its leader has not taken over yet.
    pub fn staleness(&self) -> Option<String> {
        if let Some(ConsensusError::NoQuorum { sees, needs, of }) = self.no_quorum() {
            return Some(format!(
                "this beacon sees {sees} of {of} beacons; a majority is {needs}"
            ));
        }
        if self.election.leader().is_none() {
            return Some("no leader is known".into());
        }
        self.taking_over()
            .then(|| "this leader is still taking over the state of a majority".into())
    }

    // ---- steps -----------------------------------------------------------------------------

    /// Feeds one input in; returns what the driver must do, in order.
    pub fn step(&mut self, now: Millis, input: InputOf<S, V>) -> Ready<S, V> {
        self.notice_gap(now);
        if self.leading.is_none() && self.election.is_leader() {
            self.become_leader(now); // a lone voter, restored (see `restore`)
        }
        match input {
            Input::Tick { wall_ms } => {
                self.intake.tick(now, wall_ms);
                self.on_tick(now)
            }
            Input::Peer { from, msg } | Input::Greeting { from, msg }
                if self.out_of_bounds(from, &msg) => {}
            Input::Peer { from, msg } => self.on_peer(now, from, msg, false),
            Input::Greeting { from, msg } => self.on_peer(now, from, msg, true),
            Input::PeerDown { peer } => {
                let actions = self
                    .election
                    .step(now, election::Input::PeerDown { peer })
                    .expect("peer down never fails");
                self.on_election(now, actions);
                self.forget_follower(peer);
            }
            Input::Request { token, request } => self.on_request(now, token, request),
            Input::Requests { requests } => {
                if self.leading.is_some() {
                    for (_, request) in &requests {
                        self.service.prefetch(self.journal.state(), request);
                    }
                }
                for (token, request) in requests {
                    self.on_request(now, token, request);
                }
            }
            Input::Transfer { token, to } => self.on_transfer(now, token, to),
            Input::ReadIndex { token, asker } => self.on_read_index(token, asker),
            Input::ChangeMembers { token, change } => self.on_change_members(now, token, change),
            Input::Stored { through } => self.on_stored(through),
        }
        self.sync_members(now);
        self.advance_commit(now);
        self.sync_members(now);
        self.drive_transfer(now);
        self.start_round();
        if !self.cfg.flush_per_batch {
            self.flush(now);
        }
        self.finish_ready()
    }

    /// Leader: the messages to its followers that the steps since the last call asked for
    /// ([`Config::flush_per_batch`]), one per follower, to merge into the batch before it is
    /// carried out. Empty from a follower, or when the steps asked for none.
    pub fn flush_batch(&mut self, now: Millis) -> Ready<S, V> {
        self.flush(now);
        self.finish_ready()
    }

    /// What the steps asked for, with the commit and the term to store as they stand now.
    fn finish_ready(&mut self) -> Ready<S, V> {
        self.journal.set_keep(self.entries_to_keep());
        self.ready.store.commit = self.journal.commit();
        if let Some(promise) = self.election.promise_to_store() {
            self.ready.term = Some(promise);
        }
        std::mem::take(&mut self.ready)
    }

    /// Whether `msg` carries a term or index beyond the bounds (it is then dropped whole;
    /// the first from each sender is noticed).
    fn out_of_bounds(&mut self, from: SocketAddr, msg: &Message<S>) -> bool {
        let Some(refused) = self.intake.refuse(from, msg) else {
            return false;
        };
        if refused.first {
            let why = refused.why;
            self.notice(format!(
                "refused a message from {from}: {why}; no beacon reaches such values (a corrupt disk, a bug, or a process posing as a beacon: authenticate peers with auth.peer_token or TLS); further ones from it are dropped without a word"
            ));
        }
        true
    }

    fn notice(&mut self, what: String) {
        self.ready.events.push(Event::Notice(what));
    }

    fn reply(&mut self, token: Token, result: Reply<S, V>) {
        self.ready.replies.push((token, result));
    }

    /// Queues `msg` for `to`: a leader's may leave before its store, anything else after
    /// (but a follower's acknowledgement of a round, `ack_round_early`). A leader that is
    /// its own majority (one voter) commits what it appends before its store is done, so
    /// its messages, which say how far it committed, wait for the store.
    fn send(&mut self, to: SocketAddr, msg: Message<S>) {
        if self.leading.is_some() && self.majority() > 1 {
            self.ready.early.push((to, msg));
        } else {
            self.ready.after.push((to, msg));
        }
    }

    // ---- election ------------------------------------------------------------------------

    /// Carries out the election's actions: role changes first (so that heartbeats built next
    /// carry the right payload), then the heartbeats.
    fn on_election(&mut self, now: Millis, actions: Vec<election::Action>) {
        let mut broadcast = false;
        for action in actions {
            match action {
                election::Action::Broadcast(_) => broadcast = true,
                election::Action::LeaderChanged { leader, term } => {
                    self.ready
                        .events
                        .push(Event::LeaderChanged { leader, term });
                }
            }
        }
        match (self.election.is_leader(), self.leading.is_some()) {
            (true, false) => self.become_leader(now),
            (false, true) => self.step_down(),
            (true, true) if self.leading.as_ref().map(|l| l.term) != Some(self.election.term()) => {
                // Leading on in a later term: what waited was proposed in the old one.
                self.step_down();
                self.become_leader(now);
            }
            _ => {}
        }
        if broadcast {
            for peer in self.peers() {
                let msg = self.message_for(peer, now);
                self.send(peer, msg);
            }
            if let Some(l) = self.leading.as_mut() {
                // Every follower got what a round started in this step would tell it.
                l.news.appended = false;
                l.rounds.due = false;
            }
        }
    }

    fn peers(&self) -> Vec<SocketAddr> {
        self.election.peers().collect()
    }

    /// Every follower's progress unknown, the next entry to send being the one after ours.
    fn fresh_followers(&self) -> Followers {
        Followers::fresh(self.peers(), self.journal.last().index + 1)
    }

    fn become_leader(&mut self, now: Millis) {
        // A leader decides on the state of its whole log: at once in classic mode; in quorum
        // mode once it has taken over, as the entries it has not applied may first give way
        // to a more advanced follower's log (`takeover`).
        if self.cfg.mode == Mode::Classic
            && let Err(misfit) = self.journal.catch_up(now)
        {
            self.halt(misfit, "taking the lead");
        }
        let followers = self.fresh_followers();
        let phase = match self.cfg.mode {
            Mode::Classic => Phase::Ready,
            Mode::Quorum => Phase::collecting(),
        };
        self.leading = Some(Leading::new(self.election.term(), phase, followers));
        match self.cfg.mode {
            Mode::Classic => self
                .service
                .lead(self.journal.state(), now, Knowledge::Incomplete),
            Mode::Quorum => self.try_take_over(now),
        }
    }

    fn step_down(&mut self) {
        if let Some(leading) = self.leading.take() {
            if let Some(t) = &leading.transfer {
                let leader = self.election.leader();
                let result = if leader == Some(t.to) {
                    Ok(t.to)
                } else {
                    Err(TransferError::WentElsewhere { to: t.to, leader })
                };
                self.ready.events.push(Event::Transferred {
                    token: t.token,
                    result,
                });
            }
            if !leading.phase.is_collecting() {
                self.following.heard.led(leading.term, &leading.notes);
            }
            for (_, token, _) in &leading.unheard {
                self.ready
                    .replies
                    .push((*token, Err(ConsensusError::LeaderChanged.into())));
            }
            let (answers, changes) = leading.pending.tokens();
            let (confirming, reads) = leading.rounds.tokens();
            for token in answers.into_iter().chain(confirming) {
                self.reply(token, Err(ConsensusError::LeaderChanged.into()));
            }
            for token in reads {
                self.read_indexed(token, Err(ConsensusError::LeaderChanged));
            }
            for token in changes {
                let changed = Err(ConsensusError::LeaderChanged.into());
                self.ready.events.push(Event::MembersChanged {
                    token,
                    result: changed,
                });
            }
            self.service.step_down();
        }
    }

    /// Beacons in the cluster that make a majority.
    fn majority(&self) -> usize {
        self.election.majority()
    }

    /// Quorum mode, fewer than a majority in sight: the error that says so.
    fn no_quorum(&self) -> Option<ConsensusError> {
        let online = self.election.online();
        (self.cfg.mode == Mode::Quorum && online < self.majority()).then(|| {
            ConsensusError::NoQuorum {
                sees: online,
                needs: self.majority(),
                of: self.membership.members().voters.len(),
            }
        })
    }

    /// Leading, but still collecting a majority's state (quorum mode).
    fn taking_over(&self) -> bool {
        self.leading.as_ref().is_some_and(|l| l.taking_over())
    }

    /// Why this beacon cannot serve a request now, if it cannot.
    fn serving_blocked(&self) -> Option<ConsensusError> {
        if self.journal.halted().is_some() {
            return Some(ConsensusError::NotReady);
        }
        if self.leading.is_none() {
            // A beacon on a minority side that knows no leader says why none can lead (a
            // removed one, which no member sends heartbeats, says it was removed).
            if self.election.leader().is_none()
                && !self.removed()
                && let Some(e) = self.no_quorum()
            {
                return Some(e);
            }
            return Some(self.not_leader());
        }
        if let Some(e) = self.no_quorum() {
            return Some(e);
        }
        if let Some(to) = self.leading.as_ref().and_then(|l| l.handing_to()) {
            return Some(ConsensusError::HandingOver { to });
        }
        self.taking_over().then_some(ConsensusError::NotReady)
    }

    // ---- read index ------------------------------------------------------------------------

    fn read_indexed(&mut self, token: Token, result: Result<u64, ConsensusError>) {
        self.ready.events.push(Event::ReadIndex { token, result });
    }

    /// A read's point in the log (see [`Input::ReadIndex`]): refused at once where this
    /// beacon cannot serve; in classic mode, the commit index at once (classic mode makes no
    /// promise a majority could check). In quorum mode never below the entry that began
    /// this term (Raft's rule that a leader reads only once an entry of its own term is
    /// committed): the state a new leader took over may hold entries an earlier leader
    /// committed while this one's commit index is still behind them.
    ///
    /// A follower's request in this term (`asker`) confirms this leadership as of when it
    /// asked, after its reads arrived: no later leader can have acknowledged a write before
    /// then, since the majority that write needed includes this leader or the asker, and
    /// neither had promised a later term. When the two make a majority, no round is needed.
    fn on_read_index(&mut self, token: Token, asker: Option<Asker>) {
        if let Some(e) = self.serving_blocked() {
            return self.read_indexed(token, Err(e));
        }
        let commit = self.commit();
        if self.cfg.mode != Mode::Quorum {
            return self.read_indexed(token, Ok(commit));
        }
        if let Some(index) = asker.and_then(|a| self.read_index_confirmed(a)) {
            return self.read_indexed(token, Ok(index));
        }
        let leading = self.leading.as_mut().expect("serving means leading");
        let index = commit.max(leading.start);
        leading.rounds.read_after_round(token, index);
    }

    /// The read index for `asker` when its request alone confirms this leadership (see
    /// [`Input::ReadIndex`]): quorum mode, this beacon serving, the asker following it in
    /// its term, and the two of them a majority (three beacons, not five). `None`: a
    /// confirmation round is needed.
    ///
    /// It reads and changes nothing, so a connection task may ask it between the driver's
    /// steps and answer without queueing behind writes: the state it sees is what the last
    /// step left, and that step's carry-out has made no promise of a later term yet (a
    /// beacon steps down in memory before it stores or sends one), while the commit index
    /// it gives names entries a majority has already stored.
    pub fn read_index_confirmed(&self, asker: Asker) -> Option<u64> {
        if self.cfg.mode != Mode::Quorum || self.serving_blocked().is_some() {
            return None;
        }
        let leading = self.leading.as_ref()?;
        // This leader and the asker: a majority of three, not of five.
        // A learner's word confirms nothing: it is in no majority.
        let confirmed = asker.term == self.election.term()
            && leading.followers.contains(asker.from)
            && self.election.is_voter(asker.from)
            && 2 >= self.majority();
        confirmed.then(|| self.commit().max(leading.start))
    }

    /// What this leader may ask its followers to vouch for instead of running a round for a
    /// read of its own (see [`Vouch`]): quorum mode, this beacon serving, and one follower's
    /// word with its own a majority (three voters, not five). `None`: a round is needed.
    ///
    /// Like [`Replica::read_index_confirmed`] it reads and changes nothing, so a connection
    /// task may ask it between the driver's steps, after the reads it serves arrived.
    pub fn vouch_wanted(&self) -> Option<Vouch> {
        if self.cfg.mode != Mode::Quorum || self.serving_blocked().is_some() {
            return None;
        }
        let leading = self.leading.as_ref()?;
        if self.majority() > 2 {
            return None;
        }
        // A learner's word confirms nothing: it is in no majority.
        let voters: Vec<SocketAddr> = self
            .peers()
            .into_iter()
            .filter(|p| leading.followers.contains(*p) && self.election.is_voter(*p))
            .collect();
        if voters.is_empty() {
            return None;
        }
        Some(Vouch {
            term: self.election.term(),
            index: self.commit().max(leading.start),
            voters,
        })
    }

    /// Whether this beacon vouches, now, that `leader` leads in `term`: it follows `leader`
    /// in that term, so it has promised no later one (a beacon steps down in memory before
    /// it stores or sends a promise, so what the last step left is safe to answer from,
    /// between steps).
    pub fn vouches_for(&self, leader: SocketAddr, term: u64) -> bool {
        self.election.followed() == Some(leader) && self.election.term() == term
    }

    // ---- leader transfer -------------------------------------------------------------------

    fn transferred(&mut self, token: Token, result: Result<SocketAddr, TransferError>) {
        self.ready.events.push(Event::Transferred { token, result });
    }

    /// Starts handing the leadership to `to` (or to the online beacon furthest along).
    fn on_transfer(&mut self, now: Millis, token: Token, to: Option<SocketAddr>) {
        if let Some(to) = self.leading.as_ref().and_then(|l| l.handing_to()) {
            let busy = TransferError::InProgress(to);
            return self.transferred(token, Err(busy));
        }
        if let Some(e) = self.serving_blocked() {
            return self.transferred(token, Err(e.into()));
        }
        let me = self.election.me();
        let target = match to {
            Some(t) if t == me => return self.transferred(token, Ok(me)),
            Some(t) if !self.peers().contains(&t) => {
                return self.transferred(token, Err(TransferError::NotAPeer(t)));
            }
            Some(t) if !self.election.is_voter(t) => {
                return self.transferred(token, Err(TransferError::Learner(t)));
            }
            Some(t) if !self.election.is_online(t) => {
                return self.transferred(token, Err(TransferError::Offline(t)));
            }
            Some(t) => t,
            None => {
                let leading = self.leading.as_ref().expect("serving, so leading");
                let best = self
                    .peers()
                    .into_iter()
                    .filter(|p| self.election.is_voter(*p) && self.election.is_online(*p))
                    .max_by_key(|p| {
                        let matched = leading.followers.matched(*p).unwrap_or(0);
                        // Furthest along first; ties to the earlier in sorted order.
                        (matched, std::cmp::Reverse(*p))
                    });
                match best {
                    Some(p) => p,
                    None => return self.transferred(token, Err(TransferError::NoTarget)),
                }
            }
        };
        self.notice(format!("handing the leadership over to {target}"));
        let leading = self.leading.as_mut().expect("serving, so leading");
        leading.transfer = Some(Transfer {
            to: target,
            token,
            since: now,
            told: None,
        });
    }

    /// Moves a transfer on: once its target holds every entry, tells it to take over (again
    /// after a tick without an answer, in case the message was lost); gives up after
    /// [`TRANSFER_TICKS`].
    fn drive_transfer(&mut self, now: Millis) {
        let last = self.journal.last().index;
        let tick = self.cfg.tick_ms;
        let Some(leading) = self.leading.as_mut() else {
            return;
        };
        let Some(t) = leading.transfer.clone() else {
            return;
        };
        let limit = TRANSFER_TICKS * tick;
        if now.saturating_sub(t.since) >= limit {
            leading.transfer = None;
            let failed = TransferError::TimedOut {
                to: t.to,
                ms: limit,
            };
            self.notice(format!("leader transfer abandoned: {failed}"));
            return self.transferred(t.token, Err(failed));
        }
        // Every write acknowledged (so none waits on an answer the step-down would turn
        // into "leader changed"), and the target holding all of them.
        let caught_up = self.journal.commit() >= last
            && leading.followers.matched(t.to).is_some_and(|m| m >= last);
        let due = t.told.is_none_or(|at| now.saturating_sub(at) >= tick);
        if caught_up && due {
            if let Some(t) = leading.transfer.as_mut() {
                t.told = Some(now);
            }
            let mut msg = self.bare_message();
            msg.transfer = true;
            self.send(t.to, msg);
        }
    }

    // ---- ticks and requests ----------------------------------------------------------------

    fn on_tick(&mut self, now: Millis) {
        // Resend whatever followers have not acknowledged (a message may have been dropped).
        if let Some(l) = self.leading.as_mut() {
            l.followers.resend_unacknowledged();
        }
        // A lone leader (no follower reports) keeps no notes either.
        self.forget_heard_notes();
        self.start_round_on_heartbeat();
        let actions = self.election.tick(now);
        self.on_election(now, actions);
        self.promote_kept_up(now);
        if self.leading.is_some() {
            if self.serving_blocked().is_none() && self.may_judge() {
                self.with_leader(now, |service, leader| service.tick(leader));
            }
        } else {
            self.service.follow_tick(now);
        }
    }

    /// Runs `f` on the service and the context it acts through (leader only).
    fn with_leader<T>(
        &mut self,
        now: Millis,
        f: impl FnOnce(&mut V, &mut Leader<'_, S>) -> T,
    ) -> T {
        let mut notices = Vec::new();
        let leading = self.leading.as_mut().expect("leader");
        let mut leader = self.journal.leader(
            &mut self.ready.store.entries,
            &mut leading.news.appended,
            &mut notices,
            &mut leading.notes,
            self.election.term(),
            now,
            self.intake.wall_ms(now),
        );
        let result = f(&mut self.service, &mut leader);
        for n in notices {
            self.notice(n);
        }
        result
    }

    fn on_request(&mut self, now: Millis, token: Token, request: V::Request) {
        if let Some(e) = self.serving_blocked() {
            self.reply(token, Err(e.into()));
            return;
        }
        let outcome = self.with_leader(now, |service, leader| service.request(leader, request));
        // What the answer was decided on: the state through the last entry appended, and the
        // renewals through the last note.
        let decided = self.journal.last().index;
        let note = self.leading.as_ref().map_or(0, |l| l.notes.last());
        match outcome {
            Outcome::Now(result) => self.answer_from_state(decided, note, token, result),
            Outcome::WhenCommitted { index, waiting } => {
                self.when_committed(index, note, token, waiting)
            }
            Outcome::WhenConfirmed(response) => {
                self.when_confirmed(token, (decided, note, response), true)
            }
            Outcome::WithNextBeat(response) => {
                self.when_confirmed(token, (decided, note, response), false)
            }
        }
    }

    /// Gives `result`, decided on the state through index `decided`, once that index is
    /// committed. A leader applies entries as it appends them, so its state may hold writes
    /// not committed yet: an answer read off it ("not the holder": an unregister just
    /// appended ended the registration) must not leave before those writes are committed,
    /// or a client could act on a write that a failover then loses, and a read elsewhere
    /// (a follower applies only what is committed) would contradict the answer.
    ///
    /// `note` is the last renewal noted when the answer was decided, kept beside the answer
    /// while it waits (in `noted`, by its token, while it waits for a commit). An answer
    /// given without waiting for a commit, as nearly every renewal's is, never touches
    /// `noted`: a hash insert and removal per renewal took a tenth of the core's time.
    pub(super) fn answer_from_state(
        &mut self,
        decided: u64,
        note: u64,
        token: Token,
        result: Result<V::Response, V::Error>,
    ) {
        let commit = self.journal.commit();
        let Some(leading) = self.leading.as_mut().filter(|_| decided > commit) else {
            self.give_noted(note, token, result);
            return;
        };
        leading.noted.insert(token, note);
        leading.pending.hold(decided, token, result);
    }

    /// Gives a service's answer once a majority of the voters holds every renewal noted
    /// when it was decided (quorum mode; at once when it does, as it does in the common
    /// case: a follower's answer says how far it heard beside how far it stored, and the
    /// round or commit it waited for came in the same answers). The renewals an
    /// answer may rest on (a report's, a registration's) are then known to every later
    /// leader that finds its knowledge complete ([`Knowledge::Complete`]).
    pub(super) fn give(&mut self, token: Token, result: Result<V::Response, V::Error>) {
        let needed = match self.leading.as_mut() {
            Some(l) => l.noted.remove(&token).unwrap_or(l.notes.last()),
            None => 0,
        };
        self.give_noted(needed, token, result);
    }

    /// [`Replica::give`] for an answer that rests on the renewals through note `needed`.
    fn give_noted(&mut self, needed: u64, token: Token, result: Result<V::Response, V::Error>) {
        if let Some(l) = self.leading.as_mut()
            && self.cfg.mode == Mode::Quorum
            && l.notes.confirmed < needed
            && self.election.majority() > 1
        {
            // In order of the notes each waits for: they are given in that order. Answers
            // come mostly in that order already, so the back is tried before a search.
            match l.unheard.back() {
                Some((n, _, _)) if *n > needed => {
                    let at = l.unheard.partition_point(|(n, _, _)| *n <= needed);
                    l.unheard.insert(at, (needed, token, result));
                }
                _ => l.unheard.push_back((needed, token, result)),
            }
            // A confirmation round carries the notes, and a follower answers it at once
            // saying how far it heard: an answer that waited for no round of its own (a
            // registration answered again) gets one rather than the next heartbeats.
            l.rounds.want();
            return;
        }
        self.reply(token, result.map_err(ReplyError::Machine));
    }

    /// The answer now if `index` is committed, else the request waits.
    fn when_committed(&mut self, index: u64, note: u64, token: Token, waiting: V::Waiting) {
        if index <= self.journal.commit() {
            let answer = self.service.answer(self.journal.state(), waiting);
            self.give_noted(note, token, answer);
            return;
        }
        let leading = self.leading.as_mut().expect("leader");
        leading.noted.insert(token, note);
        leading.pending.wait(index, token, waiting);
    }

    /// Applies `entry`, taken from another beacon (a follower's from its leader, a new
    /// leader's from the follower it takes over from), then stores and appends it; its
    /// change is kept for release once committed. An entry that does not fit the state is
    /// neither applied nor appended.
    fn apply_and_append(
        &mut self,
        now: Millis,
        entry: Entry<S::Command>,
    ) -> Result<(), S::ApplyError> {
        self.journal.append(now, entry.clone())?;
        self.ready.store.entries.push(entry);
        Ok(())
    }

    /// Appends and stores an entry of the core's own (a leader's start, a change of
    /// membership): there is nothing in it to apply.
    fn append_core(&mut self, entry: Entry<S::Command>) {
        debug_assert!(
            entry.command().is_none(),
            "a command goes through the service"
        );
        self.journal
            .append(0, entry.clone())
            .unwrap_or_else(|_| unreachable!("a core entry changes no state"));
        self.ready.store.entries.push(entry);
    }

    /// Appends the core's own entry (a leader starting its term).
    fn append_leader_start(&mut self) {
        let entry = Entry {
            index: self.journal.last().index + 1,
            term: self.election.term(),
            payload: Payload::LeaderStart,
        };
        let entry_index = entry.index;
        self.append_core(entry);
        if let Some(l) = self.leading.as_mut() {
            l.news.appended = true;
            l.start = entry_index;
        }
    }

    /// Replaces the whole state with `snapshot`, to be stored before anything is sent.
    /// The changes of entries it did not apply are lost to its watchers: the store says
    /// so ([`Released::restored`]).
    fn install(&mut self, snapshot: Snapshot<S::Snapshot>, now: Millis) {
        self.journal.install(&snapshot, now);
        // Nothing of the new log is stored until the driver says so.
        self.cut_durable(0);
        self.ready.store = Store {
            snapshot: Some(snapshot),
            ..Store::default()
        };
    }
}

//! What the consensus core replicates and serves, as traits: it names no machine.
//!
//! A [`Machine`] is the replicated state: commands applied in log order, deterministically,
//! so that equal logs make equal states. A [`Service`] is its leader-side logic: it turns
//! requests into commands (through a [`Leader`] context), keeps what only the leader keeps
//! (leases), acts on ticks, and answers. The core decides when a request may be served at all
//! (leading, a majority in sight, taken over), when a write's answer may be given (its entry
//! committed) and when a read of the leader's own clock may be trusted (a majority confirmed
//! the leadership after the request arrived).

use std::collections::VecDeque;
use std::fmt::Debug;

use super::log::{Entry, Log, Payload};
use super::renewals::{Knowledge, Notes, RenewalTable};
use crate::time::Millis;

/// A replicated state: deterministic, so that every beacon applying the same commands in the
/// same order holds the same state.
pub trait Machine {
    type Command: Clone + Debug + PartialEq + Send + 'static;
    /// What applying a command changed, for watchers.
    type Change: Clone + Debug + PartialEq + Send + 'static;
    type Snapshot: Clone + Debug + PartialEq + Send + 'static;
    /// A command that does not fit the state: the replicas have diverged.
    type ApplyError: std::error::Error + Clone + PartialEq + Send + Sync + 'static;

    /// Applies one command at time `now` (the leader's clock when it was proposed is not
    /// carried: time-dependent effects, such as a quarantine's end, are commands of their own).
    fn apply(
        &mut self,
        command: &Self::Command,
        now: Millis,
    ) -> Result<Option<Self::Change>, Self::ApplyError>;
    /// About how many bytes `change` holds, for what keeps changes (a watch history keeps
    /// as many as its byte budget allows): by default the change's own size; a machine whose
    /// changes carry large buffers (task payloads) counts them.
    fn change_bytes(change: &Self::Change) -> usize {
        let _ = change;
        std::mem::size_of::<Self::Change>()
    }
    /// How many parts the state has that commands change apart ([`Machine::part`]).
    const PARTS: usize = 1;
    /// The part of the state `command` changes, below [`Machine::PARTS`]. A linearizable
    /// read of one part waits for the entries that changed that part to commit, not for
    /// writes to the others: a leader applies what it appends, so without parts a read
    /// taken while any write is in flight waits for that write. A composite of machines
    /// makes each machine a part (a command changes its own machine's state alone).
    fn part(command: &Self::Command) -> usize {
        let _ = command;
        0
    }
    fn snapshot(&self, now: Millis) -> Self::Snapshot;
    fn restore(&mut self, snapshot: Self::Snapshot, now: Millis);
    /// Records a snapshot of this state holds (sets how many log entries are worth keeping).
    fn records(&self) -> usize;
    /// What this state holds, in a few words for the log ("12 registrations").
    fn summary(&self) -> String;
    /// The stored state has been replayed at start: whether it fits this beacon's
    /// configuration (a machine may replay leniently and judge here). An error stops the
    /// start; nothing is dropped silently.
    fn restored(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// The answer to a request, now or later.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<R, E, W> {
    /// The answer, at once.
    Now(Result<R, E>),
    /// Answer once the entry at `index` is committed, with [`Service::answer`] of `waiting`.
    WhenCommitted { index: u64, waiting: W },
    /// Answer with this once a majority has confirmed, after the request arrived, that this
    /// beacon still leads: a deposed leader that does not know it yet must not answer on
    /// its own clock (a lease renewal), nor refuse on a state a successor has moved past (a
    /// lease it does not know of, made by a later leader).
    WhenConfirmed(Result<R, E>),
    /// As [`Outcome::WhenConfirmed`], by a round that may wait for the leader's next
    /// heartbeat (up to a tick) rather than start at once: for answers nobody is in a hurry
    /// for (a routine renewal with most of its lease left), so that a beacon at rest sends
    /// no round of its own for each.
    WithNextBeat(Result<R, E>),
}

impl<R, E, W> Outcome<R, E, W> {
    /// The same outcome in a composite's types.
    pub fn map<R2, E2, W2>(
        self,
        r: impl FnOnce(R) -> R2,
        e: impl FnOnce(E) -> E2,
        w: impl FnOnce(W) -> W2,
    ) -> Outcome<R2, E2, W2> {
        match self {
            Outcome::Now(Ok(x)) => Outcome::Now(Ok(r(x))),
            Outcome::Now(Err(x)) => Outcome::Now(Err(e(x))),
            Outcome::WhenCommitted { index, waiting } => Outcome::WhenCommitted {
                index,
                waiting: w(waiting),
            },
            Outcome::WhenConfirmed(x) => Outcome::WhenConfirmed(x.map(r).map_err(e)),
            Outcome::WithNextBeat(x) => Outcome::WithNextBeat(x.map(r).map_err(e)),
        }
    }
}

/// The leader-side logic of a replicated state `S`.
pub trait Service<S: Machine> {
    type Request: Clone + Debug + PartialEq + Send + 'static;
    type Response: Clone + Debug + PartialEq + Send + 'static;
    /// The machine's own refusals.
    type Error: std::error::Error + Clone + PartialEq + Send + Sync + 'static;
    /// What a write remembers until its entry commits.
    type Waiting: Clone + Debug + Send + 'static;

    /// This beacon starts serving as leader, with `state` as it is (just elected, or just
    /// taken over a majority's state): whatever only a leader keeps starts afresh, but
    /// the renewals it heard as a follower ([`Service::hear_renewals`]) when `renewals` is
    /// [`Knowledge::Complete`]: every renewal any leader answered is among them.
    fn lead(&mut self, state: &S, now: Millis, renewals: Knowledge);
    /// This beacon no longer leads (what it renewed stays what it heard).
    fn step_down(&mut self);
    /// A follower: its leader renewed `keys` (see [`Leader::renewed`]); heard at `now`.
    fn hear_renewals(&mut self, _keys: &[u64], _now: Millis) {}
    /// A follower: its leader's whole table of last renewals, as of `now`, replacing what
    /// it heard before. A large one may be installed a part at a time, the rest on the
    /// following [`Service::follow_tick`]s.
    fn install_renewals(&mut self, _table: &RenewalTable, _now: Millis) {}
    /// Every tick while this beacon follows: it may go on with work spread over ticks, so
    /// that no step holds the core thread long (a follower that must lead the next moment
    /// answers its peers at once).
    fn follow_tick(&mut self, _now: Millis) {}
    /// A leader: every last renewal it knows, for a follower that lacks earlier ones.
    fn renewal_table(&self, _state: &S, _now: Millis) -> RenewalTable {
        RenewalTable::default()
    }
    /// A batch of requests is about to be handled one by one: a service whose requests
    /// read state scattered over memory (a renewal, the record and lease of its ID) may
    /// start loading it here for each, so that their cache misses overlap instead of
    /// coming one after another. A hint: it changes nothing.
    fn prefetch(&self, _state: &S, _request: &Self::Request) {}
    /// A request, while this leader serves.
    fn request(
        &mut self,
        leader: &mut Leader<'_, S>,
        request: Self::Request,
    ) -> Outcome<Self::Response, Self::Error, Self::Waiting>;
    /// Every tick while this leader serves and knows it leads (a majority confirmed it
    /// since it took up leadership or since a gap in its steps): it may act on its clock.
    fn tick(&mut self, leader: &mut Leader<'_, S>);
    /// The answer to a write whose entry is now committed.
    fn answer(&self, state: &S, waiting: Self::Waiting) -> Result<Self::Response, Self::Error>;
}

/// What a service may do while its beacon leads: read the state, append commands.
pub struct Leader<'a, S: Machine> {
    pub(crate) state: &'a mut S,
    pub(crate) log: &'a mut Log<S::Command>,
    pub(crate) unsaved: &'a mut Vec<Entry<S::Command>>,
    pub(crate) changes: &'a mut VecDeque<(u64, S::Change)>,
    /// Where each part of the state last changed (see [`Machine::part`]).
    pub(crate) changed: &'a mut [super::log::Position],
    pub(crate) appended: &'a mut bool,
    pub(crate) notices: &'a mut Vec<String>,
    pub(crate) notes: &'a mut Notes,
    pub(crate) term: u64,
    pub(crate) now: Millis,
    pub(crate) wall_ms: u64,
}

impl<S: Machine> Leader<'_, S> {
    pub fn state(&self) -> &S {
        self.state
    }

    pub fn now(&self) -> Millis {
        self.now
    }

    /// The wall-clock time (Unix milliseconds) as of this beacon's last tick, moved on by its
    /// clock since: for stamping records ("since when"), never for deciding. Every leader
    /// knows it from its first tick, so a record made right after a failover is stamped
    /// as truly as one made by a long-serving leader.
    pub fn wall_ms(&self) -> u64 {
        self.wall_ms
    }

    /// The index of the last entry: the state reflects every entry up to it. An answer read
    /// from the state as it is now waits for this index to commit.
    pub fn last_index(&self) -> u64 {
        self.log.last().index
    }

    /// The index the next appended command gets.
    pub fn next_index(&self) -> u64 {
        self.log.last().index + 1
    }

    /// The leader's term (a command's fencing position is `(term, next_index)`).
    pub fn term(&self) -> u64 {
        self.term
    }

    /// `key` was renewed on this leader's clock (a lease, by its holder's report): every
    /// follower hears of it, so that the next leader knows when it was last renewed
    /// ([`Service::hear_renewals`]). An answer that relies on the renewal waits for a
    /// confirmation round ([`Outcome::WhenConfirmed`]), which a follower acknowledges only
    /// holding it.
    pub fn renewed(&mut self, key: u64) {
        self.notes.note(key);
    }

    /// Something an operator should know about.
    pub fn notice(&mut self, what: String) {
        self.notices.push(what);
    }

    /// Appends and applies `command`; returns its index. A service appends only commands
    /// it checked against the state, so applying cannot fail; if it does, nothing is
    /// appended, a notice says so, and `None` is returned.
    pub fn append(&mut self, command: S::Command) -> Option<u64> {
        let entry = Entry {
            index: self.log.last().index + 1,
            term: self.term,
            payload: Payload::Command(command),
        };
        let Payload::Command(command) = &entry.payload else {
            unreachable!("just built");
        };
        match self.state.apply(command, self.now) {
            Ok(change) => {
                let index = entry.index;
                self.changed[S::part(command)] = entry.position();
                self.unsaved.push(entry.clone());
                self.log.append(entry);
                *self.appended = true;
                if let Some(change) = change {
                    self.changes.push_back((index, change));
                }
                Some(index)
            }
            Err(e) => {
                self.notices.push(format!(
                    "leader refused its own command {:?}: {e}",
                    entry.payload
                ));
                None
            }
        }
    }
}

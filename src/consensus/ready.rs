//! What one step of the core asks of its driver, in the order it may be done.
//!
//! A [`Ready`] says what to store (a promised term, a snapshot, entries), which messages may
//! leave before that store is durable (a leader's entries: they count only once a follower
//! acknowledges them, and the leader's own answer waits below), and what may happen only
//! after it (a follower's acknowledgements, committed changes, and answers to requests
//! unless they rest only on entries stored before: [`Ready::answers_now`]). The
//! order is in the types: the early messages are handed out against a [`TermStored`]
//! receipt, everything else against a [`Stored`] one, and only the storage issues receipts.
//! No driver or simulation can reorder them wrongly.

use std::net::SocketAddr;

use super::Token;
use super::app::{Machine, Service};
use super::error::ReplyError;
use super::log::Entry;
use super::message::{PeerMessage, Snapshot};

/// A message between beacons replicating `S`.
pub type Message<S> = PeerMessage<<S as Machine>::Command, <S as Machine>::Snapshot>;

/// The answer to a request of service `V` over state `S`.
pub type Reply<S, V> = Result<<V as Service<S>>::Response, ReplyError<<V as Service<S>>::Error>>;

/// What to store durably: `snapshot` (if any) replaces the stored state, then `entries` are
/// appended.
#[derive(Debug, Clone, PartialEq)]
pub struct Store<S: Machine> {
    pub snapshot: Option<Snapshot<S::Snapshot>>,
    pub entries: Vec<Entry<S::Command>>,
    /// How far the log is known committed, stored with the entries: a beacon that restarts
    /// applies its log through it and leaves the rest for its leader to confirm.
    pub commit: u64,
}

impl<S: Machine> Store<S> {
    pub fn is_empty(&self) -> bool {
        self.snapshot.is_none() && self.entries.is_empty()
    }
}

impl<S: Machine> Default for Store<S> {
    fn default() -> Self {
        Store {
            snapshot: None,
            entries: Vec::new(),
            commit: 0,
        }
    }
}

/// Proof that a [`Ready`]'s term is durable. Issued by the storage.
#[derive(Debug)]
pub struct TermStored(());

/// Proof that a [`Ready`]'s [`Store`] is durable. Issued by the storage.
#[derive(Debug)]
pub struct Stored(());

impl TermStored {
    pub(crate) fn issue() -> TermStored {
        TermStored(())
    }
}

impl Stored {
    pub(crate) fn issue() -> Stored {
        Stored(())
    }
}

/// Something for the log or the operator, at any time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The leader this beacon follows (or is) changed.
    LeaderChanged {
        leader: Option<SocketAddr>,
        term: u64,
    },
    /// Something an operator should know about (divergence, snapshots, a gap in the steps).
    Notice(String),
    /// The answer to a leader transfer ([`super::Input::Transfer`]): the beacon that leads
    /// now, or why the leadership stayed.
    Transferred {
        token: Token,
        result: Result<SocketAddr, super::TransferError>,
    },
    /// The answer to a read's request for its point in the log ([`super::Input::ReadIndex`]):
    /// serve the read from state applied through this index.
    ReadIndex {
        token: Token,
        result: Result<u64, super::ConsensusError>,
    },
    /// The answer to a change of membership ([`super::Input::ChangeMembers`]): the
    /// membership it made, once committed, or why it was not made.
    MembersChanged {
        token: Token,
        result: Result<Changed, super::ChangeError>,
    },
}

/// A change of membership made: the log index of its entry, and the membership it made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub index: u64,
    pub members: super::Members,
}

/// What one or more steps ask for. Merge the steps of a batch with [`Ready::merge`] to store
/// them together (one fsync).
pub struct Ready<S: Machine, V: Service<S>> {
    pub(crate) term: Option<super::Promise>,
    pub(crate) store: Store<S>,
    /// The stored log holds entries the log no longer has (a follower cut a tail its leader
    /// replaced): it is rewritten whole, as compaction does, instead of appended to.
    pub(crate) rewrite: bool,
    pub(crate) early: Vec<(SocketAddr, Message<S>)>,
    pub(crate) after: Vec<(SocketAddr, Message<S>)>,
    pub(crate) replies: Vec<(Token, Reply<S, V>)>,
    pub(crate) committed: Vec<(u64, S::Change)>,
    pub(crate) events: Vec<Event>,
}

/// What may happen once the store is durable.
pub struct Released<S: Machine, V: Service<S>> {
    /// Messages to peers (a follower's acknowledgements among them).
    pub send: Vec<(SocketAddr, Message<S>)>,
    /// Answers to requests.
    pub replies: Vec<(Token, Reply<S, V>)>,
    /// Changes now committed, in log order, for watchers (every replica tells the same
    /// change at the same index).
    pub committed: Vec<(u64, S::Change)>,
    /// The state was replaced whole by a snapshot of the log through this index: changes
    /// at or before it that this replica did not tell are lost to its watchers, which must
    /// start again from the state (a history of changes is broken here).
    pub restored: Option<u64>,
}

impl<S: Machine, V: Service<S>> Default for Ready<S, V> {
    fn default() -> Self {
        Ready {
            term: None,
            store: Store::default(),
            rewrite: false,
            early: Vec::new(),
            after: Vec::new(),
            replies: Vec::new(),
            committed: Vec::new(),
            events: Vec::new(),
        }
    }
}

impl<S: Machine, V: Service<S>> Ready<S, V> {
    /// Whether the steps asked for nothing at all.
    pub fn is_empty(&self) -> bool {
        self.term.is_none()
            && self.store.is_empty()
            && !self.rewrite
            && self.early.is_empty()
            && self.after.is_empty()
            && self.replies.is_empty()
            && self.committed.is_empty()
            && self.events.is_empty()
    }

    /// The highest term promised (and to whom), to store before anything else, if it
    /// changed.
    pub fn term(&self) -> Option<super::Promise> {
        self.term
    }

    /// What to store before [`Ready::release`].
    pub fn store(&self) -> &Store<S> {
        &self.store
    }

    /// Whether the stored log must be rewritten whole (the replica's applied state and its
    /// unapplied tail) rather than appended to: it holds entries the log cut off.
    pub fn rewrites_log(&self) -> bool {
        self.rewrite
    }

    /// Events (leader changes, notices), which may be logged at any time.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Messages that may leave once the term is stored, before the store: a leader's.
    pub fn send_now(&mut self, _stored: &TermStored) -> Vec<(SocketAddr, Message<S>)> {
        std::mem::take(&mut self.early)
    }

    /// Whether every answer rests on entries already durable: the commit index stops
    /// before the first entry this store appends, and no snapshot or rewrite replaces what
    /// is stored. A leader with other voters commits an entry only once a follower
    /// acknowledged it, which the follower could do only after this leader's early message
    /// of an earlier carry-out, whose store is done; a read's answer, or a write's, then
    /// waits for nothing this store holds. A leader that is its own majority (or, in
    /// classic mode, has no follower in sync) commits what it appends here: its answers
    /// wait for the store.
    pub fn answers_rest_on_durable(&self) -> bool {
        !self.rewrite
            && self.store.snapshot.is_none()
            && self
                .store
                .entries
                .first()
                .is_none_or(|first| self.store.commit < first.index)
    }

    /// The answers, once the term is stored and before the store, when they rest on
    /// nothing it holds ([`Ready::answers_rest_on_durable`]): a linearizable read or a
    /// write answered in a batch that also appends other writers' entries does not wait
    /// for their fsync. `None` when they must wait for [`Ready::release`].
    pub fn answers_now(&mut self, _stored: &TermStored) -> Option<Vec<(Token, Reply<S, V>)>> {
        self.answers_rest_on_durable()
            .then(|| std::mem::take(&mut self.replies))
    }

    /// The rest, once the store is durable.
    pub fn release(self, _stored: Stored) -> Released<S, V> {
        let mut send = self.early;
        send.extend(self.after);
        Released {
            send,
            replies: self.replies,
            committed: self.committed,
            restored: self.store.snapshot.as_ref().map(|s| s.position.index),
        }
    }

    /// Adds what a later step asked for: stored together, released together.
    pub fn merge(&mut self, later: Ready<S, V>) {
        if later.term.is_some() {
            self.term = later.term;
        }
        self.rewrite |= later.rewrite;
        let commit = self.store.commit.max(later.store.commit);
        if later.store.snapshot.is_some() {
            self.store = later.store;
        } else {
            self.store.entries.extend(later.store.entries);
        }
        self.store.commit = commit;
        self.early.extend(later.early);
        self.after.extend(later.after);
        self.replies.extend(later.replies);
        self.committed.extend(later.committed);
        self.events.extend(later.events);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Token;
    use super::super::scenario::{elected_leader, quorum_leader};
    use super::super::testing::*;
    use super::TermStored;

    fn tokens(replies: &[(Token, super::Reply<Numbers, Append>)]) -> Vec<Token> {
        replies.iter().map(|(t, _)| *t).collect()
    }

    /// A write a follower acknowledged is answered before the store of the batch that
    /// appends the next write: it rests on an earlier store. A lone leader commits what it
    /// appends, so its answer waits for the store that holds it.
    #[test]
    fn answers_leave_before_a_store_only_when_they_rest_on_nothing_in_it() {
        let mut a = quorum_leader();
        add(&mut a, 300, 1, 7);
        let (last, beat) = (a.position(), a.leading.as_ref().unwrap().rounds.beat());
        let mut batch = hear(&mut a, 302, B, follower(A, 1, last, beat));
        batch.merge(add(&mut a, 302, 2, 8));
        assert_eq!(batch.store.entries.len(), 1, "the second write is stored");
        assert_eq!(batch.store.commit, last.index, "the first is committed");
        assert!(batch.answers_rest_on_durable());
        let early = batch
            .answers_now(&TermStored::issue())
            .expect("answered early");
        assert_eq!(tokens(&early), vec![1]);
        assert!(batch.replies.is_empty(), "nothing left for after the store");

        let mut lone = elected_leader(1);
        let mut step = add(&mut lone, 300, 3, 9);
        assert_eq!(step.store.commit, step.store.entries[0].index);
        assert!(!step.answers_rest_on_durable());
        assert!(step.answers_now(&TermStored::issue()).is_none());
        assert_eq!(tokens(&step.replies), vec![3], "answered after the store");
    }
}

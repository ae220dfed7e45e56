//! Carrying out a [`Ready`]: the one way a step's outputs reach the disk and the network,
//! used by the daemon's driver, the simulation and the lock-step tests alike, so that what
//! the tests check is what runs.
//!
//! In the order the receipts allow: the promised term is stored; a leader's entries leave at
//! once (they count only once a follower acknowledges them); the entries (or a snapshot) are
//! stored, or the whole log rewritten where a tail was cut off; the log is compacted into a
//! snapshot once it holds more than is worth keeping; and only then is the rest released (a
//! follower's acknowledgements, committed changes, and the answers, unless they rest on
//! nothing this store holds: those leave before it). A driver may merge the
//! [`Ready`]s of several steps first ([`Ready::merge`]) to store them with one fsync.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Backend, Storage, StorageError};
use crate::consensus::{Machine, Message, Ready, Released, Replica, Reply, Service, Store, Token};
use crate::time::Millis;
use crate::wire::MachineWire;

/// Where a carry-out's messages go, and what a driver wants to know along the way.
pub trait Outbox<S: Machine, V: Service<S>, B> {
    /// A message to a peer, leaving now.
    fn send(&mut self, to: SocketAddr, msg: Message<S>);

    /// Answers that rest on nothing the store holds ([`Ready::answers_now`]), before the
    /// store: an outbox that can give them now does and returns none; what it returns is
    /// released with the rest after the store (by default, all of them).
    fn answer_early(&mut self, replies: Vec<(Token, Reply<S, V>)>) -> Vec<(Token, Reply<S, V>)> {
        replies
    }

    /// Just before the store (the early messages have left): `false` stops the carry-out
    /// here, as a crash would (a simulation tears the write first, through `storage`).
    fn before_store(&mut self, _storage: &mut Storage<S, B>, _store: &Store<S>) -> bool {
        true
    }

    /// The store of appended entries took `took` (the log's fsync), for the metrics.
    fn appended(&mut self, _took: Duration) {}

    /// The log was compacted into a snapshot.
    fn compacted(&mut self) {}
}

/// Carries out `ready`, a step (or merged steps) of `replica`, at `now`. Returns what was
/// released once everything was stored (answers and committed changes are the caller's),
/// or `None` when the outbox stopped it before the store. It is [`carry_out_early`] and
/// then [`carry_out_stored`]; a driver may run the two apart, to let its early messages
/// leave before the store blocks its thread.
pub fn carry_out<S, V, B>(
    ready: Ready<S, V>,
    replica: &Replica<S, V>,
    storage: &mut Storage<S, B>,
    now: Millis,
    out: &mut impl Outbox<S, V, B>,
) -> Result<Option<Released<S, V>>, StorageError>
where
    S: Machine + MachineWire,
    V: Service<S>,
    B: Backend,
{
    let early = carry_out_early(ready, storage, out)?;
    carry_out_stored(early, replica, storage, now, out)
}

/// What [`carry_out_early`] leaves for [`carry_out_stored`]: the rest of the step, and the
/// answers the outbox held back.
pub struct Early<S: Machine, V: Service<S>> {
    ready: Ready<S, V>,
    held: Vec<(Token, Reply<S, V>)>,
}

impl<S: Machine, V: Service<S>> Early<S, V> {
    /// Whether [`carry_out_stored`] will write to the store: entries, a snapshot or a
    /// rewrite of the log (otherwise it only releases).
    pub fn stores(&self) -> bool {
        let store = self.ready.store();
        !store.entries.is_empty() || store.snapshot.is_some() || self.ready.rewrites_log()
    }
}

/// The first half of [`carry_out`]: the promised term is stored, then a leader's entries
/// and every other early message leave, and the answers that rest on nothing the store
/// holds are given to the outbox.
pub fn carry_out_early<S, V, B>(
    ready: Ready<S, V>,
    storage: &mut Storage<S, B>,
    out: &mut impl Outbox<S, V, B>,
) -> Result<Early<S, V>, StorageError>
where
    S: Machine + MachineWire,
    V: Service<S>,
    B: Backend,
{
    // A new term is stored before any message can announce it.
    let term_stored = storage.store_term(ready.term())?;
    Ok(send_early(ready, &term_stored, false, out))
}

/// The early half once the term is stored: a leader's entries go to its followers while it
/// stores them itself (they count towards a commit only once acknowledged, and the leader's
/// own acknowledgement waits for its store), and the answers that rest on nothing the store
/// holds are given to the outbox, or held with the rest when `hold`.
fn send_early<S, V, B>(
    mut ready: Ready<S, V>,
    term_stored: &crate::consensus::TermStored,
    hold: bool,
    out: &mut impl Outbox<S, V, B>,
) -> Early<S, V>
where
    S: Machine + MachineWire,
    V: Service<S>,
    B: Backend,
{
    for (to, msg) in ready.send_now(term_stored) {
        out.send(to, msg);
    }
    let held = match ready.answers_now(term_stored) {
        Some(replies) if hold => replies,
        Some(replies) => out.answer_early(replies),
        None => Vec::new(),
    };
    Early { ready, held }
}

/// The second half of [`carry_out`]: the store, the compaction, and then the release.
pub fn carry_out_stored<S, V, B>(
    early: Early<S, V>,
    replica: &Replica<S, V>,
    storage: &mut Storage<S, B>,
    now: Millis,
    out: &mut impl Outbox<S, V, B>,
) -> Result<Option<Released<S, V>>, StorageError>
where
    S: Machine + MachineWire,
    V: Service<S>,
    B: Backend,
{
    let Early { ready, held } = early;
    if !out.before_store(storage, ready.store()) {
        return Ok(None);
    }
    let appends = !ready.store().entries.is_empty();
    let started = Instant::now();
    let stored = if ready.rewrites_log() {
        // The stored log holds a tail the log cut off: it is rewritten as compaction does.
        store_whole(replica, storage, now)?;
        crate::consensus::Stored::issue()
    } else {
        storage.store(ready.store())?
    };
    if appends {
        out.appended(started.elapsed());
    }
    // Once the log holds more entries than are worth keeping, the current state replaces
    // it (with the entries not applied yet: a follower applies on commit).
    compact_if_due(replica, storage, now, out)?;
    Ok(Some(release_stored(Early { ready, held }, stored, out)))
}

/// Whether `ready` can be stored in the background, beside the steps that follow
/// ([`crate::consensus::Config::stores_reported`]): it promises no new term (stored before
/// anything else leaves), installs no snapshot and rewrites no log (both replace what the
/// log holds and are done with nothing else under way). The rest is carried out whole,
/// once the stores under way are done ([`carry_out`]).
pub fn stores_in_background<S: Machine, V: Service<S>>(ready: &Ready<S, V>) -> bool {
    ready.term().is_none() && ready.store().snapshot.is_none() && !ready.rewrites_log()
}

impl<S: Machine, V: Service<S>> Early<S, V> {
    /// Adds a later carry-out's rest, early half done: stored together, released together,
    /// the answers in the order they were made (the later's held ones after any of this
    /// one's that wait for the store).
    pub fn merge(&mut self, later: Early<S, V>) {
        if self.ready.replies.is_empty() {
            self.held.extend(later.held);
        } else {
            self.ready.replies.extend(later.held);
        }
        self.ready.merge(later.ready);
    }

    /// Whether answers are held for the store: a later carry-out's answers wait behind
    /// them, so that requests are answered in the order they were made.
    pub fn holds_answers(&self) -> bool {
        !self.held.is_empty() || !self.ready.replies.is_empty()
    }

    /// The entries to store, taken out (the rest waits for [`release_stored`]), and the
    /// position of the last.
    pub fn take_store(&mut self) -> (Store<S>, Option<crate::consensus::Position>) {
        let store = Store {
            snapshot: None,
            entries: std::mem::take(&mut self.ready.store.entries),
            commit: self.ready.store.commit,
        };
        let through = store.entries.last().map(|e| e.position());
        (store, through)
    }
}

/// The first half of a carry-out in the background: as [`carry_out_early`], for a `ready`
/// that promises no new term ([`stores_in_background`]), so that the storage may be busy
/// with an earlier store meanwhile. Answers are held when `hold` (an earlier carry-out's
/// still wait for their store).
pub fn carry_out_early_beside<S, V, B>(
    ready: Ready<S, V>,
    hold: bool,
    out: &mut impl Outbox<S, V, B>,
) -> Early<S, V>
where
    S: Machine + MachineWire,
    V: Service<S>,
    B: Backend,
{
    assert!(
        stores_in_background(&ready),
        "a new term is stored before anything else"
    );
    // No term to store: what the last stored term allows, these messages may say.
    send_early(ready, &crate::consensus::TermStored::issue(), hold, out)
}

/// A background store: `store` appended to the log (on the storage's own thread).
pub fn store_beside<S, B>(
    storage: &mut Storage<S, B>,
    store: &Store<S>,
) -> Result<(crate::consensus::Stored, Duration), StorageError>
where
    S: Machine + MachineWire,
    B: Backend,
{
    debug_assert!(store.snapshot.is_none());
    let started = Instant::now();
    let stored = storage.store(store)?;
    Ok((stored, started.elapsed()))
}

/// The second half of a carry-out in the background, once its store is done (`stored`):
/// what waited for it is released, messages sent through `out`, answers and changes
/// returned.
pub fn release_stored<S, V, B>(
    early: Early<S, V>,
    stored: crate::consensus::Stored,
    out: &mut impl Outbox<S, V, B>,
) -> Released<S, V>
where
    S: Machine + MachineWire,
    V: Service<S>,
    B: Backend,
{
    let Early { ready, held } = early;
    let Released {
        send,
        mut replies,
        committed,
        restored,
    } = ready.release(stored);
    for (to, msg) in send {
        out.send(to, msg);
    }
    if !held.is_empty() {
        // Held back: given in the order they were made, before the later.
        replies.splice(0..0, held);
    }
    Released {
        send: Vec::new(),
        replies,
        committed,
        restored,
    }
}

/// Compacts the stored log into a snapshot of `replica` once it holds more entries than
/// are worth keeping; only where every entry of `replica`'s log is stored (nothing under
/// way, nothing stepped since), since the snapshot and the log written with it are taken
/// from it whole.
pub fn compact_if_due<S, V, B>(
    replica: &Replica<S, V>,
    storage: &mut Storage<S, B>,
    now: Millis,
    out: &mut impl Outbox<S, V, B>,
) -> Result<(), StorageError>
where
    S: Machine + MachineWire,
    V: Service<S>,
    B: Backend,
{
    if storage.logged() > replica.entries_to_keep() {
        store_whole(replica, storage, now)?;
        out.compacted();
    }
    Ok(())
}

/// Replaces what `storage` holds with `replica`'s applied state and the entries after it
/// (crash-safe: `Storage::install_with`): to compact the log, or to drop a tail it cut off.
fn store_whole<S, V, B>(
    replica: &Replica<S, V>,
    storage: &mut Storage<S, B>,
    now: Millis,
) -> Result<(), StorageError>
where
    S: Machine + MachineWire,
    V: Service<S>,
    B: Backend,
{
    storage.install_with(
        &replica.snapshot(now),
        &replica.unapplied(),
        replica.commit(),
    )
}

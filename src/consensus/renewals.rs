//! Renewals a leader makes on its clock (a lease renewed by a report), told to every follower
//! so that a new leader knows, within a message's delay, when each lease was last renewed,
//! and leases keep their remaining time across a leader change instead of starting afresh.
//!
//! The leader numbers its renewals within its term (*notes*: a key, such as a node ID) and
//! every message to a follower carries those it has not sent it yet, or, to a follower that
//! lacks what came before, the service's whole table of last renewals. A follower keeps them
//! in its service, stamped with its own clock as they arrive, and counts how far it has heard
//! (its [`Horizon`]: the leader's term and the last note it holds, every earlier one with it).
//!
//! A follower acknowledges a confirmation round only once it holds every note its leader had
//! made when it sent the round; an answer on the leader's clock (a report's) waits for such a
//! round (see `confirm`), so every renewal a service was told of is held by a majority. A new
//! leader collects the horizon of each voter that promised it its term: if its own is at
//! least the highest, it holds every renewal any leader answered, and its service keeps their
//! times ([`Knowledge::Complete`]); otherwise it starts every lease afresh as before
//! ([`Knowledge::Incomplete`]). Its followers continue from its own horizon (the *base*):
//! one that has heard at least as far holds at least what the leader held. One that heard
//! the base's term but fewer of its notes (the old leader's last notes reached the new leader
//! and not it) is sent the notes it lacks from the new leader's own [`Heard`] tail (a
//! *bridge*), once: a few keys where the table holds every lease (a million ages, and the
//! first write of the term waiting on it). The rest, and one the bridge did not reach, are
//! sent the table.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::time::Millis;

/// How far a beacon has heard its leaders' renewals: through note `seq` of the leader of
/// `term`, every earlier note of that term with it, and (by the same rule, one term at a
/// time) every renewal answered in earlier terms. Term 0 (the default): nothing it can
/// vouch for (it just started).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Horizon {
    pub term: u64,
    pub seq: u64,
}

/// Every key's last renewal, as a leader knows it: what a follower that lacks earlier notes
/// is sent, in place of what it knew.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenewalTable {
    /// Each key with how long before the table was made it was last renewed (ms). Shared,
    /// not copied: a million of them go from the wire to a service that installs them a
    /// part at a time ([`super::Service::follow_tick`]).
    pub ages: Arc<Vec<(u64, u64)>>,
    /// Every live key not in `ages` was renewed this long before (a leader's leases that
    /// started afresh at once); `None`: none such.
    pub rest_age: Option<u64>,
}

/// What one leader message carries of the renewals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenewalBatch {
    /// The notes after this one of the term follow, in order (`keys[0]` is note `after +
    /// 1`); a follower that holds fewer cannot take them.
    pub after: u64,
    pub keys: Vec<u64>,
    /// The whole table as of note `after`, replacing what the follower knew.
    pub table: Option<RenewalTable>,
    /// The notes of the base's term (see [`Notes::base`]) the follower lacks to reach the
    /// base, before the keys (which then start at note 0 of this term).
    pub bridge: Option<Bridge>,
}

/// Notes `after + 1` through the base of the term a leader's continues from, as the leader
/// heard them from its own leader: a follower that heard that term through `after` or
/// beyond takes them and continues in the new term.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bridge {
    pub after: u64,
    pub keys: Vec<u64>,
}

/// What a new leader knows of the renewals made before its term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knowledge {
    /// Every renewal a leader answered: leases keep their remaining time.
    Complete,
    /// Not every one (its own horizon is behind a promised one, classic mode, or just
    /// started): every live lease starts afresh.
    Incomplete,
}

/// Most notes a leader keeps for followers that have not heard them; one further behind
/// gets the table.
const MAX_RETAINED: usize = 1 << 20;

/// Most notes one message carries (a follower far behind gets them over several).
const MAX_PER_MESSAGE: usize = 1 << 16;

/// A leader's notes of its term.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notes {
    /// The number of the last note made.
    last: u64,
    /// Notes from `first` on.
    kept: VecDeque<u64>,
    first: u64,
    /// The horizon this term continues from ([`Knowledge::Complete`]): a follower that has
    /// heard as far holds whatever the leader held when its term began. `None`: the leader
    /// began afresh, and every follower needs the table.
    pub(super) base: Option<Horizon>,
    /// The last note a majority of the voters holds (this leader with them).
    pub(super) confirmed: u64,
}

/// What a leader tracks of one follower's renewals.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sent {
    /// The follower's horizon as it last said.
    pub(crate) reported: Option<Horizon>,
    /// Its last message told no horizon at all: a beacon that predates renewals.
    silent: bool,
    /// Notes sent to it through this one (`None`: nothing since it was last reset).
    through: Option<u64>,
    /// When it was last sent the table or a bridge: what it says until its answer to
    /// either arrives was said before, and does not count for this long.
    rescued_at: Option<Millis>,
    /// It was sent a bridge in this term (at most once: one that could not take it, or
    /// never got it, is sent the table).
    bridged: bool,
}

impl Notes {
    pub(super) fn new() -> Notes {
        Notes {
            first: 1,
            ..Notes::default()
        }
    }

    /// A renewal of `key`.
    pub(crate) fn note(&mut self, key: u64) {
        self.last += 1;
        self.kept.push_back(key);
        if self.kept.len() > MAX_RETAINED {
            self.kept.pop_front();
            self.first += 1;
        }
    }

    /// The number of the last note made.
    pub(super) fn last(&self) -> u64 {
        self.last
    }

    /// Where a follower that heard through `h` continues in `term`: after note `n` of it
    /// (`None`: it cannot continue, it needs the table).
    fn continues(&self, term: u64, h: Horizon) -> Option<u64> {
        let n = if h.term == term {
            h.seq
        } else {
            self.base.filter(|b| h >= *b).map(|_| 0)?
        };
        // What it lacks must still be kept.
        (n + 1 >= self.first || n >= self.last).then_some(n)
    }

    /// What the next message to a follower carries, given what it was sent and said: the
    /// notes it lacks; when it cannot continue from what it holds, a bridge from what this
    /// leader `heard` before its term (once), or else the table (made by `table` as of now),
    /// at most once per `patience` ms.
    pub(super) fn batch_for(
        &self,
        term: u64,
        sent: &mut Sent,
        now: Millis,
        patience: Millis,
        heard: &Heard,
        table: impl FnOnce() -> RenewalTable,
    ) -> Option<RenewalBatch> {
        let from = match (sent.reported, sent.through) {
            // Unheard since it was reset: its answer to this message says where it stands.
            (None, None) => return None,
            (None, Some(through)) => Some(through),
            (Some(r), through) => self.continues(term, r).map(|n| through.unwrap_or(n)),
        };
        if let Some(from) = from.filter(|f| f + 1 >= self.first || *f >= self.last) {
            let skip = ((from + 1 - self.first.min(from + 1)) as usize).min(self.kept.len());
            // `range`, not `iter().skip()`: a follower that keeps up needs the newest few of
            // perhaps a million notes kept for one that is down.
            let keys: Vec<u64> = self
                .kept
                .range(skip..)
                .take(MAX_PER_MESSAGE)
                .copied()
                .collect();
            sent.through = Some(from + keys.len() as u64);
            return Some(RenewalBatch {
                after: from,
                keys,
                table: None,
                bridge: None,
            });
        }
        if sent
            .rescued_at
            .is_some_and(|at| now.saturating_sub(at) < patience)
        {
            return None;
        }
        // What it says it holds (said before this bridge or table reaches it) no longer
        // counts.
        sent.rescued_at = Some(now);
        let behind = sent.reported.take();
        if !sent.bridged
            && self.first <= 1
            && let (Some(behind), Some(base)) = (behind, self.base)
            && let Some(lacks) = heard.bridge(behind, base)
        {
            sent.bridged = true;
            let keys: Vec<u64> = self.kept.iter().take(MAX_PER_MESSAGE).copied().collect();
            sent.through = Some(keys.len() as u64);
            return Some(RenewalBatch {
                after: 0,
                keys,
                table: None,
                bridge: Some(Bridge {
                    after: behind.seq,
                    keys: lacks,
                }),
            });
        }
        sent.through = Some(self.last);
        Some(RenewalBatch {
            after: self.last,
            keys: Vec::new(),
            table: Some(table()),
            bridge: None,
        })
    }

    /// Drops the notes every follower has heard: `holds` gives, for each, the last note it
    /// is known to hold (or 0); the rest stay, up to [`MAX_RETAINED`].
    pub(super) fn forget_heard(&mut self, holds: impl Iterator<Item = u64>) {
        let upto = holds.min().unwrap_or(self.last);
        while self.first <= upto && self.kept.pop_front().is_some() {
            self.first += 1;
        }
    }

    /// The last note follower `sent` holds for certain (0 when unknown or when it needs
    /// the table). A beacon that predates renewals counts as holding every note made so
    /// far: it keeps none, but its promise says nothing either, so a new leader it promised
    /// to vouches for nothing and starts every lease afresh; it must not hold answers back
    /// during an upgrade. Only the notes made so far: once it is upgraded and says what it
    /// holds, the notes after count as it says, in the same term.
    pub(super) fn held_by(&self, term: u64, sent: &Sent) -> u64 {
        if sent.silent {
            return self.last;
        }
        sent.reported
            .and_then(|r| self.continues(term, r))
            .unwrap_or(0)
    }
}

impl Sent {
    /// Sends again what the follower has not said it holds (a message may have been
    /// dropped, or arrived before it knew this leader): from what it said, at the next
    /// message.
    pub(crate) fn resend(&mut self) {
        if self.reported.is_some() {
            self.through = None;
        }
    }

    /// The follower said how far it has heard (`None`: it tells nothing of renewals).
    pub(crate) fn report(&mut self, heard: Option<Horizon>) {
        self.silent = heard.is_none();
        if heard.is_some() {
            self.reported = heard;
        }
    }
}

/// What a follower makes of a batch from its leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Take {
    /// Install the table, then hear the keys.
    Table(RenewalTable, Vec<u64>),
    /// Hear these keys (the batch's new ones).
    Keys(Vec<u64>),
    /// It does not continue what this follower holds: ignored (its leader, told where it
    /// stands, sends the table).
    Gap,
}

/// Most notes a follower keeps of its leader's term, for a new leader that heard fewer.
const MAX_TAIL: usize = 1 << 16;

/// What a beacon has heard of its leaders' renewals: how far, and the latest notes of that
/// term, which a new leader that heard fewer is sent while it takes over.
#[derive(Debug, Clone, Default)]
pub(super) struct Heard {
    horizon: Option<Horizon>,
    /// Notes of the horizon's term from `tail_first` on.
    tail: VecDeque<u64>,
    tail_first: u64,
    /// How far the leader it follows said it has heard (a new leader taking over).
    leader: Option<Horizon>,
}

impl Heard {
    pub(super) fn horizon(&self) -> Option<Horizon> {
        self.horizon
    }

    /// Starts the tail afresh at note `seq` of `term`, heard through it.
    fn restart(&mut self, term: u64, seq: u64) {
        self.horizon = Some(Horizon { term, seq });
        self.tail.clear();
        self.tail_first = seq + 1;
    }

    fn extend(&mut self, keys: &[u64]) {
        self.tail.extend(keys);
        if let Some(h) = self.horizon.as_mut() {
            h.seq += keys.len() as u64;
        }
        while self.tail.len() > MAX_TAIL {
            self.tail.pop_front();
            self.tail_first += 1;
        }
    }

    /// Continues in `term` (whose notes continue from `base`) if it has heard as far as
    /// the base: at note 0 of the term.
    pub(super) fn adopt(&mut self, term: u64, base: Option<Horizon>) {
        if let Some(h) = self.horizon
            && h.term < term
            && base.is_some_and(|b| h >= b)
        {
            self.restart(term, 0);
        }
    }

    /// A batch from the leader of `term`, whose term continues from `base`: what to hear.
    pub(super) fn take(&mut self, term: u64, base: Option<Horizon>, batch: RenewalBatch) -> Take {
        if let Some(table) = batch.table {
            self.restart(term, batch.after);
            self.extend(&batch.keys);
            return Take::Table(table, batch.keys);
        }
        let mut keys = match (batch.bridge, base) {
            (Some(bridge), Some(base)) => self.cross(bridge, base),
            _ => Vec::new(),
        };
        self.adopt(term, base);
        match self.horizon {
            Some(h) if h.term == term && batch.after <= h.seq => {
                let new = (h.seq - batch.after) as usize;
                let continued: Vec<u64> = batch.keys.into_iter().skip(new).collect();
                self.extend(&continued);
                keys.extend(continued);
                Take::Keys(keys)
            }
            // What it crossed it holds (its horizon says so), and hears.
            _ if !keys.is_empty() => Take::Keys(keys),
            _ => Take::Gap,
        }
    }

    /// Takes the notes of `bridge` it lacks, when they take its horizon to `base`: the
    /// keys it heard (none if the bridge does not start within what it holds of the base's
    /// term, or does not end at the base).
    fn cross(&mut self, bridge: Bridge, base: Horizon) -> Vec<u64> {
        let Some(h) = self.horizon else {
            return Vec::new();
        };
        if h.term != base.term
            || h.seq >= base.seq
            || bridge.after > h.seq
            || bridge.after + bridge.keys.len() as u64 != base.seq
        {
            return Vec::new();
        }
        let keys: Vec<u64> = bridge
            .keys
            .into_iter()
            .skip((h.seq - bridge.after) as usize)
            .collect();
        self.extend(&keys);
        keys
    }

    /// A leader whose term continues from `base` (its own horizon when its term began):
    /// the notes of the base's term a follower that heard through `behind` lacks to reach
    /// it, if it still holds them all.
    fn bridge(&self, behind: Horizon, base: Horizon) -> Option<Vec<u64>> {
        if self.horizon != Some(base)
            || behind.term != base.term
            || behind.seq >= base.seq
            || behind.seq + 1 < self.tail_first
        {
            return None;
        }
        let skip = (behind.seq + 1 - self.tail_first) as usize;
        let keys: Vec<u64> = self
            .tail
            .range(skip.min(self.tail.len())..)
            .copied()
            .collect();
        (keys.len() as u64 == base.seq - behind.seq).then_some(keys)
    }

    /// This beacon led in `term` and made `notes`: it has heard every one of them.
    pub(super) fn led(&mut self, term: u64, notes: &Notes) {
        self.restart(term, notes.first.saturating_sub(1));
        let keys: Vec<u64> = notes.kept.iter().copied().collect();
        self.extend(&keys);
        self.horizon = Some(Horizon {
            term,
            seq: notes.last,
        });
    }

    /// The leader it follows said it has heard through `h`.
    pub(super) fn leader_says(&mut self, h: Option<Horizon>) {
        self.leader = h;
    }

    /// The notes its leader (taking over) said it lacks, that this beacon holds.
    pub(super) fn for_leader(&self) -> Option<RenewalBatch> {
        let (mine, theirs) = (self.horizon?, self.leader?);
        if mine.term != theirs.term || mine.seq <= theirs.seq || theirs.seq + 1 < self.tail_first {
            return None;
        }
        let skip = ((theirs.seq + 1 - self.tail_first) as usize).min(self.tail.len());
        Some(RenewalBatch {
            after: theirs.seq,
            keys: self
                .tail
                .range(skip..)
                .take(MAX_PER_MESSAGE)
                .copied()
                .collect(),
            table: None,
            bridge: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(keys: &[u64]) -> Notes {
        let mut n = Notes::new();
        for k in keys {
            n.note(*k);
        }
        n
    }

    fn table() -> RenewalTable {
        RenewalTable {
            ages: Arc::new(vec![(9, 40)]),
            rest_age: Some(100),
        }
    }

    #[test]
    fn a_follower_is_sent_the_notes_it_lacks_and_continues_from_what_it_said() {
        let mut n = notes(&[5, 6, 7]);
        n.base = Some(Horizon { term: 2, seq: 10 });
        let mut sent = Sent::default();
        assert_eq!(
            n.batch_for(3, &mut sent, 0, 100, &Heard::default(), table),
            None,
            "unheard"
        );
        // It heard term 2 through the base: it continues from note 0 of term 3.
        sent.report(Some(Horizon { term: 2, seq: 12 }));
        let b = n
            .batch_for(3, &mut sent, 0, 100, &Heard::default(), table)
            .unwrap();
        assert_eq!(
            (b.after, b.keys.clone(), b.table.is_none()),
            (0, vec![5, 6, 7], true)
        );
        n.note(8);
        let b = n
            .batch_for(3, &mut sent, 1, 100, &Heard::default(), table)
            .unwrap();
        assert_eq!((b.after, b.keys), (3, vec![8]));
        // Once every follower heard them, the notes go.
        assert_eq!(
            n.held_by(3, &sent),
            0,
            "it said it holds none of term 3's yet"
        );
        sent.report(Some(Horizon { term: 3, seq: 3 }));
        assert_eq!(n.held_by(3, &sent), 3);
        n.forget_heard([3u64].into_iter());
        assert_eq!((n.first, n.kept.len()), (4, 1));
        // A follower that tells nothing of renewals (it predates them) holds nothing back.
        let mut old = Sent::default();
        assert_eq!(n.held_by(3, &old), 0, "unheard yet");
        old.report(None);
        assert_eq!(n.held_by(3, &old), n.last(), "every note made so far");
        assert_eq!(
            n.batch_for(3, &mut old, 0, 100, &Heard::default(), table),
            None,
            "and is sent none"
        );
        // Upgraded, it says what it holds: a note made since counts as it says.
        let mut upgraded = old;
        let last = n.last();
        upgraded.report(Some(Horizon { term: 3, seq: last }));
        assert_eq!(n.held_by(3, &upgraded), last);
        n.note(77);
        assert_eq!(n.held_by(3, &upgraded), last, "not the one made since");
        // A leader with no other voter keeps none.
        n.forget_heard(std::iter::empty());
        assert!(n.kept.is_empty() && n.first == n.last + 1);
    }

    #[test]
    fn a_follower_behind_the_base_or_the_kept_notes_gets_the_table_once_per_patience() {
        let mut n = notes(&[5, 6]);
        n.base = Some(Horizon { term: 2, seq: 10 });
        let mut sent = Sent::default();
        sent.report(Some(Horizon { term: 2, seq: 9 }));
        let b = n
            .batch_for(3, &mut sent, 0, 100, &Heard::default(), table)
            .unwrap();
        assert_eq!((b.after, b.table), (2, Some(table())));
        // What comes next continues from the table.
        n.note(7);
        let b = n
            .batch_for(3, &mut sent, 10, 100, &Heard::default(), table)
            .unwrap();
        assert_eq!((b.after, b.keys, b.table), (2, vec![7], None));
        // It still says it lacks them (said before the table reached it): not again
        // before the patience is out.
        sent.report(Some(Horizon { term: 2, seq: 9 }));
        assert_eq!(
            n.batch_for(3, &mut sent, 50, 100, &Heard::default(), table),
            None
        );
        assert!(
            n.batch_for(3, &mut sent, 100, 100, &Heard::default(), table)
                .unwrap()
                .table
                .is_some()
        );
        // A leader that began afresh sends everyone the table.
        let mut n = notes(&[1]);
        let mut sent = Sent::default();
        sent.report(Some(Horizon { term: 2, seq: 99 }));
        assert!(
            n.batch_for(3, &mut sent, 0, 100, &Heard::default(), table)
                .unwrap()
                .table
                .is_some()
        );
        // One whose notes were dropped (it lagged past what is kept) too.
        n.first = 5;
        n.last = 6;
        let mut sent = Sent::default();
        sent.report(Some(Horizon { term: 3, seq: 2 }));
        assert!(
            n.batch_for(3, &mut sent, 0, 100, &Heard::default(), table)
                .unwrap()
                .table
                .is_some()
        );
    }

    #[test]
    fn a_follower_takes_what_continues_its_horizon_and_nothing_after_a_gap() {
        let batch = |after, keys: &[u64]| RenewalBatch {
            after,
            keys: keys.to_vec(),
            table: None,
            bridge: None,
        };
        let h = |term, seq| Some(Horizon { term, seq });
        let mut heard = Heard::default();
        assert_eq!(
            heard.take(3, None, batch(0, &[1])),
            Take::Gap,
            "knows nothing yet"
        );
        // The table replaces whatever was heard; the keys after it continue it.
        let t = RenewalBatch {
            after: 1,
            keys: vec![4],
            table: Some(table()),
            bridge: None,
        };
        assert_eq!(heard.take(3, None, t), Take::Table(table(), vec![4]));
        assert_eq!(heard.horizon(), h(3, 2));
        // Continuing in the term; an overlap is taken once.
        assert_eq!(
            heard.take(3, None, batch(1, &[4, 5, 6])),
            Take::Keys(vec![5, 6])
        );
        assert_eq!(heard.horizon(), h(3, 4));
        // A gap: ignored, the horizon stays.
        assert_eq!(heard.take(3, None, batch(5, &[7])), Take::Gap);
        assert_eq!(heard.horizon(), h(3, 4));
        // A new term continues from a horizon at least its base, not from one behind it.
        let mut behind = heard.clone();
        assert_eq!(behind.take(4, h(3, 5), batch(0, &[1])), Take::Gap);
        assert_eq!(heard.take(4, h(3, 4), batch(0, &[1])), Take::Keys(vec![1]));
        assert_eq!(heard.horizon(), h(4, 1));
    }

    #[test]
    fn a_follower_gives_a_new_leader_the_notes_it_lacks() {
        let mut heard = Heard::default();
        heard.led(2, &notes(&[10, 11, 12, 13]));
        assert_eq!(heard.horizon(), Some(Horizon { term: 2, seq: 4 }));
        assert_eq!(heard.for_leader(), None, "no leader said where it stands");
        heard.leader_says(Some(Horizon { term: 2, seq: 1 }));
        let b = heard.for_leader().unwrap();
        assert_eq!((b.after, b.keys), (1, vec![11, 12, 13]));
        heard.leader_says(Some(Horizon { term: 2, seq: 4 }));
        assert_eq!(heard.for_leader(), None, "it lacks nothing");
        heard.leader_says(Some(Horizon { term: 1, seq: 9 }));
        assert_eq!(
            heard.for_leader(),
            None,
            "another term's notes do not continue it"
        );
    }

    #[test]
    fn a_follower_that_heard_fewer_of_the_base_term_is_bridged_once_then_sent_the_table() {
        let h = |term, seq| Horizon { term, seq };
        // The new leader heard term 2 through note 6 (its last four notes in its tail)...
        let mut leader_heard = Heard::default();
        leader_heard.led(2, &notes(&[10, 11, 12, 13, 14, 15]));
        let base = h(2, 6);
        let mut n = notes(&[20, 21]);
        n.base = Some(base);
        // ... and a follower through note 3 only.
        let mut follower = Heard::default();
        follower.led(2, &notes(&[10, 11, 12]));
        let mut sent = Sent::default();
        sent.report(follower.horizon());
        let b = n
            .batch_for(3, &mut sent, 0, 100, &leader_heard, table)
            .unwrap();
        assert_eq!(b.table, None, "no table");
        assert_eq!(
            b.bridge,
            Some(Bridge {
                after: 3,
                keys: vec![13, 14, 15]
            })
        );
        assert_eq!((b.after, b.keys.clone()), (0, vec![20, 21]));
        // It takes the notes it lacked, then this term's, and stands where the leader does.
        assert_eq!(
            follower.take(3, Some(base), b.clone()),
            Take::Keys(vec![13, 14, 15, 20, 21])
        );
        assert_eq!(follower.horizon(), Some(h(3, 2)));
        // Taken twice (sent again), nothing is heard twice.
        assert_eq!(follower.take(3, Some(base), b.clone()), Take::Keys(vec![]));
        // What it said before the bridge reached it does not count until the patience is
        // out; what it says after, does.
        sent.report(Some(h(2, 3)));
        assert_eq!(
            n.batch_for(3, &mut sent, 50, 100, &leader_heard, table),
            None
        );
        sent.report(follower.horizon());
        n.note(22);
        let b = n
            .batch_for(3, &mut sent, 60, 100, &leader_heard, table)
            .unwrap();
        assert_eq!((b.after, b.keys, b.bridge), (2, vec![22], None));
        // A follower the bridge did not reach (or that ignored it) is sent the table.
        let mut lost = Sent::default();
        lost.report(Some(h(2, 3)));
        let b = n
            .batch_for(3, &mut lost, 0, 100, &leader_heard, table)
            .unwrap();
        assert!(b.bridge.is_some());
        lost.report(Some(h(2, 3)));
        assert_eq!(
            n.batch_for(3, &mut lost, 99, 100, &leader_heard, table),
            None
        );
        let b = n
            .batch_for(3, &mut lost, 100, 100, &leader_heard, table)
            .unwrap();
        assert_eq!((b.table, b.bridge), (Some(table()), None));
        // No bridge from notes the leader no longer holds, from another term, or to a
        // follower whose horizon it does not end at.
        let mut short = Heard::default();
        short.led(2, &notes(&[10, 11, 12, 13, 14, 15]));
        short.tail.pop_front();
        short.tail_first += 1;
        assert_eq!(short.bridge(h(2, 0), base), None);
        assert_eq!(short.bridge(h(2, 1), base), Some(vec![11, 12, 13, 14, 15]));
        assert_eq!(leader_heard.bridge(h(1, 3), base), None);
        assert_eq!(leader_heard.bridge(h(2, 6), base), None, "it lacks nothing");
        let mut other = Heard::default();
        other.led(2, &notes(&[10]));
        let wrong = Bridge {
            after: 1,
            keys: vec![11, 12],
        };
        assert_eq!(
            other.take(
                3,
                Some(base),
                RenewalBatch {
                    after: 0,
                    keys: vec![20],
                    table: None,
                    bridge: Some(wrong),
                }
            ),
            Take::Gap,
            "a bridge that does not reach the base is not taken"
        );
        assert_eq!(other.horizon(), Some(h(2, 1)));
    }
}

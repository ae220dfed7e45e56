//! The replicated log: entries (a machine's command, or the core's own leader-start marker)
//! at positions, with everything before `base` compacted away.
//!
//! Every beacon applies each entry as it appends it, so its state always reflects its whole
//! log. Positions are `(index, term)`. Terms are unique to the beacon that took them (see
//! [`super::election`]), so one position names one entry cluster-wide: two logs that share a
//! position share everything up to it.

use std::collections::VecDeque;

use super::members::Members;

/// A place in the log: the entry at `index`, appended in `term`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    pub index: u64,
    pub term: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.index, self.term)
    }
}

/// What an entry carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload<C> {
    /// A leader starts its term (quorum mode). Changes nothing; committing it commits
    /// everything the leader took over from earlier terms.
    LeaderStart,
    /// A change to the replicated state.
    Command(C),
    /// The cluster's members from here on (see [`super::members`]): in effect where it is
    /// appended. Boxed: three sets inline made every entry 96 bytes where a command's is
    /// 40, and a log keeps as many entries as the state has records (a million and more),
    /// for a change of membership that comes once in a long while.
    Members(Box<Members>),
}

/// One payload at its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<C> {
    pub index: u64,
    pub term: u64,
    pub payload: Payload<C>,
}

impl<C> Entry<C> {
    pub fn position(&self) -> Position {
        Position {
            index: self.index,
            term: self.term,
        }
    }

    /// The command it carries, if any.
    pub fn command(&self) -> Option<&C> {
        match &self.payload {
            Payload::Command(c) => Some(c),
            Payload::LeaderStart | Payload::Members(_) => None,
        }
    }
}

/// The log, with everything before `base` compacted away.
#[derive(Debug, Clone)]
pub struct Log<C> {
    /// Position of the state the first entry follows (0@0 for an empty history, or the
    /// position of the last snapshot installed or entry compacted).
    base: Position,
    /// Boxed: a log keeps as many entries as the state has records (100k, a million), and
    /// a deque of entries held inline (248 bytes each) reallocated and copied hundreds of
    /// MB on the core thread each time it doubled: a stall of some 300 ms at 262,144 and
    /// 524,288 entries, long enough for the followers to take the leader for gone. Boxed,
    /// a doubling copies pointers.
    entries: VecDeque<Box<Entry<C>>>,
    /// How many entries to keep; older ones are dropped (a follower that needs them gets a
    /// snapshot).
    keep: usize,
    /// The membership as of `base` (a snapshot's, or the last change compacted away) with
    /// the index it took effect at (a snapshot's own, when installed); `None`: the
    /// configured one, never changed.
    base_members: Option<(u64, Members)>,
    /// The changes among the entries, by index: a cut takes its changes back.
    changes: Vec<(u64, Members)>,
}

impl<C: Clone> Log<C> {
    pub fn new(keep: usize) -> Log<C> {
        Log {
            base: Position::default(),
            entries: VecDeque::new(),
            keep: keep.max(1),
            base_members: None,
            changes: Vec::new(),
        }
    }

    /// The membership in effect: the last change in the log, else the base's; `None` while
    /// it is the configured one.
    pub fn members(&self) -> Option<&Members> {
        self.members_at(u64::MAX)
    }

    /// The membership as of `index` (for a snapshot taken there).
    pub fn members_at(&self, index: u64) -> Option<&Members> {
        self.change_at(index).map(|(_, m)| m)
    }

    /// The change of membership in effect at `index`, with the index it took effect at.
    pub fn change_at(&self, index: u64) -> Option<(u64, &Members)> {
        self.changes
            .iter()
            .rev()
            .find(|(i, _)| *i <= index)
            .or(self.base_members.as_ref())
            .map(|(i, m)| (*i, m))
    }

    /// The index of the last change of membership in the log (0 if none is held).
    pub fn last_change(&self) -> u64 {
        self.changes.last().map_or(0, |(i, _)| *i)
    }

    /// The last position (the base when empty).
    pub fn last(&self) -> Position {
        self.entries.back().map_or(self.base, |e| e.position())
    }

    /// Where the retained history starts.
    pub fn base(&self) -> Position {
        self.base
    }

    /// The term of the entry at `index`, if this log still knows it.
    pub fn term_at(&self, index: u64) -> Option<u64> {
        if index == self.base.index {
            return Some(self.base.term);
        }
        let offset = index.checked_sub(self.base.index + 1)?;
        self.entries.get(offset as usize).map(|e| e.term)
    }

    /// The entry at `index`, if this log still holds it.
    pub fn get(&self, index: u64) -> Option<&Entry<C>> {
        let offset = index.checked_sub(self.base.index + 1)?;
        self.entries.get(offset as usize).map(|e| &**e)
    }

    /// Whether this log's history includes `pos`.
    pub fn contains(&self, pos: Position) -> bool {
        self.term_at(pos.index) == Some(pos.term)
    }

    /// How many entries are kept.
    pub fn keep(&self) -> usize {
        self.keep
    }

    /// Changes how many entries are kept (at least one); the excess goes with the next append.
    pub fn set_keep(&mut self, keep: usize) {
        self.keep = keep.max(1);
    }

    /// Appends the entry that follows the last one; older entries beyond `keep` are dropped.
    pub fn append(&mut self, entry: Entry<C>) {
        debug_assert_eq!(
            entry.index,
            self.last().index + 1,
            "log entries are contiguous"
        );
        if let Payload::Members(m) = &entry.payload {
            self.changes.push((entry.index, Members::clone(m)));
        }
        self.entries.push_back(Box::new(entry));
        while self.entries.len() > self.keep {
            let dropped = self.entries.pop_front().expect("non-empty");
            self.base = dropped.position();
        }
        // Changes compacted away fold into the base's membership.
        while self
            .changes
            .first()
            .is_some_and(|(i, _)| *i <= self.base.index)
        {
            self.base_members = Some(self.changes.remove(0));
        }
    }

    /// Up to `max` entries after `index`; `None` when they were compacted away.
    pub fn after(&self, index: u64, max: usize) -> Option<Vec<Entry<C>>> {
        let offset = index.checked_sub(self.base.index)? as usize;
        let end = offset.saturating_add(max).min(self.entries.len());
        Some(
            self.entries
                .range(offset.min(end)..end)
                .map(|e| Entry::clone(e))
                .collect(),
        )
    }

    /// Drops the entries after `index` (at or after the base): a follower's tail that its
    /// leader's log replaces.
    pub fn truncate_after(&mut self, index: u64) {
        let keep = index
            .checked_sub(self.base.index)
            .expect("a cut at or after the base");
        self.entries.truncate(keep as usize);
        self.changes.retain(|(i, _)| *i <= index);
    }

    /// Forgets every entry: the state is now the snapshot at `base`, with its membership
    /// (`None`: the configured one).
    pub fn reset(&mut self, base: Position, members: Option<Members>) {
        self.base = base;
        self.entries.clear();
        self.changes.clear();
        self.base_members = members.map(|m| (base.index, m));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry<u64> {
        Entry {
            index,
            term,
            payload: Payload::Command(index),
        }
    }

    fn pos(index: u64, term: u64) -> Position {
        Position { index, term }
    }

    #[test]
    fn log_knows_its_positions_and_compacts() {
        let mut log = Log::new(3);
        assert_eq!(log.last(), pos(0, 0));
        assert!(log.contains(pos(0, 0)));
        for i in 1..=4 {
            log.append(entry(i, 1 + i / 3));
        }
        // Entry 1 was dropped: the base moved to it.
        assert_eq!(log.base(), pos(1, 1));
        assert_eq!(log.last(), pos(4, 2));
        assert!(log.contains(pos(3, 2)) && log.contains(pos(1, 1)));
        assert!(!log.contains(pos(3, 1)) && !log.contains(pos(0, 0)) && !log.contains(pos(5, 2)));
        assert_eq!(log.after(0, 10), None, "compacted");
        let after1: Vec<u64> = log.after(1, 10).unwrap().iter().map(|e| e.index).collect();
        assert_eq!(after1, vec![2, 3, 4]);
        assert_eq!(log.after(2, 1).unwrap()[0].index, 3);
        assert!(log.after(4, 10).unwrap().is_empty());
        log.reset(pos(9, 5), None);
        assert_eq!(log.last(), pos(9, 5));
        assert!(log.after(9, 10).unwrap().is_empty());
    }

    #[test]
    fn the_log_knows_the_membership_at_each_entry_through_cuts_and_compaction() {
        let a = |p: u16| std::net::SocketAddr::from(([127, 0, 0, 1], p));
        let one = Members::new([a(1)], []);
        let two = Members::new([a(1), a(2)], []);
        let mut log = Log::new(3);
        log.append(entry(1, 1));
        assert_eq!(log.members(), None, "the configured one");
        log.append(Entry {
            index: 2,
            term: 1,
            payload: Payload::Members(Box::new(one.clone())),
        });
        log.append(entry(3, 1));
        log.append(Entry {
            index: 4,
            term: 1,
            payload: Payload::Members(Box::new(two.clone())),
        });
        assert_eq!(log.members(), Some(&two));
        assert_eq!(log.members_at(3), Some(&one));
        assert_eq!(log.members_at(1), None);
        assert_eq!(log.last_change(), 4);
        // A cut takes the change back.
        log.truncate_after(3);
        assert_eq!(log.members(), Some(&one));
        // Compacted away, the change is the base's membership.
        for i in 4..=7 {
            log.append(entry(i, 2));
        }
        assert_eq!(log.base().index, 4);
        assert_eq!(log.members(), Some(&one));
        assert_eq!(log.last_change(), 0);
        log.reset(pos(9, 5), Some(two.clone()));
        assert_eq!(log.members(), Some(&two));
    }
}

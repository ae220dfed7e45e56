//! The replicated log: entries (a machine's command, or the core's own leader-start marker)
//! at positions, with everything before `base` compacted away.
//!
//! Every beacon applies each entry as it appends it, so its state always reflects its whole
//! log. Positions are `(index, term)`. Terms are unique to the beacon that took them (see
//! [`super::election`]), so one position names one entry cluster-wide: two logs that share a
//! position share everything up to it.

use std::collections::VecDeque;

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
            Payload::LeaderStart => None,
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
}

impl<C: Clone> Log<C> {
    pub fn new(keep: usize) -> Log<C> {
        Log {
            base: Position::default(),
            entries: VecDeque::new(),
            keep: keep.max(1),
        }
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
        self.entries.push_back(Box::new(entry));
        while self.entries.len() > self.keep {
            let dropped = self.entries.pop_front().expect("non-empty");
            self.base = dropped.position();
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
    }

    /// Forgets every entry: the state is now the snapshot at `base`.
    pub fn reset(&mut self, base: Position) {
        self.base = base;
        self.entries.clear();
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
        log.reset(pos(9, 5));
        assert_eq!(log.last(), pos(9, 5));
        assert!(log.after(9, 10).unwrap().is_empty());
    }
}

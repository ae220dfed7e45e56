//! The sequence issuer's replicated state: named sequences, each with the highest number
//! handed out (`max`) and its step.
//!
//! A segment is one command: `Advance` moves `max` to the segment's end, so however many
//! numbers a segment holds, the log grows by one entry. `max` only moves forward, with one
//! exception that loses nothing: the holder of the last segment handed out may hand back
//! its unused tail (`GiveBack`) while no later segment exists, so a service that restarts
//! cleanly does not burn the numbers it never used.

use std::collections::BTreeMap;

use crate::consensus::Machine;
use crate::time::Millis;

/// Longest sequence name.
pub const MAX_NAME_LEN: usize = 64;

/// A named sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceRecord {
    pub name: String,
    /// The highest number handed out (the first segment starts at `max + 1`).
    pub max: u64,
    /// Numbers per segment when a client does not ask for another count.
    pub step: u64,
    /// Segments handed out since creation.
    pub segments: u64,
    /// Wall-clock time of the last segment (ms since the Unix epoch); 0 before the first.
    pub last_ms: u64,
    /// Log index of the last segment's entry (0 before the first): a give-back names it.
    pub last_index: u64,
    /// First number of the last segment (0 before the first): a give-back returns numbers
    /// of that segment only, never an earlier holder's.
    pub last_start: u64,
    /// Wall-clock time of creation.
    pub created_ms: u64,
}

/// Numbers `start..=end` of sequence `name`, handed out by the entry at `index`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub index: u64,
    pub wall_ms: u64,
}

impl Segment {
    /// How many numbers it holds.
    pub fn count(&self) -> u64 {
        self.end - self.start + 1
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} [{}, {}] (index {})",
            self.name, self.start, self.end, self.index
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Creates a sequence, or replaces its step and position (never backward).
    Put(SequenceRecord),
    Delete(String),
    /// Hands out a segment: `max` moves to its end.
    Advance(Segment),
    /// The last segment's unused tail `start..=end` comes back: `max` moves to `start - 1`.
    GiveBack(Segment),
}

/// What a command changed, for watchers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Put(SequenceRecord),
    Deleted(String),
    Advanced(Segment),
    GaveBack(Segment),
}

/// A command that does not fit the state: the replicas have diverged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("sequence `{0}` does not exist")]
    Unknown(String),
    #[error("segment {segment} does not follow max {max} of its sequence")]
    NotNext { segment: Segment, max: u64 },
    #[error("a put would move sequence `{name}` back from max {max} to {to}")]
    Backward { name: String, max: u64, to: u64 },
    #[error("segment {segment} is not the last one handed out of its sequence (max {max})")]
    NotLast { segment: Segment, max: u64 },
}

/// The sequence issuer's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sequences {
    by_name: BTreeMap<String, SequenceRecord>,
}

impl Sequences {
    pub fn get(&self, name: &str) -> Option<&SequenceRecord> {
        self.by_name.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &SequenceRecord> {
        self.by_name.values()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn apply(&mut self, command: &Command) -> Result<Option<Change>, ApplyError> {
        match command {
            Command::Put(record) => {
                if let Some(old) = self.by_name.get(&record.name)
                    && record.max < old.max
                {
                    return Err(ApplyError::Backward {
                        name: record.name.clone(),
                        max: old.max,
                        to: record.max,
                    });
                }
                self.by_name.insert(record.name.clone(), record.clone());
                Ok(Some(Change::Put(record.clone())))
            }
            Command::Delete(name) => {
                self.by_name
                    .remove(name)
                    .ok_or_else(|| ApplyError::Unknown(name.clone()))?;
                Ok(Some(Change::Deleted(name.clone())))
            }
            Command::Advance(segment) => {
                let record = self
                    .by_name
                    .get_mut(&segment.name)
                    .ok_or_else(|| ApplyError::Unknown(segment.name.clone()))?;
                if record.max.checked_add(1) != Some(segment.start) || segment.end < segment.start {
                    return Err(ApplyError::NotNext {
                        segment: segment.clone(),
                        max: record.max,
                    });
                }
                record.max = segment.end;
                record.segments += 1;
                record.last_ms = segment.wall_ms;
                record.last_index = segment.index;
                record.last_start = segment.start;
                Ok(Some(Change::Advanced(segment.clone())))
            }
            Command::GiveBack(tail) => {
                let record = self
                    .by_name
                    .get_mut(&tail.name)
                    .ok_or_else(|| ApplyError::Unknown(tail.name.clone()))?;
                if record.max != tail.end
                    || record.last_index != tail.index
                    || record.last_start == 0
                    || tail.start < record.last_start
                    || tail.start > tail.end
                {
                    return Err(ApplyError::NotLast {
                        segment: tail.clone(),
                        max: record.max,
                    });
                }
                record.max = tail.start - 1;
                Ok(Some(Change::GaveBack(tail.clone())))
            }
        }
    }
}

impl Machine for Sequences {
    type Command = Command;
    type Change = Change;
    type Snapshot = Vec<SequenceRecord>;
    type ApplyError = ApplyError;

    fn apply(&mut self, command: &Command, _now: Millis) -> Result<Option<Change>, ApplyError> {
        Sequences::apply(self, command)
    }

    fn snapshot(&self, _now: Millis) -> Vec<SequenceRecord> {
        self.by_name.values().cloned().collect()
    }

    fn restore(&mut self, snapshot: Vec<SequenceRecord>, _now: Millis) {
        self.by_name = snapshot.into_iter().map(|r| (r.name.clone(), r)).collect();
    }

    fn records(&self) -> usize {
        self.by_name.len()
    }

    fn summary(&self) -> String {
        format!("{} sequences", self.by_name.len())
    }
}

/// A request field that is not acceptable; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSequence {
    #[error(
        "sequence name `{0}` is invalid: use 1 to {MAX_NAME_LEN} characters from A-Z a-z 0-9 . _ - : /"
    )]
    Name(String),
    #[error("step 0 hands out nothing: use a step of at least 1")]
    ZeroStep,
    #[error("step {step} is over this beacon's limit of {max} (key `sequence.max_step`)")]
    StepTooLarge { step: u64, max: u64 },
    #[error("start 0 is not allowed: numbers start at 1 or more")]
    ZeroStart,
    #[error("segment [{start}, {end}] is not a range")]
    BadRange { start: u64, end: u64 },
}

/// Checks a sequence name.
pub fn check_name(name: &str) -> Result<(), InvalidSequence> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "._-:/".contains(c);
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(ok) {
        return Err(InvalidSequence::Name(name.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, max: u64) -> SequenceRecord {
        SequenceRecord {
            name: name.into(),
            max,
            step: 10,
            segments: 0,
            last_ms: 0,
            last_index: 0,
            last_start: 0,
            created_ms: 1,
        }
    }

    fn segment(start: u64, end: u64, index: u64) -> Segment {
        Segment {
            name: "orders".into(),
            start,
            end,
            index,
            wall_ms: 5,
        }
    }

    #[test]
    fn segments_follow_max_and_only_the_last_tail_comes_back() {
        let mut s = Sequences::default();
        s.apply(&Command::Put(record("orders", 0))).unwrap();
        s.apply(&Command::Advance(segment(1, 10, 2))).unwrap();
        assert!(matches!(
            s.apply(&Command::Advance(segment(5, 14, 3))),
            Err(ApplyError::NotNext { max: 10, .. })
        ));
        s.apply(&Command::Advance(segment(11, 20, 3))).unwrap();
        // The first segment's tail is not the last: refused.
        assert!(matches!(
            s.apply(&Command::GiveBack(segment(4, 10, 2))),
            Err(ApplyError::NotLast { .. })
        ));
        // The last segment's tail, named by its index, comes back.
        assert!(s.apply(&Command::GiveBack(segment(15, 20, 2))).is_err());
        s.apply(&Command::GiveBack(segment(15, 20, 3))).unwrap();
        let r = s.get("orders").unwrap();
        assert_eq!(
            (r.max, r.segments, r.last_index, r.last_start),
            (14, 2, 3, 11)
        );
        // Twice is refused: `max` is no longer the tail's end.
        assert!(s.apply(&Command::GiveBack(segment(15, 20, 3))).is_err());
        // Numbers before the last segment were someone else's: never given back.
        assert!(matches!(
            s.apply(&Command::GiveBack(segment(5, 14, 3))),
            Err(ApplyError::NotLast { .. })
        ));
        s.apply(&Command::GiveBack(segment(11, 14, 3))).unwrap();
        assert_eq!(s.get("orders").unwrap().max, 10);
        assert!(s.apply(&Command::GiveBack(segment(11, 10, 3))).is_err());
        s.apply(&Command::Advance(segment(11, 14, 4))).unwrap();
        assert!(matches!(
            s.apply(&Command::Put(record("orders", 3))),
            Err(ApplyError::Backward { max: 14, to: 3, .. })
        ));
        s.apply(&Command::Delete("orders".into())).unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn names_are_checked() {
        for good in ["orders", "a", "biz.tag-1_x:y/z", &"n".repeat(MAX_NAME_LEN)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "with space", "ünï", &"n".repeat(MAX_NAME_LEN + 1)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}

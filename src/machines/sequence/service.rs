//! The sequence issuer's leader-side service: it checks each request against the state and
//! the configured limits, appends one command, and answers once that command is committed,
//! so a segment that was answered can never be handed out again by a later leader.
//!
//! The service keeps nothing of its own: everything it decides on is replicated, so a new
//! leader serves the next segment straight away.

use super::state::{Command, InvalidSequence, Segment, SequenceRecord, Sequences, check_name};
use crate::consensus::{Leader, Outcome, Service};
use crate::machines::Part;
use crate::time::Millis;

/// The configured limits (config key `sequence`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceLimits {
    /// Step of a sequence created without one.
    pub default_step: u64,
    /// The largest segment handed out at once: a client's adaptive step and a sequence's
    /// own step are capped here.
    pub max_step: u64,
    /// How many sequences a cluster may hold.
    pub max_sequences: usize,
}

impl Default for SequenceLimits {
    fn default() -> SequenceLimits {
        SequenceLimits {
            default_step: 1_000,
            max_step: 1_000_000,
            max_sequences: 10_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Create {
        name: String,
        /// The first number handed out (default 1).
        start: Option<u64>,
        step: Option<u64>,
        wall_ms: u64,
    },
    Change {
        name: String,
        step: Option<u64>,
        /// Move forward so that the next segment starts here.
        start: Option<u64>,
    },
    Delete(String),
    /// The next segment: `count` numbers (0: the sequence's step), capped at `max_step`.
    Next {
        name: String,
        count: u64,
        wall_ms: u64,
    },
    /// The unused tail of the last segment handed out.
    GiveBack(Segment),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Sequence(SequenceRecord),
    Segment {
        segment: Segment,
        step: u64,
        max_step: u64,
    },
    GaveBack(Segment),
}

/// Why the sequence issuer refused a request; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error(transparent)]
    Invalid(#[from] InvalidSequence),
    #[error("no sequence named `{0}`; create it first (`nebcli sequence create {0}`)")]
    Unknown(String),
    #[error(
        "sequence `{name}` already exists (max {max}, step {step}); change it with `sequence change`"
    )]
    Exists { name: String, max: u64, step: u64 },
    #[error("sequence `{name}` is exhausted: every number up to {max} has been handed out")]
    Exhausted { name: String, max: u64 },
    #[error(
        "{segment} is not the unused end of the last segment handed out of its sequence (max {max}, last segment at index {last_index}); nothing came back"
    )]
    NotLast {
        segment: Segment,
        max: u64,
        last_index: u64,
    },
    #[error(
        "sequence `{name}` has handed out numbers up to {max}; it may only move forward (--start {} or more)", max.saturating_add(1)
    )]
    Backward { name: String, max: u64 },
    #[error(
        "this cluster holds {max} sequences, the most it may (key `sequence.max_sequences`); delete one first"
    )]
    TooMany { max: usize },
}

/// What a write waits with until committed.
#[derive(Debug, Clone)]
pub enum Waiting {
    Sequence(SequenceRecord),
    Segment(Segment, u64),
    GaveBack(Segment),
}

/// The sequence issuer's leader-side service.
#[derive(Debug, Clone, Default)]
pub struct SequenceService {
    limits: SequenceLimits,
}

impl SequenceService {
    pub fn new(limits: SequenceLimits) -> SequenceService {
        SequenceService { limits }
    }

    pub fn limits(&self) -> SequenceLimits {
        self.limits
    }

    fn check_step(&self, step: u64) -> Result<u64, SequenceError> {
        match step {
            0 => Err(InvalidSequence::ZeroStep.into()),
            s if s > self.limits.max_step => Err(InvalidSequence::StepTooLarge {
                step: s,
                max: self.limits.max_step,
            }
            .into()),
            s => Ok(s),
        }
    }

    fn create(
        &self,
        sequences: &Sequences,
        name: String,
        start: Option<u64>,
        step: Option<u64>,
        wall_ms: u64,
    ) -> Result<Result<SequenceRecord, SequenceRecord>, SequenceError> {
        check_name(&name)?;
        let step = self.check_step(step.unwrap_or(self.limits.default_step))?;
        let start = start.unwrap_or(1);
        if start == 0 {
            return Err(InvalidSequence::ZeroStart.into());
        }
        if let Some(old) = sequences.get(&name) {
            // Asking again for what exists, untouched (a retry whose answer was lost), is
            // answered with it; anything else is a conflict.
            if old.step == step && old.max == start - 1 && old.segments == 0 {
                return Ok(Err(old.clone()));
            }
            return Err(SequenceError::Exists {
                name,
                max: old.max,
                step: old.step,
            });
        }
        if sequences.len() >= self.limits.max_sequences {
            return Err(SequenceError::TooMany {
                max: self.limits.max_sequences,
            });
        }
        Ok(Ok(SequenceRecord {
            name,
            max: start - 1,
            step,
            segments: 0,
            last_ms: 0,
            last_index: 0,
            last_start: 0,
            created_ms: wall_ms,
        }))
    }

    fn change(
        &self,
        sequences: &Sequences,
        name: &str,
        step: Option<u64>,
        start: Option<u64>,
    ) -> Result<SequenceRecord, SequenceError> {
        check_name(name)?;
        let mut record = known(sequences, name)?.clone();
        if let Some(step) = step {
            record.step = self.check_step(step)?;
        }
        if let Some(start) = start {
            if start == 0 {
                return Err(InvalidSequence::ZeroStart.into());
            }
            if start - 1 < record.max {
                return Err(SequenceError::Backward {
                    name: name.to_owned(),
                    max: record.max,
                });
            }
            record.max = start - 1;
        }
        Ok(record)
    }

    /// The next segment of `name`, to be appended at `index`.
    fn next(
        &self,
        sequences: &Sequences,
        name: &str,
        count: u64,
        index: u64,
        wall_ms: u64,
    ) -> Result<Segment, SequenceError> {
        check_name(name)?;
        let record = known(sequences, name)?;
        // A client's adaptive step is capped here; the answer says the cap.
        let count = match count {
            0 => record.step,
            c => c,
        }
        .min(self.limits.max_step);
        let Some(start) = record.max.checked_add(1) else {
            return Err(SequenceError::Exhausted {
                name: name.to_owned(),
                max: record.max,
            });
        };
        // Near the end of the number space the last segment is what is left.
        let end = record.max.saturating_add(count);
        Ok(Segment {
            name: name.to_owned(),
            start,
            end,
            index,
            wall_ms,
        })
    }

    fn give_back(sequences: &Sequences, tail: &Segment) -> Result<(), SequenceError> {
        check_name(&tail.name)?;
        if tail.start == 0 || tail.start > tail.end {
            return Err(InvalidSequence::BadRange {
                start: tail.start,
                end: tail.end,
            }
            .into());
        }
        let record = known(sequences, &tail.name)?;
        if record.max != tail.end
            || record.last_index != tail.index
            || record.last_start == 0
            || tail.start < record.last_start
        {
            return Err(SequenceError::NotLast {
                segment: tail.clone(),
                max: record.max,
                last_index: record.last_index,
            });
        }
        Ok(())
    }
}

fn known<'a>(sequences: &'a Sequences, name: &str) -> Result<&'a SequenceRecord, SequenceError> {
    sequences
        .get(name)
        .ok_or_else(|| SequenceError::Unknown(name.to_owned()))
}

/// Appends `command`; answered with `waiting` once committed.
fn write<S: Part<Sequences>>(
    leader: &mut Leader<'_, S>,
    command: Command,
    waiting: Waiting,
) -> Outcome<Response, SequenceError, Waiting> {
    let name = match &command {
        Command::Put(r) => r.name.clone(),
        Command::Delete(n) => n.clone(),
        Command::Advance(s) | Command::GiveBack(s) => s.name.clone(),
    };
    match leader.append(S::wrap(command)) {
        Some(index) => Outcome::WhenCommitted { index, waiting },
        // Checked against the state just before: a bug, and the leader's notice says so.
        None => Outcome::Now(Err(SequenceError::Unknown(name))),
    }
}

impl<S: Part<Sequences>> Service<S> for SequenceService {
    type Request = Request;
    type Response = Response;
    type Error = SequenceError;
    type Waiting = Waiting;

    fn lead(&mut self, _state: &S, _now: Millis, _renewals: crate::consensus::Knowledge) {}

    fn step_down(&mut self) {}

    fn request(
        &mut self,
        leader: &mut Leader<'_, S>,
        request: Request,
    ) -> Outcome<Response, SequenceError, Waiting> {
        let sequences = leader.state().part();
        match request {
            Request::Create {
                name,
                start,
                step,
                wall_ms,
            } => match self.create(sequences, name, start, step, wall_ms) {
                Ok(Ok(record)) => write(
                    leader,
                    Command::Put(record.clone()),
                    Waiting::Sequence(record),
                ),
                // Already there as asked: answered once what made it so is committed.
                Ok(Err(existing)) => Outcome::WhenCommitted {
                    index: leader.last_index(),
                    waiting: Waiting::Sequence(existing),
                },
                Err(e) => Outcome::Now(Err(e)),
            },
            Request::Change { name, step, start } => {
                match self.change(sequences, &name, step, start) {
                    Ok(record) => write(
                        leader,
                        Command::Put(record.clone()),
                        Waiting::Sequence(record),
                    ),
                    Err(e) => Outcome::Now(Err(e)),
                }
            }
            Request::Delete(name) => {
                let found = check_name(&name)
                    .map_err(SequenceError::from)
                    .and_then(|()| known(sequences, &name).cloned());
                match found {
                    Ok(record) => write(leader, Command::Delete(name), Waiting::Sequence(record)),
                    Err(e) => Outcome::Now(Err(e)),
                }
            }
            Request::Next {
                name,
                count,
                wall_ms,
            } => {
                let index = leader.next_index();
                match self.next(sequences, &name, count, index, wall_ms) {
                    Ok(segment) => {
                        let step = sequences.get(&name).map_or(0, |r| r.step);
                        write(
                            leader,
                            Command::Advance(segment.clone()),
                            Waiting::Segment(segment, step),
                        )
                    }
                    Err(e) => Outcome::Now(Err(e)),
                }
            }
            Request::GiveBack(tail) => match Self::give_back(sequences, &tail) {
                Ok(()) => write(
                    leader,
                    Command::GiveBack(tail.clone()),
                    Waiting::GaveBack(tail),
                ),
                Err(e) => Outcome::Now(Err(e)),
            },
        }
    }

    fn tick(&mut self, _leader: &mut Leader<'_, S>) {}

    fn answer(&self, _state: &S, waiting: Waiting) -> Result<Response, SequenceError> {
        Ok(match waiting {
            Waiting::Sequence(record) => Response::Sequence(record),
            Waiting::Segment(segment, step) => Response::Segment {
                segment,
                step,
                max_step: self.limits.max_step,
            },
            Waiting::GaveBack(tail) => Response::GaveBack(tail),
        })
    }
}

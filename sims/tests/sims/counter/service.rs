//! The counter's leader-side service: adds are written and answered once committed; a read
//! waits for everything the leader applied to commit, so it never shows a value that a
//! later leader could lack.

use beacon::consensus::{Leader, Outcome, Service};
use beacon::machines::{Configured, Part};

use super::state::{Add, Counter};

#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Add(u64),
    Read,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// The value after this add, or the value read.
    Value(u64),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CounterError {
    #[error("adding 0 changes nothing; add at least 1")]
    Zero,
    #[error("the counter cannot go past {0}")]
    Full(u64),
}

#[derive(Debug, Clone, Default)]
pub struct CounterService;

impl Configured<()> for CounterService {
    fn configured(_: &()) -> CounterService {
        CounterService
    }
}

/// What a write remembers: the value its entry gave.
#[derive(Debug, Clone)]
pub struct Waiting(u64);

impl<S: Part<Counter>> Service<S> for CounterService {
    type Request = Request;
    type Response = Response;
    type Error = CounterError;
    type Waiting = Waiting;

    fn lead(
        &mut self,
        _state: &S,
        _now: beacon::time::Millis,
        _renewals: beacon::consensus::Knowledge,
    ) {
    }

    fn step_down(&mut self) {}

    fn request(
        &mut self,
        leader: &mut Leader<'_, S>,
        request: Request,
    ) -> Outcome<Response, CounterError, Waiting> {
        let value = leader.state().part().value;
        match request {
            Request::Add(0) => Outcome::Now(Err(CounterError::Zero)),
            Request::Add(n) if value.checked_add(n).is_none() => {
                Outcome::Now(Err(CounterError::Full(value)))
            }
            Request::Add(n) => match leader.append(S::wrap(Add(n))) {
                Some(index) => Outcome::WhenCommitted {
                    index,
                    waiting: Waiting(value + n),
                },
                None => Outcome::Now(Err(CounterError::Full(value))),
            },
            Request::Read => Outcome::WhenCommitted {
                index: leader.last_index(),
                waiting: Waiting(value),
            },
        }
    }

    fn tick(&mut self, _leader: &mut Leader<'_, S>) {}

    fn answer(&self, _state: &S, Waiting(value): Waiting) -> Result<Response, CounterError> {
        Ok(Response::Value(value))
    }
}

//! What this process has learned of beacons that did not answer in time.
//!
//! A hung beacon (SIGSTOP, a frozen disk: the kernel still accepts its connections, nothing
//! answers) is a fact about the beacon, not about one connection: every [`super::Cluster`]
//! of a process, made once or afresh for each attempt, reads and writes the same table, so
//! that what one of them paid to learn the others do not pay again. An entry lasts
//! [`SUSPECT_FOR`]; the table holds the beacons suspected lately and nothing else.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How long a beacon that did not answer in time is tried last: longer than an election
/// takes, so the others have moved on by then if it hung.
pub const SUSPECT_FOR: Duration = Duration::from_secs(5);

/// How long a suspect that the others name leader is not followed: longer than a failover
/// takes at the default tick (a hung leader is offline to its peers after three ticks and
/// replaced at once). With a much longer `tick_ms`, following it again may cost one more
/// attempt at a beacon that is hung after all.
pub const SUSPECT_HINT_GRACE: Duration = Duration::from_secs(1);

/// The process's suspects, by address, with when each last did not answer.
static SUSPECTS: Mutex<Option<HashMap<String, Instant>>> = Mutex::new(None);

fn with<T>(f: impl FnOnce(&mut HashMap<String, Instant>) -> T) -> T {
    let mut table = SUSPECTS.lock().unwrap_or_else(PoisonError::into_inner);
    f(table.get_or_insert_with(HashMap::new))
}

/// When `addr` last did not answer in time, if within [`SUSPECT_FOR`].
fn since(addr: &str) -> Option<Instant> {
    with(|t| t.get(addr).copied()).filter(|s| s.elapsed() < SUSPECT_FOR)
}

/// Notes that `addr` did not answer in time (now).
pub(crate) fn note(addr: &str) {
    with(|t| {
        // Entries older than the suspicion are worth nothing: drop them as the table is
        // written, so that it holds the beacons suspected lately and no more.
        t.retain(|_, since| since.elapsed() < SUSPECT_FOR);
        t.insert(addr.to_owned(), Instant::now());
    });
}

/// Notes that `addr` answered: it is no longer suspected.
pub(crate) fn clear(addr: &str) {
    with(|t| t.remove(addr));
}

/// Whether `addr` did not answer in time lately (within [`SUSPECT_FOR`]): tried last.
pub fn is_suspect(addr: &str) -> bool {
    since(addr).is_some()
}

/// Whether a leader hint naming `addr` is followed: unless it did not answer in time
/// within [`SUSPECT_HINT_GRACE`].
pub(crate) fn followed(addr: &str) -> bool {
    since(addr).is_none_or(|s| s.elapsed() >= SUSPECT_HINT_GRACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_beacon_noted_is_suspected_until_it_answers_and_is_shared_by_every_reader() {
        let addr = "192.0.2.1:16000";
        assert!(!is_suspect(addr));
        note(addr);
        assert!(is_suspect(addr), "any reader of the process sees the note");
        assert!(
            !followed(addr),
            "within the grace, a hint naming it is not followed"
        );
        clear(addr);
        assert!(!is_suspect(addr));
        assert!(followed(addr));
    }
}

//! How far terms and log indexes may go: [`MAX_TERM`] and [`MAX_INDEX`], both 2^48.
//!
//! No honest beacon comes near them: at one election a millisecond, 2^48 terms last 8,900
//! years, and 2^48 log entries at a million writes a second last 8.9 years without a single
//! compaction resetting nothing (indexes never reset; a million writes a second is far beyond
//! one leader). A value beyond them comes from a corrupt disk, a bug or a hostile process
//! that reached a beacon's port claiming to be a configured beacon (where peers are not
//! authenticated): it is refused and logged with its sender, never adopted, so arithmetic on
//! terms and indexes (a next term, an index plus one) can never wrap. A claim within the
//! bounds but far above the cluster's terms is still taken, as any newer term is; keeping
//! impostors out is peer authentication's job (`auth.peer_token`, or TLS with `tls.ca`).

use super::log::Position;
use super::message::PeerMessage;

/// The highest term a beacon adopts or takes.
pub const MAX_TERM: u64 = 1 << 48;
/// The highest log index a beacon adopts or appends.
pub const MAX_INDEX: u64 = 1 << 48;

/// Why a position is out of bounds, if it is.
pub fn position_beyond(what: &str, p: Position) -> Option<String> {
    if p.term > MAX_TERM {
        return Some(format!(
            "{what} term {} is beyond {MAX_TERM} (2^48)",
            p.term
        ));
    }
    if p.index > MAX_INDEX {
        return Some(format!(
            "{what} index {} is beyond {MAX_INDEX} (2^48)",
            p.index
        ));
    }
    None
}

/// Why a peer's message carries a term or index beyond the bounds, if it does.
pub fn message_beyond<C, S>(msg: &PeerMessage<C, S>) -> Option<String> {
    if msg.heartbeat.term > MAX_TERM {
        return Some(format!(
            "heartbeat term {} is beyond {MAX_TERM} (2^48)",
            msg.heartbeat.term
        ));
    }
    if msg.commit > MAX_INDEX {
        return Some(format!(
            "commit index {} is beyond {MAX_INDEX} (2^48)",
            msg.commit
        ));
    }
    if let Some((index, _)) = msg.members.as_deref().filter(|(i, _)| *i > MAX_INDEX) {
        return Some(format!(
            "membership index {index} is beyond {MAX_INDEX} (2^48)"
        ));
    }
    position_beyond("log position", msg.position)
        .or_else(|| {
            msg.append
                .as_ref()
                .and_then(|a| position_beyond("append after", a.prev))
        })
        .or_else(|| {
            msg.append
                .iter()
                .flat_map(|a| a.entries.iter())
                .find_map(|e| position_beyond("entry", e.position()))
        })
        .or_else(|| {
            msg.snapshot
                .as_ref()
                .and_then(|s| position_beyond("snapshot", s.position))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::election::Heartbeat;

    #[test]
    fn values_beyond_the_bounds_are_named() {
        let ok: PeerMessage<(), ()> = PeerMessage::bare(
            Heartbeat::bare(true, MAX_TERM),
            Position::default(),
            MAX_INDEX,
        );
        assert_eq!(
            message_beyond(&ok),
            None,
            "the bounds themselves are allowed"
        );
        let rogue: PeerMessage<(), ()> =
            PeerMessage::bare(Heartbeat::bare(true, u64::MAX), Position::default(), 0);
        let why = message_beyond(&rogue).unwrap();
        assert!(why.contains("heartbeat term 18446744073709551615"), "{why}");
        let far: PeerMessage<(), ()> = PeerMessage::bare(
            Heartbeat::bare(false, 3),
            Position {
                index: MAX_INDEX + 1,
                term: 3,
            },
            0,
        );
        assert!(message_beyond(&far).unwrap().contains("log position index"));
    }
}

//! Format versions of the files in a data directory, so that a beacon never reads state it
//! does not understand, and an upgrade one version at a time is promised.
//!
//! | format | written by | what it is |
//! |---|---|---|
//! | 1 | beacon 0.1 before format versions | no mark: `log` records from byte 0, `snapshot` `[crc32][body]`, `term` the number alone, `identity.json` without `format` |
//! | 2 | beacon 0.1 | every file says its format: `log` and `snapshot` begin with a 12-byte header (8 bytes naming the file, the format as a big-endian u32), then what format 1 held; `term` is `format 2` and `term N` on two lines, then `leader ADDR` once the beacon followed a leader in that term (a line earlier readers of format 2 pass over); `identity.json` has `"format": 2` |
//! | 3 | beacon 0.1 with membership changes | as format 2 (`term` is `format 3`, `identity.json` has `"format": 3`); the log may hold changes of membership (`LogEntry.members`) and a snapshot the membership (`Snapshot.members`), which a format-2 reader cannot read |
//!
//! A beacon reads [`OLDEST`] to [`FORMAT`] and refuses a newer file with an error that says
//! which formats it reads. On start it rewrites files of an older format in its own, and
//! logs that it did: a beacon of the version before cannot read them afterwards (to go
//! back, restore the data directory from a copy taken before the upgrade).

use crate::consensus::Promise;

/// The format this beacon writes.
pub const FORMAT: u32 = 3;

/// The first format whose `log` and `snapshot` begin with a header.
pub const FIRST_MARKED: u32 = 2;

/// The oldest format this beacon reads.
pub const OLDEST: u32 = 1;

/// Bytes of a `log` or `snapshot` header.
pub(crate) const HEADER: usize = 12;

/// The first bytes of a `log` file (format 2 on). A format-1 log starts with a record's
/// length, whose first byte is 0 for any record under 16 MiB: never a `b`.
pub(super) const LOG_MAGIC: [u8; 8] = *b"beacon.L";

/// The first bytes of a `snapshot` file (format 2 on).
pub(super) const SNAPSHOT_MAGIC: [u8; 8] = *b"beacon.S";

/// A header in format [`FORMAT`].
pub(crate) fn header(magic: &[u8; 8]) -> [u8; HEADER] {
    let mut h = [0; HEADER];
    h[..8].copy_from_slice(magic);
    h[8..].copy_from_slice(&FORMAT.to_be_bytes());
    h
}

/// A whole file in format [`FORMAT`]: the header naming `magic`, then `[crc32: u32][body]`
/// (a `snapshot`, a backup).
pub(crate) fn sealed(magic: &[u8; 8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 4 + body.len());
    out.extend_from_slice(&header(magic));
    out.extend_from_slice(&crc32fast::hash(body).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The body of `[crc32: u32][body]` (what follows a sealed file's header) and its checksum,
/// once the checksum holds; else what is wrong, in words.
pub(crate) fn unseal(bytes: &[u8]) -> Result<(u32, &[u8]), String> {
    if bytes.len() < 4 {
        return Err(format!("{} bytes, shorter than its checksum", bytes.len()));
    }
    let (crc, body) = bytes.split_at(4);
    let crc = u32::from_be_bytes(crc.try_into().expect("4 bytes"));
    let actual = crc32fast::hash(body);
    if crc != actual {
        return Err(format!(
            "its checksum is {crc:08x} but its contents sum to {actual:08x} (cut short or changed)"
        ));
    }
    Ok((crc, body))
}

/// What the start of a `log` or `snapshot` file says of its format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marked {
    /// Format 1: no header, its contents start at byte 0.
    Unmarked,
    /// A header naming this format; the contents start after it.
    Format(u32),
    /// The start of a header, cut short (a crash during the file's first write).
    Torn,
}

/// Reads the mark at the start of `bytes` (an empty file is unmarked).
pub(crate) fn marked(bytes: &[u8], magic: &[u8; 8]) -> Marked {
    if bytes.is_empty() || bytes[0] != magic[0] {
        return Marked::Unmarked;
    }
    if bytes.len() < HEADER {
        return if magic.starts_with(&bytes[..bytes.len().min(8)]) {
            Marked::Torn
        } else {
            Marked::Unmarked
        };
    }
    if bytes[..8] != magic[..] {
        return Marked::Unmarked;
    }
    Marked::Format(u32::from_be_bytes(
        bytes[8..12].try_into().expect("4 bytes"),
    ))
}

/// The `term` file's text in format [`FORMAT`]: the term, then (once this beacon followed a
/// leader in it) `leader ADDR`, a line a reader of format 2 that predates it passes over.
pub(super) fn term_text(promise: Promise) -> String {
    let mut text = format!("format {FORMAT}\nterm {}\n", promise.term);
    if let Some(leader) = promise.leader {
        text.push_str(&format!("leader {leader}\n"));
    }
    text
}

/// Parses a `term` file: its format and the promise, or `None` when it is neither format.
pub(super) fn parse_term(text: &str) -> Option<(u32, Promise)> {
    let mut lines = text.lines();
    let first = lines.next()?.trim();
    match first.strip_prefix("format ") {
        None => Some((1, Promise::at(first.parse().ok()?)))
            .filter(|_| lines.all(|l| l.trim().is_empty())),
        Some(format) => {
            let format = format.trim().parse().ok()?;
            if format > FORMAT {
                // A newer format may say more: only its number matters here.
                return Some((format, Promise::default()));
            }
            let term = lines
                .next()?
                .trim()
                .strip_prefix("term ")?
                .trim()
                .parse()
                .ok()?;
            let leader = match lines.next().map(str::trim).filter(|l| !l.is_empty()) {
                None => None,
                Some(line) => Some(line.strip_prefix("leader ")?.trim().parse().ok()?),
            };
            Some((format, Promise { term, leader }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_body_comes_back_only_whole() {
        let file = sealed(&SNAPSHOT_MAGIC, b"state");
        assert_eq!(marked(&file, &SNAPSHOT_MAGIC), Marked::Format(FORMAT));
        let (_, body) = unseal(&file[HEADER..]).unwrap();
        assert_eq!(body, b"state");
        let e = unseal(&file[HEADER..file.len() - 1]).unwrap_err();
        assert!(e.contains("cut short or changed"), "{e}");
        assert!(
            unseal(&[1, 2])
                .unwrap_err()
                .contains("shorter than its checksum")
        );
    }

    #[test]
    fn marks_are_told_apart_from_format_1_contents() {
        let mut log = header(&LOG_MAGIC).to_vec();
        assert_eq!(marked(&log, &LOG_MAGIC), Marked::Format(FORMAT));
        log.extend_from_slice(&[0, 0, 0, 9]);
        assert_eq!(marked(&log, &LOG_MAGIC), Marked::Format(FORMAT));
        // A format-1 log: a record's length first.
        assert_eq!(marked(&[0, 0, 0, 40, 1, 2], &LOG_MAGIC), Marked::Unmarked);
        assert_eq!(marked(&[], &LOG_MAGIC), Marked::Unmarked);
        // A header cut short by a crash.
        assert_eq!(marked(&log[..5], &LOG_MAGIC), Marked::Torn);
        assert_eq!(marked(&log[..10], &LOG_MAGIC), Marked::Torn);
        // The other file's header is not this file's.
        assert_eq!(
            marked(&header(&SNAPSHOT_MAGIC), &LOG_MAGIC),
            Marked::Unmarked
        );
        let mut newer = header(&SNAPSHOT_MAGIC);
        newer[8..].copy_from_slice(&7u32.to_be_bytes());
        assert_eq!(marked(&newer, &SNAPSHOT_MAGIC), Marked::Format(7));
    }

    #[test]
    fn the_term_file_is_read_in_either_format() {
        let at = |term| Some((FORMAT, Promise::at(term)));
        assert_eq!(parse_term("12\n"), Some((1, Promise::at(12))));
        assert_eq!(parse_term(&term_text(Promise::at(12))), at(12));
        let followed = Promise {
            term: 12,
            leader: Some("127.0.0.1:16001".parse().unwrap()),
        };
        assert_eq!(parse_term(&term_text(followed)), Some((FORMAT, followed)));
        assert_eq!(parse_term("format 2\nterm 12\nleader nowhere\n"), None);
        assert_eq!(
            parse_term("format 9\nwhatever it says\n"),
            Some((9, Promise::default()))
        );
        assert_eq!(parse_term("twelve\n"), None);
        assert_eq!(parse_term("format 2\n12\n"), None);
        assert_eq!(parse_term(""), None);
    }
}

//! Plain-text tables in the style of the original nebcli: left-aligned columns separated by
//! at least four spaces.

/// Renders `header` and `rows` as aligned columns, one line each, with a trailing newline.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 < widths.len() {
                text.push_str(&format!("{cell:<width$}    ", width = widths[i]));
            } else {
                text.push_str(cell);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

pub fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_owned()
}

/// A time in ms, or `-`.
pub fn opt_ms(ms: Option<u64>) -> String {
    ms.map_or("-".into(), |ms| ms.to_string())
}

/// A string, or `-` if empty.
pub fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_owned()
    }
}

/// Milliseconds since the Unix epoch as UTC, `2026-11-23T09:15:02.123Z`.
pub fn utc_ms(ms: u64) -> String {
    let (days, rest) = (ms / 86_400_000, ms % 86_400_000);
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1_000 % 60,
        rest % 1_000
    )
}

/// A span of milliseconds as a person reads it: `850ms`, `42s`, `3m12s`, `2h05m`, `3d04h`.
pub fn age(ms: u64) -> String {
    let s = ms / 1_000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{s}s"),
        60..3_600 => format!("{}m{:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h{:02}m", s / 3_600, s / 60 % 60),
        _ => format!("{}d{:02}h", s / 86_400, s / 3_600 % 24),
    }
}

/// A moment (ms since the Unix epoch) for a table: how long ago, then when in UTC
/// (`3m12s ago, 2026-11-23T09:15:02Z`). `-` for 0 (not known).
pub fn when(ms: u64) -> String {
    if ms == 0 {
        return "-".into();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let utc = utc_ms(ms);
    // Whole seconds are enough for people.
    let utc = format!("{}Z", &utc[..19]);
    match now.checked_sub(ms) {
        Some(ago) => format!("{} ago, {utc}", age(ago)),
        None => utc,
    }
}

/// Numbers as ranges: `1-3, 7, 9-4000`; at most `most` ranges, then how many more.
pub fn ranges(sorted: &[u32], most: usize) -> String {
    let mut spans: Vec<(u32, u32)> = Vec::new();
    for &n in sorted {
        match spans.last_mut() {
            Some((_, end)) if n == *end + 1 => *end = n,
            _ => spans.push((n, n)),
        }
    }
    let shown: Vec<String> = spans
        .iter()
        .take(most)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let mut out = shown.join(", ");
    if spans.len() > most {
        out.push_str(&format!(", ... ({} more ranges)", spans.len() - most));
    }
    out
}

/// A line warning that an answer may be stale (with the log index it reflects, when the
/// answer says), or nothing.
pub fn stale_warning(stale: Option<&str>, index: Option<u64>) -> String {
    stale.map_or(String::new(), |why| match index {
        Some(index) => {
            format!("warning: this answer may be stale (it reflects the log through index {index}): {why}\n")
        }
        None => format!("warning: this answer may be stale: {why}\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_utc() {
        assert_eq!(utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_ms(1_704_067_200_000), "2024-01-01T00:00:00.000Z");
        assert_eq!(
            utc_ms(951_782_400_000 + 3_723_004),
            "2000-02-29T01:02:03.004Z"
        );
    }

    #[test]
    fn numbers_and_spans_print_for_people() {
        assert_eq!(ranges(&[1, 2, 3, 7, 9, 10, 11], 10), "1-3, 7, 9-11");
        assert_eq!(ranges(&[1, 3, 5, 7], 2), "1, 3, ... (2 more ranges)");
        assert_eq!(ranges(&[], 5), "");
        assert_eq!(age(850), "850ms");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(2 * 3_600_000 + 5 * 60_000), "2h05m");
        assert_eq!(age(3 * 86_400_000 + 4 * 3_600_000), "3d04h");
        let then = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
            - 90_000;
        assert!(when(then).starts_with("1m3"), "{}", when(then));
        assert!(when(then).ends_with('Z'));
        assert_eq!(when(0), "-");
    }

    #[test]
    fn columns_align_to_the_widest_cell() {
        let out = render(
            &["node", "is_leader"],
            &[
                vec!["127.0.0.1:16000".into(), "yes".into()],
                vec!["10.0.0.1:1".into(), "no".into()],
            ],
        );
        assert_eq!(
            out,
            "node               is_leader\n\
             127.0.0.1:16000    yes\n\
             10.0.0.1:1         no\n"
        );
    }
}

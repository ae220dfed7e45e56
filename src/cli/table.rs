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

/// A line warning that an answer may be stale, or nothing.
pub fn stale_warning(stale: Option<&str>) -> String {
    stale.map_or(String::new(), |why| {
        format!("warning: this answer may be stale: {why}\n")
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

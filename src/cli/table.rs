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

//! `beacon-bench tables`: the results tables the docs show, copied from the results files by
//! this program, never by hand.
//!
//! A page marks where a results file's table goes:
//!
//! ```text
//! <!-- results: bench/results-scale.md -->
//! (written by `beacon-bench tables`)
//! <!-- end results -->
//! ```
//!
//! Between the marks go the file's first table (`results-scale.md#2`: its second) and a line
//! that says where and when it was taken (the file's own first line). `--check` changes nothing and fails when a page
//! differs from what its results files say; the tests run it.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

const START: &str = "<!-- results: ";
const END: &str = "<!-- end results -->";

/// The pages that may show results tables, relative to the repository `root`: the README
/// and every page of the docs.
pub fn pages(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    // The Rust client's README is a page too: its build times come from a results file.
    let mut pages = vec![
        PathBuf::from("README.md"),
        PathBuf::from("client/README.md"),
    ];
    let docs = root.join("docs");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&docs).with_context(|| format!("read {}", docs.display()))? {
        let name = entry?.file_name();
        if name.to_string_lossy().ends_with(".md") {
            found.push(Path::new("docs").join(name));
        }
    }
    found.sort();
    pages.extend(found);
    Ok(pages)
}

/// Rewrites (or, with `check`, compares) the results blocks of `pages` under `root`; returns
/// the pages that differed.
pub fn run(root: &Path, pages: &[PathBuf], check: bool) -> anyhow::Result<Vec<PathBuf>> {
    let mut differ = Vec::new();
    for page in pages {
        let path = root.join(page);
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        // Links from the page's own folder up to the repository's top.
        let up = "../".repeat(page.components().count().saturating_sub(1));
        let written = fill(root, &up, &text).with_context(|| format!("{}", page.display()))?;
        if written != text {
            differ.push(page.clone());
            if !check {
                std::fs::write(&path, &written)
                    .with_context(|| format!("write {}", path.display()))?;
            }
        }
    }
    Ok(differ)
}

/// `text` with every results block filled from its file; `up` leads from the page to the
/// repository's top.
fn fill(root: &Path, up: &str, text: &str) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        out.push_str(line);
        out.push('\n');
        let Some(file) = line
            .strip_prefix(START)
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        // Skip what is there now, up to the end mark.
        if !lines.by_ref().any(|(_, l)| l == END) {
            bail!("line {}: `{line}` has no `{END}` after it", n + 1);
        }
        out.push_str(&block(root, up, file.trim())?);
        out.push_str(END);
        out.push('\n');
    }
    if !text.ends_with('\n') {
        out.pop();
    }
    Ok(out)
}

/// What goes between the marks for results file `file` (`FILE#N`: its `N`th table).
fn block(root: &Path, up: &str, file: &str) -> anyhow::Result<String> {
    let (file, nth) = match file.split_once('#') {
        Some((file, n)) => match n.parse::<usize>() {
            Ok(n) if n >= 1 => (file, n),
            _ => bail!("`{file}#{n}`: after `#` goes which table, counted from 1"),
        },
        None => (file, 1),
    };
    let path = root.join(file);
    let results =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let taken = results
        .lines()
        .next()
        .filter(|l| l.starts_with("Taken "))
        .map_or_else(
            || "Taken before results files said where and when they were taken.".to_owned(),
            str::to_owned,
        );
    let mut tables: Vec<Vec<&str>> = Vec::new();
    let mut inside = false;
    for line in results.lines() {
        match (line.starts_with('|'), inside) {
            (true, false) => tables.push(vec![line]),
            (true, true) => tables.last_mut().expect("a table begun").push(line),
            _ => {}
        }
        inside = line.starts_with('|');
    }
    let Some(table) = tables.get(nth - 1) else {
        bail!("{file} has {} tables, not {nth}", tables.len());
    };
    Ok(format!(
        "From [{file}]({up}{file}) ({}).\n\n{}\n",
        lower_first(&taken).trim_end_matches('.'),
        table.join("\n"),
    ))
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the repository")
            .to_owned()
    }

    /// Every results table a page shows is its results file's, as `beacon-bench tables`
    /// writes it: edit the results file (by running the benchmark), not the page.
    #[test]
    fn the_pages_show_their_results_files_tables() {
        let pages = pages(&root()).expect("the docs folder lists");
        assert!(pages.iter().any(|p| p.ends_with("security.md")));
        let differ = run(&root(), &pages, true).expect("the pages and results files read");
        assert!(
            differ.is_empty(),
            "{differ:?} differ from their results files: run `cargo run -p beacon-bench -- tables`"
        );
    }

    /// A figure means something only with where, when and at which commit it was taken:
    /// every results file starts with that line, as the benchmark writes it.
    #[test]
    fn every_results_file_says_where_when_and_at_which_commit() {
        let dir = root().join("bench");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("results") && name.ends_with(".md")
            })
            .collect();
        files.sort();
        assert!(files.len() >= 10, "{files:?}");
        let untold: Vec<String> = files
            .iter()
            .filter(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                let first = text.lines().next().unwrap_or_default();
                let commit = first
                    .split(" at commit ")
                    .nth(1)
                    .and_then(|rest| rest.get(..40))
                    .is_some_and(|c| c.chars().all(|ch| ch.is_ascii_hexdigit()));
                !(first.starts_with("Taken 20") && commit && first.contains(" cores of "))
            })
            .map(|f| f.display().to_string())
            .collect();
        assert!(
            untold.is_empty(),
            "results files without where, when and at which commit they were taken: {untold:#?}"
        );
    }

    #[test]
    fn a_block_is_replaced_and_the_rest_kept() {
        let dir = tempfile_dir();
        std::fs::write(
            dir.join("r.md"),
            "Taken 2026-01-01T00:00:00Z at commit abc.\nRun as x.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nmore\n| c |\n",
        )
        .unwrap();
        let page = "before\n<!-- results: r.md -->\nold\n<!-- end results -->\nafter\n";
        let filled = fill(&dir, "../", page).unwrap();
        assert_eq!(
            filled,
            "before\n<!-- results: r.md -->\nFrom [r.md](../r.md) (taken 2026-01-01T00:00:00Z at commit abc).\n\n| a | b |\n|---|---|\n| 1 | 2 |\n<!-- end results -->\nafter\n"
        );
        assert_eq!(
            fill(&dir, "../", &filled).unwrap(),
            filled,
            "filling again changes nothing"
        );
        let second = fill(&dir, "", "<!-- results: r.md#2 -->\n<!-- end results -->\n").unwrap();
        assert!(
            second.contains("\n\n| c |\n<!-- end"),
            "the second table: {second}"
        );
        assert!(
            second.contains("From [r.md](r.md)"),
            "linked without the #2: {second}"
        );
        for wrong in ["r.md#3", "r.md#0", "r.md#x"] {
            let page = format!("<!-- results: {wrong} -->\n<!-- end results -->\n");
            assert!(fill(&dir, "", &page).is_err(), "{wrong}");
        }
        assert!(fill(&dir, "", "<!-- results: r.md -->\nno end\n").is_err());
        assert!(
            fill(
                &dir,
                "",
                "<!-- results: missing.md -->\n<!-- end results -->\n"
            )
            .is_err()
        );
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("beacon-tables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

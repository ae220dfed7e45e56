//! `beacon-bench`: measurements of beacon clusters running as real processes on loopback.
//!
//! ```text
//! cargo build --release --workspace
//! target/release/beacon-bench failover --tick-ms 100 --rounds 5 --fault kill
//! ```
//!
//! With the `peers` feature, `beacon-bench compare` runs beacon, etcd and ZooKeeper side by
//! side (`bench/run` installs the peers and runs it).

mod charts;
#[cfg(feature = "peers")]
mod compare;
mod failover;
mod tables;

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "beacon-bench",
    about = "Benchmarks of beacon clusters on loopback"
)]
struct Args {
    /// The `beacon` daemon binary (default: next to this program).
    #[arg(long, global = true, value_name = "PATH")]
    beacon_bin: Option<PathBuf>,
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Time from a leader failure to a new leader agreed by every survivor.
    Failover(failover::Options),
    /// beacon, etcd and ZooKeeper side by side: failover, allocation, liveness capacity.
    #[cfg(feature = "peers")]
    Compare(Box<compare::Options>),
    /// Copies each results file's table into the pages that show it (between
    /// `<!-- results: FILE -->` and `<!-- end results -->`).
    Tables {
        /// Change nothing; exit 1 when a page differs from its results files.
        #[arg(long)]
        check: bool,
        /// Pages, relative to the repository (default: README.md and every page in docs/).
        pages: Vec<PathBuf>,
    },
    /// Redraws the SVG charts beside results JSON files that `compare` wrote.
    Charts {
        /// Results files (e.g. bench/results-failover.json).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn beacon_bin(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let path = match given {
        Some(p) => p,
        None => std::env::current_exe()
            .context("cannot locate this program")?
            .with_file_name("beacon"),
    };
    if !path.is_file() {
        bail!(
            "no beacon binary at {}: build it with `cargo build --release --workspace` or pass --beacon-bin",
            path.display()
        );
    }
    Ok(path)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Bench::Charts { files } = &args.bench {
        return charts::redraw(files);
    }
    if let Bench::Tables { check, pages } = &args.bench {
        return tables_command(*check, pages);
    }
    let bin = beacon_bin(args.beacon_bin)?;
    let runtime = tokio::runtime::Runtime::new()?;
    match args.bench {
        Bench::Failover(opts) => runtime.block_on(failover::run(&bin, &opts)),
        #[cfg(feature = "peers")]
        Bench::Compare(opts) => runtime.block_on(compare::run(&bin, &opts)),
        Bench::Charts { .. } | Bench::Tables { .. } => unreachable!("done above"),
    }
}

/// `beacon-bench tables`: run from anywhere in the repository.
fn tables_command(check: bool, pages: &[PathBuf]) -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the repository")?;
    let pages: Vec<PathBuf> = if pages.is_empty() {
        tables::pages(root)?
    } else {
        pages.to_vec()
    };
    let differ = tables::run(root, &pages, check)?;
    for page in &differ {
        let what = if check {
            "differs from its results files"
        } else {
            "rewritten"
        };
        println!("{}: {what}", page.display());
    }
    if check && !differ.is_empty() {
        bail!("run `beacon-bench tables` to copy the results files' tables into these pages");
    }
    Ok(())
}

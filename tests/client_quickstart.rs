//! The Rust client's quick start runs: `client/README.md`'s code is
//! `client/examples/quickstart.rs` word for word, and that example, built as the service it
//! is, runs against real beacons (a lone one, then three with the first stopped) and does
//! everything it says: registers, holds the lock, gets its task done, and leaves.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The example's binary, beside the beacon's; built when this test runs alone and it is not.
fn quickstart() -> PathBuf {
    let bin = Path::new(BEACON)
        .parent()
        .expect("the binaries' directory")
        .join("examples/quickstart");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "beacon-client", "--example", "quickstart"])
            .current_dir(root())
            .status()
            .expect("run cargo");
        assert!(status.success(), "building the quick start failed");
    }
    bin
}

/// Runs the quick start against `beacons`; its output, or a panic with it.
fn run_quickstart(beacons: &str, c: &Cluster) -> String {
    let out = Command::new(quickstart())
        .env("BEACON_ENDPOINTS", beacons)
        .output()
        .expect("run the quick start");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the quick start failed ({}):\n{text}\n{}",
        out.status,
        c.logs()
    );
    for said in [
        "node id ",
        "LOGIC nodes alive",
        "under token",
        "task done: thumbnail of photo-42.jpg",
        "log_level",
    ] {
        assert!(
            text.contains(said),
            "the quick start never said `{said}`:\n{text}"
        );
    }
    text
}

#[test]
fn the_readme_shows_the_example_word_for_word() {
    let readme = std::fs::read_to_string(root().join("client/README.md")).expect("README");
    let example =
        std::fs::read_to_string(root().join("client/examples/quickstart.rs")).expect("example");
    let start = readme
        .find("```rust,no_run\n")
        .expect("the README's quick start block")
        + "```rust,no_run\n".len();
    let end = start + readme[start..].find("```\n").expect("the block's end");
    assert_eq!(
        &readme[start..end],
        example,
        "client/README.md's quick start differs from client/examples/quickstart.rs: copy the example into it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_runs_against_a_lone_beacon_and_again() {
    let ports = free_ports(1);
    let c = Cluster::start_with(Path::new(BEACON), &ports, 100, "qs1", "{}");
    let addr = c.beacons[0].addr.to_string();
    let lone = [c.beacons[0].addr];
    eventually(Duration::from_secs(10), || agreed_leader(&lone))
        .await
        .expect("a leader");
    // Twice: what the first run made (the sequence, the queue) the second finds.
    let first = run_quickstart(&addr, &c);
    let second = run_quickstart(&addr, &c);
    assert_ne!(
        first, second,
        "the second run got numbers and IDs of its own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_runs_past_a_stopped_first_beacon() {
    let ports = free_ports(3);
    let c = Cluster::start_with(Path::new(BEACON), &ports, 100, "qs3", "{}");
    let all: Vec<_> = c.beacons.iter().map(|b| b.addr).collect();
    let leader = eventually(Duration::from_secs(15), || agreed_leader(&all))
        .await
        .expect("a leader");
    let stopped = c
        .beacons
        .iter()
        .position(|b| b.addr.to_string() != leader)
        .expect("a follower");
    c.beacons[stopped].pause();
    run_quickstart(&listed_first(&all, stopped).join(","), &c);
    c.beacons[stopped].signal(libc::SIGCONT);
}

//! The Python client package (`clients/python`) against real beacons, in a real Python
//! interpreter with grpcio: its pytest suite (a service that registers, keeps its lease
//! through a leader kill, is told when its lease is lost, discovers peers, takes sequence and
//! snowflake IDs, holds a slot and works tasks; reflection, health and bad calls), and a
//! check that its committed stubs match `proto/`.
//!
//! The interpreter is a virtual environment in `target/python-venv` (see `support/python.rs`).

use std::path::Path;
use std::process::Command;

#[path = "support/python.rs"]
mod python_env;
use python_env::{python, root, run};

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

#[test]
fn the_python_package_passes_its_tests_against_real_beacons() {
    let python = python();
    let package = root().join("clients/python");
    run(
        Command::new(&python)
            .arg("generate.py")
            .arg("--check")
            .current_dir(&package),
        "the committed stubs match proto/ (python generate.py --check)",
    );
    run(
        Command::new(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
            .current_dir(&package)
            .env("BEACON_BIN", Path::new(BEACON)),
        "pytest clients/python/tests",
    );
}

/// `pip install ./clients/python`, as the README says, installs the package and leaves
/// nothing in the repository that git would list.
#[test]
fn installing_the_package_leaves_the_checkout_clean() {
    let python = python();
    let into = tempfile::tempdir().unwrap();
    let package = root().join("clients/python");
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--no-deps", "--target"])
            .arg(into.path())
            .arg(&package),
        "pip install ./clients/python",
    );
    assert!(into.path().join("beacon_client/nodes.py").exists());
    let status = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all", "--"])
        .arg(&package)
        .current_dir(root())
        .output()
        .expect("run git status");
    if !status.status.success() {
        // Not a git checkout (a source archive): nothing can be listed.
        eprintln!(
            "not a git checkout: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        return;
    }
    let listed = String::from_utf8_lossy(&status.stdout);
    let untracked: Vec<&str> = listed.lines().filter(|l| l.starts_with("??")).collect();
    assert!(
        untracked.is_empty(),
        "pip install left files git lists: {untracked:#?}"
    );
}

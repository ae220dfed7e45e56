//! What the tests that drive another language's toolchain share: the repository's root,
//! and a command run to success or the test failed with its output. Each test binary that
//! includes it uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd`, failing the test with its output if it fails.
pub fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({})\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Holds a lock on `target/NAME.lock` while it lives: tests that build in the same place
/// (a Maven project, a Go binary) take turns.
pub fn locked(name: &str) -> std::fs::File {
    let target = root().join("target");
    std::fs::create_dir_all(&target).expect("make target/");
    let lock = std::fs::File::create(target.join(format!("{name}.lock"))).expect("a lock file");
    lock.lock().expect("take the build lock");
    lock
}

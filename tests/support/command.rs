//! What the tests that drive another language's toolchain share: the repository's root,
//! and a command run to success or the test failed with its output. Each test binary that
//! includes it uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
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

/// Whether `built` exists and is newer than every file of `sources` (files or folders, walked
/// whole): Maven takes seconds to find a project up to date, and each case asks.
pub fn newer_than_sources(built: &Path, sources: &[&Path]) -> bool {
    fn newest(p: &Path) -> std::time::SystemTime {
        let meta = std::fs::metadata(p).and_then(|m| m.modified());
        let own = meta.unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        match std::fs::read_dir(p) {
            Ok(entries) => entries
                .flatten()
                .map(|e| newest(&e.path()))
                .fold(own, std::cmp::max),
            Err(_) => own,
        }
    }
    let Ok(made) = std::fs::metadata(built).and_then(|m| m.modified()) else {
        return false;
    };
    sources.iter().all(|s| newest(s) < made)
}

/// Compiles the Java library and its tests (`clients/java`, with the driver's classpath in
/// `target/classpath.txt`) unless a build since its sources last changed left its stamp:
/// Maven leaves an unchanged classpath.txt alone, so its own time says nothing. Fresh, it
/// takes no lock, so that nothing waits for another test's build meanwhile; a build holds
/// the lock only while Maven compiles.
pub fn built_java() -> PathBuf {
    let root = root();
    let project = root.join("clients/java");
    let stamp = project.join("target/built.stamp");
    let sources = [
        project.join("pom.xml"),
        project.join("src"),
        root.join("proto"),
    ];
    let fresh = || {
        newer_than_sources(
            &stamp,
            &sources.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        )
    };
    if !fresh() {
        let _built = locked("clients-java");
        if !fresh() {
            run(
                &mut beacon_testkit::drivers::java_build(&project),
                "mvn test-compile in clients/java",
            );
            std::fs::write(&stamp, "").expect("the Java build's stamp");
        }
    }
    project
}

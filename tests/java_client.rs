//! The Java library (`clients/java`) against real beacons: Maven builds it (its messages
//! and stubs generated from `proto/` by Maven's protobuf plugin) and runs its JUnit 5 tests
//! (a service that registers, keeps its lease through a leader kill and past a stopped first
//! beacon, discovers peers across a failover, takes sequence and snowflake IDs, configures
//! itself, locks and works; refusals as typed exceptions). Maven fetches the dependencies into its
//! own repository (`~/.m2`), from Maven Central.

use std::path::Path;
use std::process::Command;

#[path = "support/command.rs"]
mod command;
use command::{built_java, run};

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

#[test]
fn the_java_library_passes_its_tests_against_real_beacons() {
    // Built once for this test and the conformance suite's Java driver; the tests then run
    // on what was built, holding no lock, so that the suite's cases need not wait for them.
    let project = built_java();
    run(
        Command::new("mvn")
            .args(["-q", "-B", "surefire:test"])
            .current_dir(project)
            .env("BEACON_BIN", Path::new(BEACON)),
        "mvn surefire:test in clients/java",
    );
}

//! The Java library (`clients/java`) against real beacons: `mvn test` builds it (its
//! messages and stubs generated from `proto/` by Maven's protobuf plugin) and runs its JUnit 5
//! tests (a service that registers, keeps its lease through a leader kill and past a stopped
//! first beacon, discovers peers across a failover, takes sequence and snowflake IDs,
//! configures itself; refusals as typed exceptions). Maven fetches the dependencies into its
//! own repository (`~/.m2`), from Maven Central.

use std::path::Path;
use std::process::Command;

#[path = "support/command.rs"]
mod command;
use command::{locked, root, run};

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

#[test]
fn the_java_library_passes_its_tests_against_real_beacons() {
    // The conformance suite builds the same project for its Java driver.
    let _built = locked("clients-java");
    run(
        Command::new("mvn")
            .args(["-q", "-B", "test"])
            .current_dir(root().join("clients/java"))
            .env("BEACON_BIN", Path::new(BEACON)),
        "mvn test in clients/java",
    );
}

//! The Go client module (`clients/go`) against real beacons: `gofmt` and `go vet` clean, the
//! committed messages and stubs the same as `proto/` makes them, and its `go test` suite (a
//! service that registers, keeps its lease through a leader kill and past stopped beacons,
//! discovers peers across a failover, takes sequence and snowflake IDs, configures itself,
//! runs health checks; refusals as typed errors). Go fetches the module's dependencies
//! into its own module cache, from the Go module proxy.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/command.rs"]
mod command;
use command::{root, run};

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

fn module() -> PathBuf {
    root().join("clients/go")
}

/// `go` run in the module's directory.
fn go(args: &[&str]) -> Command {
    let mut cmd = Command::new("go");
    cmd.args(args).current_dir(module());
    cmd
}

#[test]
fn the_go_module_is_formatted_vetted_and_generated_from_proto() {
    let unformatted = Command::new("gofmt")
        .args(["-l", "."])
        .current_dir(module())
        .output()
        .expect("run gofmt");
    assert!(
        unformatted.stdout.is_empty(),
        "gofmt -l lists files: run gofmt -w clients/go\n{}",
        String::from_utf8_lossy(&unformatted.stdout)
    );
    run(&mut go(&["vet", "./..."]), "go vet ./... in clients/go");

    // The plugins at the versions generate.sh names, built into target/go-bin.
    let bin = root().join("target/go-bin");
    for plugin in [
        "google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12",
        "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2",
    ] {
        run(
            go(&["install", plugin]).env("GOBIN", &bin),
            &format!("go install {plugin}"),
        );
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(
        Command::new(module().join("generate.sh"))
            .arg("--check")
            .env("PATH", path),
        "the committed Go stubs match proto/ (clients/go/generate.sh --check)",
    );
}

#[test]
fn the_go_module_passes_its_tests_against_real_beacons() {
    run(
        go(&["test", "-count=1", "-timeout", "600s", "./..."]).env("BEACON_BIN", Path::new(BEACON)),
        "go test ./... in clients/go",
    );
}

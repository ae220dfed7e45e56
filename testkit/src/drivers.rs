//! The client libraries' conformance drivers (docs/clients.md), as the conformance suite and
//! the bench's client-libs part start them: the same programs, built the same way.

use std::path::Path;
use std::process::Command;

/// The Maven command that compiles the Java library and its driver (`clients/java` at
/// `project`) and writes the driver's dependency classpath to `target/classpath.txt`.
pub fn java_build(project: &Path) -> Command {
    let mut cmd = Command::new("mvn");
    cmd.args([
        "-q",
        "-B",
        "-DskipTests",
        "test-compile",
        "dependency:build-classpath",
        "-Dmdep.outputFile=target/classpath.txt",
    ])
    .current_dir(project);
    cmd
}

/// The command that runs the Java driver once [`java_build`] has run.
pub fn java_driver(project: &Path) -> std::io::Result<Command> {
    let deps = std::fs::read_to_string(project.join("target/classpath.txt"))?;
    let classpath = format!(
        "{}:{}:{}",
        project.join("target/classes").display(),
        project.join("target/test-classes").display(),
        deps.trim()
    );
    let mut cmd = Command::new("java");
    cmd.args(["-cp", &classpath, "dev.beacon.client.ConformanceDriver"]);
    Ok(cmd)
}

/// The command that builds the Go driver (`clients/go` at `module`) into `out`.
pub fn go_build(module: &Path, out: &Path) -> Command {
    let mut cmd = Command::new("go");
    cmd.args(["build", "-o"])
        .arg(out)
        .arg("./cmd/conformance-driver")
        .current_dir(module);
    cmd
}

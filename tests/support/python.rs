//! A Python interpreter with the client package (`clients/python`) and its test
//! dependencies: a virtual environment in `target/python-venv`, made on first use from the
//! package index (`pip install clients/python[test]`) and made again when `pyproject.toml`
//! changes; tests that want it at once wait for each other (a lock file). `BEACON_PYTHON`
//! names another interpreter to use instead.

use std::path::PathBuf;
use std::process::Command;

#[path = "command.rs"]
mod command;
// What a test that includes this file uses of the shared part.
#[allow(unused_imports)]
pub use command::{built_java, locked, root, run};

/// The interpreter with the package and its test dependencies installed.
pub fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("BEACON_PYTHON") {
        return python.into();
    }
    let target = root().join("target");
    std::fs::create_dir_all(&target).expect("make target/");
    let lock = std::fs::File::create(target.join("python-venv.lock")).expect("the venv lock");
    lock.lock().expect("lock the venv");
    let venv = target.join("python-venv");
    let python = venv.join("bin").join("python");
    let project = root().join("clients/python/pyproject.toml");
    let stamp = venv.join("installed-from");
    let wanted = std::fs::read_to_string(&project).expect("read clients/python/pyproject.toml");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return python;
    }
    let _ = std::fs::remove_dir_all(&venv);
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "making a Python virtual environment (python3 -m venv; on Debian: apt-get install python3-venv)",
    );
    run(
        Command::new(&python).args(["-m", "pip", "install", "-q", "--upgrade", "pip"]),
        "upgrading pip",
    );
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "-q", "-e"])
            .arg(format!("{}[test]", root().join("clients/python").display())),
        "installing clients/python with its test dependencies from the package index",
    );
    std::fs::write(&stamp, wanted).expect("write the venv stamp");
    python
}

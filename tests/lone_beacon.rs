//! The README's lone beacon grows: started with no configuration (the embedded default), it
//! runs in quorum mode and takes `beacon --join` at once, with no restart. A lone beacon
//! written in classic mode switches to quorum on its own when restarted so, keeping its
//! state; one still in classic mode refuses a join with a message that says how to switch.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use beacon_testkit::*;

mod support;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

/// A beacon on `me` from the embedded default, with `extra` flags.
fn start(dir: &Path, me: SocketAddr, extra: &[&str]) -> Beacon {
    let mut args = vec![
        "--listen".to_string(),
        me.to_string(),
        "--data-dir".into(),
        dir.join("{node}").display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    Beacon::start(Path::new(BEACON), me, dir, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_lone_beacon_grows_by_join_without_a_restart() {
    let nebcli_bin = nebcli(Path::new(BEACON));
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(3);
    let [a, b, c] = [ports[0], ports[1], ports[2]].map(addr);
    let first = start(dir.path(), a, &[]);
    wait_listening(a);
    let s = status(a).await.expect("status");
    assert_eq!(s.mode, "quorum", "a lone beacon's default mode");
    support::nebcli_register(&nebcli_bin, a, "LOGIC", "10.0.0.5:8080");
    let seed = a.to_string();
    let second = start(dir.path(), b, &["--join", &seed]);
    let mut third = start(dir.path(), c, &["--join", &seed]);
    let logs = || [&first, &second, &third].map(|b| b.log()).join("\n---\n");
    settled(&[a, b, c], &[a, b, c], &logs).await;
    assert!(
        support::lists_service(c, "10.0.0.5:8080").await,
        "the registration made alone is not on the joined beacon"
    );
    // Each joiner recorded the log index of the change that added it: no older membership
    // (one a removed beacon still tells of) replaces the one it joined with, after a restart
    // too. The first beacon's membership is a new cluster's: none recorded.
    let mut recorded = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let identity = entry.unwrap().path().join("identity.json");
        if let Ok(text) = std::fs::read_to_string(&identity) {
            let json: serde_json::Value = serde_json::from_str(&text).unwrap();
            recorded.push(json["members_index"].as_u64());
        }
    }
    recorded.sort();
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    assert_eq!(recorded[0], None, "{recorded:?}");
    assert!(
        recorded[1].is_some_and(|i| i > 0) && recorded[1] != recorded[2],
        "two joiners, each added by its own change: {recorded:?}"
    );

    // The third loses its data directory and runs `--join` again: the cluster answers that
    // it is a member already, and it records the index of the membership it starts with.
    let third_dir = dir.path().join(format!("127.0.0.1_{}", c.port()));
    let added: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(third_dir.join("identity.json")).unwrap())
            .unwrap();
    third.signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
    std::fs::remove_dir_all(&third_dir).unwrap();
    let third = start(dir.path(), c, &["--join", &seed]);
    let logs = || [&first, &second, &third].map(|b| b.log()).join("\n---\n");
    settled(&[a, b, c], &[a, b, c], &logs).await;
    assert!(third.log().contains("is a member already"), "{}", logs());
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(third_dir.join("identity.json")).unwrap())
            .unwrap();
    let (added, again) = (
        added["members_index"].as_u64(),
        again["members_index"].as_u64(),
    );
    assert!(
        again.is_some_and(|i| Some(i) >= added),
        "rejoined with members_index {again:?}, added at {added:?}\n{}",
        logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_classic_beacon_switches_to_quorum_on_restart_and_says_how_when_asked_to_grow() {
    let nebcli_bin = nebcli(Path::new(BEACON));
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(2);
    let [a, b] = [ports[0], ports[1]].map(addr);
    let mut lone = start(dir.path(), a, &["--mode", "classic"]);
    wait_listening(a);
    support::nebcli_register(&nebcli_bin, a, "LOGIC", "10.0.0.5:8080");

    // Asked to grow in classic mode: refused, saying how to switch.
    let seed = a.to_string();
    let mut refused = start(dir.path(), b, &["--join", &seed]);
    let exited = eventually(Duration::from_secs(20), || {
        let running = refused.is_running();
        async move { (!running).then_some(()) }
    })
    .await;
    let said = refused.log();
    assert!(
        exited.is_some(),
        "a join to a classic beacon went on:\n{said}"
    );
    assert!(
        said.contains("classic mode") && said.contains("--mode quorum"),
        "{said}"
    );
    std::fs::remove_dir_all(dir.path().join(format!("127.0.0.1_{}", b.port()))).ok();

    // Restarted without --mode, it is in quorum mode (the lone default), with its state.
    lone.signal_and_wait(libc::SIGTERM, Duration::from_secs(10));
    let before = lone.log().len();
    let mut lone = start(dir.path(), a, &[]);
    wait_listening(a);
    // The notice may be written a moment after the listener opens.
    let noticed = eventually(Duration::from_secs(10), || {
        let said = lone.log()[before..].to_string();
        async move {
            said.contains("a lone beacon switches mode safely")
                .then_some(())
        }
    })
    .await;
    let said = lone.log()[before..].to_string();
    assert!(noticed.is_some(), "no notice of the switch:\n{said}");
    let s = status(a).await.expect("status");
    assert_eq!(s.mode, "quorum");
    let second = start(dir.path(), b, &["--join", &seed]);
    let logs = || [&lone, &second].map(|b| b.log()).join("\n---\n");
    settled(&[a, b], &[a, b], &logs).await;
    assert!(
        support::lists_service(b, "10.0.0.5:8080").await,
        "the registration made in classic mode is gone"
    );
    assert!(lone.is_running());
}

/// Waits until `up` follow one leader whose voters are `voters`, with no learner.
async fn settled(up: &[SocketAddr], voters: &[SocketAddr], logs: &dyn Fn() -> String) {
    assert!(
        voters_settle(up, voters).await,
        "the voters never became {voters:?}, followed by {up:?}\n{}",
        logs()
    );
}

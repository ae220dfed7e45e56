//! Named locks and elections on real processes: one holder at a time, fencing tokens that
//! rise with each holder, the next contender in line when a holder lets go or dies, and
//! `nebcli lock NAME -- CMD` / `nebcli elect NAME` from the shell.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use beacon::client::{ConnectOptions, Lock, LockOptions};
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

fn options(i: u8) -> LockOptions {
    LockOptions {
        connect: ConnectOptions {
            timeout: Duration::from_secs(2),
            ..ConnectOptions::default()
        },
        ..LockOptions::new(SocketAddr::from(([10, 7, 0, i], 9000)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_holder_at_a_time_with_rising_tokens_and_the_next_in_line_takes_over() {
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &free_ports(3),
        100,
        "locks",
        r#"{"lease_ms": 1000}"#,
    );
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .expect("a leader");
    let beacons: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();

    let first = Lock::acquire(beacons.clone(), "jobs", options(1))
        .await
        .unwrap();
    let t1 = first.fencing_token();
    // A second contender waits while the first holds it.
    let second = tokio::spawn({
        let beacons = beacons.clone();
        async move { Lock::acquire(beacons, "jobs", options(2)).await }
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!second.is_finished(), "two holders at once");
    // Released: the second gets it at once, under a higher token.
    let released = Instant::now();
    first.release().await.unwrap();
    let second = second.await.unwrap().unwrap();
    println!("handed over {:?} after the release", released.elapsed());
    let t2 = second.fencing_token();
    assert!(t2 > t1, "{t2:?} above {t1:?}");

    // A third waits; the second dies (its lease runs out): the third takes over.
    let third = tokio::spawn({
        let beacons = beacons.clone();
        async move { Lock::acquire(beacons, "jobs", options(3)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let died = Instant::now();
    drop(second);
    let third = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("the next in line gets it within a lease or so")
        .unwrap()
        .unwrap();
    println!("taken over {:?} after the holder died", died.elapsed());
    assert!(third.fencing_token() > t2);

    // A slot group that is not a lock is not taken for one.
    let mut admin =
        beacon::client::Cluster::new(beacons.clone(), options(9).connect, Duration::from_secs(5));
    admin.create_slots("robots", "ROBOT", 2).await.unwrap();
    let e = match Lock::acquire(beacons.clone(), "robots", options(4)).await {
        Ok(_) => panic!("a two-slot group is no lock"),
        Err(e) => e,
    };
    assert!(e.to_string().contains("not lock `robots`"), "{e}");
    drop(third);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nebcli_lock_runs_a_command_under_the_lock_and_elect_holds_a_leadership() {
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let cluster = Cluster::start(BEACON.as_ref(), &free_ports(1), 100, "locks-cli");
    let s = cluster.beacons[0].addr.to_string();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("critical.log");

    // Two commands under one lock never overlap; each sees its fencing token.
    let script = format!(
        "echo \"start $BEACON_LOCK_TOKEN\" >> {0}; sleep 0.4; echo end >> {0}; exit 3",
        log.display()
    );
    let run = || {
        std::process::Command::new(&nebcli)
            .args(["-s", &s, "lock", "deploy", "--", "sh", "-c", &script])
            .output()
    };
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(run);
        let b = scope.spawn(run);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    for out in [&a, &b] {
        assert_eq!(
            out.status.code(),
            Some(3),
            "the command's exit status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0].starts_with("start ") && lines[1] == "end",
        "{lines:?}"
    );
    assert!(
        lines[2].starts_with("start ") && lines[3] == "end",
        "{lines:?}"
    );
    assert_ne!(lines[0], lines[2], "each holder its own token: {lines:?}");

    // elect holds a leadership until SIGTERM; --observe sees it come and go.
    let mut observer = Process::start(
        &nebcli,
        ["-s", &s, "elect", "primary", "--observe"]
            .map(String::from)
            .to_vec(),
        Vec::new(),
        dir.path().join("observe.log"),
    );
    let mut elected = Process::start(
        &nebcli,
        ["-s", &s, "elect", "primary", "--proposal", "db-1"]
            .map(String::from)
            .to_vec(),
        Vec::new(),
        dir.path().join("elect.log"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !elected.log().contains("elected: primary") {
        assert!(Instant::now() < deadline, "{}", elected.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !observer.log().contains("leader of primary: node ") {
        assert!(Instant::now() < deadline, "{}", observer.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = elected
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(10))
        .expect("elect exits on SIGTERM");
    assert!(status.success(), "{}", elected.log());
    assert!(
        elected.log().contains("SIGTERM: resigned primary"),
        "{}",
        elected.log()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while observer.log().matches("leader of primary").count() < 3 {
        assert!(Instant::now() < deadline, "{}", observer.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = observer.log();
    assert!(seen.contains("leader of primary: none"), "{seen}");
    assert!(seen.contains("leader of primary: node "), "{seen}");
    observer.kill();
}

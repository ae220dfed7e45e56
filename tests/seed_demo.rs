//! The NebulaBeacon demo on real processes, in both modes, each mode's rule asserted once
//! the cluster has settled (not in the window before it does):
//!
//! * classic (the seed's own behaviour): kill the leader, kill a follower, restart both;
//!   leadership moves to the next beacon in sorted order and does not move back;
//! * quorum (the default for three beacons, `conf/cluster`): the survivor of two kills sees
//!   one beacon of three, less than a majority, so it steps down and refuses writes; a second
//!   beacon back makes a majority, and the first online in sorted order leads; the third
//!   back follows it (the online leader stays).

use std::time::Duration;

use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

const TICK_MS: u64 = 100;
/// Generous bound for anything the cluster must reach; a normal run needs a few ticks.
const LIMIT: Duration = Duration::from_secs(10);
/// Ticks a settled state must hold: far more than the 3 ticks a beacon takes to go offline.
const SETTLED_TICKS: u64 = 10;

/// The leader every beacon of `nodes` agrees on (`Some(None)`: they agree there is none),
/// once each shows exactly `nodes` of `all` online and that view has held unchanged for
/// [`SETTLED_TICKS`] (bounded by [`LIMIT`]): each mode's rule is judged on a settled cluster,
/// not in the few milliseconds before it settles.
async fn settled(all: &[std::net::SocketAddr], nodes: &[std::net::SocketAddr]) -> Option<String> {
    let view = || async {
        let mut leaders = Vec::new();
        for node in nodes {
            let s = status(*node).await?;
            let shows_as_expected = all
                .iter()
                .all(|b| row(&s, *b).is_online == nodes.contains(b));
            if !shows_as_expected {
                return None;
            }
            leaders.push(s.leader);
        }
        leaders.dedup();
        (leaders.len() == 1).then(|| leaders.pop().unwrap())
    };
    let deadline = std::time::Instant::now() + LIMIT;
    let (mut last, mut held) = (None, 0);
    loop {
        let now = view().await;
        if now.is_some() && now == last {
            held += 1;
            if held >= SETTLED_TICKS {
                return now.flatten();
            }
        } else {
            held = 0;
        }
        last = now;
        assert!(
            std::time::Instant::now() < deadline,
            "the cluster did not settle with {nodes:?} online: last view {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(TICK_MS)).await;
    }
}

#[tokio::test]
async fn classic_mode_the_seeds_demo_leadership_moves_on_and_never_back() {
    let ports = free_ports(3);
    let mut cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "demo",
        r#"{"mode": "classic"}"#,
    );
    let all: Vec<_> = ports.iter().map(|p| addr(*p)).collect();
    let (a, b, c) = (all[0], all[1], all[2]);

    // Three beacons: one leader, agreed by all; the first in sorted order.
    assert_eq!(
        settled(&all, &all).await,
        Some(a.to_string()),
        "{}",
        cluster.logs()
    );
    // Kill the leader: the next beacon in sorted order leads, agreed by the survivors.
    cluster.beacons[0].kill();
    assert_eq!(
        settled(&all, &[b, c]).await,
        Some(b.to_string()),
        "{}",
        cluster.logs()
    );
    // Kill a follower: in classic mode the leader stays, alone.
    cluster.beacons[2].kill();
    assert_eq!(
        settled(&all, &[b]).await,
        Some(b.to_string()),
        "{}",
        cluster.logs()
    );
    let s = status(b).await.unwrap();
    assert!(s.cannot_write.is_none(), "classic mode writes alone: {s:?}");
    // Restart both: all online everywhere, and leadership does not move back.
    cluster.beacons[0].restart();
    cluster.beacons[2].restart();
    assert_eq!(
        settled(&all, &all).await,
        Some(b.to_string()),
        "{}",
        cluster.logs()
    );
    // The restarted beacons resumed from their stored terms and followed the existing leader.
    let sb = status(b).await.unwrap();
    let sa = status(a).await.unwrap();
    assert_eq!(sa.term, sb.term, "follower announces the leader's term");
}

#[tokio::test]
async fn quorum_mode_a_beacon_alone_steps_down_and_a_majority_elects_again() {
    let ports = free_ports(3);
    let mut cluster = Cluster::start(BEACON.as_ref(), &ports, TICK_MS, "demo");
    let all: Vec<_> = ports.iter().map(|p| addr(*p)).collect();
    let (a, b, c) = (all[0], all[1], all[2]);
    assert_eq!(
        status(a).await.unwrap().mode,
        "quorum",
        "the default for three"
    );

    assert_eq!(
        settled(&all, &all).await,
        Some(a.to_string()),
        "{}",
        cluster.logs()
    );
    // Kill the leader: the next beacon in sorted order leads; two of three are a majority.
    cluster.beacons[0].kill();
    assert_eq!(
        settled(&all, &[b, c]).await,
        Some(b.to_string()),
        "{}",
        cluster.logs()
    );
    // Kill a follower: one of three is no majority; the survivor leads no more.
    cluster.beacons[2].kill();
    assert_eq!(settled(&all, &[b]).await, None, "{}", cluster.logs());
    let s = status(b).await.unwrap();
    let why = s.cannot_write.unwrap_or_default();
    assert!(
        why.contains("majority"),
        "writes refused, saying why: {why}"
    );
    // One back: a majority again; the first online in sorted order leads.
    cluster.beacons[2].restart();
    assert_eq!(
        settled(&all, &[b, c]).await,
        Some(b.to_string()),
        "{}",
        cluster.logs()
    );
    // The other back: it follows the online leader, which stays.
    cluster.beacons[0].restart();
    assert_eq!(
        settled(&all, &all).await,
        Some(b.to_string()),
        "{}",
        cluster.logs()
    );
    assert!(status(a).await.unwrap().cannot_write.is_none());
}

#[tokio::test]
async fn a_beacon_of_another_cluster_is_refused_and_logged() {
    let ports = free_ports(2);
    let dir = tempfile::tempdir().unwrap();
    let peers = format!("{},{}", addr(ports[0]), addr(ports[1]));
    let start = |port: u16, cluster: &str| {
        Beacon::start(
            BEACON.as_ref(),
            addr(port),
            dir.path(),
            [
                "--listen",
                &addr(port).to_string(),
                "--peers",
                &peers,
                "--tick-ms",
                "50",
                "--cluster",
                cluster,
                "--data-dir",
                &dir.path().join("{node}").display().to_string(),
            ]
            .map(String::from)
            .to_vec(),
        )
    };
    let x = start(ports[0], "blue");
    let y = start(ports[1], "green");
    wait_listening(x.addr);
    wait_listening(y.addr);
    // Give them many ticks to (wrongly) meet.
    tokio::time::sleep(Duration::from_millis(600)).await;
    for (me, other) in [(x.addr, y.addr), (y.addr, x.addr)] {
        let s = status(me).await.expect("still serving");
        assert!(!row(&s, other).is_online, "{me} accepted {other}: {s:?}");
        assert_eq!(s.leader, Some(me.to_string()), "each leads its own side");
    }
    let log = x.log();
    assert!(
        log.contains("wrong cluster: this beacon serves cluster `blue`, the peer is in `green`"),
        "{log}"
    );
    assert!(
        y.log()
            .contains("refused our handshake: wrong cluster: this beacon serves cluster `blue`"),
        "{}",
        y.log()
    );
}

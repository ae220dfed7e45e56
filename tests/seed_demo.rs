//! The NebulaBeacon demo on real processes: three beacons, kill the leader, kill a follower,
//! restart both. Leadership moves to the next beacon in sorted order and does not move back.

use std::time::Duration;

use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");

const TICK_MS: u64 = 100;
/// Generous bound for anything the cluster must reach; a normal run needs a few ticks.
const LIMIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn kill_leader_kill_follower_restart_both() {
    let ports = free_ports(3);
    let mut cluster = Cluster::start(BEACON.as_ref(), &ports, TICK_MS, "demo");
    let all: Vec<_> = ports.iter().map(|p| addr(*p)).collect();
    let (a, b, c) = (all[0], all[1], all[2]);

    // Three beacons: one leader, agreed by all; the first in sorted order.
    let leader = eventually(LIMIT, || agreed_leader(&all)).await;
    assert_eq!(leader, Some(a.to_string()), "{}", cluster.logs());
    for node in &all {
        let s = status(*node).await.unwrap();
        assert!(s.beacons.iter().all(|r| r.is_online), "{s:?}");
    }

    // Kill the leader: the next beacon in sorted order leads, agreed by the survivors.
    cluster.beacons[0].kill();
    let survivors = [b, c];
    let leader = eventually(LIMIT, || agreed_leader(&survivors)).await;
    assert_eq!(leader, Some(b.to_string()), "{}", cluster.logs());
    for node in [b, c] {
        let s = status(node).await.unwrap();
        let dead = row(&s, a);
        assert!(
            !dead.is_online && !dead.is_leader,
            "{node} still shows {a} up: {s:?}"
        );
    }

    // Kill a follower: the leader stays, the follower shows offline.
    cluster.beacons[2].kill();
    let view = eventually(LIMIT, || async {
        let s = status(b).await?;
        (!row(&s, c).is_online).then_some(s)
    })
    .await
    .expect("leader sees the killed follower offline");
    assert_eq!(view.leader, Some(b.to_string()));
    assert!(row(&view, b).is_leader && row(&view, b).is_online);
    assert!(!row(&view, a).is_online && !row(&view, c).is_online);

    // Restart both: all online everywhere, and leadership does not move back.
    cluster.beacons[0].restart();
    cluster.beacons[2].restart();
    let settled = eventually(LIMIT, || async {
        for node in &all {
            let s = status(*node).await?;
            if !s.beacons.iter().all(|r| r.is_online) {
                return None;
            }
        }
        agreed_leader(&all).await
    })
    .await;
    assert_eq!(settled, Some(b.to_string()), "{}", cluster.logs());
    // And it stays there for a while (10 ticks).
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(TICK_MS)).await;
        assert_eq!(
            agreed_leader(&all).await,
            Some(b.to_string()),
            "{}",
            cluster.logs()
        );
    }
    // The restarted beacons resumed from their stored terms and followed the existing leader.
    let sb = status(b).await.unwrap();
    let sa = status(a).await.unwrap();
    assert_eq!(sa.term, sb.term, "follower announces the leader's term");
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

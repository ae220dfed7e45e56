//! A beacon that hangs (SIGSTOP: its sockets stay open, the kernel still accepts on them,
//! nothing answers) costs a service nothing: the Rust client and nebcli leave it within a
//! fraction of the lease or of the command's time and go on through another beacon.
//!
//! Three beacons with a 2 s lease. A registration is made through a list whose first beacon
//! is stopped, renews through a stopped follower's absence, and keeps its lease while the
//! leader it reports to is stopped for three leases; a watch resumes at the next leader.
//! nebcli, given the stopped beacon first, registers and shows the cluster within its
//! `--timeout-ms`. A client made afresh for each call (nebcli, a probe that rebuilds its
//! client after a failure) dials the next beacon while the stopped one is silent, so it
//! never waits out its handshake limit, and what one client learned of the stopped beacon
//! the whole process knows.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use beacon::client::{
    Cluster as Leader, ConnectOptions, RegisterOptions, Registration, Watch, WatchEvent,
};
use beacon::machines::registry::RegistryCmd;
use beacon::net::{SUSPECT_FOR, is_suspect};
use beacon::pb;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;
const LEASE_MS: u64 = 2_000;

fn start() -> Cluster {
    let ports = free_ports(3);
    Cluster::start_with(
        Path::new(BEACON),
        &ports,
        TICK_MS,
        "hung",
        &format!(r#"{{"lease_ms": {LEASE_MS}, "id_reuse_delay_ms": 5000}}"#),
    )
}

fn addrs(c: &Cluster) -> Vec<SocketAddr> {
    c.beacons.iter().map(|b| b.addr).collect()
}

async fn leader_of(c: &Cluster, among: &[SocketAddr]) -> usize {
    let leader = eventually(Duration::from_secs(15), || agreed_leader(among))
        .await
        .unwrap_or_else(|| panic!("no agreed leader among {among:?}\n{}", c.logs()));
    addrs(c)
        .iter()
        .position(|a| a.to_string() == leader)
        .expect("a beacon of the cluster")
}

/// Holds for `span` that the registration's lease never lapses; panics with the cluster's
/// logs if it does.
async fn keeps_its_lease(reg: &Registration, span: Duration, c: &Cluster, what: &str) {
    let lost = tokio::time::timeout(span, reg.lost()).await;
    assert!(
        lost.is_err(),
        "{what}: the lease was lost: {}\n{}",
        lost.unwrap(),
        c.logs()
    );
    assert!(reg.is_live(), "{what}: the lease no longer holds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_beacon_costs_a_rust_service_neither_its_registration_nor_its_lease() {
    let c = start();
    let all = addrs(&c);
    let leader = leader_of(&c, &all).await;
    let follower = (leader + 1) % 3;

    // The first beacon of the service's list is stopped before it registers.
    c.beacons[follower].pause();
    let list = listed_first(&all, follower);
    let reg = Registration::register(
        list.clone(),
        RegisterOptions::new("LOGIC", "10.0.0.5:8080".parse().unwrap()),
    )
    .await
    .unwrap_or_else(|e| panic!("register past a stopped first beacon: {e}\n{}", c.logs()));
    let mut watch = Watch::start(
        list,
        vec!["LOGIC".into()],
        ConnectOptions::default(),
        Duration::from_secs(20),
    )
    .await
    .unwrap_or_else(|e| panic!("watch past a stopped first beacon: {e}"));
    keeps_its_lease(
        &reg,
        Duration::from_millis(2 * LEASE_MS),
        &c,
        "a follower stopped",
    )
    .await;
    c.beacons[follower].signal(libc::SIGCONT);

    // The leader it reports to stops for three leases: the others elect a new one, and the
    // keepalive leaves the stopped one within a fraction of the lease.
    let others: Vec<SocketAddr> = all.iter().copied().filter(|a| *a != all[leader]).collect();
    c.beacons[leader].pause();
    keeps_its_lease(
        &reg,
        Duration::from_millis(3 * LEASE_MS),
        &c,
        "the leader stopped",
    )
    .await;
    let new_leader = leader_of(&c, &others).await;
    assert_ne!(new_leader, leader);
    // The watch resumed at the new leader: a registration made there is heard.
    let second = Registration::register(
        others.iter().map(|a| a.to_string()).collect(),
        RegisterOptions::new("LOGIC", "10.0.0.6:8080".parse().unwrap()),
    )
    .await
    .expect("register at the new leader");
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match watch.next().await {
                Ok(WatchEvent::Added(n)) if n.addr == "10.0.0.6:8080" => return Ok(()),
                Ok(_) => continue,
                Err(e) => return Err(e),
            }
        }
    })
    .await;
    assert!(
        matches!(heard, Ok(Ok(()))),
        "the watch did not move on from the stopped leader: {heard:?}\n{}",
        c.logs()
    );
    c.beacons[leader].signal(libc::SIGCONT);
    keeps_its_lease(&reg, Duration::from_millis(LEASE_MS), &c, "all running").await;
    second.unregister().await.expect("unregister");
    reg.unregister().await.expect("unregister");
}

/// A client made afresh for each call, with a stopped beacon first in its list, answers
/// without waiting out the stopped beacon's handshake limit (3 s here, so that a client
/// that waited it out could not pass): it dials the next beacon after the attempt delay
/// and takes the first to answer. The attempt it outran goes on in the background, and once
/// it reaches its limit every client of the process dials the stopped beacon last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_made_afresh_goes_past_a_stopped_first_beacon_without_waiting_it_out() {
    let c = start();
    let all = addrs(&c);
    let leader = leader_of(&c, &all).await;
    let opts = ConnectOptions {
        handshake_timeout: Duration::from_secs(3),
        ..ConnectOptions::default()
    };
    for (round, stopped) in [(leader + 1) % 3, leader].into_iter().enumerate() {
        c.beacons[stopped].pause();
        let others: Vec<SocketAddr> = all.iter().copied().filter(|a| *a != all[stopped]).collect();
        leader_of(&c, &others).await;
        let list = listed_first(&all, stopped);
        let mut took = Vec::new();
        for n in 0..3u8 {
            let mut fresh = Leader::new(list.clone(), opts.clone(), Duration::from_secs(10));
            let request = pb::registry::RegisterRequest {
                node_type: "LOGIC".into(),
                addr: format!("10.0.4.{}:{}", 10 * round + usize::from(n), 80),
                ..Default::default()
            };
            let started = std::time::Instant::now();
            fresh
                .call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &request, "register")
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "a fresh client past stopped {}: {e}\n{}",
                        all[stopped],
                        c.logs()
                    )
                });
            took.push(started.elapsed());
        }
        println!(
            "stopped {} first: fresh clients answered in {took:?}",
            all[stopped]
        );
        for t in &took {
            assert!(
                *t < Duration::from_millis(1_500),
                "a fresh client took {t:?} past stopped {} (its handshake limit is 3 s): {took:?}\n{}",
                all[stopped],
                c.logs()
            );
        }
        let learned = eventually(Duration::from_secs(6), || async {
            is_suspect(&all[stopped].to_string()).then_some(())
        })
        .await;
        assert!(
            learned.is_some(),
            "the process never learned that {} does not answer",
            all[stopped]
        );
        c.beacons[stopped].signal(libc::SIGCONT);
        leader_of(&c, &all).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nebcli_given_a_stopped_beacon_first_goes_on_to_the_next_within_its_time() {
    let c = start();
    let nebcli_bin = nebcli(Path::new(BEACON));
    let all = addrs(&c);
    let leader = leader_of(&c, &all).await;
    for stopped in [(leader + 1) % 3, leader] {
        c.beacons[stopped].pause();
        // The others lead on (a stopped leader is replaced) before the command is timed.
        let others: Vec<SocketAddr> = all.iter().copied().filter(|a| *a != all[stopped]).collect();
        leader_of(&c, &others).await;
        let servers = listed_first(&all, stopped).join(",");
        let addr = format!("10.0.1.{}:80", stopped + 1);
        // Its handshake limit is a second (a quarter of --timeout-ms 8000, at most 1 s):
        // a nebcli that waited it out at the stopped beacon takes longer than this allows.
        let started = std::time::Instant::now();
        let (ok, out) = run_nebcli(
            &nebcli_bin,
            &[
                "-s",
                &servers,
                "--timeout-ms",
                "8000",
                "register",
                "--type",
                "LOGIC",
                "--addr",
                &format!("10.0.2.{}:80", stopped + 1),
            ],
        );
        let took = started.elapsed();
        assert!(
            ok,
            "register past stopped {}: {out}\n{}",
            all[stopped],
            c.logs()
        );
        assert!(
            took < Duration::from_millis(900),
            "nebcli took {took:?} past stopped {}, more than the handshake limit it should not wait out",
            all[stopped]
        );
        let (ok, out) = run_nebcli(
            &nebcli_bin,
            &[
                "-s",
                &servers,
                "--timeout-ms",
                "3000",
                "register",
                "--type",
                "LOGIC",
                "--addr",
                &addr,
            ],
        );
        assert!(
            ok,
            "register past stopped {}: {out}\n{}",
            all[stopped],
            c.logs()
        );
        let (ok, out) = run_nebcli(
            &nebcli_bin,
            &["-s", &servers, "--timeout-ms", "3000", "show", "beacon"],
        );
        assert!(ok && out.contains("is_leader"), "show beacon: {out}");
        c.beacons[stopped].signal(libc::SIGCONT);
        leader_of(&c, &all).await;
    }
}

/// A leader slow for a moment (stopped for less than its peers take to count it offline) is
/// left after one attempt, and followed again once the others still name it after a
/// failover's time: a write waits out the moment, not the whole suspicion
/// ([`SUSPECT_FOR`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_slow_for_a_moment_is_followed_again_once_the_others_still_name_it() {
    // Ticks of 500 ms: a stopped leader is offline to its peers only after 1.5 s.
    let ports = free_ports(3);
    let c = Cluster::start_with(Path::new(BEACON), &ports, 500, "slow", "{}");
    let all = addrs(&c);
    let leader = leader_of(&c, &all).await;
    let term = status(all[leader]).await.map(|s| s.term);
    let opts = ConnectOptions {
        timeout: Duration::from_millis(200),
        ..ConnectOptions::default()
    };
    let beacons = all.iter().map(|a| a.to_string()).collect();
    let mut client = Leader::new(beacons, opts, Duration::from_secs(20));
    let register = |n: u8| pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: format!("10.0.3.{n}:80"),
        ..Default::default()
    };
    client
        .call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &register(1), "register")
        .await
        .unwrap_or_else(|e| panic!("a write before the pause: {e}\n{}", c.logs()));

    let second = register(2);
    c.beacons[leader].pause();
    let stopped = std::time::Instant::now();
    let (written, ()) = tokio::join!(
        client.call::<_, pb::registry::RegisterReply>(RegistryCmd::Register, &second, "register"),
        async {
            tokio::time::sleep(Duration::from_millis(600)).await;
            c.beacons[leader].signal(libc::SIGCONT);
        }
    );
    let took = stopped.elapsed();
    written.unwrap_or_else(|e| panic!("the write during the pause: {e}\n{}", c.logs()));
    assert_eq!(
        status(all[leader]).await.map(|s| s.term),
        term,
        "the leader stayed: it was slow, not replaced\n{}",
        c.logs()
    );
    assert!(
        took < SUSPECT_FOR - Duration::from_secs(1),
        "the write waited {took:?} for a leader stopped 600 ms: it was shunned for the whole suspicion\n{}",
        c.logs()
    );
    println!("a leader stopped for 600 ms: the write went through after {took:?}");
}

/// A gRPC channel to `beacon`.
async fn grpc_to(beacon: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{beacon}"))
        .unwrap()
        .connect()
        .await
        .expect("gRPC to a beacon")
}

/// Registers `addr` over gRPC on `ch` within 10 s: the answer, and how long it took.
async fn grpc_register(
    ch: tonic::transport::Channel,
    addr: &str,
) -> (Result<pb::registry::RegisterReply, tonic::Status>, Duration) {
    use http::uri::PathAndQuery;
    use tonic::client::Grpc;
    use tonic_prost::ProstCodec;

    let mut grpc = Grpc::new(ch);
    grpc.ready().await.expect("ready");
    let mut request = tonic::Request::new(pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: addr.into(),
        ..Default::default()
    });
    request.set_timeout(Duration::from_secs(10));
    let codec = ProstCodec::<pb::registry::RegisterRequest, pb::registry::RegisterReply>::default();
    let path = PathAndQuery::from_static("/beacon.v1.registry.Registry/Register");
    let started = std::time::Instant::now();
    let answer = grpc
        .unary(request, path, codec)
        .await
        .map(|r| r.into_inner());
    (answer, started.elapsed())
}

/// Holds that a call relayed towards a stopped leader, answered after `took`, either went
/// through (the follower saw the leader go before the call came, and carried it to the next
/// one) or was refused with LEADER_CHANGED, "retry": not left to a deadline or a limit.
fn told_to_retry(
    answer: Result<pb::registry::RegisterReply, tonic::Status>,
    took: Duration,
    c: &Cluster,
) {
    let Err(status) = answer else {
        return;
    };
    let code = status
        .metadata()
        .get("beacon-code")
        .and_then(|v| v.to_str().ok()?.parse::<u32>().ok());
    assert_eq!(
        code,
        Some(beacon::wire::ErrorCode::LeaderChanged as u32),
        "refused after {took:?}, not told that the leadership moved: {status:?}\n{}",
        c.logs()
    );
    assert!(status.message().contains("retry"), "{status:?}");
}

/// A call a follower carries to its leader (over gRPC, a client may call any beacon) while
/// that leader hangs is refused with LEADER_CHANGED, "retry", once the follower sees the
/// leadership move: the hung leader keeps its connections open and answers nothing, so a
/// relayed call left on them would wait out its client's deadline (10 s here) while another
/// beacon leads. A keep-alive's report waits the same way, and its lease is short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_relayed_to_a_leader_that_hangs_is_told_to_retry_once_leadership_moves() {
    let c = start();
    let all = addrs(&c);
    let leader = leader_of(&c, &all).await;
    let ch = grpc_to(all[(leader + 1) % 3]).await;
    // The follower's relay connection to the leader is open.
    grpc_register(ch.clone(), "10.0.9.1:80")
        .await
        .0
        .unwrap_or_else(|e| panic!("register through the follower: {e:?}\n{}", c.logs()));

    c.beacons[leader].pause();
    let (answer, took) = grpc_register(ch, "10.0.9.2:80").await;
    c.beacons[leader].signal(libc::SIGCONT);
    told_to_retry(answer, took, &c);
    println!("the relayed call was answered after {took:?}");
}

/// A follower that has not relayed yet dials its leader for the first call it relays. A
/// leader stopped just before accepts that connection (the kernel does) and never answers
/// its handshake: the call is refused with LEADER_CHANGED once another beacon leads, not
/// left to the dial's limit (2 s), and a call after it is relayed to the new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_being_opened_to_a_leader_that_hung_gives_way_to_the_next_leader() {
    let c = start();
    let all = addrs(&c);
    let leader = leader_of(&c, &all).await;
    let others: Vec<SocketAddr> = all.iter().copied().filter(|a| *a != all[leader]).collect();
    let ch = grpc_to(all[(leader + 1) % 3]).await;

    c.beacons[leader].pause();
    // The follower still takes the stopped beacon for its leader: it dials it.
    let first = tokio::spawn(grpc_register(ch.clone(), "10.0.8.1:80"));
    let old = all[leader].to_string();
    eventually(Duration::from_secs(15), || next_leader(&others, &old))
        .await
        .unwrap_or_else(|| panic!("no next leader among {others:?}\n{}", c.logs()));
    // Retried as a client does while the new leader takes over (a moment).
    let mut second = grpc_register(ch.clone(), "10.0.8.2:80").await;
    for _ in 0..50 {
        match &second.0 {
            Err(s) if s.code() == tonic::Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                second = grpc_register(ch.clone(), "10.0.8.2:80").await;
            }
            _ => break,
        }
    }
    let (second, took) = second;
    second.unwrap_or_else(|e| panic!("relayed to the new leader ({took:?}): {e:?}\n{}", c.logs()));
    let (first, took) = first.await.unwrap();
    c.beacons[leader].signal(libc::SIGCONT);
    told_to_retry(first, took, &c);
    println!("the call being relayed to the stopped leader was answered after {took:?}");
}

/// A leader of three voters confirms its own linearizable reads on a follower's word that
/// it still follows it (`via="vouch"`), asked of both followers: with one follower stopped
/// the other's word is enough and the reads go on; with both stopped no follower vouches,
/// and the reads are refused rather than answered by a leader that nobody confirms. Once
/// the followers run again, the reads do too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaders_reads_go_on_on_one_followers_word_and_stop_with_none() {
    let (c, admin) = cluster_with_admin(
        Path::new(BEACON),
        3,
        TICK_MS,
        "vouch",
        serde_json::json!({}),
    );
    let all = addrs(&c);
    let leader = leader_of(&c, &all).await;
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let vouched = || {
        let (_, metrics) = http_get(admin[leader], "/metrics").expect("the leader's metrics");
        metric(
            &metrics,
            r#"beacon_read_index_duration_seconds_count{via="vouch"}"#,
        )
        .expect("the vouched reads are counted")
    };
    let opts = ConnectOptions {
        timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    };
    let mut reader = beacon::client::Client::connect(&all[leader].to_string(), &opts)
        .await
        .expect("connect to the leader");
    let before = vouched();
    reader.sequences("").await.expect("a read at the leader");
    assert_eq!(vouched(), before + 1.0, "confirmed on a follower's word");

    // One follower stops: the other's word is enough, read after read.
    c.beacons[followers[0]].pause();
    for n in 0..5 {
        reader
            .sequences("")
            .await
            .unwrap_or_else(|e| panic!("read {n} with one follower stopped: {e}\n{}", c.logs()));
    }
    assert_eq!(
        vouched(),
        before + 6.0,
        "each on the running follower's word"
    );

    // Both stop: nobody vouches (nor acknowledges a round), so the read is refused.
    c.beacons[followers[1]].pause();
    let refused = reader.sequences("").await;
    assert!(
        refused.is_err(),
        "a read answered with no follower running: {refused:?}"
    );
    assert_eq!(
        vouched(),
        before + 6.0,
        "no word counted without a follower"
    );

    // Both run again: a leader is elected (perhaps another) and reads are answered.
    for f in &followers {
        c.beacons[*f].signal(libc::SIGCONT);
    }
    let leader = leader_of(&c, &all).await;
    let mut reader = beacon::client::Client::connect(&all[leader].to_string(), &opts)
        .await
        .expect("connect to the leader");
    let mut answered = Err(None);
    for _ in 0..50 {
        match reader.sequences("").await {
            Ok(_) => {
                answered = Ok(());
                break;
            }
            Err(e) => answered = Err(Some(e)),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        answered.is_ok(),
        "no read once the followers ran again: {answered:?}\n{}",
        c.logs()
    );
}

//! A learner on real processes: three voters and a learner (key `learners`). The learner
//! keeps a full replica and answers reads, sends native writers on to the leader and relays
//! gRPC calls there, follows each new leader, and never leads nor counts for a majority.

mod support;
use std::net::SocketAddr;
use std::time::Duration;
use support::nodes;

use beacon::client::{Client, Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon::wire::ErrorCode;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(3),
        ..ConnectOptions::default()
    }
}

fn register_req(addr: &str) -> pb::registry::RegisterRequest {
    pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: addr.into(),
        ..Default::default()
    }
}

/// Registers service `addr` by asking the beacon at `via` first, as a client that knows
/// only it does: a follower (the learner too) names the leader, and the client goes there.
async fn register(via: SocketAddr, addr: &str) -> Result<u32, beacon::client::ClientError> {
    let mut cluster = Leader::new(vec![via.to_string()], opts(), Duration::from_secs(5));
    let reply: pb::registry::RegisterReply = cluster
        .call(
            RegistryCmd::Register,
            &register_req(addr),
            "the registration",
        )
        .await?;
    Ok(reply.node.map_or(0, |n| n.node_id))
}

/// The learner's own answer to a registration: it never takes one itself.
async fn refused_at(at: SocketAddr) -> Option<beacon::client::ClientError> {
    let mut client = Client::connect(&at.to_string(), &opts()).await.ok()?;
    client.register(&register_req("10.7.2.1:7000")).await.err()
}

/// The addresses `at` has registered, read linearizably.
async fn registered(at: SocketAddr) -> Option<Vec<String>> {
    let listed = nodes(at).await?.nodes.into_iter();
    let mut addrs: Vec<String> = listed.filter_map(|e| e.node.map(|n| n.addr)).collect();
    addrs.sort();
    Some(addrs)
}

/// The learner's own row says so, and it does not lead.
async fn is_following_learner(learner: SocketAddr) -> Option<String> {
    let s = status(learner).await?;
    let own = row(&s, learner);
    (own.role == "learner" && !own.is_leader).then_some(())?;
    s.leader
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_keeps_a_replica_follows_every_leader_and_makes_no_majority() {
    // Built before the cluster starts, so that the build takes none of its time.
    let nebcli = nebcli(BEACON.as_ref());
    let ports = free_ports(4);
    let (voter_ports, learner_port) = (&ports[..3], ports[3]);
    let voters: Vec<SocketAddr> = voter_ports.iter().map(|p| addr(*p)).collect();
    let learner = addr(learner_port);
    let configs = vec!["{}".to_owned(); 4];
    let mut c = Cluster::start_with_learners(
        BEACON.as_ref(),
        voter_ports,
        &[learner_port],
        TICK_MS,
        "learn",
        &configs,
    );

    let leader = eventually(Duration::from_secs(15), || agreed_leader(&voters))
        .await
        .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    let followed = eventually(Duration::from_secs(10), || async {
        is_following_learner(learner).await.filter(|l| *l == leader)
    })
    .await;
    assert_eq!(followed, Some(leader.clone()), "{}", c.logs());
    // The voters see it too, as a learner.
    let s = status(voters[0]).await.expect("a voter answers");
    assert_eq!(row(&s, learner).role, "learner");
    assert_eq!(row(&s, voters[1]).role, "voter");

    // Writes through the learner reach the leader; the learner reads them back at once.
    let mut expected = Vec::new();
    for i in 0..20 {
        let service = format!("10.7.0.{}:7000", i + 1);
        let id = register(learner, &service).await;
        assert!(id.is_ok(), "registration {i} through the learner: {id:?}");
        expected.push(service);
    }
    // A gRPC call at the learner is relayed to the leader, as at a follower.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{learner}"))
        .unwrap()
        .connect()
        .await
        .expect("a gRPC connection to the learner");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("the channel is ready");
    let codec =
        tonic_prost::ProstCodec::<pb::registry::RegisterRequest, pb::registry::RegisterReply>::default();
    let by_grpc = "10.7.0.99:7000";
    let reply = grpc
        .unary(
            tonic::Request::new(register_req(by_grpc)),
            http::uri::PathAndQuery::from_static("/beacon.v1.registry.Registry/Register"),
            codec,
        )
        .await
        .expect("a registration over gRPC at the learner");
    assert_eq!(
        reply.into_inner().node.map(|n| n.addr),
        Some(by_grpc.into())
    );
    expected.push(by_grpc.into());
    expected.sort();
    assert_eq!(registered(learner).await, Some(expected.clone()));

    // The leadership is not handed to a learner.
    let out = std::process::Command::new(&nebcli)
        .args(["-s", &leader, "leader", "transfer", &learner.to_string()])
        .output()
        .expect("run nebcli");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is a learner"),
        "{err}"
    );

    // The leader is killed: a voter takes over, never the learner, which follows it.
    let leader_at = voters.iter().position(|v| v.to_string() == leader).unwrap();
    c.beacons[leader_at].kill();
    let others: Vec<SocketAddr> = voters
        .iter()
        .copied()
        .filter(|v| v.to_string() != leader)
        .collect();
    let next = eventually(Duration::from_secs(15), || next_leader(&others, &leader))
        .await
        .unwrap_or_else(|| panic!("no leader after the kill\n{}", c.logs()));
    assert_ne!(next, learner.to_string());
    let followed = eventually(Duration::from_secs(10), || async {
        is_following_learner(learner).await.filter(|l| *l == next)
    })
    .await;
    assert_eq!(followed, Some(next.clone()), "{}", c.logs());
    let after = "10.7.1.1:7000";
    assert!(register(learner, after).await.is_ok());
    expected.push(after.into());
    expected.sort();
    assert_eq!(registered(learner).await, Some(expected.clone()));

    // One voter left, and the learner: no majority. Writes are refused, and the learner
    // does not lead, however long it waits.
    let second = voters.iter().position(|v| v.to_string() == next).unwrap();
    c.beacons[second].kill();
    let refused = eventually(Duration::from_secs(10), || async {
        refused_at(learner)
            .await
            .filter(|e| e.is(ErrorCode::NoQuorum))
    })
    .await;
    assert!(
        refused.is_some(),
        "writes go on without a majority\n{}",
        c.logs()
    );
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(TICK_MS)).await;
        let s = status(learner).await.expect("the learner answers");
        assert!(
            !row(&s, learner).is_leader,
            "the learner leads\n{}",
            c.logs()
        );
        assert_ne!(s.leader.as_deref(), Some(learner.to_string().as_str()));
    }

    // The voters come back: the cluster writes again, and the learner has everything.
    c.beacons[leader_at].restart();
    c.beacons[second].restart();
    let back = eventually(Duration::from_secs(20), || agreed_leader(&voters)).await;
    assert!(back.is_some(), "no leader after the restarts\n{}", c.logs());
    let last = "10.7.3.1:7000";
    let written = eventually(Duration::from_secs(10), || async {
        register(learner, last).await.ok()
    })
    .await;
    assert!(written.is_some(), "{}", c.logs());
    expected.push(last.into());
    expected.sort();
    assert_eq!(registered(learner).await, Some(expected));
}

#[test]
fn a_learner_must_not_also_be_a_voter_nor_follow_no_voters() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BEACON)
            .args(args)
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--check-config")
            .output()
            .expect("run beacon");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = run(&[
        "--listen",
        "127.0.0.1:7001",
        "--peers",
        "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003",
        "--learners",
        "127.0.0.1:7002",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--learners") && err.contains("also a voter"),
        "{err}"
    );
    let (ok, _) = run(&[
        "--listen",
        "127.0.0.1:7004",
        "--peers",
        "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003",
        "--learners",
        "127.0.0.1:7004",
    ]);
    assert!(
        ok,
        "a learner listed among the learners, following three voters"
    );
}

//! Work assignment against real beacon processes: the seed's crawler story (resources split
//! by least load, moved when a worker dies, left alone when it returns, moved back only by
//! a rebalance that revokes first), idempotent adds and deletes, and bad input.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use beacon::client::{AssignmentEvent, Assignments, RegisterOptions, Registration};
use beacon::client::{Client, ClientError, Cluster as Leader, ConnectOptions};
use beacon::machines::assign::AssignErrorCode;
use beacon::pb::assign as pb;
use beacon::wire::ErrorCode;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

async fn worker(beacons: &[String], i: u8) -> Registration {
    let options = RegisterOptions {
        connect: opts(),
        ..RegisterOptions::new("CRAWLER", SocketAddr::from(([10, 8, 0, i], 9000)))
    };
    Registration::register(beacons.to_vec(), options)
        .await
        .unwrap_or_else(|e| panic!("worker {i}: {e}"))
}

/// Resources by holder node ID (0: nobody).
async fn by_holder(c: &mut Client) -> BTreeMap<u32, Vec<String>> {
    let mut held: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for r in c.resources("").await.unwrap().resources {
        let id = r.holder.map_or(0, |h| h.node_id);
        held.entry(id).or_default().push(r.name);
    }
    held
}

/// Waits (bounded) until `f` holds for the resources as a beacon sees them.
async fn until(c: &mut Client, what: &str, f: impl Fn(&[pb::ResourceInfo]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resources = c.resources("").await.unwrap().resources;
        if f(&resources) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {resources:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_story_split_move_on_death_stay_on_return_rebalance_on_request() {
    let ports = free_ports(3);
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "assign-story",
        r#"{"lease_ms": 1000}"#,
    );
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let leader_addr = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .expect("a leader");
    let mut c = Client::connect(&leader_addr, &opts()).await.unwrap();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));

    let one = worker(&beacons, 1).await;
    let two = worker(&beacons, 2).await;
    for i in 1..=5 {
        let r = leader
            .add_resource(&format!("site-{i}"), "CRAWLER", 1, BTreeMap::new())
            .await
            .unwrap();
        assert!(r.holder.is_some(), "placed at once");
    }
    let held = by_holder(&mut c).await;
    let counts: Vec<usize> = held.values().map(Vec::len).collect();
    assert_eq!(counts, vec![3, 2], "split 3/2 by least load: {held:?}");
    // Ties go to the lowest node ID: the first worker holds three.
    assert_eq!(held[&one.node_id()].len(), 3, "{held:?}");
    let tokens: BTreeMap<String, (u64, u64)> = c
        .resources("")
        .await
        .unwrap()
        .resources
        .into_iter()
        .map(|r| {
            let h = r.holder.unwrap();
            (r.name, (h.term, h.index))
        })
        .collect();

    // Worker one dies (its keepalive stops): once its lease ends, all five are worker two's,
    // each with a token above its previous holder's.
    let died = Instant::now();
    drop(one);
    let second = two.node_id();
    until(&mut c, "all five move to the survivor", |rs| {
        rs.iter()
            .all(|r| r.holder.as_ref().is_some_and(|h| h.node_id == second))
    })
    .await;
    println!(
        "moved {:?} after the worker stopped reporting",
        died.elapsed()
    );
    for r in c.resources("").await.unwrap().resources {
        let h = r.holder.unwrap();
        assert!(
            (h.term, h.index) >= tokens[&r.name],
            "{}: token fell",
            r.name
        );
    }

    // It comes back (a new registration): nothing moves on its own.
    let back = worker(&beacons, 1).await;
    tokio::time::sleep(Duration::from_millis(5 * TICK_MS)).await;
    assert_eq!(by_holder(&mut c).await.get(&second).map(Vec::len), Some(5));

    // A rebalance revokes two; each moves once its holder lets it go.
    let moves = leader.rebalance("CRAWLER").await.unwrap();
    assert_eq!(moves.len(), 2, "{moves:?}");
    for m in &moves {
        assert_eq!((m.from, m.to), (second, back.node_id()));
    }
    let resources = c.resources("").await.unwrap().resources;
    for m in &moves {
        let r = resources.iter().find(|r| r.name == m.name).unwrap();
        assert!(r.revoking, "{} is being revoked", r.name);
        assert_eq!(r.holder.as_ref().unwrap().node_id, second, "still owned");
        let h = r.holder.as_ref().unwrap();
        let moved = leader
            .release_resource(&r.name, h.term, h.index)
            .await
            .unwrap();
        assert_eq!(moved.holder.unwrap().node_id, back.node_id());
        // A second release with the old token is refused.
        let e = leader
            .release_resource(&r.name, h.term, h.index)
            .await
            .unwrap_err();
        assert!(e.is(AssignErrorCode::NotResourceHolder), "{e}");
    }
    let counts: Vec<usize> = by_holder(&mut c).await.values().map(Vec::len).collect();
    assert_eq!(counts.iter().sum::<usize>(), 5);
    assert!(counts.iter().all(|n| *n == 2 || *n == 3), "{counts:?}");
    drop(two);
    drop(back);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_and_deletes_are_idempotent_and_bad_input_changes_nothing() {
    let ports = free_ports(1);
    let cluster = Cluster::start(BEACON.as_ref(), &ports, TICK_MS, "assign-bad");
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let mut c = Client::connect(&beacons[0], &opts()).await.unwrap();

    // No service of the type yet: the resource waits, unassigned.
    let labels = BTreeMap::from([("zone".to_string(), "b".to_string())]);
    let r = leader
        .add_resource("job", "GPU", 2, labels.clone())
        .await
        .unwrap();
    assert!(r.holder.is_none());
    let again = leader
        .add_resource("job", "GPU", 2, labels.clone())
        .await
        .unwrap();
    assert_eq!(again, r, "adding the same again returns it as it is");
    let before = c.resources("").await.unwrap().resources;

    let refused = |r: Result<(), ClientError>| {
        let e = r.expect_err("refused");
        (e.code().expect("a refusal"), e.to_string())
    };
    let (code, msg) = refused(
        leader
            .add_resource("job", "GPU", 3, labels.clone())
            .await
            .map(|_| ()),
    );
    assert_eq!(code, AssignErrorCode::ResourceConflict as u32);
    assert!(msg.contains("delete it first"), "{msg}");
    let (code, msg) = refused(
        leader
            .add_resource("bad name", "GPU", 1, BTreeMap::new())
            .await
            .map(|_| ()),
    );
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    assert!(msg.contains("resource name `bad name` is invalid"), "{msg}");
    let (code, msg) = refused(
        leader
            .add_resource("x", "", 1, BTreeMap::new())
            .await
            .map(|_| ()),
    );
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    assert!(msg.contains("node_type"), "{msg}");
    let (code, msg) = refused(
        leader
            .add_resource("x", "GPU", 2_000_000, BTreeMap::new())
            .await
            .map(|_| ()),
    );
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    assert!(msg.contains("assign.max_weight"), "{msg}");
    let bad_label = BTreeMap::from([("a=b".to_string(), "c".to_string())]);
    let (code, _) = refused(
        leader
            .add_resource("x", "GPU", 1, bad_label)
            .await
            .map(|_| ()),
    );
    assert_eq!(code, ErrorCode::InvalidRequest as u32);
    let (code, _) = refused(leader.release_resource("nope", 1, 1).await.map(|_| ()));
    assert_eq!(code, AssignErrorCode::UnknownResource as u32);
    assert_eq!(
        c.resources("").await.unwrap().resources,
        before,
        "nothing changed"
    );

    // A service with the labels registers: the waiting resource goes to it.
    let mut options = RegisterOptions::new("GPU", "10.8.1.1:9000".parse().unwrap());
    options.connect = opts();
    options.metadata = r#"{"zone": "b"}"#.into();
    let gpu = Registration::register(beacons.clone(), options)
        .await
        .unwrap();
    until(&mut c, "the waiting resource is placed", |rs| {
        rs.iter().all(|r| {
            r.holder
                .as_ref()
                .is_some_and(|h| h.node_id == gpu.node_id())
        })
    })
    .await;

    // Deleting twice: the first returns it, the second nothing, and neither fails.
    let gone = leader.delete_resource("job").await.unwrap();
    assert_eq!(gone.map(|r| r.name), Some("job".to_string()));
    assert_eq!(leader.delete_resource("job").await.unwrap(), None);
    assert!(c.resources("").await.unwrap().resources.is_empty());
}

/// The next event within a few seconds.
async fn event(a: &mut Assignments) -> AssignmentEvent {
    tokio::time::timeout(Duration::from_secs(5), a.next())
        .await
        .expect("an event within 5 s")
        .expect("the watch goes on")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_follows_its_own_assignments_and_loses_them_with_its_lease() {
    let ports = free_ports(1);
    let mut cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "assign-watch",
        r#"{"lease_ms": 1000}"#,
    );
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let a = worker(&beacons, 1).await;
    let mut mine = Assignments::start(&a).await.unwrap();
    assert_eq!(mine.held().count(), 0);
    for name in ["x", "y"] {
        leader
            .add_resource(name, "CRAWLER", 1, BTreeMap::new())
            .await
            .unwrap();
    }
    let mut added = Vec::new();
    for _ in 0..2 {
        match event(&mut mine).await {
            AssignmentEvent::Added(r) => added.push(r.name),
            other => panic!("{other:?}"),
        }
    }
    added.sort();
    assert_eq!(added, vec!["x", "y"]);

    // Another worker joins and a rebalance asks this one to let one go.
    let b = worker(&beacons, 2).await;
    let moves = leader.rebalance("").await.unwrap();
    assert_eq!(moves.len(), 1);
    let AssignmentEvent::Revoking(r) = event(&mut mine).await else {
        panic!("a revocation")
    };
    assert_eq!(r.name, moves[0].name);
    let next = mine.release(&r.name).await.unwrap();
    assert_eq!(next.holder.unwrap().node_id, b.node_id());
    assert!(matches!(event(&mut mine).await, AssignmentEvent::Removed(g) if g.name == r.name));
    assert_eq!(mine.held().count(), 1);

    // The beacon goes away: the lease is lost and with it everything held.
    cluster.beacons[0].kill();
    match event(&mut mine).await {
        AssignmentEvent::Lost { resources, why, .. } => {
            assert_eq!(resources.len(), 1, "{why}");
            assert!(!why.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert!(mine.next().await.is_err(), "the watch has ended");
    drop(b);
}

async fn robot(beacons: &[String], i: u8) -> Registration {
    let options = RegisterOptions {
        connect: opts(),
        ..RegisterOptions::new("ROBOT", SocketAddr::from(([10, 8, 2, i], 9000)))
    };
    Registration::register(beacons.to_vec(), options)
        .await
        .unwrap_or_else(|e| panic!("robot {i}: {e}"))
}

/// Slot holders of `group` as a beacon sees them (`None`: free), and its standbys.
async fn slots(c: &mut Client, group: &str) -> (Vec<Option<u32>>, Vec<u32>) {
    let reply = c.slot_groups(group).await.unwrap();
    let view = reply.groups.into_iter().next().expect("the group");
    let g = view.group.unwrap();
    (
        g.slots
            .iter()
            .map(|s| s.holder.as_ref().map(|h| h.node_id))
            .collect(),
        view.standbys,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slot_story_three_slots_five_services_a_standby_takes_over() {
    let ports = free_ports(1);
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "assign-slots",
        r#"{"lease_ms": 1000}"#,
    );
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let mut c = Client::connect(&beacons[0], &opts()).await.unwrap();
    let mut robots = Vec::new();
    for i in 1..=5 {
        robots.push(Some(robot(&beacons, i).await));
    }
    let ids: Vec<u32> = robots
        .iter()
        .map(|r| r.as_ref().unwrap().node_id())
        .collect();
    let g = leader.create_slots("robots", "ROBOT", 3).await.unwrap();
    assert_eq!(g.slots.len(), 3);
    // Creating it again as it is answers with it; with another count, refused.
    leader.create_slots("robots", "ROBOT", 3).await.unwrap();
    let e = leader.create_slots("robots", "ROBOT", 4).await.unwrap_err();
    assert!(e.is(AssignErrorCode::GroupConflict), "{e}");

    // The three oldest registrations get the slots; two stand by.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (held, standbys) = loop {
        let (held, standbys) = slots(&mut c, "robots").await;
        if held.iter().all(Option::is_some) {
            break (held, standbys);
        }
        assert!(Instant::now() < deadline, "slots granted: {held:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(held, vec![Some(ids[0]), Some(ids[1]), Some(ids[2])]);
    assert_eq!(standbys, vec![ids[3], ids[4]]);

    // A robot bound to slot 1 runs where that slot's holder is.
    let bot = leader
        .add_slot_resource("bot-1", "robots", 1, 1)
        .await
        .unwrap();
    assert_eq!(bot.holder.as_ref().unwrap().node_id, ids[1]);
    // A claim of a held slot, or with a stale version, is refused.
    let me = robots[3].as_ref().unwrap();
    let reg = (me.node_id(), me.fencing_token().0, me.fencing_token().1);
    let e = leader.claim_slot("robots", 1, 1, reg).await.unwrap_err();
    assert!(e.is(AssignErrorCode::SlotTaken), "{e}");
    // A robot moves only with its slot: its holder cannot hand it to someone else.
    let h = bot.holder.clone().unwrap();
    let e = leader
        .release_resource("bot-1", h.term, h.index)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("moves only with the slot"), "{e}");

    // The oldest standby follows its assignments: it is pushed the slot, never polls.
    let mut standby = Assignments::start(robots[3].as_ref().unwrap())
        .await
        .unwrap();
    assert_eq!(standby.slots().count(), 0);

    // The holder of slot 1 dies: the oldest standby takes its slot, and the robot with it.
    let died = Instant::now();
    robots[1] = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (held, standbys) = slots(&mut c, "robots").await;
        if held[1] == Some(ids[3]) {
            assert_eq!(standbys, vec![ids[4]]);
            break;
        }
        assert!(Instant::now() < deadline, "a standby takes over: {held:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "slot 1 taken over {:?} after its holder stopped reporting",
        died.elapsed()
    );
    let bots = c.resources("").await.unwrap().resources;
    assert_eq!(
        bots[0].holder.as_ref().unwrap().node_id,
        ids[3],
        "the robot moved with the slot"
    );
    let (mut granted, mut added) = (None, None);
    while granted.is_none() || added.is_none() {
        match event(&mut standby).await {
            AssignmentEvent::SlotGranted(s) => granted = Some((s.group, s.slot)),
            AssignmentEvent::Added(r) => added = Some(r.name),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(granted, Some(("robots".to_string(), 1)));
    assert_eq!(added.as_deref(), Some("bot-1"));

    // An explicit unregister hands the slot over at once (no lease to wait for).
    let gone = robots[0].take().unwrap();
    let handed = Instant::now();
    gone.unregister().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (held, _) = slots(&mut c, "robots").await;
        if held[0] == Some(ids[4]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the last standby takes slot 0: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "slot 0 handed over {:?} after an unregister",
        handed.elapsed()
    );
    let e = leader.delete_slots("robots").await.unwrap_err();
    assert!(e.is(AssignErrorCode::GroupInUse), "{e}");
    leader.delete_resource("bot-1").await.unwrap();
    assert!(leader.delete_slots("robots").await.unwrap().is_some());
    assert!(
        leader.delete_slots("robots").await.unwrap().is_none(),
        "idempotent"
    );
    drop(robots);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_window_keeps_resources_for_a_returning_holder_and_a_join_rebalances_itself() {
    let ports = free_ports(1);
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "assign-delay",
        r#"{"lease_ms": 1000, "assign": {"delay_ms": {"CRAWLER": 60000}, "auto_rebalance_spread": 1, "max_moves": 2}}"#,
    );
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let mut c = Client::connect(&beacons[0], &opts()).await.unwrap();
    let one = worker(&beacons, 1).await;
    let two = worker(&beacons, 2).await;
    for i in 1..=4 {
        leader
            .add_resource(&format!("site-{i}"), "CRAWLER", 1, BTreeMap::new())
            .await
            .unwrap();
    }
    let first = one.node_id();
    let mine = |rs: &[pb::ResourceInfo], id: u32| {
        rs.iter()
            .filter(|r| r.holder.as_ref().is_some_and(|h| h.node_id == id))
            .count()
    };
    assert_eq!(mine(&c.resources("").await.unwrap().resources, first), 2);

    // Worker one's lease ends: its two resources wait for it (a minute's window) ...
    drop(one);
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert_eq!(
        mine(&c.resources("").await.unwrap().resources, first),
        2,
        "kept for the holder to come back"
    );
    // ... and it comes back at the same address: they are its again, under new tokens.
    let back = worker(&beacons, 1).await;
    let again = back.node_id();
    until(
        &mut c,
        "the returning holder gets its resources back",
        |rs| mine(rs, again) == 2,
    )
    .await;

    // It ends again, and an operator does not want to wait: moved now.
    drop(back);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    leader.reassign_now("CRAWLER").await.unwrap();
    let second = two.node_id();
    until(&mut c, "all four on the survivor", |rs| {
        mine(rs, second) == 4
    })
    .await;

    // A third worker joins and holds nothing: the leader revokes up to max_moves on its
    // own; once released they are the newcomer's.
    let three = worker(&beacons, 3).await;
    until(&mut c, "an automatic rebalance revokes", |rs| {
        rs.iter().filter(|r| r.revoking).count() == 2
    })
    .await;
    for r in c.resources("").await.unwrap().resources {
        if r.revoking {
            let h = r.holder.unwrap();
            let moved = leader
                .release_resource(&r.name, h.term, h.index)
                .await
                .unwrap();
            assert_eq!(moved.holder.unwrap().node_id, three.node_id());
        }
    }
    assert_eq!(
        mine(&c.resources("").await.unwrap().resources, three.node_id()),
        2
    );
    drop(two);
}

/// A resource bound to a slot with no holder waits for one: it never runs on another slot's
/// holder, though that one is a live service of the right type. Once a new leader (the
/// first one killed) grants the slot, the resource moves with it, stamped with the wall
/// time of the move, not the new leader's uptime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_resource_waits_for_its_slot_and_a_new_leader_stamps_moves_with_wall_time() {
    let ports = free_ports(3);
    let mut cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "assign-bound",
        r#"{"lease_ms": 1000}"#,
    );
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let first = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .expect("a leader");
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let a = robot(&beacons, 1).await;
    leader.create_slots("robots", "ROBOT", 2).await.unwrap();
    leader
        .add_slot_resource("bot-0", "robots", 0, 1)
        .await
        .unwrap();
    leader
        .add_slot_resource("bot-1", "robots", 1, 1)
        .await
        .unwrap();
    let mut c = Client::connect(&first, &opts()).await.unwrap();
    until(&mut c, "slot 0 and bot-0 go to the only robot", |rs| {
        rs.iter().any(|r| {
            r.name == "bot-0" && r.holder.as_ref().is_some_and(|h| h.node_id == a.node_id())
        })
    })
    .await;
    // Ten ticks: time enough for any tick to have placed it wrongly.
    tokio::time::sleep(Duration::from_millis(10 * TICK_MS)).await;
    let bots = c.resources("").await.unwrap().resources;
    let bot1 = bots.iter().find(|r| r.name == "bot-1").unwrap();
    assert!(
        bot1.holder.is_none(),
        "bot-1 is bound to slot 1, which has no holder: it runs nowhere, not on slot 0's holder: {bot1:?}"
    );

    // The leader dies; a second robot arrives and the new leader grants it slot 1.
    let i = addrs.iter().position(|x| x.to_string() == first).unwrap();
    cluster.beacons[i].kill();
    let survivors: Vec<SocketAddr> = addrs.iter().copied().filter(|x| *x != addrs[i]).collect();
    let second = eventually(Duration::from_secs(10), || next_leader(&survivors, &first))
        .await
        .expect("a new leader");
    let b = robot(&beacons, 2).await;
    let mut c = Client::connect(&second, &opts()).await.unwrap();
    until(
        &mut c,
        "bot-1 moves with slot 1 to the second robot",
        |rs| {
            rs.iter().any(|r| {
                r.name == "bot-1" && r.holder.as_ref().is_some_and(|h| h.node_id == b.node_id())
            })
        },
    )
    .await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let bots = c.resources("").await.unwrap().resources;
    let since = bots
        .iter()
        .find(|r| r.name == "bot-1")
        .and_then(|r| r.holder.as_ref())
        .unwrap()
        .since_ms;
    assert!(
        since <= now_ms && now_ms - since < 60_000,
        "bot-1 moved to the second robot within the last minute, so its since_ms ({since}) is near the wall clock ({now_ms})"
    );
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_worker_gets_no_new_work_and_a_drained_one_hands_its_work_off() {
    use beacon::client::HealthStatus;
    let ports = free_ports(1);
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "assign-health",
        r#"{"lease_ms": 2000}"#,
    );
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let mut c = Client::connect(&beacons[0], &opts()).await.unwrap();
    let a = worker(&beacons, 1).await;
    let b = worker(&beacons, 2).await;
    let sick = worker(&beacons, 3).await;
    // The third worker's own checks fail: new resources go to the other two alone.
    sick.set_health(HealthStatus::Critical, "disk full");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = c.nodes("CRAWLER", "").await.unwrap();
        let written = reply.nodes.iter().filter_map(|e| e.node.as_ref()).any(|n| {
            n.node_id == sick.node_id() && n.health.as_ref().is_some_and(|h| h.status == 2)
        });
        if written {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the leader wrote the worker's health"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..4 {
        leader
            .add_resource(&format!("site-{i}"), "CRAWLER", 1, BTreeMap::new())
            .await
            .unwrap();
    }
    let held = by_holder(&mut c).await;
    assert_eq!(held.get(&a.node_id()).map(Vec::len), Some(2), "{held:?}");
    assert_eq!(held.get(&b.node_id()).map(Vec::len), Some(2), "{held:?}");
    assert!(!held.contains_key(&sick.node_id()), "{held:?}");

    // An operator drains worker a: its resources are revoked, and once it lets them go
    // they move to b, the one serving worker left. It keeps its node ID and its lease.
    let mut mine = Assignments::start(&a).await.unwrap();
    let drain = beacon::pb::registry::SetHealthRequest {
        node_id: a.node_id(),
        draining: Some(true),
        ..Default::default()
    };
    let _: beacon::pb::registry::SetHealthReply = leader
        .call(
            beacon::machines::registry::RegistryCmd::SetHealth,
            &drain,
            "drain",
        )
        .await
        .unwrap();
    let mut released = 0;
    while released < 2 {
        if let AssignmentEvent::Revoking(r) = event(&mut mine).await {
            let next = mine.release(&r.name).await.unwrap();
            assert_eq!(next.holder.unwrap().node_id, b.node_id(), "{}", r.name);
            released += 1;
        }
    }
    let a_id = a.node_id();
    until(&mut c, "everything on b", |rs| {
        rs.iter()
            .all(|r| r.holder.as_ref().is_some_and(|h| h.node_id == b.node_id()))
    })
    .await;
    assert!(a.is_live() && sick.is_live(), "nobody lost a lease");
    assert_eq!(a.node_id(), a_id);
}

/// Waits (bounded) for the next slot event on `a`, answering resource revocations on the way.
async fn slot_event(a: &mut Assignments) -> AssignmentEvent {
    loop {
        match event(a).await {
            AssignmentEvent::Revoking(r) => {
                a.release(&r.name).await.unwrap();
            }
            e @ (AssignmentEvent::SlotGranted(_)
            | AssignmentEvent::SlotRevoking(_)
            | AssignmentEvent::SlotGone(_)) => return e,
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_slot_holder_hands_its_slot_to_a_standby_and_drain_wait_returns_when_it_holds_nothing()
 {
    let ports = free_ports(1);
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "assign-drain-slot",
        r#"{"lease_ms": 2000}"#,
    );
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let mut c = Client::connect(&beacons[0], &opts()).await.unwrap();
    leader.create_slots("robots", "ROBOT", 1).await.unwrap();
    let a = robot(&beacons, 1).await;
    let mut mine = Assignments::start(&a).await.unwrap();
    assert!(
        matches!(slot_event(&mut mine).await, AssignmentEvent::SlotGranted(s) if s.slot == 0),
        "the first robot holds the one slot"
    );
    leader
        .add_resource("site-0", "ROBOT", 1, BTreeMap::new())
        .await
        .unwrap();
    until(&mut c, "site-0 on the slot holder", |rs| {
        rs.iter()
            .any(|r| r.holder.as_ref().is_some_and(|h| h.node_id == a.node_id()))
    })
    .await;
    let b = robot(&beacons, 2).await;
    assert_eq!(
        slots(&mut c, "robots").await,
        (vec![Some(a.node_id())], vec![b.node_id()])
    );

    // The operator drains a and waits: nebcli says what a still holds until nothing is left.
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let a_id = a.node_id().to_string();
    let mut wait = std::process::Command::new(&nebcli)
        .args(["-s", &beacons[0], "node", "drain", &a_id])
        .args(["--note", "kernel upgrade", "--wait", "--wait-ms", "20000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // a follows its assignments as a service would: asked to let its slot and its resource
    // go, it does, and nebcli returns once it holds nothing.
    let deadline = Instant::now() + Duration::from_secs(25);
    let mut handed = None;
    let status = loop {
        if let Some(status) = wait.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "nebcli node drain --wait returns"
        );
        match tokio::time::timeout(Duration::from_millis(100), mine.next()).await {
            Ok(Ok(AssignmentEvent::Revoking(r))) => {
                mine.release(&r.name).await.unwrap();
            }
            Ok(Ok(AssignmentEvent::SlotRevoking(s))) => {
                assert_eq!((s.group.as_str(), s.slot), ("robots", 0));
                handed = Some(mine.release_slot("robots", 0).await.unwrap());
            }
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => panic!("the watch goes on: {e}"),
        }
    };
    let group = handed.expect("the drained holder was asked to let its slot go");
    let next = group.slots[0].holder.as_ref().expect("a standby took it");
    assert_eq!(next.node_id, b.node_id(), "the standby holds the slot now");
    assert!(!group.slots[0].revoking);
    let out = wait.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("draining"), "the drain is confirmed: {text}");
    assert!(text.contains("holds nothing: drained"), "{text}");
    until(&mut c, "site-0 and nothing else on b", |rs| {
        rs.iter()
            .all(|r| r.holder.as_ref().is_some_and(|h| h.node_id == b.node_id()))
    })
    .await;
    assert_eq!(slots(&mut c, "robots").await.0, vec![Some(b.node_id())]);
    assert!(a.is_live(), "a keeps its lease and its node ID");

    // b drains too, but nobody in rotation can take its slot: it keeps it, and the wait
    // ends unfinished (exit 3) saying what is left.
    let out = std::process::Command::new(&nebcli)
        .args(["-s", &beacons[0], "node", "drain", &b.node_id().to_string()])
        .args(["--wait", "--wait-ms", "1500"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{text}{err}");
    assert!(err.contains("slot robots/0"), "{err}");
    assert_eq!(slots(&mut c, "robots").await.0, vec![Some(b.node_id())]);

    // A bad use of --wait is refused before anything is sent.
    let out = std::process::Command::new(&nebcli)
        .args(["-s", &beacons[0], "node", "undrain", &a_id, "--wait"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--wait is for `node drain`"));

    // Undrained, a is a standby in rotation again: b's slot now has someone to take it, so
    // b is asked to let it go, and a holds it.
    let (undrained, out) = run_nebcli(&nebcli, &["-s", &beacons[0], "node", "undrain", &a_id]);
    assert!(undrained, "{out}");
    let mut theirs = Assignments::start(&b).await.unwrap();
    let revoked = loop {
        match slot_event(&mut theirs).await {
            AssignmentEvent::SlotRevoking(s) => break s,
            AssignmentEvent::SlotGranted(_) => {}
            other => panic!("b keeps its slot until it lets it go: {other:?}"),
        }
    };
    assert_eq!((revoked.group.as_str(), revoked.slot), ("robots", 0));
    let group = theirs.release_slot("robots", 0).await.unwrap();
    assert_eq!(
        group.slots[0].holder.as_ref().map(|h| h.node_id),
        Some(a.node_id()),
        "the undrained standby holds the slot"
    );
}

/// A draining slot holder that hangs (SIGSTOP: it never lets its slot go, nor renews) keeps
/// the slot until its lease lapses; then the standby takes it, never while the hung holder's
/// registration lives, and `node drain --wait` returns once nothing is left on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_slot_holder_that_hangs_keeps_its_slot_until_its_lease_lapses() {
    let ports = free_ports(1);
    let cluster = Cluster::start_with(
        BEACON.as_ref(),
        &ports,
        TICK_MS,
        "assign-hung-holder",
        r#"{"lease_ms": 2000}"#,
    );
    let beacons: Vec<String> = cluster.beacons.iter().map(|b| b.addr.to_string()).collect();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let mut c = Client::connect(&beacons[0], &opts()).await.unwrap();
    leader.create_slots("robots", "ROBOT", 1).await.unwrap();

    // The holder is a process of its own: a registration kept alive by nebcli (killed when
    // the test ends, whichever way: a stopped one is not left behind).
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let logs = tempfile::tempdir().unwrap();
    let args = ["-s", &beacons[0], "register", "--type", "ROBOT"]
        .into_iter()
        .chain(["--addr", "10.8.3.1:9000", "--keep"]);
    let holder = Process::start(
        &nebcli,
        args.map(String::from).collect(),
        Vec::new(),
        logs.path().join("holder.log"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let held = loop {
        if let [Some(id)] = slots(&mut c, "robots").await.0.as_slice() {
            break *id;
        }
        assert!(
            Instant::now() < deadline,
            "the kept registration holds the slot"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let standby = robot(&beacons, 2).await;
    assert_eq!(slots(&mut c, "robots").await.1, vec![standby.node_id()]);

    let wait = std::process::Command::new(&nebcli)
        .args(["-s", &beacons[0], "node", "drain", &held.to_string()])
        .args(["--wait", "--wait-ms", "20000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let group = c.slot_groups("robots").await.unwrap().groups.remove(0);
        if group.group.unwrap().slots[0].revoking {
            break;
        }
        assert!(Instant::now() < deadline, "the slot is being revoked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    holder.pause();
    let stopped = Instant::now();

    // Until the standby holds the slot, the hung holder does; once the standby does, the
    // hung holder's registration has ended.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (holders, _) = slots(&mut c, "robots").await;
        if holders == [Some(standby.node_id())] {
            let nodes = c.nodes("", "").await.unwrap();
            let live: Vec<u32> = nodes
                .nodes
                .iter()
                .filter(|e| e.is_online)
                .filter_map(|e| e.node.as_ref())
                .map(|n| n.node_id)
                .collect();
            assert!(
                !live.contains(&held),
                "the standby holds the slot {:?} after the stop while the hung holder {held} is still registered: {live:?}\n{}",
                stopped.elapsed(),
                cluster.logs()
            );
            break;
        }
        assert_eq!(holders, [Some(held)], "the slot stays with its hung holder");
        assert!(
            Instant::now() < deadline,
            "the slot never moved off the hung holder\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let moved = stopped.elapsed();
    let out = wait.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("still holds: slot robots/0"), "{text}");
    assert!(
        text.contains("no live registration: nothing is left on it"),
        "{text}"
    );
    assert!(standby.is_live());
    println!(
        "a hung draining holder's slot moved to the standby {moved:?} after the stop (lease 2 s)"
    );
}

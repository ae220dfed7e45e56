use beacon_client::{
    Check, Cluster, ConfigWatch, ConnectOptions, Lock, LockOptions, RegisterOptions, Registration,
    Sequence, SequenceErrorCode, SequenceOptions, TaskOutcome, Tasks, Watch, Worker,
};
use std::net::SocketAddr;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Every beacon of the cluster, or any of them (`BEACON_ENDPOINTS`, as nebcli reads it):
    // the client finds the leader, follows it across failovers, and leaves a beacon that
    // stops answering within a fraction of a lease.
    let endpoints = std::env::var("BEACON_ENDPOINTS").unwrap_or("127.0.0.1:16000".into());
    let beacons: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
    let retry_for = Duration::from_secs(10);

    // This service's own port: what it registers, and what others reach it at.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;

    // What the service uses, made once by an operator (`nebcli sequence create orders`,
    // `nebcli queue create thumbs`), or here when missing. A queue made again with the same
    // settings is left as it is; a sequence that exists is refused `SEQUENCE_EXISTS`.
    let mut admin = Cluster::new(beacons.clone(), ConnectOptions::default(), retry_for);
    match admin.create_sequence("orders", 0, 0).await {
        Err(e) if e.is(SequenceErrorCode::SequenceExists) => {}
        created => _ = created?,
    }
    admin.create_queue("thumbs", 0, 0).await?;

    // A node ID, unique while the lease holds, renewed in the background.
    let reg = Registration::register(beacons.clone(), RegisterOptions::new("LOGIC", addr)).await?;
    println!(
        "node id {} fencing token {:?}",
        reg.node_id(),
        reg.fencing_token()
    );

    // Its health, from checks beside it (each second; a status reported once it held for 3
    // rounds): while its port does not open it is critical, and discovery, work assignment
    // and task queues leave it out.
    let own_port = Check::Tcp {
        addr,
        timeout: Duration::from_secs(1),
    };
    reg.run_checks(vec![own_port], Duration::from_secs(1), 3);

    // Who else is alive: the current set, then each change once.
    let mut peers = Watch::start(
        beacons.clone(),
        vec!["LOGIC".into()],
        ConnectOptions::default(),
        retry_for,
    )
    .await?;
    println!("{} LOGIC nodes alive", peers.nodes().count());

    // Numbers from the sequence, served from a local buffer.
    let orders = Sequence::open(beacons.clone(), "orders", SequenceOptions::default()).await?;
    let order_id = orders.next_id_async().await?;

    // A lock held by a registration of its own, lost with its lease and fenced by its token.
    // One address holds one registration, so the contender has an address of its own.
    let contender = SocketAddr::new(addr.ip(), addr.port().wrapping_add(1));
    let lock = Lock::acquire(
        beacons.clone(),
        "nightly-report",
        LockOptions::new(contender),
    )
    .await?;
    println!("report {order_id} under token {:?}", lock.fencing_token());
    lock.release().await?;

    // A worker of queue `thumbs` on this registration, and a task for it with its result.
    let worker = Worker::start(&reg, vec!["thumbs".into()], 2, |task| async move {
        Ok(format!("thumbnail of {}", String::from_utf8_lossy(&task.payload)).into_bytes())
    })
    .await?;
    let tasks = Tasks::new(beacons.clone(), ConnectOptions::default(), retry_for);
    let handle = tasks
        .submit("thumbs", &format!("photo-{order_id}"), b"photo-42.jpg")
        .await?;
    if let TaskOutcome::Completed(thumb) = handle.result_within(Duration::from_secs(30)).await? {
        println!("task done: {}", String::from_utf8_lossy(&thumb));
    }

    // This service's configuration (cluster/, type/LOGIC/, node/ADDR/, id/ID/), kept current.
    let mut config = ConfigWatch::for_service(
        beacons,
        "LOGIC".into(),
        addr,
        reg.node_id(),
        ConnectOptions::default(),
        retry_for,
    )
    .await?;
    let log_level = config.effective().get("log_level").map(|v| v.to_vec());
    println!("log_level {log_level:?}");

    // A service runs until it is told to stop; this one watches for a moment, then leaves.
    tokio::select! {
        lost = reg.lost() => println!("lease lost: stop using node id {}: {lost:?}", reg.node_id()),
        change = peers.next() => println!("peers changed: {change:?}"),
        change = config.next() => println!("configuration changed: {change:?}"),
        () = tokio::time::sleep(Duration::from_secs(1)) => println!("nothing changed"),
    }
    worker.stop();
    reg.unregister().await?;
    drop(listener);
    Ok(())
}

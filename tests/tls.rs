//! TLS on the beacon port, with real processes: a three-beacon cluster whose beacons verify
//! each other against one CA elects and serves clients over TLS; a beacon with a
//! certificate from another CA is kept out while the other two carry on; a TLS client
//! without a certificate that says it is a beacon is refused; plaintext, garbage, a
//! half-finished handshake, an expired certificate and a client that does not know the CA
//! each fail clearly, and the beacons keep serving.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use beacon::client::{Client, ClientError, Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon::transport::tls;
use beacon::wire::{Cmd, Code, ErrorCode, Frame, FrameCodec};
use beacon_testkit::certs::{Ca, Issued};
use beacon_testkit::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;

fn tls_keys(issued: &Issued, ca: &Ca) -> String {
    serde_json::json!({
        "tls": {
            "cert": issued.cert,
            "key": issued.key,
            "ca": ca.pem,
        }
    })
    .to_string()
}

fn client_opts(ca: &Ca, identity: Option<&Issued>) -> ConnectOptions {
    let config = tls::client_config(
        &ca.pem,
        identity.map(|i| (i.cert.as_path(), i.key.as_path())),
    )
    .expect("client TLS config");
    ConnectOptions {
        timeout: Duration::from_secs(2),
        tls: Some(Arc::new(config)),
        ..ConnectOptions::default()
    }
}

async fn register(
    beacons: &[SocketAddr],
    opts: &ConnectOptions,
    addr: &str,
) -> Result<u32, ClientError> {
    let names = beacons.iter().map(ToString::to_string).collect();
    let mut leader = Leader::new(names, opts.clone(), Duration::from_secs(5));
    let req = pb::registry::RegisterRequest {
        node_type: "LOGIC".into(),
        addr: addr.into(),
        ..Default::default()
    };
    let reply: pb::registry::RegisterReply =
        leader.call(RegistryCmd::Register, &req, "register").await?;
    Ok(reply.node.map(|n| n.node_id).unwrap_or_default())
}

/// Whether the beacon at `at` answers a TLS client's status request.
async fn serves(at: SocketAddr, opts: &ConnectOptions) -> bool {
    status_with(at, opts).await.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_serves_and_keeps_out_what_does_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "cluster-ca").unwrap();
    let other_ca = Ca::new(dir.path(), "other-ca").unwrap();
    let ports = free_ports(3);
    let addrs: Vec<SocketAddr> = ports.iter().map(|p| addr(*p)).collect();
    // The third beacon's certificate comes from another CA (it trusts the cluster's CA).
    let configs: Vec<String> = (0..3)
        .map(|i| {
            let signer = if i == 2 { &other_ca } else { &ca };
            tls_keys(
                &signer.issue(dir.path(), &format!("beacon-{i}")).unwrap(),
                &ca,
            )
        })
        .collect();
    let c = Cluster::start_each(BEACON.as_ref(), &ports, TICK_MS, "tls", &configs);
    let opts = client_opts(&ca, None);

    // The two beacons of the cluster's CA elect one of themselves and serve.
    let good = &addrs[..2];
    let leader = eventually(Duration::from_secs(15), || agreed_leader_with(good, &opts))
        .await
        .unwrap_or_else(|| {
            panic!(
                "no leader among the beacons of the cluster's CA\n{}",
                c.logs()
            )
        });
    let id = register(good, &opts, "10.0.0.1:7000")
        .await
        .unwrap_or_else(|e| panic!("register over TLS: {e}\n{}", c.logs()));
    assert!(id > 0);
    // The outsider is not taken in: the others see it offline, and say why in their logs.
    let s = status_with(addrs[0], &opts).await.expect("status");
    assert!(
        !row(&s, addrs[2]).is_online,
        "the beacon of another CA is online in {leader}'s view\n{}",
        c.logs()
    );
    assert!(
        c.beacons[0].log().contains("TLS handshake failed")
            || c.beacons[1].log().contains("TLS handshake failed"),
        "a refused peer is logged\n{}",
        c.logs()
    );

    // A TLS client without a certificate that says it is a beacon of the cluster.
    let tcp = TcpStream::connect(addrs[0]).await.unwrap();
    let config = opts.tls.clone().unwrap();
    let name = tls::server_name(&addrs[0].to_string()).unwrap();
    let stream = tls::dial(tcp, config, name)
        .await
        .expect("TLS handshake as a client");
    let err = claim_to_be_a_beacon(stream, "tls", addrs[1])
        .await
        .expect("a refusal");
    assert_eq!(err.code, ErrorCode::Unauthenticated as u32, "{}", err.msg);
    assert!(err.msg.contains("certificate"), "{}", err.msg);

    // A client certificate of the cluster's CA (a name, no address) claiming to be a beacon.
    let dashboard = ca.issue_client(dir.path(), "dashboard").unwrap();
    let tcp = TcpStream::connect(addrs[0]).await.unwrap();
    let config = client_opts(&ca, Some(&dashboard)).tls.unwrap();
    let name = tls::server_name(&addrs[0].to_string()).unwrap();
    let stream = tls::dial(tcp, config, name)
        .await
        .expect("TLS with a client certificate");
    let err = claim_to_be_a_beacon(stream, "tls", addrs[1])
        .await
        .expect("a refusal");
    assert_eq!(err.code, ErrorCode::Unauthenticated as u32, "{}", err.msg);
    assert!(
        err.msg.contains("`dashboard`") && err.msg.contains("is not for"),
        "{}",
        err.msg
    );

    // Plaintext to the TLS port, garbage, and a handshake left half-done: each closed.
    let mut plain = TcpStream::connect(addrs[0]).await.unwrap();
    let hello = Frame::new(Cmd::Hello.code(), 1, 0, &pb::Hello::default());
    let mut bytes = bytes::BytesMut::new();
    tokio_util::codec::Encoder::encode(&mut FrameCodec::new(1 << 20), hello, &mut bytes).unwrap();
    plain.write_all(&bytes).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), plain.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(_)) | Ok(Err(_))),
        "plaintext to a TLS port is answered or closed, not left hanging"
    );
    let mut garbage = TcpStream::connect(addrs[0]).await.unwrap();
    garbage
        .write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3])
        .await
        .unwrap();
    let mut half = TcpStream::connect(addrs[0]).await.unwrap();
    half.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    // Meanwhile it serves, and it logged the plaintext attempt with the remote address.
    assert!(
        serves(addrs[0], &opts).await,
        "serves beside broken connections\n{}",
        c.logs()
    );
    assert!(
        eventually(Duration::from_secs(3), || async {
            c.beacons[0]
                .log()
                .contains("TLS handshake failed")
                .then_some(())
        })
        .await
        .is_some(),
        "{}",
        c.logs()
    );
    drop((garbage, half));

    // A client that does not know the cluster's CA: a clear TLS error, not a hang.
    let stranger = client_opts(&other_ca, None);
    let e = Client::connect(&addrs[0].to_string(), &stranger)
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Tls { .. }), "{e:?}");
    assert!(!e.is_retryable(), "{e}");
    // A plaintext client: refused or closed, quickly.
    let plain_opts = ConnectOptions {
        timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    };
    let e = Client::connect(&addrs[0].to_string(), &plain_opts)
        .await
        .unwrap_err();
    // The beacon's alert is recognised for what it is.
    if let ClientError::Frame { .. } = e {
        assert!(e.to_string().contains("looks like TLS"), "{e}");
    }
    // An expired client certificate is refused by the beacon.
    let expired = ca.issue_expired(dir.path(), "old-client").unwrap();
    let e = status_with(addrs[0], &client_opts(&ca, Some(&expired))).await;
    assert!(e.is_none(), "an expired client certificate was accepted");
    assert!(
        eventually(Duration::from_secs(3), || async {
            c.beacons[0].log().contains("expired").then_some(())
        })
        .await
        .is_some(),
        "the expired certificate is named in the log\n{}",
        c.logs()
    );
    // And still it serves.
    register(good, &opts, "10.0.0.2:7000")
        .await
        .unwrap_or_else(|e| panic!("register after the bad input: {e}\n{}", c.logs()));
}

/// `GET path` over HTTPS to `at`, verified against `opts`' CA: the status line.
async fn https_get(at: SocketAddr, opts: &ConnectOptions, path: &str) -> std::io::Result<String> {
    let tcp = TcpStream::connect(at).await?;
    let name = tls::server_name(&at.to_string()).unwrap();
    let mut stream = tls::dial(tcp, opts.tls.clone().unwrap(), name).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    Ok(answer.lines().next().unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_is_used_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca").unwrap();
    let ports = free_ports(2);
    let (at, admin) = (addr(ports[0]), addr(ports[1]));
    let issued = ca.issue(dir.path(), "beacon").unwrap();
    let mut keys: serde_json::Value = serde_json::from_str(&tls_keys(&issued, &ca)).unwrap();
    keys["admin"] = admin.to_string().into();
    let c = Cluster::start_each(
        BEACON.as_ref(),
        &ports[..1],
        TICK_MS,
        "renew",
        &[keys.to_string()],
    );
    let opts = client_opts(&ca, None);
    assert!(
        eventually(Duration::from_secs(10), || async {
            serves(at, &opts).await.then_some(())
        })
        .await
        .is_some(),
        "{}",
        c.logs()
    );
    // The admin HTTP API is served over TLS too; plain HTTP gets no answer.
    let line = https_get(admin, &opts, "/v1/beacon")
        .await
        .expect("HTTPS to the admin port");
    assert!(line.contains("200"), "{line}\n{}", c.logs());
    let mut plain = TcpStream::connect(admin).await.unwrap();
    plain
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(6), plain.read_to_end(&mut buf)).await;
    assert!(
        !String::from_utf8_lossy(&buf).contains("HTTP/1.1 200"),
        "plain HTTP answered"
    );
    // The CA is replaced, and the beacon's certificate with one it signed: new clients
    // of the new CA are served, without a restart.
    let new_ca = Ca::new(dir.path(), "new-ca").unwrap();
    let renewed = new_ca.issue(dir.path(), "beacon-renewed").unwrap();
    // Same paths as configured: overwrite them.
    std::fs::copy(&renewed.cert, &issued.cert).unwrap();
    std::fs::copy(&renewed.key, &issued.key).unwrap();
    std::fs::copy(&new_ca.pem, &ca.pem).unwrap();
    let new_opts = client_opts(&new_ca, None);
    assert!(
        eventually(Duration::from_secs(5), || async {
            serves(at, &new_opts).await.then_some(())
        })
        .await
        .is_some(),
        "the renewed certificate is not in use\n{}",
        c.logs()
    );
    assert!(
        c.beacons[0].log().contains("certificates reloaded"),
        "{}",
        c.logs()
    );
}

/// Sends `request` over HTTPS to `at` (bounded by 15 s) and returns what came back.
async fn https_raw(at: SocketAddr, opts: &ConnectOptions, request: &[u8]) -> String {
    let tcp = TcpStream::connect(at).await.unwrap();
    let name = tls::server_name(&at.to_string()).unwrap();
    let mut stream = tls::dial(tcp, opts.tls.clone().unwrap(), name)
        .await
        .unwrap();
    let exchange = async {
        let _ = stream.write_all(request).await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        answer
    };
    let answer = tokio::time::timeout(Duration::from_secs(15), exchange)
        .await
        .expect("an answer, not a hang");
    String::from_utf8_lossy(&answer).into_owned()
}

/// The HTTPS admin port is bounded as the plain one is: a head over 64 KiB gets 431 at once,
/// a head that never completes is closed after 10 s; a 405 says why; a client certificate
/// named in `auth.certs` reads the views, as on the cluster port, and every refusal above is
/// logged with the beacon's identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_https_admin_port_bounds_requests_and_takes_certificate_identities() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca").unwrap();
    let ports = free_ports(2);
    let (at, admin) = (addr(ports[0]), addr(ports[1]));
    let issued = ca.issue(dir.path(), "beacon").unwrap();
    let dashboard = ca.issue_client(dir.path(), "dashboard").unwrap();
    let mut keys: serde_json::Value = serde_json::from_str(&tls_keys(&issued, &ca)).unwrap();
    keys["admin"] = admin.to_string().into();
    keys["auth"] = serde_json::json!({
        "tokens": [{"name": "ops", "token": "ops-secret", "role": "admin"}],
        "certs": [{"name": "dashboard", "role": "read"}],
    });
    let c = Cluster::start_each(
        BEACON.as_ref(),
        &ports[..1],
        TICK_MS,
        "https",
        &[keys.to_string()],
    );
    let anonymous = client_opts(&ca, None);
    let with_cert = client_opts(&ca, Some(&dashboard));
    eventually(Duration::from_secs(10), || async {
        status_with(at, &client_opts(&ca, Some(&dashboard)))
            .await
            .map(|_| ())
    })
    .await
    .unwrap_or_else(|| panic!("serving\n{}", c.logs()));

    // A certificate identity reads the views; without one (or a token), 401.
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let answer = https_raw(admin, &with_cert, get("/v1/beacon").as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer = https_raw(admin, &anonymous, get("/v1/beacon").as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    // 405 with its reason.
    let post = "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let answer = https_raw(admin, &anonymous, post.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    assert!(answer.contains("the admin API answers GET"), "{answer}");
    // A 300 KB header: 431, not a hang.
    let big = format!(
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(300_000)
    );
    let answer = https_raw(admin, &anonymous, big.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // A head that never completes is closed (within 10 s, bounded here by https_raw).
    let started = std::time::Instant::now();
    let answer = https_raw(admin, &anonymous, b"GET /health HTTP/1.1\r\nHost: x\r\n").await;
    assert!(!answer.contains("200"), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "closed only once the time was up"
    );
    let log = c.beacons[0].log();
    for said in [
        "admin request head over 65536 bytes",
        "admin request head not complete within",
    ] {
        let line = log
            .lines()
            .find(|l| l.contains(said))
            .unwrap_or_else(|| panic!("{said}:\n{log}"));
        assert!(
            line.contains("beacon{node="),
            "the beacon's identity: {line}"
        );
    }
}

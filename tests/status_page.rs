//! The status page on the admin port, in a real headless browser (Chromium driven through
//! chromedriver) against three real beacons: it shows the leader the cluster agrees on, it
//! follows a leader kill without being reloaded, and a registration appears in it and can be
//! found. And, over plain HTTP, that with `auth` configured the page and the JSON views need
//! a `read` identity while the probes stay open.
//!
//! `.ci/run` installs Chromium and chromedriver and sets `BEACON_REQUIRE_BROWSER`, so CI
//! always runs the browser test; elsewhere it is skipped, saying so, when no browser is
//! installed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use beacon::client::{Cluster as Leader, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use beacon_testkit::*;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const TICK_MS: u64 = 100;
/// How long the page may take to show a change: it refreshes every 2 s.
const PAGE_PATIENCE: Duration = Duration::from_secs(15);

/// Chromium and its driver: from `BEACON_CHROMIUM` / `BEACON_CHROMEDRIVER`, else where
/// Debian puts them.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let find = |var: &str, paths: &[&str]| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| paths.iter().map(PathBuf::from).find(|p| p.exists()))
    };
    let chromium = find(
        "BEACON_CHROMIUM",
        &["/usr/bin/chromium", "/usr/bin/chromium-browser"],
    )?;
    let driver = find(
        "BEACON_CHROMEDRIVER",
        &["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"],
    )?;
    Some((chromium, driver))
}

/// chromedriver, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start(program: &Path, log: &Path) -> Driver {
        let port = free_ports(1)[0];
        let log = std::fs::File::create(log).expect("driver log");
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        wait_listening(addr(port));
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn open_browser(chromium: &Path, driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1300,1400"],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a chromedriver session")
}

/// Runs `script` in the page until it returns something `accept` takes, for at most
/// [`PAGE_PATIENCE`]; the last value is in the panic message otherwise.
async fn page_until(
    page: &Client,
    what: &str,
    script: &str,
    accept: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + PAGE_PATIENCE;
    loop {
        let value = page.execute(script, vec![]).await.expect("script runs");
        if accept(&value) {
            return value;
        }
        if Instant::now() > deadline {
            let text = page
                .execute("return document.body.innerText", vec![])
                .await
                .unwrap_or_default();
            panic!(
                "the page did not show {what} within {PAGE_PATIENCE:?} (last: {value}); it shows:\n{text}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The leader `admin` reports in `/v1/beacon`.
fn leader_from_api(admin: SocketAddr) -> Option<String> {
    let (code, body) = http_get(admin, "/v1/beacon")?;
    let v: Value = serde_json::from_str(&body).ok()?;
    (code == 200).then(|| v["leader"].as_str().map(str::to_owned))?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_leader_follows_a_kill_and_finds_a_registration() {
    let Some((chromium, driver_bin)) = browser() else {
        assert!(
            std::env::var_os("BEACON_REQUIRE_BROWSER").is_none(),
            "BEACON_REQUIRE_BROWSER is set but no Chromium and chromedriver were found \
             (set BEACON_CHROMIUM and BEACON_CHROMEDRIVER, or install chromium chromium-driver)"
        );
        eprintln!("skipped: no Chromium with chromedriver here (Debian: chromium chromium-driver)");
        return;
    };
    let (mut cluster, admin) = cluster_with_admin(BEACON.as_ref(), 3, TICK_MS, "page", json!({}));
    let addrs: Vec<SocketAddr> = cluster.beacons.iter().map(|b| b.addr).collect();
    let leader = eventually(Duration::from_secs(10), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("no agreed leader:\n{}", cluster.logs()));
    let leader_at = addrs.iter().position(|a| a.to_string() == leader).unwrap();
    // The page of a beacon that will survive the leader's kill.
    let watched = (leader_at + 1) % 3;

    let driver = Driver::start(&driver_bin, &cluster.dir.path().join("chromedriver.log"));
    let page = open_browser(&chromium, &driver).await;
    page.goto(&format!("http://{}/", admin[watched]))
        .await
        .expect("the page loads");

    // The leader shown is the one every beacon agrees on, and the table marks it.
    let shown = page_until(
        &page,
        "the leader",
        "return document.getElementById('leader').dataset.leader",
        |v| v.as_str().is_some_and(|s| !s.is_empty()),
    )
    .await;
    assert_eq!(shown, json!(leader));
    let marked = page
        .find(Locator::Css("#beacons tr[data-role=leader]"))
        .await
        .expect("a leader row")
        .attr("data-node")
        .await
        .unwrap();
    assert_eq!(marked.as_deref(), Some(leader.as_str()));
    let rows = page
        .find_all(Locator::Css("#beacons tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 3, "one row per beacon");
    // Each beacon's row links to its own status page.
    let links: Vec<String> = page
        .execute(
            "return [...document.querySelectorAll('#beacons a')].map(a => a.getAttribute('href'))",
            vec![],
        )
        .await
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    for a in &admin {
        assert!(links.contains(&format!("http://{a}/")), "{a} in {links:?}");
    }

    // A registration appears under its node type, and opening the type finds it.
    let beacons = addrs.iter().map(|a| a.to_string()).collect();
    let mut client = Leader::new(beacons, ConnectOptions::default(), Duration::from_secs(10));
    let reply: pb::registry::RegisterReply = client
        .call(
            RegistryCmd::Register,
            &pb::registry::RegisterRequest {
                node_type: "CHECKOUT".into(),
                addr: "10.9.8.7:4000".into(),
                metadata: r#"{"zone": "eu-2"}"#.into(),
                ..Default::default()
            },
            "the registration",
        )
        .await
        .expect("registered");
    let id = reply.node.unwrap().node_id;
    page_until(
        &page,
        "the CHECKOUT service",
        "const r = document.querySelector('#types tr[data-type=CHECKOUT]'); return r ? r.innerText : null",
        |v| v.as_str().is_some_and(|t| t.contains('1')),
    )
    .await;
    page.find(Locator::Css("#types tr[data-type=CHECKOUT]"))
        .await
        .unwrap()
        .click()
        .await
        .expect("the type opens");
    page.find(Locator::Id("search"))
        .await
        .unwrap()
        .send_keys("eu-2")
        .await
        .unwrap();
    let found = page_until(
        &page,
        "the registration found by its metadata",
        "return [...document.querySelectorAll('#nodes tbody tr[data-id]')].map(r => r.innerText)",
        |v| v.as_array().is_some_and(|rows| rows.len() == 1),
    )
    .await;
    let row = found[0].as_str().unwrap();
    assert!(
        row.contains("10.9.8.7:4000") && row.contains(&id.to_string()),
        "{row}"
    );

    // A config document is listed with its revision and whom it concerns.
    let written = client
        .config_write(
            vec![],
            vec![beacon::client::config_put(
                "type/CHECKOUT/log_level",
                b"debug".to_vec(),
                false,
            )],
        )
        .await
        .expect("written");
    let listed = page_until(
        &page,
        "the config document",
        "const r = document.querySelector('#configs tr[data-key=\"type/CHECKOUT/log_level\"]'); return r ? r.innerText : null",
        |v| v.as_str().is_some(),
    )
    .await;
    let listed = listed.as_str().unwrap();
    assert!(
        listed.contains(&written.revision.to_string())
            && listed.contains("CHECKOUT services (1 registered)"),
        "{listed}"
    );

    // Kill the leader: the open page, not reloaded, shows the new one, the killed beacon
    // offline and the change in its timeline.
    let refreshed: Value = page
        .execute("return document.body.dataset.refreshed", vec![])
        .await
        .unwrap();
    cluster.beacons[leader_at].kill();
    let survivors: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| a.to_string() != leader)
        .collect();
    let new_leader = eventually(Duration::from_secs(10), || agreed_leader(&survivors))
        .await
        .expect("a new leader");
    let shown = page_until(
        &page,
        "the new leader",
        "return document.getElementById('leader').dataset.leader",
        |v| v.as_str().is_some_and(|s| !s.is_empty() && s != leader),
    )
    .await;
    assert_eq!(shown, json!(new_leader));
    assert_eq!(
        leader_from_api(admin[watched]).as_deref(),
        Some(new_leader.as_str())
    );
    let again: Value = page
        .execute("return document.body.dataset.refreshed", vec![])
        .await
        .unwrap();
    assert_ne!(again, refreshed, "the page redrew itself");
    page_until(
        &page,
        "the killed leader offline, a follower",
        &format!(
            "const r = document.querySelector('#beacons tr[data-node=\"{leader}\"]'); return r ? r.dataset.role + ' ' + r.innerText : null"
        ),
        |v| v.as_str().is_some_and(|t| t.starts_with("follower") && t.contains("offline")),
    )
    .await;
    let changes = page_until(
        &page,
        "the change in the timeline",
        "return [...document.querySelectorAll('#changes tbody tr')].map(r => r.innerText)",
        |v| {
            v.as_array().is_some_and(|rows| {
                rows.iter()
                    .any(|r| r.as_str().is_some_and(|t| t.contains(&new_leader)))
            })
        },
    )
    .await;
    assert!(
        changes
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains(&leader)),
        "the old leader is in the timeline too: {changes}"
    );
    let _ = page.close().await;
}

#[test]
fn with_auth_the_page_and_views_need_a_reader_and_the_probes_stay_open() {
    let auth = json!({
        "auth": {
            "peer_token": "beacons-only",
            "tokens": [
                { "name": "viewer", "token": "viewer-secret", "role": "read" },
                { "name": "ops", "token": "ops-secret", "role": "admin" },
            ],
        }
    });
    let (cluster, admin) = cluster_with_admin(BEACON.as_ref(), 1, TICK_MS, "page-auth", auth);
    let a = admin[0];
    let get = |path: &str, headers: &[(&str, &str)]| {
        http_request(a, path, headers)
            .unwrap_or_else(|| panic!("{path} answers:\n{}", cluster.logs()))
    };
    wait_listening(a);
    for path in [
        "/",
        "/metrics",
        "/v1/beacon",
        "/v1/nodes",
        "/v1/leaders",
        "/v1/ids",
    ] {
        let r = get(path, &[]);
        assert_eq!(r.code, 401, "{path} without a token: {}", r.body);
        assert!(
            r.head
                .to_ascii_lowercase()
                .contains("www-authenticate: basic realm=\"beacon page-auth\""),
            "{path}: a browser is asked for the token:\n{}",
            r.head
        );
        assert!(r.body.contains("requires authentication"), "{}", r.body);
        let r = get(path, &[("Authorization", "Bearer wrong")]);
        assert_eq!(r.code, 401, "{path} with an unknown token");
        assert!(r.body.contains("not one this beacon knows"), "{}", r.body);
        let r = get(path, &[("Authorization", "Bearer viewer-secret")]);
        assert_eq!(r.code, 200, "{path} with a read token: {}", r.body);
    }
    // A browser sends the token as the password of Basic authentication
    // ("anyone:viewer-secret").
    let r = get(
        "/",
        &[("Authorization", "Basic YW55b25lOnZpZXdlci1zZWNyZXQ=")],
    );
    assert_eq!(r.code, 200);
    assert!(r.body.contains("<title>beacon</title>"));
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'"),
        "{}",
        r.head
    );
    for probe in ["/livez", "/readyz", "/health"] {
        assert_eq!(get(probe, &[]).code, 200, "{probe} needs no token");
    }
    let r = get("/metrics", &[]);
    assert_eq!(r.code, 401);
    let r = get("/metrics", &[("Authorization", "Bearer ops-secret")]);
    let refused = metric(
        &r.body,
        "beacon_auth_refusals_total{reason=\"unauthenticated\"}",
    );
    assert!(
        refused.is_some_and(|n| n >= 13.0),
        "refusals counted: {refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_views_count_by_type_cut_rows_and_list_leader_changes() {
    let (cluster, admin) = cluster_with_admin(BEACON.as_ref(), 1, TICK_MS, "views", json!({}));
    let a = admin[0];
    wait_listening(a);
    let beacons = vec![cluster.beacons[0].addr.to_string()];
    let mut client = Leader::new(beacons, ConnectOptions::default(), Duration::from_secs(10));
    for (node_type, addr) in [
        ("WEB", "10.0.0.1:80"),
        ("WEB", "10.0.0.2:80"),
        ("DB", "10.0.0.3:5432"),
    ] {
        let _: pb::registry::RegisterReply = client
            .call(
                RegistryCmd::Register,
                &pb::registry::RegisterRequest {
                    node_type: node_type.into(),
                    addr: addr.into(),
                    ..Default::default()
                },
                "the registration",
            )
            .await
            .expect("registered");
    }
    let json_of = |path: &str| -> Value {
        let (code, body) = http_get(a, path).unwrap_or_else(|| panic!("{path} answers"));
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    };
    let v = json_of("/v1/nodes?limit=1");
    assert_eq!(v["total"], 3);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 1, "{v}");
    // The next page starts where this one says, and the last one says it ends the list.
    let first = v["nodes"][0]["node"]["node_id"].as_u64().unwrap();
    let next = v["next_node_id"].as_u64().unwrap();
    assert!(next > first, "{v}");
    let v = json_of(&format!("/v1/nodes?limit=2&from={next}"));
    let ids: Vec<u64> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"]["node_id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        (ids.len(), ids[0], &v["next_node_id"]),
        (2, next, &json!(0)),
        "{v}"
    );
    assert_eq!(
        v["types"],
        json!([
            {"node_type": "DB", "online": 1, "offline": 0},
            {"node_type": "WEB", "online": 2, "offline": 0},
        ])
    );
    let v = json_of("/v1/nodes?type=WEB");
    assert_eq!(v["nodes"].as_array().unwrap().len(), 2);
    assert!(
        v["nodes"][0]["node"]["metadata"].is_object(),
        "metadata as an object, as --json: {v}"
    );
    let (code, body) = http_get(a, "/v1/nodes?limit=many").unwrap();
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("limit must be a whole number"), "{body}");
    // By health: a drained WEB service is left out of `serving`, listed under `draining`,
    // and every entry says its health by name.
    let web = v["nodes"][0]["node"]["node_id"].as_u64().unwrap() as u32;
    assert_eq!(v["nodes"][0]["node"]["health"]["status"], "passing", "{v}");
    let _: pb::registry::SetHealthReply = client
        .call(
            RegistryCmd::SetHealth,
            &pb::registry::SetHealthRequest {
                node_id: web,
                draining: Some(true),
                note: "upgrade".into(),
                ..Default::default()
            },
            "the drain",
        )
        .await
        .expect("drained");
    let ids_of = |v: &Value| -> Vec<u64> {
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["node"]["node_id"].as_u64().unwrap())
            .collect()
    };
    let v = json_of("/v1/nodes?type=WEB&health=draining");
    assert_eq!(ids_of(&v), [u64::from(web)], "{v}");
    assert_eq!(v["nodes"][0]["node"]["health"]["note"], "upgrade", "{v}");
    let v = json_of("/v1/nodes?type=WEB&health=serving");
    assert_eq!(v["nodes"].as_array().unwrap().len(), 1, "{v}");
    assert!(!ids_of(&v).contains(&u64::from(web)), "{v}");
    let (code, body) = http_get(a, "/v1/nodes?health=sick").unwrap();
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("health `sick`"), "{body}");
    // Reads are linearizable unless asked otherwise; a consistency that is neither is refused.
    let v = json_of("/v1/nodes?type=WEB&consistency=serializable");
    assert_eq!(v["nodes"].as_array().unwrap().len(), 2, "{v}");
    let (code, body) = http_get(a, "/v1/nodes?consistency=eventual").unwrap();
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("consistency `eventual`"), "{body}");
    let v = json_of("/v1/ids");
    assert_eq!(v["in_use"], 3);
    // A lone beacon leads from the start: one change, to itself.
    let v = json_of("/v1/leaders");
    let me = cluster.beacons[0].addr.to_string();
    assert_eq!(v["changes"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["changes"][0]["leader"], json!(me));
    assert!(v["changes"][0]["at_ms"].as_u64().unwrap() <= v["now_ms"].as_u64().unwrap());
    let v = json_of("/v1/beacon");
    assert_eq!(v["beacons"][0]["admin"], json!(format!("http://{a}")));
    for (path, key) in [
        ("/v1/sequences", "sequences"),
        ("/v1/resources", "resources"),
        ("/v1/slots", "groups"),
        ("/v1/queues", "queues"),
        ("/v1/configs?values=0", "documents"),
    ] {
        let v = json_of(path);
        assert_eq!(v[key], json!([]), "{path}: none yet: {v}");
        assert_eq!(v["node"], json!(me), "{path} answered by this beacon: {v}");
    }
}

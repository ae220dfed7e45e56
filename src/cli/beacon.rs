//! The core's nebcli command: `show beacon`, the beacon cluster as one beacon sees it.

use super::table::{self, opt_ms, stale_warning, yes_no};
use super::{Commands, Failure, Session, UsageError, none};
use crate::pb;

/// `show beacon`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShowBeacon;

impl Commands for ShowBeacon {
    const HELP: &'static [(&'static str, &'static str)] = &[(
        "show beacon",
        "the beacon cluster as this beacon sees it: node, is_leader, is_online, term, last_seen_ms, stored, role",
    )];
    const SUBJECTS: &'static [&'static str] = &["beacon"];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        match head {
            ["show", "beacon"] => Some(none("show beacon", &words[2..]).map(|()| ShowBeacon)),
            _ => None,
        }
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let status = session
            .with_client(async |c| c.beacon_status().await)
            .await?;
        Ok(session.print(&status, render))
    }
}

pub fn render(status: &pb::BeaconStatus) -> String {
    let rows: Vec<Vec<String>> = status
        .beacons
        .iter()
        .map(|b| {
            // The seed's columns first, as NebulaBeacon's `show beacon` printed them.
            vec![
                b.node.clone(),
                yes_no(b.is_leader),
                yes_no(b.is_online),
                b.term.to_string(),
                opt_ms(b.last_seen_ms),
                opt_ms(b.stored),
                if b.role.is_empty() { "voter" } else { &b.role }.to_owned(),
            ]
        })
        .collect();
    let mut out = table::render(
        &[
            "node",
            "is_leader",
            "is_online",
            "term",
            "last_seen_ms",
            "stored",
            "role",
        ],
        &rows,
    );
    out.push_str(&format!(
        "mode {} · term {} · commit {} · log {}@{} · leader {} (answered by {}, version {})\n",
        status.mode,
        status.term,
        status.commit,
        status.index,
        status.log_term,
        status.leader.as_deref().unwrap_or("none"),
        status.node,
        if status.version.is_empty() {
            "unknown"
        } else {
            &status.version
        }
    ));
    out.push_str(&format!(
        "core beat over the last minute: longest gap between steps {} ms (tick {} ms), longest wait for the core {} ms\n",
        status.step_gap_worst_ms, status.tick_ms, status.queue_wait_worst_ms
    ));
    out.push_str(&stale_warning(status.stale.as_deref(), None));
    if let Some(why) = &status.cannot_write {
        out.push_str(&format!("writes through this beacon fail now: {why}\n"));
    }
    out
}

/// `endpoint health` and `endpoint status`: every beacon of the cluster, each asked directly
/// (as `etcdctl endpoint health|status --cluster`). The beacon list comes from the beacon
/// given with `-s`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Health,
    Status,
}

/// One beacon's answer to `endpoint health|status`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EndpointView {
    pub endpoint: String,
    /// Whether a write sent to it now would succeed.
    pub healthy: bool,
    /// Time to connect and answer.
    pub took_ms: f64,
    /// Why it is not healthy (unreachable, no majority, no leader).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<pb::BeaconStatus>,
}

impl Commands for Endpoint {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "endpoint health",
            "every beacon of the cluster: can a write sent to it succeed now; exits 1 when none can",
        ),
        (
            "endpoint status",
            "every beacon of the cluster: version, role, leader, term, commit, log, lag, mode, core beat (longest step gap and wait for the core over the last minute)",
        ),
    ];
    const SUBJECTS: &'static [&'static str] = &[];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        match head {
            ["endpoint", "health"] => {
                Some(none("endpoint health", &words[2..]).map(|()| Endpoint::Health))
            }
            ["endpoint", "status"] => {
                Some(none("endpoint status", &words[2..]).map(|()| Endpoint::Status))
            }
            ["endpoint", ..] => Some(Err(super::usage(
                "`endpoint` needs `health` or `status`".to_owned(),
            ))),
            _ => None,
        }
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let first = session
            .with_client(async |c| c.beacon_status().await)
            .await?;
        let mut views = Vec::new();
        for b in &first.beacons {
            views.push(ask(&b.node, session).await);
        }
        let out = match self {
            Endpoint::Health => session.print(&views, |v| render_health(v)),
            Endpoint::Status => session.print(&views, |v| render_status(v)),
        };
        let healthy = views.iter().filter(|v| v.healthy).count();
        if healthy == 0 {
            return Err(Failure::Found {
                out,
                why: format!(
                    "the cluster cannot write: none of its {} beacons can",
                    views.len()
                ),
            });
        }
        Ok(out)
    }
}

/// Asks `node` directly for its status, with the session's options.
async fn ask(node: &str, session: &Session) -> EndpointView {
    let started = std::time::Instant::now();
    let asked = async {
        let mut c = crate::net::Client::connect(node, &session.opts).await?;
        c.beacon_status().await
    }
    .await;
    let took_ms = started.elapsed().as_secs_f64() * 1e3;
    match asked {
        Ok(status) => EndpointView {
            endpoint: node.to_owned(),
            healthy: status.cannot_write.is_none(),
            took_ms,
            error: status.cannot_write.clone(),
            status: Some(status),
        },
        Err(e) => EndpointView {
            endpoint: node.to_owned(),
            healthy: false,
            took_ms,
            error: Some(e.to_string()),
            status: None,
        },
    }
}

fn render_health(views: &[EndpointView]) -> String {
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            vec![
                v.endpoint.clone(),
                yes_no(v.healthy),
                format!("{:.1} ms", v.took_ms),
                v.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let mut out = table::render(&["endpoint", "healthy", "took", "error"], &rows);
    let healthy = views.iter().filter(|v| v.healthy).count();
    out.push_str(&format!("{healthy} of {} beacons can write\n", views.len()));
    out
}

fn render_status(views: &[EndpointView]) -> String {
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| match &v.status {
            Some(s) => vec![
                v.endpoint.clone(),
                s.version.clone(),
                own_role(s),
                yes_no(s.leader.as_deref() == Some(v.endpoint.as_str())),
                s.leader.clone().unwrap_or_else(|| "none".into()),
                s.term.to_string(),
                s.commit.to_string(),
                format!("{}@{}", s.index, s.log_term),
                s.lag.to_string(),
                s.mode.clone(),
                format!("{} ms", s.step_gap_worst_ms),
                format!("{} ms", s.queue_wait_worst_ms),
                s.cannot_write.clone().unwrap_or_default(),
            ],
            None => {
                let mut row = vec![v.endpoint.clone()];
                row.extend(std::iter::repeat_n("-".to_owned(), 11));
                row.push(v.error.clone().unwrap_or_default());
                row
            }
        })
        .collect();
    table::render(
        &[
            "endpoint",
            "version",
            "role",
            "is_leader",
            "leader",
            "term",
            "commit",
            "log",
            "lag",
            "mode",
            "step_gap",
            "core_wait",
            "error",
        ],
        &rows,
    )
}

/// The answering beacon's role, from its own entry: `voter` or `learner`.
fn own_role(status: &pb::BeaconStatus) -> String {
    let own = status.beacons.iter().find(|b| b.is_self);
    match own.map(|b| b.role.as_str()) {
        Some("") | None => "voter".to_owned(),
        Some(role) => role.to_owned(),
    }
}

/// `leader transfer [HOST:PORT]`: hands the leadership to that beacon (or the one furthest
/// along), for maintenance, without an election gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderTransfer {
    pub to: Option<String>,
}

impl Commands for LeaderTransfer {
    const HELP: &'static [(&'static str, &'static str)] = &[(
        "leader transfer [HOST:PORT]",
        "hand the leadership to that beacon (none given: the online one furthest along) without an election gap: the leader stops taking writes, waits until the target holds every entry, and hands over (role admin)",
    )];
    const SUBJECTS: &'static [&'static str] = &[];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        match head {
            ["leader", "transfer"] => Some(match &words[2..] {
                [] => Ok(LeaderTransfer { to: None }),
                [to] if to.parse::<std::net::SocketAddr>().is_ok() => Ok(LeaderTransfer {
                    to: Some((*to).to_owned()),
                }),
                [to] => Err(super::usage(format!(
                    "`leader transfer`: `{to}` is not the IP:PORT of a beacon"
                ))),
                _ => Err(super::usage("usage: `leader transfer [HOST:PORT]`")),
            }),
            ["leader", ..] => Some(Err(super::usage("usage: `leader transfer [HOST:PORT]`"))),
            _ => None,
        }
    }

    /// Asks the leader itself, once: a transfer is not retried behind the operator's back
    /// (one that timed out is reported, and the old leader leads on).
    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let status = session
            .with_client(async |c| c.beacon_status().await)
            .await?;
        let Some(leader) = status.leader.clone() else {
            return Err(Failure::Check(
                "no leader is known: nothing to hand over (see `show beacon`)".into(),
            ));
        };
        let started = std::time::Instant::now();
        let mut c = crate::net::Client::connect(&leader, &session.opts).await?;
        let req = pb::TransferLeaderRequest {
            to: self.to.clone().unwrap_or_default(),
        };
        let reply: pb::TransferLeaderReply = c
            .request(
                crate::wire::Cmd::TransferLeader,
                &req,
                "the leader transfer",
            )
            .await?;
        let took_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(if session.json {
            super::json(&serde_json::json!({
                "leader": reply.leader,
                "previous": reply.previous,
                "took_ms": took_ms,
            }))
        } else if reply.leader == reply.previous {
            format!("{} leads already\n", reply.leader)
        } else {
            format!(
                "leadership handed from {} to {} in {took_ms:.1} ms\n",
                reply.previous, reply.leader
            )
        })
    }
}

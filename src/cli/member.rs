//! `member list|add|promote|remove`: the cluster's membership, changed one beacon at a time
//! while it runs (etcdctl's `member` commands). `beacon --join` adds itself through
//! [`change`], the same path.

use std::time::{Duration, Instant};

use super::table::{self, yes_no};
use super::{Commands, Failure, Session, UsageError, usage};
use crate::net::{Client, ClientError, ConnectOptions};
use crate::pb;
use crate::pb::change_members_request::Action;
use crate::wire::{Cmd, ErrorCode};

/// How long a change is retried while the cluster cannot take it yet (a change under way,
/// a leader just elected, the leadership moving away from a beacon being removed).
const RETRY_FOR: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    List,
    /// A new beacon, as a learner; promoted once it has kept up, unless `learner`.
    Add {
        node: String,
        learner: bool,
    },
    Promote(String),
    Remove(String),
}

const USAGE: &str = "usage: `member list`, `member add HOST:PORT [--learner]`, `member promote HOST:PORT`, `member remove HOST:PORT`";

impl Commands for Member {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "member list",
            "the members as the leader sees them: node, role, is_leader, is_online, stored, behind",
        ),
        (
            "member add HOST:PORT [--learner]",
            "adds a beacon as a learner; the leader makes it a voter once it has kept up (never with --learner)",
        ),
        ("member promote HOST:PORT", "makes a learner a voter"),
        (
            "member remove HOST:PORT",
            "removes a beacon (a leader hands its leadership over first)",
        ),
    ];
    const SUBJECTS: &'static [&'static str] = &[];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        if head.first() != Some(&"member") {
            return None;
        }
        let node = |w: &str| -> Result<String, UsageError> {
            w.parse::<std::net::SocketAddr>()
                .map(|_| w.to_owned())
                .map_err(|_| usage(format!("`{w}` is not the IP:PORT of a beacon")))
        };
        Some(match (head.get(1).copied(), &words[2.min(words.len())..]) {
            (Some("list"), []) => Ok(Member::List),
            (Some("add"), [n]) => node(n).map(|node| Member::Add {
                node,
                learner: false,
            }),
            (Some("add"), [n, flag] | [flag, n]) if *flag == "--learner" => {
                node(n).map(|node| Member::Add {
                    node,
                    learner: true,
                })
            }
            (Some("promote"), [n]) => node(n).map(Member::Promote),
            (Some("remove"), [n]) => node(n).map(Member::Remove),
            _ => Err(usage(USAGE)),
        })
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let status = session
            .with_client(async |c| c.beacon_status().await)
            .await?;
        let (action, node, learner) = match self {
            Member::List => return list(session, status).await,
            Member::Add { node, learner } => (Action::Add, node, *learner),
            Member::Promote(node) => (Action::Promote, node, false),
            Member::Remove(node) => (Action::Remove, node, false),
        };
        let req = pb::ChangeMembersRequest {
            action: action as i32,
            node: node.clone(),
            learner,
        };
        let started = Instant::now();
        let changed = change(&session.opts, &session.servers, &req).await?;
        let took_ms = started.elapsed().as_secs_f64() * 1e3;
        let members = changed.reply.members.unwrap_or_default();
        Ok(if session.json {
            super::json(&serde_json::json!({
                "voters": members.voters,
                "learners": members.learners,
                "promoting": members.promoting,
                "index": changed.reply.index,
                "leader": changed.reply.leader,
                "handed_over_from": changed.handed_over_from,
                "took_ms": took_ms,
            }))
        } else {
            let mut out = String::new();
            if let Some(from) = &changed.handed_over_from {
                out.push_str(&format!(
                    "{from} led: it handed its leadership to {} first\n",
                    changed.reply.leader
                ));
            }
            let what = match action {
                Action::Add if learner => format!("{node} added as a learner"),
                Action::Add => format!(
                    "{node} added as a learner; the leader makes it a voter once it has kept up"
                ),
                Action::Promote => format!("{node} promoted to voter"),
                Action::Remove => format!("{node} removed"),
            };
            out.push_str(&format!(
                "{what} (log index {}, {took_ms:.1} ms): voters [{}]{}\n",
                changed.reply.index,
                members.voters.join(", "),
                if members.learners.is_empty() {
                    String::new()
                } else {
                    format!(", learners [{}]", members.learners.join(", "))
                }
            ));
            out
        })
    }
}

/// The members as the leader sees them (its followers' progress included), else as the
/// beacon asked sees them.
async fn list(session: &mut Session, status: pb::BeaconStatus) -> Result<String, Failure> {
    let status = match status.leader.as_deref() {
        Some(leader) if leader != status.node => {
            match Client::connect(leader, &session.opts).await {
                Ok(mut c) => c.beacon_status().await.unwrap_or(status),
                Err(_) => status,
            }
        }
        _ => status,
    };
    Ok(session.print(&status, render))
}

/// `member list`'s table: each member's role and how far behind the leader it is.
pub fn render(status: &pb::BeaconStatus) -> String {
    let answered_by_leader = status.leader.as_deref() == Some(status.node.as_str());
    let rows: Vec<Vec<String>> = status
        .beacons
        .iter()
        .map(|b| {
            let mut role = if b.role.is_empty() { "voter" } else { &b.role }.to_owned();
            if b.promoting {
                role.push_str(" (to promote)");
            }
            if b.leaving {
                role = "leaving".into();
            }
            let behind = match b.stored {
                Some(stored) if answered_by_leader => {
                    status.index.saturating_sub(stored).to_string()
                }
                _ => "-".into(),
            };
            vec![
                b.node.clone(),
                role,
                yes_no(b.is_leader),
                yes_no(b.is_online),
                b.stored.map_or("-".into(), |s| s.to_string()),
                behind,
            ]
        })
        .collect();
    let mut out = table::render(
        &["node", "role", "is_leader", "is_online", "stored", "behind"],
        &rows,
    );
    out.push_str(&format!(
        "membership of log index {} ({}) · answered by {}{}\n",
        status.members_index,
        if status.members_index == 0 {
            "the configured one"
        } else {
            "changed while running"
        },
        status.node,
        if answered_by_leader {
            " (the leader)"
        } else {
            " (not the leader: progress unknown)"
        }
    ));
    out
}

/// A change made, and the leader that made it.
pub struct Changed {
    pub reply: pb::ChangeMembersReply,
    /// The beacon removed led: it handed the leadership over first.
    pub handed_over_from: Option<String>,
}

/// Makes one change of membership through the leader of the beacons `servers`: finds the
/// leader, hands the leadership away first when the leader is the beacon to remove, and
/// retries for a while what the cluster cannot take yet (a change under way, a leader just
/// elected, a leader that moved).
pub async fn change(
    opts: &ConnectOptions,
    servers: &[String],
    req: &pb::ChangeMembersRequest,
) -> Result<Changed, ClientError> {
    let started = Instant::now();
    let mut handed_over_from = None;
    let mut last: Option<ClientError> = None;
    let mut at: Option<String> = None;
    while started.elapsed() < RETRY_FOR {
        let leader = match at.take() {
            Some(l) => l,
            None => match find_leader(opts, servers).await {
                Ok(l) => l,
                Err(e) => {
                    last = Some(e);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        let attempt = async {
            let mut c = Client::connect(&leader, opts).await?;
            if req.action == Action::Remove as i32 && req.node == leader {
                // A leader does not remove itself: it hands over to the online voter
                // furthest along, which then removes it.
                let handed: pb::TransferLeaderReply = c
                    .request(
                        Cmd::TransferLeader,
                        &pb::TransferLeaderRequest::default(),
                        "the leader transfer",
                    )
                    .await?;
                return Ok(Err(handed.leader));
            }
            c.request(Cmd::ChangeMembers, req, "the membership change")
                .await
                .map(Ok)
        };
        match attempt.await {
            Ok(Ok(reply)) => {
                return Ok(Changed {
                    reply,
                    handed_over_from,
                });
            }
            Ok(Err(new_leader)) => {
                handed_over_from = Some(leader);
                at = Some(new_leader);
            }
            Err(ClientError::Refused {
                code, leader: hint, ..
            }) if code == ErrorCode::NotLeader as u32 && hint.is_some() => {
                at = hint;
            }
            Err(e @ ClientError::Refused { code, .. })
                if code == ErrorCode::Unavailable as u32
                    || code == ErrorCode::NotLeader as u32
                    || code == ErrorCode::NoQuorum as u32
                    || code == ErrorCode::LeaderChanged as u32 =>
            {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e @ ClientError::Refused { .. }) => return Err(e),
            Err(e) => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let last = last.unwrap_or_else(|| no_leader(servers.join(",")));
    Err(ClientError::NoLeader {
        what: "the membership change",
        waited: RETRY_FOR,
        last: Box::new(last),
    })
}

/// A beacon that knows no leader, as an error.
fn no_leader(addr: String) -> ClientError {
    ClientError::Refused {
        addr,
        what: "the membership change",
        code: ErrorCode::NotLeader as u32,
        msg: "no leader is known yet".into(),
        leader: None,
        retry_after: None,
    }
}

/// The leader, as the first of `servers` that knows one says. A beacon that knows none (an
/// election under way, or a beacon removed from the cluster, which nobody sends heartbeats
/// any more) has the voters it lists asked after the servers given.
async fn find_leader(opts: &ConnectOptions, servers: &[String]) -> Result<String, ClientError> {
    let mut last = None;
    let mut ask: Vec<String> = servers.to_vec();
    let mut i = 0;
    while let Some(server) = ask.get(i).cloned() {
        i += 1;
        match Client::connect(&server, opts).await {
            Ok(mut c) => match c.beacon_status().await {
                Ok(status) => match status.leader {
                    Some(leader) => return Ok(leader),
                    None => {
                        last = Some(no_leader(server));
                        for b in status.beacons.iter().filter(|b| b.role == "voter") {
                            if !ask.contains(&b.node) {
                                ask.push(b.node.clone());
                            }
                        }
                    }
                },
                Err(e) => last = Some(e),
            },
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| no_leader("(no beacon given)".into())))
}

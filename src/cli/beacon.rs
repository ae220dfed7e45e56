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
        "the beacon cluster as this beacon sees it: node, is_leader, is_online, term, last_seen_ms",
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
            vec![
                b.node.clone(),
                yes_no(b.is_leader),
                yes_no(b.is_online),
                b.term.to_string(),
                opt_ms(b.last_seen_ms),
                opt_ms(b.stored),
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
        ],
        &rows,
    );
    out.push_str(&format!(
        "mode {} · term {} · commit {} · log {}@{} · leader {} (answered by {})\n",
        status.mode,
        status.term,
        status.commit,
        status.index,
        status.log_term,
        status.leader.as_deref().unwrap_or("none"),
        status.node
    ));
    out.push_str(&stale_warning(status.stale.as_deref()));
    out
}

//! The registry's DNS names, answered by the DNS edge from the replica:
//!
//! * `TYPE.service.beacon.`: the serving registrations of node type `TYPE` (passing or
//!   warning, not draining), each named `ID.node` for its `SRV` record. Node types are
//!   case-sensitive in beacon and DNS names are not, so `TYPE` matches every type that
//!   differs from it only in case. A type with registrations but none serving is a name
//!   with no records; a type with none is no name at all.
//! * `ID.node.beacon.`: registration `ID`, whatever its health (an operator asking for one
//!   registration gets it).
//!
//! Leading labels that start with `_` (RFC 2782's `_http._tcp.`, which nginx and HAProxy put
//! before a name they ask `SRV` records of) are passed over.

use super::state::{NodeId, Registry};
use crate::machines::DnsInstance;

/// The instances `labels` (below the zone) name, if the registry knows the name.
pub(crate) fn lookup(registry: &Registry, labels: &[String]) -> Option<Vec<DnsInstance>> {
    let instance = |id: NodeId, addr| DnsInstance {
        name: format!("{id}.node"),
        addr,
    };
    let start = labels.iter().take_while(|l| l.starts_with('_')).count();
    match &labels[start..] {
        [node_type, kind] if kind.eq_ignore_ascii_case("service") => {
            let mut known = false;
            let serving = registry
                .nodes()
                .filter(|r| r.node_type.eq_ignore_ascii_case(node_type))
                .inspect(|_| known = true)
                .filter(|r| r.health().serving())
                .map(|r| instance(r.node_id, r.addr))
                .collect();
            known.then_some(serving)
        }
        [id, kind] if kind.eq_ignore_ascii_case("node") => {
            let id: NodeId = id.parse().ok()?;
            registry.get(id).map(|r| vec![instance(id, r.addr)])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::machines::registry::state::{Command, Health, IdRange, NodeRecord, Status};

    fn record(id: NodeId, node_type: &str, health: Health) -> NodeRecord {
        NodeRecord {
            node_id: id,
            node_type: node_type.into(),
            addr: format!("10.0.0.{id}:80{id:02}").parse().unwrap(),
            access_addr: None,
            worker_num: 0,
            metadata: "".into(),
            registered_ms: 0,
            term: 1,
            index: u64::from(id),
            owner: "".into(),
            health: None,
        }
        .with_health(health)
    }

    fn names(found: Option<Vec<DnsInstance>>) -> Option<Vec<String>> {
        found.map(|v| {
            v.into_iter()
                .map(|i| format!("{} {}", i.name, i.addr))
                .collect()
        })
    }

    #[test]
    fn a_service_is_its_serving_registrations_a_node_is_one_whatever_its_health() {
        let mut reg = Registry::new(IdRange::DEFAULT, 1000);
        let critical = Health {
            status: Status::Critical,
            ..Health::default()
        };
        let draining = Health {
            draining: true,
            ..Health::default()
        };
        let warning = Health {
            status: Status::Warning,
            ..Health::default()
        };
        for r in [
            record(1, "WEB", Health::default()),
            record(2, "Web", warning),
            record(3, "WEB", critical.clone()),
            record(4, "WEB", draining),
            record(5, "DB", critical),
        ] {
            reg.apply(&Command::Register(Arc::new(r)), 0).unwrap();
        }
        let ask = |labels: &[&str]| {
            let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
            names(lookup(&reg, &labels))
        };
        assert_eq!(
            ask(&["web", "SERVICE"]),
            Some(vec![
                "1.node 10.0.0.1:8001".into(),
                "2.node 10.0.0.2:8002".into()
            ])
        );
        assert_eq!(ask(&["db", "service"]), Some(vec![]), "known, none serving");
        assert_eq!(ask(&["cache", "service"]), None, "no such type");
        assert_eq!(
            ask(&["3", "node"]),
            Some(vec!["3.node 10.0.0.3:8003".into()])
        );
        assert_eq!(ask(&["9", "node"]), None);
        assert_eq!(ask(&["x", "node"]), None);
        assert_eq!(ask(&["a", "web", "service"]), None);
        assert_eq!(
            ask(&["_http", "_tcp", "web", "service"]),
            ask(&["web", "service"]),
            "RFC 2782's service and protocol labels are passed over"
        );
        assert_eq!(ask(&["_http", "_tcp"]), None);
    }
}

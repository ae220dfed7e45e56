//! A DNS query in, its answer out: no sockets and no machine here, only how beacon answers
//! a name in its zone (`beacon.`), so every rule is tested on bytes. What a name stands for
//! is the machines' to say ([`crate::machines::Served::dns`]: the registry's
//! `TYPE.service.beacon.` and `ID.node.beacon.`).
//!
//! A name stands for instances, each an address and the name of that instance alone: an
//! `A` / `AAAA` query gets their addresses, an `SRV` query their ports with those names as
//! targets, whose addresses come in the additional section. A name nobody knows is
//! `NXDOMAIN`; a known name asked for a type it has no records of (`MX`, `TXT`, an `A` of an
//! IPv6-only service) is `NOERROR` with no answer. A UDP answer larger than the asker takes
//! (512 bytes, or what its EDNS offers, up to 1232) goes with the `TC` bit and no records,
//! so the resolver asks again over TCP, which answers in full.

use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};

pub use crate::machines::DnsInstance as Instance;

/// The zone beacon answers for.
pub const DOMAIN: &str = "beacon";

/// The largest UDP answer beacon sends to an asker that offers more (EDNS): the size the
/// DNS flag day of 2020 settled on, which no path fragments.
const MAX_UDP: usize = 1232;

/// How a query was answered, for the metrics (`beacon_dns_queries_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Records went back.
    Answered,
    /// The name exists but holds no records of the type asked.
    NoData,
    NxDomain,
    /// Too large for UDP: sent with `TC` and no records.
    Truncated,
    /// Not a query beacon understands (`FORMERR`, `NOTIMP`), or a name outside its zone
    /// (`REFUSED`).
    Refused,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::NoData => "no_data",
            Outcome::NxDomain => "nxdomain",
            Outcome::Truncated => "truncated",
            Outcome::Refused => "refused",
        }
    }
}

/// How the answer travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// The labels of `name` below beacon's zone, as asked (in their case), if it is in it: for
/// `Web.service.beacon.`, `["Web", "service"]`.
pub fn labels(name: &Name) -> Option<Vec<String>> {
    let mut labels: Vec<String> = name
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    let zone = labels.pop()?;
    (zone.eq_ignore_ascii_case(DOMAIN) && !labels.is_empty()).then_some(labels)
}

/// Whether `name` is beacon's zone or below it, in any case.
pub fn in_zone(name: &Name) -> bool {
    name.iter()
        .next_back()
        .is_some_and(|zone| zone.eq_ignore_ascii_case(DOMAIN.as_bytes()))
}

/// The answer to query `request` (the bytes off the wire), with how it went; `None` when
/// the bytes are not a DNS query at all (nothing is sent back). `lookup` gives the
/// instances a name holds from its [`labels`] below the zone (`None`: no such name).
pub fn answer(
    request: &[u8],
    transport: Transport,
    ttl: u32,
    lookup: impl FnOnce(&[String]) -> Option<Arc<Vec<Instance>>>,
) -> Option<(Vec<u8>, Outcome)> {
    let query = match Message::from_vec(request) {
        Ok(q) => q,
        Err(_) => {
            // A header at least: say what was wrong to its id, as resolvers expect.
            let id = u16::from_be_bytes([*request.first()?, *request.get(1)?]);
            let refusal = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
            return Some((refusal.to_vec().ok()?, Outcome::Refused));
        }
    };
    if query.message_type() != MessageType::Query {
        return None;
    }
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(query.op_code())
        .set_authoritative(true)
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(false);
    if query.extensions().is_some() {
        let mut ours = Edns::new();
        ours.set_max_payload(MAX_UDP as u16).set_version(0);
        reply.set_edns(ours);
    }
    let refuse = |mut reply: Message, code| {
        reply.set_response_code(code);
        Some((reply.to_vec().ok()?, Outcome::Refused))
    };
    if query.op_code() != OpCode::Query {
        return refuse(reply, ResponseCode::NotImp);
    }
    let [question] = query.queries() else {
        return refuse(reply, ResponseCode::FormErr);
    };
    reply.add_query(question.clone());
    let name = question.name();
    if !in_zone(name) {
        // Not beacon's to say: REFUSED, as an authoritative server answers for a zone it
        // does not serve. NXDOMAIN would tell a resolver that forwards more than the zone
        // that the name does not exist, and it would cache that.
        reply.set_authoritative(false);
        return refuse(reply, ResponseCode::Refused);
    }
    let below = labels(name);
    let instances = match below {
        Some(l) => match lookup(&l) {
            Some(found) => found,
            None => {
                reply.set_response_code(ResponseCode::NXDomain);
                return Some((reply.to_vec().ok()?, Outcome::NxDomain));
            }
        },
        // The zone's own name exists (everything is below it) and holds no records:
        // NXDOMAIN there would deny every name of the zone to a resolver (RFC 8020).
        None => Arc::new(Vec::new()),
    };
    let qtype = question.query_type();
    for i in instances.iter() {
        match (qtype, i.addr.ip()) {
            (RecordType::A | RecordType::ANY, IpAddr::V4(ip)) => {
                reply.add_answer(Record::from_rdata(name.clone(), ttl, RData::A(A(ip))));
            }
            (RecordType::AAAA | RecordType::ANY, IpAddr::V6(ip)) => {
                reply.add_answer(Record::from_rdata(name.clone(), ttl, RData::AAAA(AAAA(ip))));
            }
            (RecordType::SRV, ip) => {
                let target = Name::from_ascii(format!("{}.{DOMAIN}.", i.name)).ok()?;
                let srv = SRV::new(1, 1, i.addr.port(), target.clone());
                reply.add_answer(Record::from_rdata(name.clone(), ttl, RData::SRV(srv)));
                let address = match ip {
                    IpAddr::V4(ip) => RData::A(A(ip)),
                    IpAddr::V6(ip) => RData::AAAA(AAAA(ip)),
                };
                reply.add_additional(Record::from_rdata(target, ttl, address));
            }
            _ => {}
        }
    }
    let outcome = if reply.answers().is_empty() {
        Outcome::NoData
    } else {
        Outcome::Answered
    };
    let bytes = reply.to_vec().ok()?;
    let room = match query.extensions() {
        Some(edns) => usize::from(edns.max_payload()).clamp(512, MAX_UDP),
        None => 512,
    };
    if transport == Transport::Udp && bytes.len() > room {
        reply.take_answers();
        reply.take_additionals();
        reply.set_truncated(true);
        return Some((reply.to_vec().ok()?, Outcome::Truncated));
    }
    Some((bytes, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use std::net::SocketAddr;

    fn query(name: &str, qtype: RecordType) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(7)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query)
            .set_recursion_desired(true)
            .add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
        m.to_vec().unwrap()
    }

    fn instances(n: u16) -> Vec<Instance> {
        (1..=n)
            .map(|i| Instance {
                name: format!("{i}.node"),
                addr: SocketAddr::from(([10, 0, (i / 200) as u8, (i % 200) as u8], 8000 + i)),
            })
            .collect()
    }

    fn ask(name: &str, qtype: RecordType, over: Transport, n: u16) -> (Message, Outcome) {
        let (bytes, outcome) = answer(&query(name, qtype), over, 0, |labels| {
            match labels
                .iter()
                .map(|l| l.to_ascii_lowercase())
                .collect::<Vec<_>>()[..]
            {
                [ref t, ref s] if t == "web" && s == "service" => Some(Arc::new(instances(n))),
                [ref id, ref s] if id == "1" && s == "node" => Some(Arc::new(instances(1))),
                _ => None,
            }
        })
        .expect("answered");
        (Message::from_vec(&bytes).unwrap(), outcome)
    }

    #[test]
    fn the_zone_is_beacon_in_any_case() {
        let name = |s: &str| Name::from_ascii(s).unwrap();
        assert_eq!(
            labels(&name("Web.Service.BEACON.")),
            Some(vec!["Web".into(), "Service".into()])
        );
        for other in ["web.service.consul.", "beacon.", "."] {
            assert_eq!(labels(&name(other)), None, "{other}");
        }
    }

    #[test]
    fn a_service_gives_its_addresses_and_srv_records_with_their_targets() {
        let (m, outcome) = ask("WEB.service.beacon.", RecordType::A, Transport::Udp, 3);
        assert_eq!(outcome, Outcome::Answered);
        assert_eq!((m.id(), m.response_code()), (7, ResponseCode::NoError));
        assert!(m.authoritative() && m.recursion_desired() && !m.recursion_available());
        let ips: Vec<String> = m.answers().iter().map(|r| r.data().to_string()).collect();
        assert_eq!(ips, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
        assert!(m.answers().iter().all(|r| r.ttl() == 0));
        let (m, _) = ask("web.service.beacon.", RecordType::SRV, Transport::Udp, 2);
        let srv: Vec<String> = m.answers().iter().map(|r| r.data().to_string()).collect();
        assert_eq!(srv, ["1 1 8001 1.node.beacon.", "1 1 8002 2.node.beacon."]);
        let extra: Vec<String> = m
            .additionals()
            .iter()
            .map(|r| format!("{} {}", r.name(), r.data()))
            .collect();
        assert_eq!(
            extra,
            ["1.node.beacon. 10.0.0.1", "2.node.beacon. 10.0.0.2"]
        );
    }

    #[test]
    fn unknown_names_are_nxdomain_and_unsupported_types_empty() {
        let (m, outcome) = ask("db.service.beacon.", RecordType::A, Transport::Udp, 1);
        assert_eq!(
            (m.response_code(), outcome),
            (ResponseCode::NXDomain, Outcome::NxDomain)
        );
        assert_eq!(m.queries().len(), 1, "the question comes back");
        let (m, outcome) = ask("web.service.beacon.", RecordType::MX, Transport::Udp, 1);
        assert_eq!(
            (m.response_code(), outcome),
            (ResponseCode::NoError, Outcome::NoData)
        );
        assert!(m.answers().is_empty());
        let (m, outcome) = ask("web.service.beacon.", RecordType::AAAA, Transport::Udp, 1);
        assert_eq!(outcome, Outcome::NoData, "IPv4 instances have no AAAA");
        assert!(m.answers().is_empty());
        let (m, _) = ask("1.node.beacon.", RecordType::A, Transport::Udp, 1);
        assert_eq!(m.answers()[0].data().to_string(), "10.0.0.1");
    }

    #[test]
    fn names_outside_the_zone_are_refused_and_the_zone_itself_exists() {
        for outside in ["example.com.", "beacon.example.com.", "com.", "."] {
            let (m, outcome) = ask(outside, RecordType::A, Transport::Udp, 1);
            assert_eq!(
                (m.response_code(), outcome),
                (ResponseCode::Refused, Outcome::Refused),
                "{outside}"
            );
            assert!(!m.authoritative(), "{outside}: not beacon's zone");
            assert_eq!(m.queries().len(), 1, "{outside}: the question comes back");
        }
        for apex in ["beacon.", "BEACON."] {
            let (m, outcome) = ask(apex, RecordType::A, Transport::Udp, 1);
            assert_eq!(
                (m.response_code(), outcome),
                (ResponseCode::NoError, Outcome::NoData),
                "{apex}"
            );
            assert!(m.authoritative());
        }
    }

    #[test]
    fn too_large_for_udp_is_truncated_and_tcp_answers_in_full() {
        let (m, outcome) = ask("web.service.beacon.", RecordType::A, Transport::Udp, 100);
        assert_eq!(outcome, Outcome::Truncated);
        assert!(m.truncated() && m.answers().is_empty());
        let (m, outcome) = ask("web.service.beacon.", RecordType::A, Transport::Tcp, 100);
        assert_eq!(outcome, Outcome::Answered);
        assert_eq!(m.answers().len(), 100);
        assert!(!m.truncated());
    }

    #[test]
    fn what_is_not_a_query_is_refused_or_dropped() {
        // Garbage with a header's worth of bytes: FORMERR to its id.
        let (bytes, outcome) = answer(&[0, 9, 0xff, 0xff, 1], Transport::Udp, 0, |_| None)
            .expect("a header's id is answered");
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!((m.id(), m.response_code()), (9, ResponseCode::FormErr));
        assert_eq!(outcome, Outcome::Refused);
        // One byte: nothing to answer to.
        assert!(answer(&[1], Transport::Udp, 0, |_| None).is_none());
        // A response is never answered (no loops between two servers).
        let mut m = Message::from_vec(&query("web.service.beacon.", RecordType::A)).unwrap();
        m.set_message_type(MessageType::Response);
        assert!(answer(&m.to_vec().unwrap(), Transport::Udp, 0, |_| None).is_none());
        // Another opcode: NOTIMP.
        let mut m = Message::from_vec(&query("web.service.beacon.", RecordType::A)).unwrap();
        m.set_op_code(OpCode::Update);
        let (bytes, _) = answer(&m.to_vec().unwrap(), Transport::Udp, 0, |_| None).unwrap();
        assert_eq!(
            Message::from_vec(&bytes).unwrap().response_code(),
            ResponseCode::NotImp
        );
    }
}

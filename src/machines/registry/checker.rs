//! The registry's workload and invariants for the simulations ([`crate::sim::Workload`]).
//!
//! Services register, report on their leases, give their IDs up or just drop them (the lease
//! then runs out and the ID goes to quarantine), as the client library does; their requests
//! may be lost, late, or held back for seconds and arrive long after the service moved on.
//! Checked after every step:
//!
//! * no node ID is believed held by two services at once (a service believes it holds its ID
//!   until a lease after the last report a leader confirmed was sent, as the client library
//!   counts);
//! * no write acts on a registration other than the one its sender held: a report or an
//!   unregister is answered for the sender's own registration only, and no service learns
//!   its registration was ended while it still, rightly, believed it held it;
//! * no believed registration is missing from a leader that has taken over;
//!
//! and once the faults heal, every beacon holds every believed registration it committed.

use std::net::SocketAddr;

use super::service::{RegisterRequest, RegistryError, Report, Request, Response, Unregister};
use super::state::{FencingToken, NodeId, Registry};
use super::{RegistryService, Target};
use crate::consensus::{Reply, ReplyError, Token};
use crate::machines::{Part, Routes};
use crate::sim::{Answer, Checked, Context, InFlight, Probe, View, Workload};
use crate::time::Millis;

/// The clients' timing.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The lease the beacons grant (their `lease_ms`).
    pub lease: Millis,
    /// A service reports this often (the client library reports four times per lease).
    pub report_every: Millis,
    /// A registration or unregister unanswered this long is sent again.
    pub request_timeout: Millis,
}

impl Timing {
    pub fn for_lease(lease: Millis) -> Timing {
        Timing {
            lease,
            report_every: lease / 4,
            request_timeout: 1_000,
        }
    }
}

/// A registration a service holds.
#[derive(Debug, Clone, Copy)]
pub struct Holding {
    pub addr: SocketAddr,
    pub id: NodeId,
    pub token: FencingToken,
    /// The term of the leader that acknowledged it: every leader of a later term has it.
    pub acked_in: u64,
    /// When the last report a leader confirmed (or the registration) was sent: the service
    /// believes it holds the ID until a lease after it.
    pub confirmed: Millis,
    next_report: Millis,
    /// When the service stops holding it.
    until: Millis,
    lease: Millis,
    /// At the end it gives the ID up (an unregister); otherwise it just stops (the lease
    /// runs out).
    release: bool,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Idle {
        until: Millis,
    },
    Registering {
        addr: SocketAddr,
        /// When the first attempt was sent: the lease is counted from there.
        started: Millis,
        sent: Option<(Token, Millis)>,
        retry_at: Millis,
    },
    Holding(Holding),
    Unregistering {
        held: Holding,
        sent: Option<(Token, Millis)>,
        retry_at: Millis,
    },
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Register { addr: SocketAddr },
    Report { token: FencingToken },
    Unregister { token: FencingToken },
}

/// What a client sent a request for, and when.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    kind: Kind,
    sent_at: Millis,
}

struct Client {
    phase: Phase,
    registrations: u16,
}

/// What the services got through.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub acks: u64,
    pub confirmed_reports: u64,
    pub unregistered: u64,
    /// Late requests refused because they named a registration that had ended.
    pub stale_refused: u64,
}

/// Services using the registry of a composite state `S` served by `V`, as its clients.
pub struct Clients {
    timing: Timing,
    clients: Vec<Client>,
    in_flight: InFlight<Pending>,
    pub counters: Counters,
}

/// The address of client `client`'s `n`th registration.
fn service_addr(client: usize, n: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, client as u8 + 1], n + 1))
}

/// A registration of `addr` as the client library sends it.
pub fn register_request(addr: SocketAddr, wall_ms: u64) -> Request {
    register_as("LOGIC", addr, wall_ms)
}

/// A registration of `addr` as a service of `node_type` (the other machines' workloads
/// register workers so).
pub fn register_as(node_type: &str, addr: SocketAddr, wall_ms: u64) -> Request {
    Request::Register(Box::new(RegisterRequest {
        caller: Default::default(),
        node_type: node_type.into(),
        addr,
        access_addr: None,
        worker_num: 1,
        metadata: String::new(),
        wall_ms,
    }))
}

/// A report renewing `h`, `routine` (its confirmation may wait for the next heartbeat) or not.
fn report_request(h: &Holding, routine: bool) -> Request {
    let mut request = renewal(h.id, h.addr, h.token);
    if let Request::Report(r) = &mut request {
        r.routine = routine;
    }
    request
}

/// A bare report renewing registration `token` of node `id` at `addr`.
pub fn renewal(id: NodeId, addr: SocketAddr, token: FencingToken) -> Request {
    Request::Report(Report {
        caller: Default::default(),
        node_id: id,
        addr,
        token,
        load: None,
        clock_ms: 0,
        health: None,
        routine: false,
    })
}

impl Holding {
    /// A service stops using its ID a lease after the last confirmed report was sent.
    pub fn believed_until(&self) -> Millis {
        self.confirmed + self.lease
    }
}

impl Clients {
    pub fn new(clients: usize, timing: Timing) -> Clients {
        Clients {
            timing,
            clients: (0..clients)
                .map(|_| Client {
                    phase: Phase::Idle { until: 0 },
                    registrations: 0,
                })
                .collect(),
            in_flight: InFlight::default(),
            counters: Counters::default(),
        }
    }

    /// Services that believe they hold an ID at `now`.
    pub fn believers(&self, now: Millis) -> Vec<Holding> {
        self.clients
            .iter()
            .filter_map(|c| match c.phase {
                Phase::Holding(h) if now < h.believed_until() => Some(h),
                _ => None,
            })
            .collect()
    }

    /// A registration was acknowledged: no other service may believe it holds that ID.
    fn acknowledged(&mut self, now: Millis, at: SocketAddr, held: &Holding) -> Checked {
        self.counters.acks += 1;
        if let Some(other) = self
            .believers(now)
            .into_iter()
            .find(|h| h.addr != held.addr && h.id == held.id)
        {
            return Err(format!(
                "ID {} acknowledged to {} by {at} at {} while {} holds it since {} (believed until {})",
                held.id,
                held.addr,
                held.token,
                other.addr,
                other.token,
                other.believed_until()
            ));
        }
        Ok(())
    }

    fn send<S, V>(
        &mut self,
        cx: &mut dyn Context<V::Request>,
        client: usize,
        kind: Kind,
        request: Request,
    ) -> Option<Token>
    where
        S: Part<Registry>,
        V: Routes<S, RegistryService>,
    {
        let request = <V as Routes<S, RegistryService>>::request(request);
        let pending = Pending {
            kind,
            sent_at: cx.now(),
        };
        let timeout = self.timing.request_timeout;
        self.in_flight.send(cx, client, request, pending, timeout)
    }

    /// Moves client `i` on as time passes: registrations start, retries fall due, leases
    /// lapse, holders stop.
    fn advance<R>(&mut self, cx: &mut dyn Context<R>, i: usize) -> Option<Phase> {
        let now = cx.now();
        let timeout = self.timing.request_timeout;
        let phase = self.clients[i].phase;
        match phase {
            Phase::Idle { until } if now >= until => {
                let n = self.clients[i].registrations;
                self.clients[i].registrations += 1;
                Some(Phase::Registering {
                    addr: service_addr(i, n),
                    started: now,
                    sent: None,
                    retry_at: now,
                })
            }
            Phase::Registering {
                addr,
                started,
                sent: Some((_, at)),
                ..
            } if now - at > timeout => Some(Phase::Registering {
                addr,
                started,
                sent: None,
                retry_at: now,
            }),
            Phase::Holding(h) if now >= h.believed_until() => {
                // No leader confirmed the lease for a whole lease: the service stops using
                // the ID (the client library's "unconfirmed").
                cx.note(format!(
                    "LOST {} (ID {}, {}): unconfirmed for a lease",
                    h.addr, h.id, h.token
                ));
                Some(Phase::Idle {
                    until: now + cx.below(300),
                })
            }
            Phase::Holding(h) if now >= h.until => {
                if h.release {
                    // From the moment it asks to unregister, the service no longer uses it.
                    Some(Phase::Unregistering {
                        held: h,
                        sent: None,
                        retry_at: now,
                    })
                } else {
                    cx.note(format!("DROP {} (ID {})", h.addr, h.id));
                    Some(Phase::Idle {
                        until: now + cx.below(300),
                    })
                }
            }
            Phase::Unregistering {
                held,
                sent: Some((_, at)),
                ..
            } if now - at > timeout => Some(Phase::Unregistering {
                held,
                sent: None,
                retry_at: now,
            }),
            _ => None,
        }
    }
}

impl<S, V> Workload<S, V> for Clients
where
    S: Part<Registry>,
    V: Routes<S, RegistryService>,
{
    type Sent = Pending;

    fn in_flight(&mut self) -> &mut InFlight<Pending> {
        &mut self.in_flight
    }

    fn act(&mut self, cx: &mut dyn Context<V::Request>) -> Checked {
        let now = cx.now();
        for i in 0..self.clients.len() {
            if let Some(p) = self.advance(cx, i) {
                self.clients[i].phase = p;
            }
            match self.clients[i].phase {
                Phase::Registering {
                    addr,
                    started,
                    sent: None,
                    retry_at,
                } if now >= retry_at => {
                    let request = register_request(addr, 1_800_000_000_000 + now);
                    let kind = Kind::Register { addr };
                    if let Some(token) = self.send::<S, V>(cx, i, kind, request) {
                        self.clients[i].phase = Phase::Registering {
                            addr,
                            started,
                            sent: Some((token, now)),
                            retry_at,
                        };
                    }
                }
                Phase::Holding(mut h) if now >= h.next_report => {
                    h.next_report = now + self.timing.report_every;
                    self.clients[i].phase = Phase::Holding(h);
                    let kind = Kind::Report { token: h.token };
                    let routine = cx.chance(0.5);
                    self.send::<S, V>(cx, i, kind, report_request(&h, routine));
                }
                Phase::Unregistering {
                    held,
                    sent: None,
                    retry_at,
                } if now >= retry_at => {
                    // By address or by ID: either way it names its registration.
                    let target = if cx.chance(0.5) {
                        Target::Addr(held.addr)
                    } else {
                        Target::Id(held.id)
                    };
                    let request = Request::Unregister(Unregister {
                        caller: Default::default(),
                        target,
                        token: held.token,
                        release: true,
                        clock_ms: 0,
                    });
                    let kind = Kind::Unregister { token: held.token };
                    if let Some(token) = self.send::<S, V>(cx, i, kind, request) {
                        self.clients[i].phase = Phase::Unregistering {
                            held,
                            sent: Some((token, now)),
                            retry_at,
                        };
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn answered(&mut self, cx: &mut dyn Context<V::Request>, a: Answer<S, V, Pending>) -> Checked {
        let (at, term, token, p, reply) = (a.from, a.term, a.token, a.sent, a.reply);
        let result: Result<Response, ReplyError<RegistryError>> = match reply {
            Ok(r) => Ok(V::response(r).ok_or("another machine's answer to a registry request")?),
            Err(ReplyError::Consensus(e)) => Err(ReplyError::Consensus(e)),
            Err(ReplyError::Machine(e)) => Err(ReplyError::Machine(
                V::error(e).ok_or("another machine's refusal of a registry request")?,
            )),
        };
        let now = cx.now();
        if let Err(e) = &result {
            cx.note(format!("REFUSED {token} {:?} by {at}: {e}", p.kind));
            if matches!(
                (p.kind, e),
                (
                    Kind::Report { .. },
                    ReplyError::Machine(RegistryError::NoLease { .. })
                ) | (
                    Kind::Unregister { .. },
                    ReplyError::Machine(
                        RegistryError::NotHolder { .. } | RegistryError::UnknownTarget(_)
                    )
                )
            ) {
                self.counters.stale_refused += 1;
            }
        }
        // Every answer for a registration names the sender's own.
        let acted = match &result {
            Ok(Response::Reported { token, .. }) => Some(*token),
            Ok(Response::Unregistered(record)) => Some(record.token()),
            _ => None,
        };
        if let (Kind::Report { token: mine } | Kind::Unregister { token: mine }, Some(acted)) =
            (p.kind, acted)
            && acted != mine
        {
            return Err(format!(
                "{at} acted on registration {acted} for a request that named {mine}"
            ));
        }
        let client = a.client;
        let backoff = now + 20;
        let next = match (self.clients[client].phase, p.kind, result) {
            (
                Phase::Registering { addr, started, .. },
                Kind::Register { addr: asked },
                Ok(Response::Registered { record, .. }),
            ) if asked == addr => {
                if record.addr != addr {
                    return Err(format!(
                        "{at} answered {addr}'s registration with {record:?}"
                    ));
                }
                let held = Holding {
                    addr,
                    id: record.node_id,
                    token: record.token(),
                    acked_in: term,
                    confirmed: started,
                    next_report: now + self.timing.report_every,
                    until: now + 100 + cx.below(2_500),
                    release: cx.chance(0.7),
                    lease: self.timing.lease,
                };
                cx.note(format!(
                    "ACK {} -> ID {} at {} by {at}",
                    held.addr, held.id, held.token
                ));
                self.acknowledged(now, at, &held)?;
                Some(Phase::Holding(held))
            }
            (
                Phase::Registering {
                    sent: Some((t, _)),
                    addr,
                    started,
                    ..
                },
                _,
                Err(_),
            ) if t == token => Some(Phase::Registering {
                addr,
                started,
                sent: None,
                retry_at: backoff,
            }),
            (
                Phase::Holding(mut h),
                Kind::Report { token: named },
                Ok(Response::Reported { .. }),
            ) if named == h.token => {
                self.counters.confirmed_reports += 1;
                h.confirmed = h.confirmed.max(p.sent_at);
                Some(Phase::Holding(h))
            }
            (
                Phase::Holding(h),
                Kind::Report { token: named },
                Err(ReplyError::Machine(RegistryError::NoLease { .. })),
            ) if named == h.token => {
                if now < h.believed_until() {
                    return Err(format!(
                        "{} was told by {at} that its registration {} (ID {}) is gone while its lease, confirmed at {}, holds until {}",
                        h.addr,
                        h.token,
                        h.id,
                        h.confirmed,
                        h.believed_until()
                    ));
                }
                Some(Phase::Idle {
                    until: now + cx.below(300),
                })
            }
            (
                Phase::Unregistering {
                    held,
                    sent: Some((t, _)),
                    ..
                },
                Kind::Unregister { .. },
                result,
            ) if t == token => match result {
                Ok(Response::Unregistered(_)) => {
                    self.counters.unregistered += 1;
                    cx.note(format!("UNREGISTERED {} (ID {})", held.addr, held.id));
                    Some(Phase::Idle {
                        until: now + cx.below(500),
                    })
                }
                // Gone already: expired meanwhile, or an earlier attempt went through.
                Err(ReplyError::Machine(
                    RegistryError::NotHolder { .. } | RegistryError::UnknownTarget(_),
                )) => Some(Phase::Idle {
                    until: now + cx.below(500),
                }),
                _ => Some(Phase::Unregistering {
                    held,
                    sent: None,
                    retry_at: backoff,
                }),
            },
            _ => None, // a late answer to a request retried or given up since
        };
        if let Some(next) = next {
            self.clients[client].phase = next;
        }
        Ok(())
    }

    fn check(&mut self, now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        let believers = self.believers(now);
        for (i, a) in believers.iter().enumerate() {
            if let Some(b) = believers[i + 1..].iter().find(|b| b.id == a.id) {
                return Err(format!(
                    "ID {} believed held by {} ({}) and by {} ({}) at once",
                    a.id, a.addr, a.token, b.addr, b.token
                ));
            }
        }
        for v in replicas {
            let node = v.replica;
            if !node.is_leader() || !node.has_taken_over() {
                continue;
            }
            let term = node.election().term();
            let registry = node.state().part();
            for h in &believers {
                if h.acked_in > term {
                    continue; // acknowledged by a later leader; this one is stale
                }
                let kept = registry
                    .get(h.id)
                    .is_some_and(|r| r.addr == h.addr && r.token() == h.token);
                if !kept {
                    return Err(format!(
                        "leader {} (term {term}) lacks registration {} (ID {} of {}), which its service believes it holds until {}; it has {:?}",
                        v.addr,
                        h.token,
                        h.id,
                        h.addr,
                        h.believed_until(),
                        registry.get(h.id)
                    ));
                }
            }
        }
        Ok(())
    }

    fn probe(&mut self) -> V::Request {
        <V as Routes<S, RegistryService>>::request(register_request(
            SocketAddr::from(([10, 9, 9, 9], 9)),
            0,
        ))
    }

    fn probe_answer(&self, reply: &Reply<S, V>) -> Probe {
        match reply {
            Ok(r) => match V::response(r.clone()) {
                Some(Response::Registered { .. }) => Probe::Served,
                _ => Probe::Refused,
            },
            Err(ReplyError::Consensus(_)) => Probe::Retry,
            Err(ReplyError::Machine(e)) => match V::error(e.clone()) {
                // Every ID in use or in quarantine: one frees up within a quarantine; or
                // a lease ran out before the entry committed.
                Some(RegistryError::Exhausted(_) | RegistryError::EndedBeforeCommit { .. }) => {
                    Probe::Retry
                }
                _ => Probe::Refused,
            },
        }
    }

    fn converged(&self, now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        // Services are still active: compare only what stays believed through the last step.
        for v in replicas {
            let node = v.replica;
            let registry = node.state().part();
            for h in self.believers(now) {
                if h.token.index <= node.commit()
                    && registry.get(h.id).is_none_or(|r| r.token() != h.token)
                {
                    return Err(format!(
                        "{} (commit {}, at {}) lacks committed registration {} (ID {} of {})",
                        v.addr,
                        node.commit(),
                        node.position(),
                        h.token,
                        h.id,
                        h.addr
                    ));
                }
            }
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("acks", c.acks),
            ("confirmed_reports", c.confirmed_reports),
            ("unregistered", c.unregistered),
            ("stale_refused", c.stale_refused),
        ]
    }
}

//! Workers that register, keep their leases, die and come back, as services do: what the
//! other machines' simulation workloads (assignment, task queues) need live registrations
//! for. Each keeps one [`Life`] per client in [`Lives`] and adds its own work while a
//! worker is up.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::checker::{register_as, renewal};
use super::service::{Request, Response};
use super::state::{FencingToken, NodeId};
use crate::sim::Context;
use crate::time::Millis;

/// How often a live worker reports.
pub const REPORT_EVERY_MS: Millis = 250;

/// A worker's registration while it holds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    pub id: NodeId,
    pub token: FencingToken,
    pub addr: SocketAddr,
    /// When it last sent a report.
    pub reported: Millis,
}

impl Worker {
    /// Whether its next report is due at `now`.
    pub fn report_due(&self, now: Millis) -> bool {
        now >= self.reported + REPORT_EVERY_MS
    }
}

#[derive(Debug, Clone)]
enum Life {
    /// Not registered; registers again from this time.
    Down {
        until: Millis,
    },
    Registering,
    Up(Worker),
}

/// What a client does at a step of the workload.
#[derive(Debug)]
pub enum Turn {
    /// Register at `addr` (a new life) with this request.
    Register(SocketAddr, Request),
    /// It is up and stays up this step: the workload decides what it sends.
    Up(Worker),
    /// Nothing: it is registering, down, or just died.
    Idle,
}

/// The workers' lives, one per client, at addresses of their own subnet.
#[derive(Debug)]
pub struct Lives {
    lives: BTreeMap<usize, Life>,
    born: u16,
    subnet: u8,
    /// Its node type.
    node_type: &'static str,
}

impl Lives {
    /// Workers of `node_type` at 10.`subnet`.0.CLIENT.
    pub fn new(node_type: &'static str, subnet: u8) -> Lives {
        Lives {
            lives: BTreeMap::new(),
            born: 0,
            subnet,
            node_type,
        }
    }

    /// Client `client`'s turn at `now`: a worker down long enough registers again; one that
    /// is up dies now and then (no more reports: its lease runs out, and it comes back as a
    /// new registration later).
    pub fn turn<R>(&mut self, client: usize, cx: &mut dyn Context<R>) -> Turn {
        let now = cx.now();
        let life = self
            .lives
            .entry(client)
            .or_insert(Life::Down { until: 0 })
            .clone();
        match life {
            Life::Down { until } if now >= until => {
                self.born = self.born.wrapping_add(1);
                let addr = SocketAddr::from(([10, self.subnet, 0, client as u8], 1000 + self.born));
                self.lives.insert(client, Life::Registering);
                Turn::Register(addr, register_as(self.node_type, addr, now))
            }
            Life::Up(worker) => {
                if cx.chance(0.002) {
                    let until = now + 500 + cx.below(3_000);
                    self.lives.insert(client, Life::Down { until });
                    return Turn::Idle;
                }
                Turn::Up(worker)
            }
            _ => Turn::Idle,
        }
    }

    /// The report that renews `client`'s lease at `now`, noted as sent.
    pub fn report(&mut self, client: usize, worker: Worker, now: Millis) -> Request {
        self.lives.insert(
            client,
            Life::Up(Worker {
                reported: now,
                ..worker
            }),
        );
        renewal(worker.id, worker.addr, worker.token)
    }

    /// The answer to `client`'s registration at `addr` (`None`: refused, or no answer): up
    /// with the registration it got, or down for a while. Returns whether it is up.
    pub fn registered(
        &mut self,
        client: usize,
        addr: SocketAddr,
        answer: Option<Response>,
        now: Millis,
    ) -> bool {
        match answer {
            Some(Response::Registered { record, .. }) if record.addr == addr => {
                self.lives.insert(
                    client,
                    Life::Up(Worker {
                        id: record.node_id,
                        token: record.token(),
                        addr,
                        reported: now,
                    }),
                );
                true
            }
            _ => {
                self.lost(client, now);
                false
            }
        }
    }

    /// Whether `client` is up (registered and not known dead).
    pub fn is_up(&self, client: usize) -> bool {
        matches!(self.lives.get(&client), Some(Life::Up(_)))
    }

    /// `client`'s lease is gone (a report refused): a new life, a little later.
    pub fn lost(&mut self, client: usize, now: Millis) {
        self.lives.insert(client, Life::Down { until: now + 200 });
    }
}

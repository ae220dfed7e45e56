//! A service's own assignments, followed.
//!
//! The leader answers a watch with the resources the registration holds and then pushes a
//! notice per committed change that concerns it, each with its log index. When leadership
//! moves, [`Assignments`] resumes at the new leader from the index after the last one it
//! heard (every change once), or, when that index is compacted there, watches afresh and
//! reports only the difference. When the registration's
//! lease is lost, every resource it held is reported lost at once, so the service stops
//! work it may no longer own.

use std::collections::{BTreeMap, VecDeque};

use tokio::sync::watch;

use crate::machines::assign::wire::AssignCmd;
use crate::machines::registry::{LeaseLost, Registration};
use crate::net::{Client, ClientError, Cluster};
use crate::pb::assign as pb;
use crate::wire::Code;

/// One change to what this service holds.
#[derive(Debug, Clone, PartialEq)]
pub enum AssignmentEvent {
    /// Start running it: it is this service's, under the fencing token in its holder.
    Added(pb::ResourceInfo),
    /// Let it go: a rebalance moves it; call [`Assignments::release`] once stopped.
    Revoking(pb::ResourceInfo),
    /// Stop running it: it is no longer this service's.
    Removed(pb::ResourceInfo),
    /// A slot is this service's (it was standing by, or claimed it): run what the slot runs.
    SlotGranted(pb::SlotHeld),
    /// Let the slot go: this service is draining and a standby is waiting for it; stop
    /// what the slot runs, then call [`Assignments::release_slot`].
    SlotRevoking(pb::SlotHeld),
    /// A slot is no longer this service's.
    SlotGone(pb::SlotHeld),
    /// The lease is lost: stop running all of these, and give up these slots; the watch ends.
    Lost {
        resources: Vec<pb::ResourceInfo>,
        slots: Vec<pb::SlotHeld>,
        why: String,
    },
}

/// The resources one registration holds, and every change to them.
pub struct Assignments {
    cluster: Cluster,
    node_id: u32,
    token: (u64, u64),
    conn: Option<Client>,
    held: BTreeMap<String, pb::ResourceInfo>,
    slots: BTreeMap<(String, u32), pb::SlotHeld>,
    pending: VecDeque<AssignmentEvent>,
    lost: watch::Receiver<Option<LeaseLost>>,
    ended: Option<String>,
    /// The log index of the last notice (or listing) heard: a resume starts after it.
    index: u64,
    resumes: u64,
    resyncs: u64,
}

impl Assignments {
    /// Starts following `registration`'s assignments; [`Assignments::held`] then holds what
    /// it holds (each an `Added` event too, so a loop over [`Assignments::next`] starts all).
    pub async fn start(registration: &Registration) -> Result<Assignments, ClientError> {
        let mut a = Assignments {
            cluster: Cluster::new(
                registration.reply().beacons.clone(),
                registration.connect_options().clone(),
                registration.retry_for(),
            ),
            node_id: registration.node_id(),
            token: registration.fencing_token(),
            conn: None,
            held: BTreeMap::new(),
            slots: BTreeMap::new(),
            pending: VecDeque::new(),
            lost: registration.lease_lost(),
            ended: None,
            index: 0,
            resumes: 0,
            resyncs: 0,
        };
        let fresh = a.subscribe(0).await?;
        a.resync(fresh);
        Ok(a)
    }

    /// The slots this service holds, as (group, slot).
    pub fn slots(&self) -> impl Iterator<Item = &pb::SlotHeld> {
        self.slots.values()
    }

    /// What this service holds now, by name.
    pub fn held(&self) -> impl Iterator<Item = &pb::ResourceInfo> {
        self.held.values()
    }

    /// How many times the watch had to start afresh (its index was compacted where it
    /// resumed) and report the difference.
    pub fn resyncs(&self) -> u64 {
        self.resyncs
    }

    /// How many times the watch resumed from its index (a new leader, a broken connection).
    pub fn resumes(&self) -> u64 {
        self.resumes
    }

    /// The log index the watch has heard through.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Watches at the leader from log index `from` (0: from what it holds now).
    async fn subscribe(&mut self, from: u64) -> Result<pb::WatchAssignmentsReply, ClientError> {
        let req = pb::WatchAssignments {
            node_id: self.node_id,
            term: self.token.0,
            index: self.token.1,
            start_index: from,
        };
        let (conn, reply): (Client, pb::WatchAssignmentsReply) = self
            .cluster
            .open_stream(AssignCmd::Watch, &req, "the assignment watch")
            .await?;
        self.conn = Some(conn);
        self.index = reply.index;
        Ok(reply)
    }

    /// Takes the watch up again after its stream ended: from the index after the last one
    /// heard, or, when that is compacted, afresh with the difference reported.
    async fn recover(&mut self) -> Result<(), ClientError> {
        match self.subscribe(self.index + 1).await {
            Ok(_) => self.resumes += 1,
            Err(e) if e.is(crate::wire::ErrorCode::Compacted) => {
                let fresh = self.subscribe(0).await?;
                self.resyncs += 1;
                self.resync(fresh);
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The next change. Waits as long as nothing changes; rides out failovers; ends with
    /// [`AssignmentEvent::Lost`] when the lease is lost, after which it fails.
    pub async fn next(&mut self) -> Result<AssignmentEvent, ClientError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            if let Some(why) = &self.ended {
                return Err(ClientError::Ended {
                    what: "the assignment watch",
                    why: why.clone(),
                });
            }
            let mut lost = self.lost.clone();
            let frame = match self.conn.as_mut() {
                Some(conn) => tokio::select! {
                    frame = conn.next_pushed("the assignment watch") => Some(frame),
                    _ = lost.wait_for(Option::is_some) => None,
                },
                None => Some(Err(ClientError::Closed {
                    addr: String::new(),
                })),
            };
            let Some(frame) = frame else {
                self.lose_lease();
                continue;
            };
            let notice = frame.and_then(|f| {
                if f.cmd != AssignCmd::Notice.code() {
                    return Err(ClientError::BadReply {
                        what: "the assignment watch",
                        msg: format!("a pushed frame of cmd {}", f.cmd),
                    });
                }
                f.decode::<pb::AssignmentNotice>()
                    .map_err(|cause| ClientError::Frame {
                        addr: String::new(),
                        cause,
                    })
            });
            match notice {
                Ok(notice) => self.apply(notice),
                Err(e) if e.is_retryable() => {
                    self.conn = None;
                    // Watching again at the next leader, unless the lease is lost meanwhile.
                    let mut lost = self.lost.clone();
                    let recovered = tokio::select! {
                        done = self.recover() => Some(done?),
                        _ = lost.wait_for(Option::is_some) => None,
                    };
                    if recovered.is_none() {
                        self.lose_lease();
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Lets `name` go (after a `Revoking`, or of the service's own accord): it goes to
    /// another service at once.
    pub async fn release(&mut self, name: &str) -> Result<pb::ResourceInfo, ClientError> {
        let Some((term, index)) = self
            .held
            .get(name)
            .and_then(|r| r.holder.as_ref())
            .map(|h| (h.term, h.index))
        else {
            return Err(ClientError::Ended {
                what: "the release",
                why: format!("resource `{name}` is not held by this service"),
            });
        };
        let next = self.cluster.release_resource(name, term, index).await?;
        if let Some(r) = self.held.remove(name) {
            self.pending.push_back(AssignmentEvent::Removed(r));
        }
        Ok(next)
    }

    /// Lets slot `slot` of `group` go (after a `SlotRevoking`, or of the service's own
    /// accord): it goes at once to the oldest standby in rotation, with the resources bound
    /// to it. Returns the group as it is then.
    pub async fn release_slot(
        &mut self,
        group: &str,
        slot: u32,
    ) -> Result<pb::SlotGroupInfo, ClientError> {
        let Some(held) = self.slots.get(&(group.to_owned(), slot)) else {
            return Err(ClientError::Ended {
                what: "the slot release",
                why: format!("slot {group}/{slot} is not held by this service"),
            });
        };
        let (term, index) = (held.term, held.index);
        let now = self.cluster.release_slot(group, slot, term, index).await?;
        if let Some(s) = self.slots.remove(&(group.to_owned(), slot)) {
            self.pending.push_back(AssignmentEvent::SlotGone(s));
        }
        Ok(now)
    }

    /// The lease is lost: everything held is lost with it.
    fn lose_lease(&mut self) {
        let why = self
            .lost
            .borrow()
            .clone()
            .map_or("the registration's keepalive stopped".to_owned(), |l| {
                l.to_string()
            });
        self.lose(why);
    }

    fn lose(&mut self, why: String) {
        let resources: Vec<pb::ResourceInfo> =
            std::mem::take(&mut self.held).into_values().collect();
        let slots: Vec<pb::SlotHeld> = std::mem::take(&mut self.slots).into_values().collect();
        self.conn = None;
        self.pending.push_back(AssignmentEvent::Lost {
            resources,
            slots,
            why: why.clone(),
        });
        self.ended = Some(why);
    }

    /// The assignment token of `r`, which names this holding.
    fn token(r: &pb::ResourceInfo) -> Option<(u64, u64)> {
        r.holder.as_ref().map(|h| (h.term, h.index))
    }

    fn held_event(&mut self, r: pb::ResourceInfo) {
        let event = match self.held.get(&r.name) {
            Some(old) if Self::token(old) == Self::token(&r) => {
                if r.revoking && !old.revoking {
                    Some(AssignmentEvent::Revoking(r.clone()))
                } else {
                    None
                }
            }
            Some(old) => {
                // Held again under a new assignment: the old one ended.
                self.pending
                    .push_back(AssignmentEvent::Removed(old.clone()));
                Some(AssignmentEvent::Added(r.clone()))
            }
            None => Some(AssignmentEvent::Added(r.clone())),
        };
        self.held.insert(r.name.clone(), r);
        self.pending.extend(event);
    }

    fn apply(&mut self, notice: pb::AssignmentNotice) {
        self.index = self.index.max(notice.index);
        for r in notice.gone {
            let ours = self
                .held
                .get(&r.name)
                .is_some_and(|old| Self::token(old) == Self::token(&r));
            if ours && let Some(old) = self.held.remove(&r.name) {
                self.pending.push_back(AssignmentEvent::Removed(old));
            }
        }
        for r in notice.held {
            self.held_event(r);
        }
        for s in notice.slots_gone {
            if self.slots.remove(&(s.group.clone(), s.slot)).is_some() {
                self.pending.push_back(AssignmentEvent::SlotGone(s));
            }
        }
        for s in notice.slots_held {
            self.slot_event(s);
        }
    }

    /// A slot held as of now: granted, or now being revoked.
    fn slot_event(&mut self, s: pb::SlotHeld) {
        let event = match self.slots.get(&(s.group.clone(), s.slot)) {
            None => Some(AssignmentEvent::SlotGranted(s.clone())),
            Some(old) if (old.term, old.index) != (s.term, s.index) => {
                // Held again under a new grant: the old one ended.
                self.pending
                    .push_back(AssignmentEvent::SlotGone(old.clone()));
                Some(AssignmentEvent::SlotGranted(s.clone()))
            }
            Some(old) if s.revoking && !old.revoking => {
                Some(AssignmentEvent::SlotRevoking(s.clone()))
            }
            Some(_) => None,
        };
        // Granted while already being revoked: told both.
        let revoking = s.revoking && matches!(event, Some(AssignmentEvent::SlotGranted(_)));
        self.slots.insert((s.group.clone(), s.slot), s.clone());
        self.pending.extend(event);
        if revoking {
            self.pending.push_back(AssignmentEvent::SlotRevoking(s));
        }
    }

    /// Turns the difference between what was held and `fresh` into events.
    fn resync(&mut self, fresh: pb::WatchAssignmentsReply) {
        let slots: BTreeMap<(String, u32), pb::SlotHeld> = fresh
            .slots
            .into_iter()
            .map(|s| ((s.group.clone(), s.slot), s))
            .collect();
        for old in take_missing(&mut self.slots, &slots) {
            self.pending.push_back(AssignmentEvent::SlotGone(old));
        }
        for s in slots.into_values() {
            self.slot_event(s);
        }
        let fresh: BTreeMap<String, pb::ResourceInfo> = fresh
            .held
            .into_iter()
            .map(|r| (r.name.clone(), r))
            .collect();
        for old in take_missing(&mut self.held, &fresh) {
            self.pending.push_back(AssignmentEvent::Removed(old));
        }
        for r in fresh.into_values() {
            self.held_event(r);
        }
    }
}

/// Takes out of `held` what `now` no longer has, in key order.
fn take_missing<K: Ord + Clone, V, W>(held: &mut BTreeMap<K, V>, now: &BTreeMap<K, W>) -> Vec<V> {
    let gone: Vec<K> = held
        .keys()
        .filter(|k| !now.contains_key(*k))
        .cloned()
        .collect();
    gone.iter().filter_map(|k| held.remove(k)).collect()
}

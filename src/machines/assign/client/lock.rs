//! Named locks and leader elections for services (etcd's `lock`/`elect`, Curator's
//! LeaderLatch, Consul's lock), built on a slot group of one slot: the group is the lock, its
//! node type (`lock.NAME`) is what contenders register as, and the slot goes to the oldest
//! live contender. Holding it is holding a lease: a holder that dies or is cut off loses it
//! within a lease, and the next contender in line gets it at the leader's next tick. Every
//! grant carries a fencing token `(term, index)` that rises with each holder, so a resource
//! guarded by the lock can refuse a deposed holder that does not know it yet.

use std::net::SocketAddr;
use std::time::Duration;

use super::{AssignmentEvent, Assignments};
use crate::machines::assign::AssignErrorCode;
use crate::machines::registry::{RegisterOptions, Registration};
use crate::net::{ClientError, Cluster, ConnectOptions};
use crate::pb::assign as pb;

/// The node type contenders for lock `name` register as.
pub fn lock_type(name: &str) -> String {
    format!("lock.{name}")
}

/// Checks a lock's name: what a node type allows after `lock.`.
fn check_lock_name(name: &str) -> Result<(), ClientError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let max = crate::machines::registry::state::MAX_TYPE_LEN - "lock.".len();
    if name.is_empty() || name.len() > max || !name.chars().all(ok) {
        return Err(ClientError::Ended {
            what: "the lock",
            why: format!(
                "`{name}` is not a lock name: use 1 to {max} characters from A-Z a-z 0-9 . _ -"
            ),
        });
    }
    Ok(())
}

/// How to contend for a lock.
#[derive(Debug, Clone)]
pub struct LockOptions {
    /// The contender's own address (a registration's `ip:port`): who holds the lock, as
    /// others see it.
    pub addr: SocketAddr,
    /// JSON metadata of the registration (an election's proposal, say).
    pub metadata: String,
    pub connect: ConnectOptions,
    /// How long calls ride out a leader change.
    pub retry_for: Duration,
}

impl LockOptions {
    pub fn new(addr: SocketAddr) -> LockOptions {
        LockOptions {
            addr,
            metadata: String::new(),
            connect: ConnectOptions::default(),
            retry_for: Duration::from_secs(10),
        }
    }
}

/// A lock held (or a leadership won). Dropping it lets its lease run out; call
/// [`Lock::release`] to hand it to the next contender at once.
pub struct Lock {
    name: String,
    registration: Registration,
    watch: Assignments,
    held: pb::SlotHeld,
}

impl Lock {
    /// Waits until lock `name` is this contender's. The lock (a one-slot group) is created
    /// when missing, which needs the `admin` role where roles apply; an admin may create it
    /// once beforehand (`nebcli slots create NAME --type lock.NAME --count 1`).
    pub async fn acquire(
        beacons: Vec<String>,
        name: &str,
        opts: LockOptions,
    ) -> Result<Lock, ClientError> {
        check_lock_name(name)?;
        let node_type = lock_type(name);
        let mut cluster = Cluster::new(beacons.clone(), opts.connect.clone(), opts.retry_for);
        ensure_group(&mut cluster, name, &node_type).await?;
        let mut register = RegisterOptions::new(node_type, opts.addr);
        register.metadata = opts.metadata.clone();
        register.connect = opts.connect.clone();
        register.retry_for = opts.retry_for;
        let registration = Registration::register(beacons, register).await?;
        let mut watch = Assignments::start(&registration).await?;
        let mine = |s: &pb::SlotHeld| s.group == name;
        let already = watch.slots().find(|s| mine(s)).cloned();
        let held = match already {
            Some(held) => held,
            None => loop {
                match watch.next().await? {
                    AssignmentEvent::SlotGranted(s) if mine(&s) => break s,
                    AssignmentEvent::Lost { why, .. } => {
                        return Err(ClientError::Ended {
                            what: "the lock",
                            why: format!("the contender's lease was lost while waiting: {why}"),
                        });
                    }
                    _ => {}
                }
            },
        };
        Ok(Lock {
            name: name.to_owned(),
            registration,
            watch,
            held,
        })
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The grant's fencing token `(term, index)`: it rises with each holder. Pass it to
    /// whatever the lock guards, and have that refuse a token below the highest seen.
    pub fn fencing_token(&self) -> (u64, u64) {
        (self.held.term, self.held.index)
    }

    /// The registration that holds it.
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    /// Resolves when the lock is lost (the lease ran out or the slot was taken away), with
    /// why. Stop acting as its holder at once.
    pub async fn lost(&mut self) -> String {
        loop {
            match self.watch.next().await {
                Ok(AssignmentEvent::SlotGone(s)) if s.group == self.name => {
                    return "the lock was taken away".into();
                }
                Ok(AssignmentEvent::Lost { why, .. }) => return why,
                Ok(_) => {}
                Err(e) => return e.to_string(),
            }
        }
    }

    /// Lets the lock go: the next contender in line gets it at once.
    pub async fn release(self) -> Result<(), ClientError> {
        drop(self.watch);
        self.registration.unregister().await.map(|_| ())
    }
}

/// Makes sure lock `name` exists as a one-slot group of `node_type`.
async fn ensure_group(
    cluster: &mut Cluster,
    name: &str,
    node_type: &str,
) -> Result<(), ClientError> {
    let not_a_lock = |g: &pb::SlotGroupInfo| ClientError::Ended {
        what: "the lock",
        why: format!(
            "slot group `{name}` exists with node type {} and {} slots: it is not lock `{name}` (type {node_type}, one slot)",
            g.node_type,
            g.slots.len()
        ),
    };
    let existing = groups(cluster, name)
        .await?
        .groups
        .into_iter()
        .filter_map(|v| v.group)
        .find(|g| g.name == name);
    match existing {
        Some(g) if g.node_type == node_type && g.slots.len() == 1 => Ok(()),
        Some(g) => Err(not_a_lock(&g)),
        None => match cluster.create_slots(name, node_type, 1).await {
            Ok(_) => Ok(()),
            Err(e) if e.is(AssignErrorCode::GroupConflict) => {
                let g = pb::SlotGroupInfo {
                    name: name.to_owned(),
                    ..Default::default()
                };
                Err(not_a_lock(&g))
            }
            Err(e) => Err(e),
        },
    }
}

/// Slot group `name` as the leader has it.
async fn groups(cluster: &mut Cluster, name: &str) -> Result<pb::GroupsReply, ClientError> {
    let req = pb::GroupsRequest {
        name: name.to_owned(),
        ..Default::default()
    };
    cluster
        .call(
            crate::machines::assign::AssignCmd::Groups,
            &req,
            "the slots request",
        )
        .await
}

/// Who holds lock `name` now (an election's leader), as a beacon sees it: the holder's
/// node ID, address and fencing token, or `None` while nobody does.
pub async fn holder(
    cluster: &mut Cluster,
    name: &str,
) -> Result<Option<pb::HolderInfo>, ClientError> {
    let reply = groups(cluster, name).await?;
    Ok(reply
        .groups
        .into_iter()
        .filter_map(|v| v.group)
        .find(|g| g.name == name)
        .and_then(|g| g.slots.into_iter().next())
        .and_then(|s| s.holder))
}

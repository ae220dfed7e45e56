//! A fault-injecting TCP proxy for partition tests: one [`Link`] carries one beacon's
//! connections to another, and can be cut and healed. With a link per direction, a
//! partition can be symmetric or one-way, and any shape (rings, bridges) can be drawn.
//!
//! A cut comes in two kinds: [`Cut::Reset`] resets the open connections and refuses new ones
//! (a firewall that rejects, or a peer whose host is gone: both sides notice at once);
//! [`Cut::Silent`] drops every byte and leaves the connections open (a firewall that drops,
//! a cable pulled: nobody notices but by the silence). Healing a silent cut resets the
//! connections it dropped bytes on, since their byte streams have holes; new ones come up.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How a link is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Open connections are reset, new ones refused.
    Reset,
    /// Every byte is dropped; connections stay open.
    Silent,
}

const OPEN: u8 = 0;
const RESET: u8 = 1;
const SILENT: u8 = 2;

#[derive(Default)]
struct State {
    mode: AtomicU8,
    closed: AtomicBool,
    /// Both ends of every open connection, to reset them.
    open: Mutex<Vec<TcpStream>>,
    /// Every byte carried, both ways (while tapped): what someone on the wire would see.
    tapped: Mutex<Option<Vec<u8>>>,
}

impl State {
    fn reset_all(&self) {
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Forwards connections from its own loopback address to `target`.
pub struct Link {
    listen: SocketAddr,
    state: Arc<State>,
}

impl Link {
    pub fn start(target: SocketAddr) -> Link {
        let listener = crate::free_listener();
        let listen = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let st = state.clone();
        thread::spawn(move || {
            for inbound in listener.incoming() {
                if st.closed.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(inbound) = inbound else { continue };
                if st.mode.load(Ordering::SeqCst) == RESET {
                    let _ = inbound.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(outbound) = TcpStream::connect_timeout(&target, Duration::from_secs(1))
                else {
                    continue;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                {
                    let mut open = st.open.lock().unwrap();
                    open.retain(|s| s.peer_addr().is_ok());
                    open.extend([inbound.try_clone().unwrap(), outbound.try_clone().unwrap()]);
                }
                pump(
                    inbound.try_clone().unwrap(),
                    outbound.try_clone().unwrap(),
                    st.clone(),
                );
                pump(outbound, inbound, st.clone());
            }
        });
        Link { listen, state }
    }

    /// The address to connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.listen
    }

    /// Resets every open connection and refuses new ones until [`Link::heal`].
    pub fn cut(&self) {
        self.cut_as(Cut::Reset);
    }

    /// Cuts the link the way `how` says.
    pub fn cut_as(&self, how: Cut) {
        match how {
            Cut::Reset => {
                self.state.mode.store(RESET, Ordering::SeqCst);
                self.state.reset_all();
            }
            Cut::Silent => self.state.mode.store(SILENT, Ordering::SeqCst),
        }
    }

    pub fn heal(&self) {
        let was = self.state.mode.swap(OPEN, Ordering::SeqCst);
        if was == SILENT {
            // Their byte streams have holes: let them start over.
            self.state.reset_all();
        }
    }

    pub fn is_cut(&self) -> bool {
        self.state.mode.load(Ordering::SeqCst) != OPEN
    }

    /// Records every byte carried from now on, both ways.
    pub fn tap(&self) {
        *self.state.tapped.lock().unwrap() = Some(Vec::new());
    }

    /// What was carried since [`Link::tap`].
    pub fn tapped(&self) -> Vec<u8> {
        self.state
            .tapped
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_default()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.state.closed.store(true, Ordering::SeqCst);
        self.cut();
        // Wake the accept loop so it sees `closed`.
        let _ = TcpStream::connect_timeout(&self.listen, Duration::from_millis(100));
    }
}

/// Copies `from` to `to` until either side ends (dropping what it reads while the link is
/// cut silently), then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream, state: Arc<State>) {
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) if state.mode.load(Ordering::SeqCst) == SILENT => {}
                Ok(n) => {
                    if let Some(tap) = state.tapped.lock().unwrap().as_mut() {
                        tap.extend_from_slice(&buf[..n]);
                    }
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// A link for every ordered pair of `n` beacons: `link(i, j)` carries beacon i's connections
/// to beacon j.
pub struct Mesh {
    links: Vec<Vec<Option<Link>>>,
}

impl Mesh {
    pub fn start(beacons: &[SocketAddr]) -> Mesh {
        let links = (0..beacons.len())
            .map(|i| {
                (0..beacons.len())
                    .map(|j| (i != j).then(|| Link::start(beacons[j])))
                    .collect()
            })
            .collect();
        Mesh { links }
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn link(&self, from: usize, to: usize) -> &Link {
        self.links[from][to].as_ref().expect("no link to itself")
    }

    /// The `dial` config key of beacon `i`: each peer's identity -> its link's address.
    pub fn dial_for(&self, i: usize, beacons: &[SocketAddr]) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = beacons
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(j, b)| (b.to_string(), self.link(i, j).addr().to_string().into()))
            .collect();
        serde_json::Value::Object(map)
    }

    /// Cuts both directions between every beacon of `side` and every other.
    pub fn isolate(&self, side: &[usize]) {
        self.isolate_as(side, Cut::Reset);
    }

    /// [`Mesh::isolate`], cut the way `how` says.
    pub fn isolate_as(&self, side: &[usize], how: Cut) {
        let n = self.links.len();
        for i in 0..n {
            for j in 0..n {
                if i != j && side.contains(&i) != side.contains(&j) {
                    self.link(i, j).cut_as(how);
                }
            }
        }
    }

    /// Cuts every link but those between the pairs in `keep` (both directions): rings and
    /// bridges.
    pub fn keep_only(&self, keep: &[(usize, usize)], how: Cut) {
        let n = self.links.len();
        for i in 0..n {
            for j in 0..n {
                let kept = keep.contains(&(i, j)) || keep.contains(&(j, i));
                if i != j && !kept {
                    self.link(i, j).cut_as(how);
                }
            }
        }
    }

    pub fn heal_all(&self) {
        for row in &self.links {
            for link in row.iter().flatten() {
                link.heal();
            }
        }
    }
}

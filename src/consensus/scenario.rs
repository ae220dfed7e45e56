//! Scenario transcripts: the core's behaviour written as text a reviewer reads without Rust.
//!
//! Each file of `src/consensus/scenarios/` is a list of commands, each followed by `----`
//! and what the core did (the messages each step sent, the answers it released, the changes
//! it committed, its events), and by a blank line. The interpreter below drives a few
//! [`Replica`]s of the test machine (`testing.rs`: numbers appended to a list) by hand, on a
//! clock of its own, with storage that is durable at once, and checks each output against
//! the file. `BEACON_REWRITE=1 cargo test --lib scenario` writes what the core does now into
//! the files instead (then read the diff), as etcd-raft's `datadriven` tests do.
//!
//! Beacons are named by letter (A is 127.0.0.1:7001, B 7002, ...); the election orders them
//! by address, so A is first. The commands:
//!
//! * `beacons quorum|classic A B C [learners D]`: starts beacons with nothing stored; `start
//!   D quorum A B C learners D` starts one more (a beacon joining as a learner).
//! * `tick [A B ...]`: the clock moves one tick (100 ms) and the named beacons (all running
//!   ones) take their periodic step. `wait MS` moves the clock alone.
//! * `deliver [A B ...]`: every message in flight (to the named beacons) arrives, in the
//!   order sent; what the receivers send goes in flight. `stabilize` delivers until nothing
//!   is in flight (at most 50 rounds). `drop`: the messages in flight are lost.
//! * `cut A B` (both ways), `cut A->B` (one way), `isolate A`, `heal`: messages over a cut
//!   link are lost when delivered.
//! * `full B->A [C->A]`: the link's buffers are full (its receiver stopped reading): what is
//!   in flight on it still arrives, what is sent on it from now on is lost (shown as
//!   `lost (full)`), until `heal`.
//! * `stop A` / `resume A`: a hung process. It takes no step; what is sent to it waits
//!   (as in its socket's buffer) and arrives when it resumes.
//! * `crash A`: the process dies; its peers are told its connections closed, and what is
//!   in flight to it is lost. `restart A`: it starts again from what it stored and
//!   exchanges greetings with the running beacons.
//! * `propose A N`, `read A`: a request at A (append N; count the numbers on the leader's
//!   word), answered in the output when released. `transfer A [B]`: a leader transfer.
//! * `add A D [promote]`, `promote A D`, `remove A D`: a change of membership asked of A.
//! * `forge A->B term N [leader]`: A's heartbeat as if A were in term N (a rogue or a
//!   corrupted peer), delivered at once.
//! * `status [A B ...]`: each beacon's role, term, leader, commit, last position and members.
//! * `log A`: A's log.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::election::Heartbeat;
use super::testing::{Append, Node, Numbers, Request, Step, addr, config_of};
use super::{
    Change, Entry, Event, Input, Members, Message, Mode, Payload, PeerMessage, Promise, Replica,
    Snapshot, Stored, TermStored,
};
use crate::time::Millis;

/// One tick of the clock, as the daemon's default.
const TICK_MS: u64 = 100;

/// How many rounds `stabilize` delivers at most.
const STABILIZE_ROUNDS: usize = 50;

/// A beacon's name: its letter.
type Name = char;

fn port(name: Name) -> u16 {
    7001 + (name as u16 - 'A' as u16)
}

fn name_of(at: SocketAddr) -> Name {
    char::from(b'A' + (at.port() - 7001) as u8)
}

fn names(set: impl IntoIterator<Item = SocketAddr>) -> String {
    set.into_iter().map(name_of).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Up,
    Stopped,
    Crashed,
}

/// A beacon: its replica and what it stored.
struct Beacon {
    node: Node,
    run: Run,
    mode: Mode,
    beacons: Vec<u16>,
    learners: Vec<u16>,
    promise: Promise,
    snapshot: Option<Snapshot<Vec<u64>>>,
    entries: Vec<Entry<u64>>,
    commit: u64,
}

impl Beacon {
    fn config(&self, me: Name) -> super::Config {
        beacon_config(me, self.mode, &self.beacons, &self.learners, self.promise)
    }
}

/// Beacon `me`'s configuration: `beacons` voting, `learners` learning, `promise` stored.
fn beacon_config(
    me: Name,
    mode: Mode,
    beacons: &[u16],
    learners: &[u16],
    promise: Promise,
) -> super::Config {
    let mut cfg = config_of(port(me), mode, beacons);
    cfg.learners = learners.iter().map(|p| addr(*p)).collect();
    cfg.stored = promise;
    cfg
}

/// A scenario being run.
#[derive(Default)]
struct Scenario {
    now: Millis,
    beacons: BTreeMap<Name, Beacon>,
    /// Messages in flight, in the order sent.
    flight: VecDeque<(Name, Name, Message<Numbers>)>,
    cut: BTreeSet<(Name, Name)>,
    /// Links whose buffers are full: what is sent on them is lost at once.
    full: BTreeSet<(Name, Name)>,
    next_token: u64,
    /// What each request was, to name its answer.
    asked: BTreeMap<u64, String>,
}

type Outcome = Result<String, String>;

impl Scenario {
    fn run(&mut self, line: &str) -> Outcome {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (cmd, args) = words.split_first().ok_or("an empty command")?;
        let mut out = String::new();
        match *cmd {
            "beacons" => self.start_all(args)?,
            "start" => self.start_one(args)?,
            "tick" => {
                self.now += TICK_MS;
                for at in self.chosen(args)? {
                    if self.beacons[&at].run == Run::Up {
                        self.input(at, Input::Tick { wall_ms: self.now }, &mut out);
                    }
                }
            }
            "wait" => {
                let ms: u64 = one(args)?.parse().map_err(|_| "wait MS")?;
                self.now += ms;
            }
            "deliver" => {
                let to = self.chosen(args)?;
                self.deliver_round(&to, &mut out);
            }
            "stabilize" => {
                let all = self.chosen(&[])?;
                let mut rounds = 0;
                while self.flight.iter().any(|(_, to, _)| self.receives(*to)) {
                    rounds += 1;
                    if rounds > STABILIZE_ROUNDS {
                        return Err(format!("still not stable after {STABILIZE_ROUNDS} rounds"));
                    }
                    self.deliver_round(&all, &mut out);
                }
            }
            "drop" => {
                let n = self.flight.len();
                self.flight.clear();
                writeln!(out, "{n} messages lost").unwrap();
            }
            "cut" => {
                if args.iter().any(|a| a.contains("->")) {
                    for link in args {
                        let (a, b) = link.split_once("->").ok_or("cut A->B C->D")?;
                        self.cut.insert((letter(a)?, letter(b)?));
                    }
                } else {
                    let set: Vec<Name> =
                        args.iter().map(|a| letter(a)).collect::<Result<_, _>>()?;
                    for a in &set {
                        for b in set.iter().filter(|b| *b != a) {
                            self.cut.insert((*a, *b));
                        }
                    }
                }
            }
            "isolate" => {
                let a = letter(one(args)?)?;
                let others: Vec<Name> = self.beacons.keys().copied().filter(|b| *b != a).collect();
                for b in others {
                    self.cut.insert((a, b));
                    self.cut.insert((b, a));
                }
            }
            "full" => {
                for link in args {
                    let (a, b) = link.split_once("->").ok_or("full B->A C->A")?;
                    self.full.insert((letter(a)?, letter(b)?));
                }
            }
            "heal" => {
                self.cut.clear();
                self.full.clear();
            }
            "stop" => {
                let a = self.known(one(args)?)?;
                self.beacons.get_mut(&a).unwrap().run = Run::Stopped;
            }
            "resume" => {
                let a = self.known(one(args)?)?;
                self.beacons.get_mut(&a).unwrap().run = Run::Up;
                // Its first step sees how long it was away.
                self.input(a, Input::Tick { wall_ms: self.now }, &mut out);
            }
            "crash" => {
                let a = self.known(one(args)?)?;
                self.beacons.get_mut(&a).unwrap().run = Run::Crashed;
                self.flight.retain(|(from, to, _)| *to != a && *from != a);
                for b in self.running() {
                    self.input(
                        b,
                        Input::PeerDown {
                            peer: addr(port(a)),
                        },
                        &mut out,
                    );
                }
            }
            "restart" => {
                let a = self.known(one(args)?)?;
                self.restart(a)?;
                self.greet(a, &mut out);
            }
            "propose" => {
                let [at, n] = args else {
                    return Err("propose A N".into());
                };
                let at = self.known(at)?;
                let n: u64 = n.parse().map_err(|_| "propose A N")?;
                self.request(at, Request::Add(n), format!("propose {n}"), &mut out);
            }
            "read" => {
                let at = self.known(one(args)?)?;
                self.request(at, Request::Count, "read".into(), &mut out);
            }
            "transfer" => {
                let at = self.known(args.first().ok_or("transfer A [B]")?)?;
                let to = args.get(1).map(|b| self.known(b)).transpose()?;
                let token = self.token(format!("transfer to {}", to.map_or('?', |c| c)));
                let input = Input::Transfer {
                    token,
                    to: to.map(|b| addr(port(b))),
                };
                self.input(at, input, &mut out);
            }
            "add" | "promote" | "remove" => {
                let (at, who) = match args {
                    [at, who] | [at, who, _] => (self.known(at)?, letter(who)?),
                    _ => return Err(format!("{cmd} A D")),
                };
                let node = addr(port(who));
                let change = match *cmd {
                    "add" => Change::AddLearner {
                        node,
                        promote: args.get(2) == Some(&"promote"),
                    },
                    "promote" => Change::Promote(node),
                    _ => Change::Remove(node),
                };
                let token = self.token(format!("{cmd} {who}"));
                self.input(at, Input::ChangeMembers { token, change }, &mut out);
            }
            "forge" => {
                let [link, "term", term, rest @ ..] = args else {
                    return Err("forge A->B term N [leader]".into());
                };
                let (a, b) = link.split_once("->").ok_or("forge A->B term N")?;
                let (a, b) = (letter(a)?, self.known(b)?);
                let term: u64 = term.parse().map_err(|_| "forge A->B term N")?;
                let leads = rest.first() == Some(&"leader");
                let real = self.beacons.get(&a).map(|x| x.node.greeting());
                let position = real.as_ref().map(|m| m.position).unwrap_or_default();
                let mut msg = PeerMessage::bare(
                    Heartbeat {
                        is_leader: leads,
                        term,
                        leader: leads.then(|| addr(port(a))),
                        sees: u64::MAX >> (64 - self.beacons.len()),
                        eligible: true,
                    },
                    position,
                    0,
                );
                msg.voters = real.map_or(0, |m| m.voters);
                self.input(
                    b,
                    Input::Peer {
                        from: addr(port(a)),
                        msg,
                    },
                    &mut out,
                );
            }
            "status" => {
                for at in self.chosen(args)? {
                    writeln!(out, "{}", self.status(at)).unwrap();
                }
            }
            "log" => {
                let at = self.known(one(args)?)?;
                let node = &self.beacons[&at].node;
                let base = node.journal.log().base();
                writeln!(out, "{at} base {base} commit {}", node.commit()).unwrap();
                for e in node
                    .journal
                    .log()
                    .after(base.index, usize::MAX)
                    .unwrap_or_default()
                {
                    writeln!(out, "  {}", entry(&e)).unwrap();
                }
            }
            other => return Err(format!("unknown command `{other}`")),
        }
        if out.is_empty() {
            out.push_str("ok\n");
        }
        Ok(out)
    }

    fn start_all(&mut self, args: &[&str]) -> Result<(), String> {
        let [mode, rest @ ..] = args else {
            return Err("beacons quorum|classic A B C [learners D]".into());
        };
        let mode = parse_mode(mode)?;
        let (voters, learners) = members_of(rest)?;
        for &a in voters.iter().chain(&learners) {
            self.add_beacon(a, mode, &voters, &learners);
        }
        Ok(())
    }

    fn start_one(&mut self, args: &[&str]) -> Result<(), String> {
        let [me, mode, rest @ ..] = args else {
            return Err("start D quorum|classic A B C [learners D]".into());
        };
        let me = letter(me)?;
        let (voters, learners) = members_of(rest)?;
        self.add_beacon(me, parse_mode(mode)?, &voters, &learners);
        Ok(())
    }

    fn add_beacon(&mut self, me: Name, mode: Mode, voters: &[Name], learners: &[Name]) {
        let cfg = beacon_config(
            me,
            mode,
            &voters.iter().map(|n| port(*n)).collect::<Vec<_>>(),
            &learners.iter().map(|n| port(*n)).collect::<Vec<_>>(),
            Promise::default(),
        );
        let beacon = Beacon {
            mode,
            beacons: cfg.beacons.iter().map(|a| a.port()).collect(),
            learners: cfg.learners.iter().map(|a| a.port()).collect(),
            node: Replica::new(cfg, Numbers::default(), Append),
            run: Run::Up,
            promise: Promise::default(),
            snapshot: None,
            entries: Vec::new(),
            commit: 0,
        };
        self.beacons.insert(me, beacon);
    }

    fn restart(&mut self, a: Name) -> Result<(), String> {
        let b = self.beacons.get_mut(&a).unwrap();
        let (node, _notices) = Replica::restore(
            b.config(a),
            Numbers::default(),
            Append,
            b.snapshot.clone(),
            b.entries.clone(),
            b.commit,
        )
        .map_err(|e| format!("{a} does not restart: {e}"))?;
        b.node = node;
        b.run = Run::Up;
        Ok(())
    }

    /// `a` and each running beacon answer each other's handshake, as a new connection does.
    fn greet(&mut self, a: Name, out: &mut String) {
        for b in self.running().into_iter().filter(|b| *b != a) {
            if self.is_cut(a, b) || self.is_cut(b, a) {
                continue;
            }
            let theirs = self.beacons[&b].node.greeting();
            let greeting = Input::Greeting {
                from: addr(port(b)),
                msg: theirs,
            };
            self.input(a, greeting, out);
            let mine = self.beacons[&a].node.greeting();
            let greeting = Input::Greeting {
                from: addr(port(a)),
                msg: mine,
            };
            self.input(b, greeting, out);
        }
    }

    fn token(&mut self, what: String) -> u64 {
        self.next_token += 1;
        self.asked.insert(self.next_token, what);
        self.next_token
    }

    fn request(&mut self, at: Name, request: Request, what: String, out: &mut String) {
        let token = self.token(what);
        self.input(at, Input::Request { token, request }, out);
    }

    /// Steps `at` with `input` at the scenario's clock and carries out what it asks for.
    fn input(&mut self, at: Name, input: super::InputOf<Numbers, Append>, out: &mut String) {
        let now = self.now;
        let step = self.node(at).step(now, input);
        self.carry(at, step, out);
    }

    fn node(&mut self, at: Name) -> &mut Node {
        &mut self.beacons.get_mut(&at).expect("a known beacon").node
    }

    fn running(&self) -> Vec<Name> {
        self.beacons
            .iter()
            .filter(|(_, b)| b.run == Run::Up)
            .map(|(n, _)| *n)
            .collect()
    }

    fn receives(&self, to: Name) -> bool {
        self.beacons.get(&to).is_some_and(|b| b.run == Run::Up)
    }

    fn is_cut(&self, from: Name, to: Name) -> bool {
        self.cut.contains(&(from, to))
    }

    fn known(&self, word: &str) -> Result<Name, String> {
        let a = letter(word)?;
        if self.beacons.contains_key(&a) {
            Ok(a)
        } else {
            Err(format!("no beacon {a}"))
        }
    }

    /// The beacons `args` names, or all of them.
    fn chosen(&self, args: &[&str]) -> Result<Vec<Name>, String> {
        if args.is_empty() {
            return Ok(self.beacons.keys().copied().collect());
        }
        args.iter().map(|a| self.known(a)).collect()
    }

    /// Delivers what is in flight to `to` now (what it sends meanwhile waits for the next
    /// round); messages to a stopped beacon stay in flight.
    fn deliver_round(&mut self, to: &[Name], out: &mut String) {
        let flight = std::mem::take(&mut self.flight);
        let mut arriving = Vec::new();
        for (from, dest, msg) in flight {
            if self
                .beacons
                .get(&dest)
                .is_some_and(|b| b.run == Run::Crashed)
            {
                // Its connections are gone, and what was sent over them with them.
                continue;
            }
            if to.contains(&dest) && self.receives(dest) {
                arriving.push((from, dest, msg));
            } else {
                self.flight.push_back((from, dest, msg));
            }
        }
        for (from, dest, msg) in arriving {
            if self.is_cut(from, dest) {
                writeln!(out, "{from}->{dest} lost (cut)").unwrap();
                continue;
            }
            self.input(
                dest,
                Input::Peer {
                    from: addr(port(from)),
                    msg,
                },
                out,
            );
        }
    }

    /// Carries out `step` of `at` with storage that is durable at once, in the order the
    /// receipts allow, and writes what it did.
    fn carry(&mut self, at: Name, mut step: Step, out: &mut String) {
        for event in step.take_events() {
            if let Some(line) = event_line(&event) {
                writeln!(out, "{at}: {line}").unwrap();
            }
        }
        let b = self.beacons.get_mut(&at).unwrap();
        if let Some(promise) = step.term() {
            b.promise = promise;
        }
        let mut sent = step.send_now(&TermStored::issue());
        let store = step.store();
        if let Some(snapshot) = &store.snapshot {
            b.snapshot = Some(snapshot.clone());
            b.entries.clear();
        }
        if step.rewrites_log() {
            let base = b.node.journal.log().base();
            b.entries = b
                .node
                .journal
                .log()
                .after(base.index, usize::MAX)
                .unwrap_or_default();
        } else {
            for e in &store.entries {
                b.entries.retain(|x| x.index < e.index);
                b.entries.push(e.clone());
            }
        }
        b.commit = b.commit.max(store.commit);
        let released = step.release(Stored::issue());
        sent.extend(released.send);
        for (index, change) in released.committed {
            writeln!(out, "{at}: committed {index}: {change}").unwrap();
        }
        for (token, reply) in released.replies {
            let what = self.asked.get(&token).cloned().unwrap_or_default();
            let said = match reply {
                Ok(v) => format!("ok {v}"),
                Err(e) => format!("refused: {e}"),
            };
            writeln!(out, "{at}: {what} -> {said}").unwrap();
        }
        let voters: Vec<SocketAddr> = self.beacons[&at]
            .node
            .members()
            .voters
            .iter()
            .copied()
            .collect();
        for (to, msg) in sent {
            let dest = name_of(to);
            if self.full.contains(&(at, dest)) {
                writeln!(out, "{at}->{dest} lost (full)").unwrap();
                continue;
            }
            writeln!(out, "{at}->{dest} {}", message(&msg, &voters)).unwrap();
            self.flight.push_back((at, dest, msg));
        }
    }

    fn status(&self, at: Name) -> String {
        let b = &self.beacons[&at];
        let n = &b.node;
        let e = n.election();
        let role = match b.run {
            Run::Crashed => return format!("{at} crashed"),
            _ if n.is_leader() => "leader",
            _ if e.is_learner() => "learner",
            _ => "follower",
        };
        let mut s = format!("{at} {role} term {}", e.term());
        if let Some(l) = e.leader() {
            write!(s, " leader {}", name_of(l)).unwrap();
        }
        write!(s, " commit {} last {}", n.commit(), n.position()).unwrap();
        write!(s, " voters {}", names(n.members().voters.iter().copied())).unwrap();
        if !n.members().learners.is_empty() {
            write!(
                s,
                " learners {}",
                names(n.members().learners.iter().copied())
            )
            .unwrap();
        }
        if n.is_leader() && !n.serving() {
            s.push_str(" (not serving)");
        }
        if b.run == Run::Stopped {
            s.push_str(" (stopped)");
        }
        s
    }
}

fn one<'a>(args: &[&'a str]) -> Result<&'a str, String> {
    match args {
        [a] => Ok(a),
        _ => Err(format!("one beacon expected, got {args:?}")),
    }
}

fn letter(word: &str) -> Result<Name, String> {
    match word.as_bytes() {
        [c @ b'A'..=b'H'] => Ok(char::from(*c)),
        _ => Err(format!("`{word}` is not a beacon (A to H)")),
    }
}

fn parse_mode(word: &str) -> Result<Mode, String> {
    match word {
        "quorum" => Ok(Mode::Quorum),
        "classic" => Ok(Mode::Classic),
        _ => Err(format!("mode `{word}`: quorum or classic")),
    }
}

/// `A B C [learners D E]`.
fn members_of(words: &[&str]) -> Result<(Vec<Name>, Vec<Name>), String> {
    let split = words.iter().position(|w| *w == "learners");
    let (voters, learners) = match split {
        Some(i) => (&words[..i], &words[i + 1..]),
        None => (words, &[][..]),
    };
    let voters = voters.iter().map(|w| letter(w)).collect::<Result<_, _>>()?;
    let learners = learners
        .iter()
        .map(|w| letter(w))
        .collect::<Result<_, _>>()?;
    Ok((voters, learners))
}

fn members(m: &Members) -> String {
    let mut s = names(m.voters.iter().copied());
    if !m.learners.is_empty() {
        write!(s, "/{}", names(m.learners.iter().copied())).unwrap();
    }
    s
}

fn entry(e: &Entry<u64>) -> String {
    let what = match &e.payload {
        Payload::LeaderStart => "start".to_owned(),
        Payload::Command(n) => format!("+{n}"),
        Payload::Members(m) => format!("members {}", members(m)),
    };
    format!("{} {what}", e.position())
}

/// A message in one line: the heartbeat, then what else it carries.
fn message(msg: &Message<Numbers>, voters: &[SocketAddr]) -> String {
    let hb = &msg.heartbeat;
    let mut s = format!("term {}", hb.term);
    if hb.is_leader {
        s.push_str(" leader");
    } else if let Some(l) = hb.leader {
        write!(s, " follows {}", name_of(l)).unwrap();
    }
    let seen: String = voters
        .iter()
        .enumerate()
        .filter(|(i, _)| hb.sees & (1 << i) != 0)
        .map(|(_, v)| name_of(*v))
        .collect();
    write!(s, " sees {seen}").unwrap();
    if !hb.eligible {
        s.push_str(" ineligible");
    }
    write!(s, " at {} commit {}", msg.position, msg.commit).unwrap();
    if let Some(a) = &msg.append {
        let entries: Vec<String> = a.entries.iter().map(entry).collect();
        write!(s, " append after {} [{}]", a.prev, entries.join(", ")).unwrap();
    }
    if let Some(snap) = &msg.snapshot {
        write!(s, " snapshot {}", snap.position).unwrap();
    }
    for (flag, word) in [
        (msg.reject, "reject"),
        (msg.need_snapshot, "need-snapshot"),
        (msg.fetch, "fetch"),
        (msg.transfer, "transfer"),
    ] {
        if flag {
            write!(s, " {word}").unwrap();
        }
    }
    if msg.beat > 0 {
        write!(s, " beat {}", msg.beat).unwrap();
    }
    if msg.ack_beat > 0 {
        write!(s, " ack {}", msg.ack_beat).unwrap();
    }
    if let Some(m) = &msg.members {
        write!(s, " members {}@{}", members(&m.1), m.0).unwrap();
    }
    s
}

fn event_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::LeaderChanged { leader, term } => match leader {
            Some(l) => format!("leader {} in term {term}", name_of(*l)),
            None => format!("no leader in term {term}"),
        },
        Event::Notice(n) => format!("notice: {n}"),
        Event::Transferred { result, .. } => match result {
            Ok(to) => format!("transferred to {}", name_of(*to)),
            Err(e) => format!("transfer failed: {e}"),
        },
        Event::ReadIndex { result, .. } => match result {
            Ok(i) => format!("read index {i}"),
            Err(e) => format!("read index refused: {e}"),
        },
        Event::MembersChanged { result, .. } => match result {
            Ok(c) => format!("members now {}", members(&c.members)),
            Err(e) => format!("members not changed: {e}"),
        },
    })
}

/// Beacon A, leader of the first `count` beacons (A, B, C, ...) in quorum mode, as the
/// interpreter leaves it after an election with every message delivered: it serves in term 1,
/// every follower holds and acknowledged the entry that starts its term, and nothing is in
/// flight. Its clock stands at [`ELECTED_AT`]. The core's unit tests start from it and then
/// drive it message by message.
pub(super) fn elected_leader(count: usize) -> Node {
    let a = elected(count).beacons.remove(&'A').expect("A").node;
    assert!(a.is_leader() && a.has_taken_over(), "A serves");
    assert_eq!(
        a.commit(),
        a.position().index,
        "its term's first entry is committed"
    );
    a
}

/// B, a follower of A among A, B, C in quorum mode, as [`elected_leader`] leaves them.
pub(super) fn quorum_follower() -> Node {
    let b = elected(3).beacons.remove(&'B').expect("B").node;
    assert_eq!(
        b.election().followed(),
        Some(super::testing::addr(super::testing::A))
    );
    b
}

/// The first `count` beacons after an election with every message delivered (see
/// [`elected_leader`]).
fn elected(count: usize) -> Scenario {
    let letters: Vec<String> = (0..count)
        .map(|i| char::from(b'A' + i as u8).to_string())
        .collect();
    let mut scenario = Scenario::default();
    let script = [
        format!("beacons quorum {}", letters.join(" ")),
        "tick".into(),
        "stabilize".into(),
        "tick".into(),
        "stabilize".into(),
        "tick".into(),
        "stabilize".into(),
    ];
    for line in &script {
        scenario
            .run(line)
            .unwrap_or_else(|e| panic!("`{line}`: {e}"));
    }
    assert_eq!(scenario.now, ELECTED_AT);
    assert!(scenario.flight.is_empty(), "nothing left in flight");
    scenario
}

/// A, leader of A, B, C in quorum mode, as [`elected_leader`] leaves it.
pub(super) fn quorum_leader() -> Node {
    elected_leader(3)
}

/// The clock of the leader [`elected_leader`] returns.
pub(super) const ELECTED_AT: Millis = 3 * TICK_MS;

/// A scenario file: commands, each with the output expected.
fn parse(text: &str) -> Vec<(Vec<String>, String, String)> {
    // (lines before the command: comments and blanks, the command, the expected output)
    let mut cases = Vec::new();
    let mut lines = text.lines().peekable();
    let mut before = Vec::new();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            before.push(line.to_owned());
            continue;
        }
        let command = line.to_owned();
        let mut expected = String::new();
        if lines.peek() == Some(&"----") {
            lines.next();
            for l in lines.by_ref() {
                if l.is_empty() {
                    break;
                }
                expected.push_str(l);
                expected.push('\n');
            }
        }
        cases.push((std::mem::take(&mut before), command, expected));
    }
    cases
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/consensus/scenarios")
}

/// Runs the scenario of `path`: the differences from its file, or (rewriting) the file as
/// the core writes it now.
fn check(path: &Path, rewrite: bool) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut scenario = Scenario::default();
    let mut written = String::new();
    let mut differences = Vec::new();
    for (before, command, expected) in parse(&text) {
        for l in &before {
            written.push_str(l);
            written.push('\n');
        }
        let got = scenario
            .run(&command)
            .map_err(|e| format!("{}: `{command}`: {e}", path.display()))?;
        if got != expected {
            differences.push(format!(
                "`{command}`\n--- expected\n{expected}--- got\n{got}"
            ));
        }
        written.push_str(&format!("{command}\n----\n{got}\n"));
    }
    if rewrite {
        let written = written.trim_end().to_owned() + "\n";
        std::fs::write(path, written).map_err(|e| e.to_string())?;
        return Ok(());
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: the core no longer does what the file says (BEACON_REWRITE=1 rewrites it):\n{}",
            path.display(),
            differences.join("\n")
        ))
    }
}

#[test]
fn every_scenario_does_what_its_transcript_says() {
    let rewrite = std::env::var_os("BEACON_REWRITE").is_some();
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .expect("src/consensus/scenarios")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{} scenarios", files.len());
    let failures: Vec<String> = files
        .iter()
        .filter_map(|f| check(f, rewrite).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_transcript_that_differs_is_caught() {
    let dir = std::env::temp_dir().join(format!("beacon-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wrong.txt");
    std::fs::write(
        &path,
        "beacons quorum A B C\n----\nok\n\nstatus A\n----\nA leader term 7\n",
    )
    .unwrap();
    let err = check(&path, false).unwrap_err();
    assert!(err.contains("A follower term 0"), "{err}");
    assert!(check(&path, true).is_ok());
    assert!(check(&path, false).is_ok(), "rewritten, it holds");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_command_is_named() {
    let mut s = Scenario::default();
    assert!(s.run("beacons quorum A B C").is_ok());
    assert!(s.run("frobnicate").unwrap_err().contains("unknown command"));
    assert!(s.run("tick Z").unwrap_err().contains("not a beacon"));
    assert!(s.run("crash E").unwrap_err().contains("no beacon E"));
}

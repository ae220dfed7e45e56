//! Replication: what a leader sends each follower, and what each side makes of the other's
//! messages.

use std::net::SocketAddr;

use super::election;
use super::message::Append;
use super::{Machine, Message, Position, Replica, Service};
use crate::time::Millis;

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// Sends newly appended entries, and a newly started confirmation round, to every
    /// follower at once.
    pub(super) fn flush(&mut self, now: Millis) {
        if !self.messages_held() {
            return;
        }
        let l = self.leading.as_ref().expect("only a leader holds messages");
        let (beat_due, committed) = (l.rounds.due, l.news.committed);
        for peer in self.peers() {
            let msg = self.message_for(peer, now);
            if msg.replicates() || beat_due || committed {
                self.send(peer, msg);
            }
        }
        let leading = self.leading.as_mut().expect("leader");
        leading.news.appended = false;
        leading.rounds.due = false;
        leading.news.committed = false;
    }

    /// Leader: whether its steps asked for messages to its followers (new entries, the
    /// commit, a round) that [`Replica::flush`] has not sent yet. A driver that flushes per
    /// batch ([`super::Config::flush_per_batch`]) asks first, under its read lock, and
    /// takes the write lock for [`Replica::flush_batch`] only when it says so.
    pub fn messages_held(&self) -> bool {
        self.leading
            .as_ref()
            .is_some_and(|l| l.news.appended || l.rounds.due || l.news.committed)
    }

    pub(super) fn bare_message(&self) -> Message<S> {
        let mut msg = Message::<S>::bare(
            self.election.heartbeat(),
            self.journal.last(),
            self.journal.commit(),
        );
        msg.beat = self.leading.as_ref().map_or(0, |l| l.rounds.beat());
        msg.ack_beat = self.following.ack_beat(self.election.term());
        msg.voters = self.membership.voters_digest();
        msg.heard = self.heard();
        msg.renewal_base = self
            .leading
            .as_ref()
            .filter(|l| !l.taking_over())
            .and_then(|l| l.notes.base);
        if self.leading.is_some() {
            msg.members = self
                .journal
                .log()
                .change_at(self.journal.commit())
                .map(|(i, m)| Box::new((i, m.clone())));
        }
        msg
    }

    /// The next message for `peer`: a heartbeat, plus (from a leader) what it lacks, of
    /// the log and of the renewals (to a follower's leader taking over: the renewals it
    /// lacks).
    pub(super) fn message_for(&mut self, peer: SocketAddr, now: Millis) -> Message<S> {
        let mut msg = self.log_message_for(peer, now);
        msg.renewals = self.renewals_for(peer, now).map(Box::new);
        msg
    }

    /// The renewals `peer` lacks (quorum mode): a leader's notes or table for a voter that
    /// follows it; a follower's notes for its leader taking over.
    fn renewals_for(&mut self, peer: SocketAddr, now: Millis) -> Option<super::RenewalBatch> {
        if self.cfg.mode != super::Mode::Quorum {
            return None;
        }
        let Some(leading) = self.leading.as_mut() else {
            return (self.election.leader() == Some(peer))
                .then(|| self.following.heard.for_leader())
                .flatten();
        };
        if leading.taking_over() || !self.election.is_voter(peer) {
            return None;
        }
        let f = leading.followers.get_mut(peer)?;
        // A follower outside this leader's history is being sent a snapshot: a table of
        // leases for a state it does not hold yet would only queue behind it, again each
        // patience while it reads in a large one (a million leases every 2 s to a follower
        // reading ten million registrations). It gets the table once it is back in the log.
        if f.wants_snapshot {
            return None;
        }
        let said = f.renewals.reported;
        let (service, state) = (&self.service, self.journal.state());
        let batch = leading.notes.batch_for(
            leading.term,
            &mut f.renewals,
            now,
            self.cfg.patience_ms(),
            &self.following.heard,
            || service.renewal_table(state, now),
        )?;
        // Rare (a beacon that joins, restarts or fell behind) and, for a table, as large as
        // the state: said, so that a slow first write of a term can be traced to it. Only
        // then is the horizon written out: this runs for every message to every follower.
        let heard = || {
            said.map_or("nothing yet".to_owned(), |h| {
                format!("{}.{}", h.term, h.seq)
            })
        };
        if let Some(table) = batch.table.as_ref().filter(|t| !t.ages.is_empty()) {
            self.notice(format!(
                "sending {peer} the whole renewal table ({} leases): it heard through {}",
                table.ages.len(),
                heard()
            ));
        } else if let Some(bridge) = &batch.bridge {
            self.notice(format!(
                "sending {peer} the {} renewals it lacks of the term before (it heard through {})",
                bridge.keys.len(),
                heard()
            ));
        }
        Some(batch)
    }

    /// How far this beacon has heard the renewals (quorum mode): a serving leader, every
    /// note of its term; term 0 when it holds nothing it can vouch for.
    pub(super) fn heard(&self) -> Option<super::Horizon> {
        if self.cfg.mode != super::Mode::Quorum {
            return None;
        }
        Some(match self.leading.as_ref().filter(|l| !l.taking_over()) {
            Some(l) => super::Horizon {
                term: l.term,
                seq: l.notes.last(),
            },
            None => self.following.heard.horizon().unwrap_or_default(),
        })
    }

    /// [`Replica::message_for`] without the renewals.
    fn log_message_for(&mut self, peer: SocketAddr, now: Millis) -> Message<S> {
        let mut msg = self.bare_message();
        let resend_after = self.cfg.patience_ms();
        let last = self.journal.last();
        if let Some(l) = self.leading.as_ref().filter(|l| l.taking_over()) {
            // Taking over: nothing to send but our heartbeat, and the fetch of what the
            // holder has after our applied state (a tail we have not applied may differ).
            if let Some(f) = l.phase.fetching().filter(|f| f.from == peer) {
                msg.fetch = true;
                msg.need_snapshot = f.whole;
                msg.position = self.applied();
            }
            return msg;
        }
        let Some(f) = self
            .leading
            .as_mut()
            .and_then(|l| l.followers.get_mut(peer))
        else {
            return msg;
        };
        if f.wants_snapshot {
            if f.progress.snapshot_due(now, resend_after) {
                f.progress.sent_snapshot(now, msg.beat);
                msg.snapshot = Some(Box::new(self.journal.leader_snapshot(now)));
            }
            return msg;
        }
        if f.progress.matched.is_none() {
            // Unknown follower: an empty append asks it for its position at once.
            msg.append = Some(Append {
                prev: last,
                entries: Vec::new(),
            });
            return msg;
        }
        let from = f.progress.next - 1;
        if from >= last.index {
            return msg;
        }
        match self
            .journal
            .log()
            .after(from, super::MAX_ENTRIES_PER_MESSAGE)
        {
            Some(entries) => {
                let prev = Position {
                    index: from,
                    term: self.journal.log().term_at(from).expect("retained"),
                };
                f.progress.next = entries.last().map_or(from, |e| e.index) + 1;
                msg.append = Some(Append { prev, entries });
            }
            None => {
                // What it needs was compacted away.
                f.wants_snapshot = true;
                f.progress.matched = None;
                return self.log_message_for(peer, now);
            }
        }
        msg
    }

    pub(super) fn on_peer(
        &mut self,
        now: Millis,
        from: SocketAddr,
        msg: Message<S>,
        greeting: bool,
    ) {
        if let Some(heard) = &msg.members {
            self.hear_members(now, heard);
        }
        if msg.heartbeat.is_leader && self.leading.is_none() {
            // A leader taking over says how far it heard: this beacon's promise (sent as
            // the election steps below) brings the notes it lacks.
            self.following.heard.leader_says(msg.heard);
        }
        let mut hb = msg.heartbeat;
        if msg.voters != 0 && msg.voters != self.membership.voters_digest() {
            // Its `sees` numbers other voters than ours (one of us has a change of
            // membership the other lacks): taken as seeing everyone, so that contact
            // checks do not hold up the election that brings the two in line.
            hb.sees = u64::MAX;
        }
        let input = if greeting {
            election::Input::Greeting { from, hb }
        } else {
            election::Input::Heartbeat { from, hb }
        };
        match self.election.step(now, input) {
            Ok(actions) => self.on_election(now, actions),
            Err(e) => {
                self.notice(format!("message from {from} ignored: {e}"));
                return;
            }
        }
        if self.leading.is_some() {
            self.on_follower_report(now, from, msg);
        } else if self.election.leader() == Some(from) {
            let transfer = msg.transfer.then_some(msg.heartbeat.term);
            self.on_leader_message(now, from, msg);
            // Our leader hands its leadership to us: it has seen us hold every entry it
            // has, and takes none meanwhile.
            if let Some(term) = transfer {
                let actions = self.election.take_transfer(from, term);
                if !actions.is_empty() {
                    self.notice(format!(
                        "taking over the leadership from {from} (a transfer)"
                    ));
                }
                self.on_election(now, actions);
            }
        }
    }

    /// Leader: a follower told us its position.
    fn on_follower_report(&mut self, now: Millis, from: SocketAddr, msg: Message<S>) {
        if msg.heartbeat.is_leader {
            return; // a rival claim, settled by the election; its log is not ours to track
        }
        if msg.heartbeat.term == self.election.term()
            && msg.heartbeat.leader == Some(self.election.me())
        {
            self.on_ack(from, msg.ack_beat);
            self.on_heard(from, msg.heard);
        }
        if self.taking_over() {
            self.on_promise(now, from, msg);
            return;
        }
        let log = self.journal.log();
        let Some(f) = self
            .leading
            .as_mut()
            .and_then(|l| l.followers.get_mut(from))
        else {
            return;
        };
        // Its commit names entries of our log while it knows no term above ours: it learned
        // it from leaders of our term or earlier ones, whose committed entries a serving
        // leader holds. A follower of a later leader knows commits of a log we may not
        // share. (A restarted follower says its commit before it follows anyone.)
        let ours = msg.heartbeat.term <= self.election.term();
        let commit = (self.cfg.mode == super::Mode::Quorum && ours).then_some(msg.commit);
        let lost = msg.need_snapshot || f.progress.observe(log, msg.position, commit, msg.reject);
        let base = log.base();
        let mut notice = None;
        if lost {
            f.progress.still_lost(f.acked_beat);
        }
        if lost && !f.wants_snapshot {
            f.wants_snapshot = true;
            f.progress.matched = None;
            notice = Some(format!(
                "follower {from} is at {} outside this leader's log (base {base}): sending a snapshot",
                msg.position
            ));
        } else if !lost {
            f.wants_snapshot = false;
        }
        let behind = f.wants_snapshot || f.progress.next <= self.journal.last().index;
        if let Some(n) = notice {
            self.notice(n);
        }
        if behind {
            let reply = self.message_for(from, now);
            if reply.replicates() {
                self.send(from, reply);
            }
        }
    }

    /// Whether `position` is in this beacon's history: its log holds it, or an entry of the
    /// same term at or after it (one leader per term, and a follower only appends what
    /// continues its leader's log, so an entry of that term implies everything before it).
    pub(super) fn holds(&self, position: Position) -> bool {
        self.journal.holds(position)
    }

    /// Follower in quorum mode: how far message `msg` from its leader shows this replica's
    /// log committed, read without a step (`None`: no further than it knows). A connection
    /// task asks it as the message arrives, so that reads waiting for the commit need not
    /// wait for the step, which waits for this beacon's own fsync under way.
    ///
    /// The leader's commit index names entries a majority has stored (the leader's own disk
    /// included); this replica's log matches the leader's through the last position of the
    /// leader's it holds (the message's `prev`, or the leader's last position), so its own
    /// entries up to the lower of the two are those committed ones.
    pub fn commit_heard(&self, from: SocketAddr, msg: &Message<S>) -> Option<u64> {
        let follows = self.cfg.mode == super::Mode::Quorum
            && self.leading.is_none()
            && self.election.leader() == Some(from)
            && msg.heartbeat.is_leader
            && msg.heartbeat.term == self.election.term();
        if !follows {
            return None;
        }
        let mut verified = 0;
        if self.holds(msg.position) {
            verified = msg.position.index;
        }
        if let Some(append) = &msg.append
            && self.holds(append.prev)
        {
            verified = verified.max(append.prev.index);
        }
        let commit = msg.commit.min(verified).min(self.journal.last().index);
        (commit > self.journal.commit()).then_some(commit)
    }

    /// Follower: the leader sent us entries or a snapshot.
    fn on_leader_message(&mut self, now: Millis, from: SocketAddr, mut msg: Message<S>) {
        if msg.heartbeat.term < self.election.max_seen_term() {
            // We promised a newer term: an older leader's entries are not taken.
            return;
        }
        if msg.fetch {
            // A new leader takes over the most advanced state of a majority: ours. What it
            // lacks is the entries after its last position when our log holds that position
            // and it is not far behind (a message's worth now, the rest as it asks again);
            // else, or when it asks, the whole state.
            let mut reply = self.bare_message();
            let gap = self.journal.last().index.saturating_sub(msg.position.index);
            // Our whole state is wanted: the entries not applied yet included.
            if let Err(misfit) = self.journal.catch_up(now) {
                self.halt(misfit, "handing its state to a new leader");
                return;
            }
            let entries = (!msg.need_snapshot
                && gap <= super::MAX_ENTRIES_FETCHED
                && self.journal.log().contains(msg.position))
            .then(|| {
                self.journal
                    .log()
                    .after(msg.position.index, super::MAX_ENTRIES_PER_MESSAGE)
            })
            .flatten();
            match entries {
                Some(entries) => {
                    reply.append = Some(super::Append {
                        prev: msg.position,
                        entries,
                    })
                }
                None => reply.snapshot = Some(Box::new(self.snapshot(now))),
            }
            self.send(from, reply);
            return;
        }
        let term = msg.heartbeat.term;
        let say_heard = self.hear_renewals(now, term, msg.renewal_base, msg.renewals.take());
        // A new confirmation round of our leader's is acknowledged at once (below, with the
        // answer to what it carries, or alone).
        let new_beat = self.following.see_round(term, msg.beat);
        let mut reject = false;
        let mut need_snapshot = false;
        let replicates = msg.replicates();
        // The last index known to match the leader's log.
        let mut verified = if self.holds(msg.position) {
            msg.position.index
        } else {
            0
        };
        if let Some(snapshot) = msg.snapshot {
            let snapshot = *snapshot;
            if self.holds(snapshot.position) && snapshot.position.index <= self.applied().index {
                // A late copy of a state we already have (and have built on): installing
                // it would take back entries this beacon acknowledged.
                verified = verified.max(snapshot.position.index);
            } else if self.holds(snapshot.position) {
                // A state our log holds but has not applied (an entry there did not fit,
                // and we asked for it): it replaces ours, our entries after it stay.
                verified = verified.max(snapshot.position.index);
                self.notice(format!(
                    "installed a snapshot from leader {from} at {} under this beacon's later entries",
                    snapshot.position
                ));
                self.install_under_tail(snapshot, now);
            } else {
                verified = snapshot.position.index;
                self.notice(format!(
                    "installed a snapshot from leader {from} at {}",
                    snapshot.position
                ));
                self.install(snapshot, now);
            }
        }
        if let Some(append) = msg.append {
            if !self.holds(append.prev) && append.prev.index < self.journal.log().base().index {
                // Before what our log keeps (a state installed after the commit we told):
                // no entry can be checked against it, only the whole state replaces ours.
                need_snapshot = true;
            } else if !self.holds(append.prev) {
                reject = true;
            } else {
                verified = verified.max(append.prev.index);
                for entry in append.entries {
                    if self.holds(entry.position()) {
                        verified = verified.max(entry.index); // already have it
                        continue;
                    }
                    match self.journal.log().term_at(entry.index) {
                        Some(_) if entry.index > self.applied().index => {
                            // We hold different entries from here, none applied: they came
                            // from a leader whose entries did not commit (the leader's log
                            // holds every committed one). Ours are cut off, its taken.
                            self.cut_after(entry.index - 1, from);
                        }
                        Some(_) => {
                            // We applied different entries past `prev`: our state diverged
                            // and cannot be rolled back entry by entry.
                            need_snapshot = true;
                            break;
                        }
                        None if entry.index != self.journal.last().index + 1 => {
                            reject = true;
                            break;
                        }
                        None => {}
                    }
                    let position = entry.position();
                    if let Err((at, e)) = self.take_from_leader(now, entry) {
                        self.notice(format!(
                            "entry {at} from leader {from} does not fit this beacon's state ({e}): asking for a snapshot"
                        ));
                        need_snapshot = true;
                        break;
                    }
                    verified = verified.max(position.index);
                }
            }
        }
        self.journal.commit_to(msg.commit.min(verified));
        if let Err((at, e)) = self.journal.apply_committed(now) {
            self.notice(format!(
                "committed entry {at} does not fit this beacon's state ({e}): asking leader {from} for a snapshot"
            ));
            need_snapshot = true;
        }
        self.release_changes();
        self.following.hear_commit(msg.commit);
        if replicates || new_beat || say_heard {
            if new_beat {
                self.ack_round_early(from);
            }
            let mut ack = self.bare_message();
            ack.reject = reject;
            ack.need_snapshot = need_snapshot;
            self.send(from, ack);
        }
    }

    /// Leader: follower `from` said how far it has heard the renewals; gives the answers
    /// that waited for a majority to hold them, and drops the notes every follower holds.
    pub(super) fn on_heard(&mut self, from: SocketAddr, heard: Option<super::Horizon>) {
        let majority = self.majority();
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        let Some(f) = l.followers.get_mut(from) else {
            return;
        };
        f.renewals.report(heard);
        let (term, notes) = (l.term, &l.notes);
        let held = |f: &super::progress::Follower| notes.held_by(term, &f.renewals);
        let confirmed = l
            .followers
            .majority_reached(&self.election, notes.last(), majority, held);
        self.forget_heard_notes();
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        if confirmed <= l.notes.confirmed {
            return;
        }
        l.notes.confirmed = confirmed;
        for (token, result) in super::confirm::take_due(&mut l.unheard, confirmed) {
            self.reply(token, result.map_err(super::ReplyError::Machine));
        }
    }

    /// Leader: drops the notes every voter holds (all of them when it has no other voter).
    pub(super) fn forget_heard_notes(&mut self) {
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        let (term, notes, election) = (l.term, &l.notes, &self.election);
        let lowest = l
            .followers
            .iter()
            .filter(|(p, _)| election.is_voter(*p))
            .map(|(_, f)| notes.held_by(term, &f.renewals))
            .min();
        l.notes.forget_heard(lowest.into_iter());
    }

    /// Follower: takes what its leader of `term` says of the renewals (see
    /// [`super::renewals`]) into the service. Returns whether the batch did not continue
    /// what this beacon holds (its leader, told where it stands, sends the table).
    fn hear_renewals(
        &mut self,
        now: Millis,
        term: u64,
        base: Option<super::Horizon>,
        batch: Option<Box<super::RenewalBatch>>,
    ) -> bool {
        let Some(batch) = batch else {
            self.following.heard.adopt(term, base);
            return false;
        };
        match self.following.heard.take(term, base, *batch) {
            super::renewals::Take::Keys(keys) => {
                self.service.hear_renewals(&keys, now);
                false
            }
            super::renewals::Take::Table(table, keys) => {
                self.service.install_renewals(&table, now);
                self.service.hear_renewals(&keys, now);
                false
            }
            super::renewals::Take::Gap => true,
        }
    }

    /// Follower: acknowledges our leader's new confirmation round before this batch's
    /// entries are stored. A round proves that a majority still follows the leader in its
    /// term (which is durable before any early message leaves); it says nothing of our log.
    /// Sent after the store, the acknowledgement waited for our fsync, and so did every
    /// linearizable read and lease renewal waiting on the round. This one claims only what
    /// is durable: the log up to the first entry still waiting for a store (this one's, or
    /// one under way: [`super::durable`]). The usual acknowledgement follows once the
    /// entries are stored.
    fn ack_round_early(&mut self, leader: SocketAddr) {
        if self.ready.store.snapshot.is_some() {
            return;
        }
        let first = self.ready.store.entries.first().map(|e| e.index);
        // Nothing waits for a store: the usual acknowledgement leaves at once.
        if self.own_durable() == self.journal.last().index && first.is_none() {
            return;
        }
        let Some(durable) = self.durable_position(first) else {
            return;
        };
        let mut early = self.bare_message();
        early.position = durable;
        early.commit = early.commit.min(durable.index);
        self.ready.early.push((leader, early));
    }

    /// A follower that reconnected starts from scratch in the leader's view.
    pub(super) fn forget_follower(&mut self, peer: SocketAddr) {
        let next = self.journal.last().index + 1;
        if let Some(l) = self.leading.as_mut() {
            l.followers.reset(peer, next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::scenario::quorum_leader;
    use super::super::testing::*;
    use super::super::{Append, Entry, Horizon, Input, Message, Mode, Payload, Position};

    #[test]
    fn a_leaders_write_leaves_before_its_store_and_waits_for_its_commit() {
        let mut a = quorum_leader();
        let start = a.position();
        let step = a.step(
            200,
            Input::Request {
                token: 9,
                request: Request::Add(7),
            },
        );
        let entry = Entry {
            index: start.index + 1,
            term: 1,
            payload: Payload::Command(7),
        };
        assert_eq!(
            step.store.entries,
            vec![entry.clone()],
            "the entry is stored"
        );
        // Both followers get it before the leader's own store is durable (it counts only
        // once acknowledged), following the entry they hold.
        let sent: Vec<_> = step
            .early
            .iter()
            .map(|(to, m)| (to.port(), m.append.clone()))
            .collect();
        let append = Some(Append {
            prev: start,
            entries: vec![entry],
        });
        assert_eq!(sent, vec![(B, append.clone()), (C, append)]);
        assert!(step.after.is_empty());
        assert!(
            step.replies.is_empty(),
            "answered once a majority stored it"
        );
    }

    /// A batch that steps a follower's acknowledgement (which commits a write) and a new
    /// write: flushed per step, each follower gets two messages (the commit, then the new
    /// entry); flushed per batch, one that carries both, and nothing is sent before the
    /// batch's flush.
    #[test]
    fn a_leader_flushing_per_batch_sends_each_follower_one_message_for_its_batch() {
        for per_batch in [false, true] {
            let mut a = quorum_leader();
            a.cfg.flush_per_batch = per_batch;
            let mut batch = add(&mut a, 300, 1, 7);
            batch.merge(a.flush_batch(300));
            let first = a.position();
            let beat = a.leading.as_ref().unwrap().rounds.beat();
            let mut batch = hear(&mut a, 302, B, follower(A, 1, first, beat));
            batch.merge(add(&mut a, 302, 2, 8));
            if per_batch {
                assert!(batch.early.is_empty(), "held for the batch's flush");
            }
            assert_eq!(a.messages_held(), per_batch);
            batch.merge(a.flush_batch(302));
            assert!(!a.messages_held());
            let sent: Vec<_> = batch
                .early
                .iter()
                .map(|(to, m)| {
                    let last = m.append.as_ref().and_then(|a| a.entries.last());
                    (to.port(), last.map(|e| e.index), m.commit)
                })
                .collect();
            let second = first.index + 1;
            let want = if per_batch {
                vec![
                    (B, Some(second), first.index),
                    (C, Some(second), first.index),
                ]
            } else {
                vec![
                    (B, None, first.index),
                    (C, None, first.index),
                    (B, Some(second), first.index),
                    (C, Some(second), first.index),
                ]
            };
            assert_eq!(sent, want, "flushed per batch: {per_batch}");
            assert!(a.flush_batch(303).is_empty(), "nothing more to send");
        }
    }

    #[test]
    fn a_follower_asks_for_the_whole_state_when_the_leaders_entries_start_before_its_log() {
        // B installed a state at 5@2 (taking over, before it lost the lead) while it knew
        // the log committed through 3 only: a leader backing off to that commit sends
        // entries after 3@1, which B's log no longer holds to check them against.
        let cfg = super::super::testing::config_of(B, Mode::Quorum, &[A, B, C]);
        let snapshot = super::super::Snapshot {
            position: Position { index: 5, term: 2 },
            state: vec![1, 2, 3, 4],
            members: None,
        };
        let (mut b, _) = super::super::Replica::restore(
            cfg,
            Numbers::default(),
            Append,
            Some(snapshot),
            Vec::new(),
            3,
        )
        .unwrap();
        assert_eq!(b.commit(), 3);
        let mut msg = follower(A, 3, Position { index: 9, term: 3 }, 0);
        msg.heartbeat.is_leader = true;
        msg.heartbeat.leader = Some(addr(A));
        msg.commit = 9;
        msg.append = Some(Append {
            prev: Position { index: 3, term: 1 },
            entries: vec![Entry {
                index: 4,
                term: 1,
                payload: Payload::Command(4),
            }],
        });
        let step = hear(&mut b, 10, A, msg);
        let ack = step
            .after
            .iter()
            .rev()
            .find(|(to, _)| to.port() == A)
            .expect("an answer to the leader");
        assert!(
            ack.1.need_snapshot && !ack.1.reject,
            "the whole state, not a rejection the leader answers with the same entries: {:?}",
            ack.1
        );
    }

    #[test]
    fn a_follower_stores_what_follows_its_log_and_acknowledges_only_after() {
        let mut b = node(B, Mode::Quorum);
        let entries = vec![
            Entry {
                index: 1,
                term: 1,
                payload: Payload::LeaderStart,
            },
            Entry {
                index: 2,
                term: 1,
                payload: Payload::Command(7),
            },
        ];
        let mut msg = follower(A, 1, Position { index: 2, term: 1 }, 0);
        msg.heartbeat.is_leader = true;
        msg.heartbeat.leader = Some(addr(A));
        msg.commit = 1;
        msg.append = Some(Append {
            prev: Position::default(),
            entries: entries.clone(),
        });
        let step = hear(&mut b, 10, A, msg.clone());
        assert_eq!(b.election().leader(), Some(addr(A)), "it follows the claim");
        assert_eq!(step.store.entries, entries);
        assert!(
            step.early.is_empty(),
            "a follower sends nothing before its store"
        );
        // Its acknowledgement to the leader (after its heartbeat's news to everyone).
        let ack = step
            .after
            .iter()
            .rev()
            .find(|(to, _)| to.port() == A)
            .unwrap();
        assert_eq!(
            (ack.1.position, ack.1.reject),
            (Position { index: 2, term: 1 }, false)
        );
        assert_eq!(
            b.commit(),
            1,
            "commits what the leader committed and it holds"
        );
        // Entries that do not follow its log are refused, and nothing is stored.
        msg.append = Some(Append {
            prev: Position { index: 5, term: 1 },
            entries: Vec::new(),
        });
        let step = hear(&mut b, 20, A, msg);
        assert!(step.store.entries.is_empty());
        assert!(step.after.iter().any(|(_, m)| m.reject), "it says so");
    }

    /// Command entry `index` of `term`.
    fn entry(index: u64, term: u64) -> Entry<u64> {
        Entry {
            index,
            term,
            payload: Payload::Command(index),
        }
    }

    /// B, following A in term 1, after A's message with entries 1 and 2 (and that message,
    /// to send again changed).
    fn following_a_with_two_entries() -> (Node, Message<Numbers>) {
        hears_two_entries(node(B, Mode::Quorum))
    }

    /// `b` after A's message with entries 1 and 2 (and that message).
    fn hears_two_entries(mut b: Node) -> (Node, Message<Numbers>) {
        let mut msg = follower(A, 1, Position { index: 2, term: 1 }, 0);
        msg.heartbeat.is_leader = true;
        msg.heartbeat.leader = Some(addr(A));
        msg.append = Some(Append {
            prev: Position::default(),
            entries: vec![entry(1, 1), entry(2, 1)],
        });
        hear(&mut b, 10, A, msg.clone());
        (b, msg)
    }

    #[test]
    fn a_follower_acknowledges_a_new_round_before_its_store_claiming_only_what_is_stored() {
        let (mut b, mut msg) = following_a_with_two_entries();
        // Round 4 arrives with entries 3 and 4.
        msg.position = Position { index: 4, term: 1 };
        msg.beat = 4;
        msg.append = Some(Append {
            prev: Position { index: 2, term: 1 },
            entries: vec![entry(3, 1), entry(4, 1)],
        });
        let step = hear(&mut b, 20, A, msg.clone());
        assert_eq!(step.store.entries.len(), 2);
        let early: Vec<_> = step.early.iter().filter(|(to, _)| to.port() == A).collect();
        assert_eq!(
            early.len(),
            1,
            "the round's acknowledgement leaves before the store"
        );
        let (_, early) = early[0];
        assert_eq!(early.ack_beat, 4);
        assert_eq!(
            early.position,
            Position { index: 2, term: 1 },
            "it claims only the entries stored before"
        );
        let after = &step
            .after
            .iter()
            .rev()
            .find(|(to, _)| to.port() == A)
            .unwrap()
            .1;
        assert_eq!(
            (after.position, after.ack_beat),
            (Position { index: 4, term: 1 }, 4)
        );
        // A round with nothing to store is acknowledged at once anyway: no early copy.
        msg.beat = 5;
        msg.append = None;
        let step = hear(&mut b, 30, A, msg);
        assert!(step.store.entries.is_empty());
        assert!(step.early.is_empty());
        assert!(
            step.after
                .iter()
                .any(|(to, m)| to.port() == A && m.ack_beat == 5)
        );
    }

    /// Storing in the background, a follower acknowledges a round early whenever a store
    /// is under way, even one of an earlier step, claiming only what was reported stored.
    #[test]
    fn a_follower_storing_beside_its_steps_claims_only_what_was_reported() {
        let mut b = node(B, Mode::Quorum);
        b.cfg.stores_reported = true;
        let (mut b, mut msg) = hears_two_entries(b);
        // Entries 1 and 2 are on their way to the disk; round 5 brings nothing to store.
        msg.beat = 5;
        msg.append = None;
        let step = hear(&mut b, 20, A, msg.clone());
        let early: Vec<_> = step.early.iter().filter(|(to, _)| to.port() == A).collect();
        assert_eq!(early.len(), 1, "acknowledged before the store under way");
        assert_eq!((early[0].1.ack_beat, early[0].1.position.index), (5, 0));
        // Once the store is reported, a round is acknowledged with the rest, as before.
        b.step(
            25,
            Input::Stored {
                through: Position { index: 2, term: 1 },
            },
        );
        msg.beat = 6;
        let step = hear(&mut b, 30, A, msg);
        assert!(step.early.is_empty());
        assert!(
            step.after
                .iter()
                .any(|(to, m)| to.port() == A && m.ack_beat == 6 && m.position.index == 2)
        );
    }

    #[test]
    fn a_follower_hears_its_commit_only_where_its_log_matches_its_leaders() {
        let (mut b, mut msg) = following_a_with_two_entries();
        assert_eq!(b.commit(), 0);
        // The next message tells commit 2 and brings entries 3 and 4 after 2@1, which B
        // holds: B's entries through 2 are committed, before any step.
        msg.commit = 2;
        msg.position = Position { index: 4, term: 1 };
        msg.append = Some(Append {
            prev: Position { index: 2, term: 1 },
            entries: vec![entry(3, 1), entry(4, 1)],
        });
        assert_eq!(b.commit_heard(addr(A), &msg), Some(2));
        // A commit beyond B's log counts only as far as B's log goes.
        msg.commit = 4;
        assert_eq!(b.commit_heard(addr(A), &msg), Some(2));
        // After a position B does not hold (another history), nothing is heard; nor from
        // a beacon B does not follow, nor in another term.
        let mut other = msg.clone();
        other.position = Position { index: 4, term: 2 };
        other.append = Some(Append {
            prev: Position { index: 2, term: 2 },
            entries: vec![entry(3, 2)],
        });
        assert_eq!(b.commit_heard(addr(A), &other), None);
        assert_eq!(b.commit_heard(addr(C), &msg), None);
        let mut later = msg.clone();
        later.heartbeat.term = 2;
        assert_eq!(b.commit_heard(addr(A), &later), None);
        // Once stepped, the commit is B's own: nothing more to hear.
        hear(&mut b, 20, A, msg.clone());
        assert_eq!(b.commit(), 4);
        assert_eq!(b.commit_heard(addr(A), &msg), None);
    }

    /// A follower being sent a snapshot is sent no renewals until it is back in the log;
    /// then it gets the table.
    #[test]
    fn a_follower_being_sent_a_snapshot_gets_the_renewal_table_after_it() {
        let to = |step: &Step, port: u16| -> Vec<Message<Numbers>> {
            step.early
                .iter()
                .chain(&step.after)
                .filter(|(to, _)| to.port() == port)
                .map(|(_, m)| m.clone())
                .collect()
        };
        let mut a = quorum_leader();
        let term = a.election().term();
        // B found an entry of A's that did not fit its state: it asks for a snapshot.
        let mut report = follower(A, term, a.position(), 0);
        report.need_snapshot = true;
        report.heard = Some(Horizon::default());
        let step = hear(&mut a, 200, B, report.clone());
        let to_b = to(&step, B);
        assert!(to_b.iter().any(|m| m.snapshot.is_some()), "{to_b:?}");
        assert!(to_b.iter().all(|m| m.renewals.is_none()), "{to_b:?}");
        // It says the same while it reads the snapshot in, patience after patience: no
        // table, and a snapshot again only as the snapshot's own backoff allows.
        for now in (300..10_000).step_by(100) {
            let mut step = hear(&mut a, now, B, report.clone());
            step.merge(tick(&mut a, now + 50));
            assert!(
                to(&step, B).iter().all(|m| m.renewals.is_none()),
                "at {now}"
            );
        }
        // It installed it: back in A's log, in A's term. The next message brings the table.
        let mut back = follower(A, term, a.position(), 0);
        back.heard = Some(Horizon::default());
        let mut step = hear(&mut a, 10_000, B, back);
        step.merge(tick(&mut a, 10_100));
        let tables = to(&step, B)
            .iter()
            .filter(|m| m.renewals.as_ref().is_some_and(|r| r.table.is_some()))
            .count();
        assert_eq!(tables, 1, "{:?}", to(&step, B));
    }

    #[test]
    fn a_follower_whose_log_leaves_ours_after_its_commit_gets_entries_not_a_snapshot() {
        let mut a = quorum_leader();
        let start = a.position();
        let term = a.election().term();
        // B restarted with a tail A never had (5@1 past A's start), knowing A's start
        // committed: A sends its entries from after the commit, and B cuts its tail.
        let mut report = follower(A, term, Position { index: 5, term: 1 }, 0);
        report.commit = start.index;
        let step = hear(&mut a, 200, B, report.clone());
        let to_b: Vec<&Message<Numbers>> = step
            .early
            .iter()
            .chain(&step.after)
            .filter(|(to, _)| to.port() == B)
            .map(|(_, m)| m)
            .collect();
        assert!(to_b.iter().all(|m| m.snapshot.is_none()), "{to_b:?}");
        let f = &a.leading.as_ref().unwrap().followers[&addr(B)];
        assert!(!f.wants_snapshot);
        assert_eq!(f.progress.matched, Some(start.index));
        // So too before it follows anyone (its greeting as it restarts).
        let mut a = quorum_leader();
        let mut greeting = report.clone();
        greeting.heartbeat.leader = None;
        a.step(
            200,
            Input::Greeting {
                from: addr(B),
                msg: greeting,
            },
        );
        let f = &a.leading.as_ref().unwrap().followers[&addr(B)];
        assert!(!f.wants_snapshot);
        // The same report from a beacon that follows a later leader: its commit may name a
        // log A does not share, so only a snapshot repairs it.
        let mut a = quorum_leader();
        report.heartbeat.leader = Some(addr(C));
        report.heartbeat.term = term + 1;
        hear(&mut a, 200, B, report);
        let f = &a.leading.as_ref().unwrap().followers[&addr(B)];
        assert!(f.wants_snapshot);
    }
}

//! The state machine: one server's view of the ensemble, driven by [`Zab::handle`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use crate::commands::{AppendCapacity, CommandQueue};
use crate::election::{Election, Introduction, Outcome, Voters};
use crate::history::History;
use crate::message::{
    Attempt, ForwardsHeard, Lane, Link, Message, PeerState, PerLane, SnapshotImage, Vote,
};
use crate::sync::{plan, LearnerLog, SyncPlan};
use crate::{
    Action, Config, Entry, Epoch, Epochs, Input, LearnerStatus, LearnerSyncs, Position, Recovered,
    ServerId, ServingRole, Status,
};

/// Entries a saved snapshot lets go that one input drops: a few tens of microseconds, so a
/// snapCount's worth goes in well under a second at any load, ticks included.
const TRIM_ENTRIES_PER_INPUT: usize = 512;

pub struct Zab {
    config: Config,
    epochs: Epochs,
    history: History,
    /// Every entry through here is durable on this server.
    durable: Position,
    committed: Position,
    delivered: Position,
    phase: Phase,
    /// Bumped on every change of phase, so a handler that took the phase's state out to
    /// work on it knows whether to put it back.
    phase_generation: u64,
    /// The newest election round this server has taken part in: raised by `look`, to the
    /// round it decided in, and, while it leads, to its learners' attempts (numbered by
    /// their rounds). A looking vote from its leader in a round no newer than the one it
    /// decided in is an echo of that election, not a new one; and a leader that looks again
    /// does so in a round its learners take for new.
    election_round: u64,
    reported_status: Status,
    /// How many stints of serving this server has begun (see [`Status::Serving`]).
    stints: u64,
    /// Appends not yet reported durable, oldest first: (last position, its epoch, the
    /// position through which the append still counts once durable — lowered when a later
    /// truncation or snapshot overtakes it).
    pending_appends: VecDeque<(Position, Epoch, Position)>,
    /// When this server, not established, last answered each peer's looking vote.
    vote_answers_ms: BTreeMap<ServerId, u64>,
    /// Peers whose connection went down and that have sent nothing since: an election does
    /// not wait for their votes.
    unreachable_peers: BTreeSet<ServerId>,
    learner_syncs: LearnerSyncs,
    now_ms: u64,
    out: Vec<Action>,
}

/// Whether a learner's sync starts, or one under way is sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyncStart {
    New,
    Resend,
}

enum Phase {
    Looking(Election),
    Learning(Learner),
    Leading(Leader),
    /// Only while a handler holds the real phase's state.
    Taken,
}

struct Learner {
    leader: ServerId,
    observer: bool,
    stage: LearnerStage,
    /// The epoch the leader asked for (0 until `NewEpoch`).
    epoch: Epoch,
    /// The vote that made this server follow `leader`, answered to looking servers until
    /// the leader is established, so that the leader can complete its own election.
    final_vote: Option<Vote>,
    /// Whether anything came from `leader` since this server chose it. Until then looking
    /// servers are answered with this server's own candidacy instead of the final vote: a
    /// learner that keeps trying a leader that is gone must not keep offering that leader to
    /// the servers looking meanwhile, or they elect it again and again (ZooKeeper's
    /// `checkLeader` plays this part there). The leader's own looking vote in a newer round
    /// makes its learner look too; in the round the learner decided in it is a copy or an
    /// answer, and a leader counts no vote while it leads, so the candidacy it gets back
    /// changes nothing.
    heard_from_leader: bool,
    started_ms: u64,
    last_heard_ms: u64,
    last_sent_ms: u64,
    /// Forwarded commands the leader has not taken (proposed), in each lane.
    forwards: PerLane<Forwarded>,
    /// When this learner last acknowledged, so that commit announcements are not each
    /// answered: an empty `Propose` gets an `Ack` only once per heartbeat interval.
    last_ack_ms: u64,
    /// How far the leader's own log is durable, as it last said in this epoch.
    leader_durable: Position,
    /// How far another follower's log is durable, the furthest any said in this epoch.
    follower_durable: Position,
    /// The leader's last position when it synchronized this learner (0 before). Serving
    /// is reported only once everything through it is delivered: by then every entry of an
    /// earlier epoch that will ever commit has been delivered here, and so has every command
    /// the leader took from this learner's earlier attempts in this epoch (it dropped the
    /// rest when this attempt began), so a command this server handed over before and has
    /// not seen delivered never will be.
    history_end: Position,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LearnerStage {
    /// `FollowerInfo` sent; waiting for `NewEpoch`.
    Discovering,
    /// `AckEpoch` sent; waiting for `NewLeader`.
    Promised { counted: bool },
    /// `NewLeader` applied; waiting for the log through `last` to be durable.
    Syncing { last: Position },
    /// Synchronized: following the leader's proposals.
    Broadcast,
}

/// A `NewLeader`'s synchronization, as its learner carries it out (see [`Message::NewLeader`]).
struct NewLeaderSync {
    truncate_after: Position,
    snapshot: Option<SnapshotImage>,
    entries: Vec<Entry>,
    commit: Position,
    history_end: Position,
}

/// What the leader may still propose now, in entries and payload bytes.
struct Room {
    entries: u64,
    bytes: u64,
    /// Nothing is in flight: one command goes whatever its size, so none waits forever.
    idle: bool,
}

impl Room {
    /// Moves the next of `waiting` to `accepted` if it fits; false when it does not.
    fn take_next(&mut self, waiting: &mut CommandQueue, accepted: &mut Vec<Bytes>) -> bool {
        let Some(next) = waiting.front() else {
            return true;
        };
        let bytes = next.len() as u64;
        if self.entries == 0 || (bytes > self.bytes && !self.idle) {
            return false;
        }
        self.entries -= 1;
        self.bytes = self.bytes.saturating_sub(bytes);
        self.idle = false;
        accepted.extend(waiting.pop_front());
        true
    }

    /// Moves all of `waiting` that fits to `accepted`, in order; false when one does not.
    fn take_all(&mut self, waiting: &mut CommandQueue, accepted: &mut Vec<Bytes>) -> bool {
        while waiting.front().is_some() {
            if !self.take_next(waiting, accepted) {
                return false;
            }
        }
        true
    }
}

/// A learner's forwarded commands of one lane, kept until the leader has taken them.
#[derive(Debug)]
struct Forwarded {
    /// Not yet taken (proposed); the first has sequence `confirmed + 1`.
    commands: CommandQueue,
    confirmed: u64,
    /// The leader holds or has taken the commands through this sequence (at least
    /// `confirmed`): only those after it are ever sent again.
    received: u64,
    /// When the leader last received or took more of them.
    progress_ms: u64,
    /// Resends since the leader last received or took more of them.
    resends: u32,
}

impl Forwarded {
    fn new(now_ms: u64) -> Forwarded {
        Forwarded {
            commands: CommandQueue::default(),
            confirmed: 0,
            received: 0,
            progress_ms: now_ms,
            resends: 0,
        }
    }

    /// Adds commands to forward; returns the index of the first.
    fn push(&mut self, payloads: Vec<Bytes>, now_ms: u64) -> usize {
        let first_new = self.commands.len();
        if self.confirmed + first_new as u64 <= self.received {
            // The leader's progress is counted from now, not from its last forwards.
            self.progress_ms = now_ms;
            self.resends = 0;
        }
        for payload in payloads {
            self.commands.push_back(payload);
        }
        first_new
    }

    /// The leader said how far it has them.
    fn heard(&mut self, heard: ForwardsHeard, now_ms: u64) {
        if heard.received > self.received {
            self.received = heard.received;
            self.progress_ms = now_ms;
            self.resends = 0;
        }
        if heard.taken > self.confirmed {
            self.commands
                .drop_front((heard.taken - self.confirmed) as usize);
            self.confirmed = heard.taken;
            self.received = self.received.max(heard.taken);
            self.progress_ms = now_ms;
            self.resends = 0;
        }
    }

    /// The index to send again from, when the leader has not received them for long enough.
    /// Over TCP only a broken connection (or a full queue) loses forwards; the leader may hold
    /// received ones for long under load, and those are not sent again.
    fn resend_due(&mut self, now_ms: u64, heartbeat_ms: u64) -> Option<usize> {
        let forwarded = self.confirmed + self.commands.len() as u64;
        let earliest_ms = self.progress_ms + resend_wait_ms(heartbeat_ms, 2, 0, self.resends);
        if forwarded <= self.received || now_ms < earliest_ms {
            // Nothing to resend, or too early whatever its size: no need to sum its bytes
            // on every tick.
            return None;
        }
        let first_unreceived = (self.received - self.confirmed) as usize;
        let unreceived_bytes: usize = self.commands.from(first_unreceived).map(Bytes::len).sum();
        let wait_ms = resend_wait_ms(heartbeat_ms, 2, unreceived_bytes as u64, self.resends);
        if now_ms < self.progress_ms + wait_ms {
            return None;
        }
        self.progress_ms = now_ms;
        self.resends += 1;
        Some(first_unreceived)
    }
}

/// A learner's forwarded commands of one lane, as its leader holds them.
#[derive(Debug, Default)]
struct Held {
    /// How many have been proposed.
    taken: u64,
    /// The next ones, in the learner's order, held while the proposals in flight leave no
    /// room for them. Within `forwards_in_flight_max` commands and `in_flight_bytes_max`
    /// bytes: the learner keeps no more unconfirmed, so only a duplicate could go beyond, and
    /// one beyond is dropped.
    waiting: CommandQueue,
}

impl Held {
    fn heard(&self) -> ForwardsHeard {
        ForwardsHeard {
            taken: self.taken,
            received: self.taken + self.waiting.len() as u64,
        }
    }

    /// Holds the new ones of the commands numbered from `first_sequence`: a resent one
    /// already taken or waiting is skipped. False, taking none, when they start after a gap
    /// (their predecessors lost with a connection), until the learner resends from the gap.
    fn receive(
        &mut self,
        first_sequence: u64,
        payloads: Vec<Bytes>,
        commands_max: u64,
        bytes_max: u64,
    ) -> bool {
        let next_sequence = self.heard().received + 1;
        if first_sequence > next_sequence {
            return false;
        }
        let already = (next_sequence - first_sequence) as usize;
        let room = self.waiting.room(commands_max, bytes_max);
        let mut fresh = payloads.into_iter().skip(already);
        for payload in room.fill(|| fresh.next()) {
            self.waiting.push_back(payload);
        }
        true
    }

    /// Moves to `accepted` what `take` lets through from the waiting ones, counting it taken;
    /// returns what `take` does.
    fn take_with(
        &mut self,
        accepted: &mut Vec<Bytes>,
        take: impl FnOnce(&mut CommandQueue, &mut Vec<Bytes>) -> bool,
    ) -> bool {
        let before = accepted.len();
        let fits = take(&mut self.waiting, accepted);
        self.taken += (accepted.len() - before) as u64;
        fits
    }
}

struct Leader {
    /// 0 until a quorum has reported its accepted epoch.
    epoch: Epoch,
    stage: LeaderStage,
    final_vote: Option<Vote>,
    started_ms: u64,
    peers: BTreeMap<ServerId, Peer>,
    /// The leader's last position when its history was fixed (start of synchronization).
    history_end: Position,
    /// The commit position at the previous tick: by the next, every learner has been told
    /// it or of a later one (see [`Zab::tell_owed_commit`]).
    committed_at_tick: Position,
    /// This server's own commands, in each lane, held while the proposals in flight leave no
    /// room for them: the urgent ones go first, the others take their turn with each
    /// learner's waiting forwards.
    own_waiting: PerLane<CommandQueue>,
    /// Whose waiting commands [`Zab::propose_waiting`] takes first: 0 for `own_waiting`, i for
    /// the i-th learner in `peers` (taken modulo their number, which may change).
    next_turn: usize,
}

impl Leader {
    /// A learner known to be ours (checked by the caller, e.g. [`Zab::with_heard_learner`]).
    fn peer_mut(&mut self, id: ServerId) -> &mut Peer {
        self.peers
            .get_mut(&id)
            .expect("the caller checked that this is one of our learners")
    }

    /// The learners that waited for a snapshot load, which has now ended (loaded or not):
    /// one that gets no snapshot from it is synced again after its resend wait.
    fn stop_awaiting_snapshot(&mut self) -> Vec<ServerId> {
        self.peers
            .iter_mut()
            .filter(|(_, peer)| peer.awaiting_snapshot)
            .map(|(id, peer)| {
                peer.awaiting_snapshot = false;
                *id
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaderStage {
    /// Gathering `FollowerInfo` from a quorum.
    Collecting,
    /// `NewEpoch` sent; gathering promises from a quorum.
    Promising,
    /// Synchronizing learners; established once a quorum has acknowledged `NewLeader`.
    Syncing,
    Broadcast,
}

struct Peer {
    observer: bool,
    attempt: Attempt,
    accepted_epoch: Epoch,
    promise: Option<Promise>,
    /// The learner acknowledged `NewLeader`: its log is a prefix of ours.
    synced: bool,
    awaiting_snapshot: bool,
    /// Durable on the learner (meaningful once synced).
    acked: Position,
    /// The last position sent to the learner.
    sent: Position,
    /// `acked` at the previous progress check, to notice a learner that stopped progressing.
    acked_at_heartbeat: Position,
    /// When that check last ran: once a heartbeat interval, on a clock of its own, since the
    /// commit announcements a busy leader sends the learner would put off a heartbeat for
    /// ever (and, with it, sending again what the learner lost).
    progress_checked_ms: u64,
    last_heard_ms: u64,
    last_sent_ms: u64,
    sync_sent_ms: u64,
    /// `NewLeader`s sent to this attempt, and the payload bytes of the last one: see
    /// [`resend_wait_ms`].
    syncs_sent: u32,
    sync_bytes: u64,
    /// This learner's forwarded commands, in each lane.
    forwards: PerLane<Held>,
    /// The highest of our durable positions we have told the learner.
    durable_told: Position,
    /// The highest commit position the learner knows of for certain: told by us, or worked
    /// out from its own acknowledged log and our durable position told. (It may know more,
    /// from the other follower's acknowledgements, which we cannot see arrive.)
    commit_known: Position,
}

/// Moves every urgent command waiting (the leader's own, then each learner's) that `room`
/// fits to `accepted`; false when one does not fit.
fn take_urgent(leader: &mut Leader, room: &mut Room, accepted: &mut Vec<Bytes>) -> bool {
    if !room.take_all(&mut leader.own_waiting.urgent, accepted) {
        return false;
    }
    leader.peers.values_mut().all(|peer| {
        peer.forwards
            .urgent
            .take_with(accepted, |waiting, accepted| {
                room.take_all(waiting, accepted)
            })
    })
}

/// Moves the client commands waiting that `room` fits to `accepted`, one from each queue in
/// turn (see [`Zab::propose_waiting`]).
fn take_commands_in_turn(leader: &mut Leader, room: &mut Room, accepted: &mut Vec<Bytes>) {
    let queues = 1 + leader.peers.len();
    let mut turn = leader.next_turn % queues;
    let mut empty_in_a_row = 0;
    while empty_in_a_row < queues {
        let before = accepted.len();
        let fits = if turn == 0 {
            room.take_next(&mut leader.own_waiting.commands, accepted)
        } else {
            let peer = leader
                .peers
                .values_mut()
                .nth(turn - 1)
                .expect("turn < queues");
            let held = &mut peer.forwards.commands;
            held.take_with(accepted, |waiting, accepted| {
                room.take_next(waiting, accepted)
            })
        };
        if !fits {
            break;
        }
        empty_in_a_row = if accepted.len() > before {
            0
        } else {
            empty_in_a_row + 1
        };
        turn = (turn + 1) % queues;
    }
    leader.next_turn = turn;
}

/// The furthest that `quorum` of the `marks` reach (the quorum-th highest): of durable
/// positions, what may commit; of times last heard from, when a quorum last was. `None` when
/// there are fewer than `quorum` of them.
fn reached_by_quorum<T: Ord + Copy>(marks: &mut [T], quorum: usize) -> Option<T> {
    if marks.len() < quorum {
        return None;
    }
    marks.sort_unstable_by(|a, b| b.cmp(a));
    Some(marks[quorum - 1])
}

/// The synchronized voting followers among a leader's learners.
fn voting_followers<'a>(
    config: &'a Config,
    peers: &'a BTreeMap<ServerId, Peer>,
) -> impl Iterator<Item = (ServerId, &'a Peer)> + 'a {
    peers
        .iter()
        .filter(|(id, peer)| peer.synced && config.is_participant(**id))
        .map(|(id, peer)| (*id, peer))
}

/// How far a quorum of durable copies reaches among a leader's synchronized voting followers
/// and its own log, durable through `own` (the commit rule, or what it would give).
fn reached_with_own_copy(
    config: &Config,
    peers: &BTreeMap<ServerId, Peer>,
    own: Position,
) -> Option<Position> {
    let mut copies: Vec<Position> = voting_followers(config, peers)
        .map(|(_, peer)| peer.acked)
        .collect();
    copies.push(own);
    reached_by_quorum(&mut copies, config.quorum_size())
}

/// How long a sender waits for a sign of progress before it sends `bytes` again, after
/// `resends` resends without one: `heartbeats_min` heartbeats, and one more for every
/// [`RESEND_BYTES_PER_HEARTBEAT`]; then twice as long each time, up to 16 times. Over TCP a
/// resend helps only after a full queue dropped the first send. When the receiver is merely
/// slow (a large snapshot still on its way, a leader behind on its input under overload), a
/// resend adds to what it must get through, so it must not come at a steady rate.
fn resend_wait_ms(heartbeat_ms: u64, heartbeats_min: u64, bytes: u64, resends: u32) -> u64 {
    const DOUBLINGS_MAX: u32 = 4;
    let heartbeats = heartbeats_min + bytes / RESEND_BYTES_PER_HEARTBEAT;
    (heartbeat_ms * heartbeats) << resends.min(DOUBLINGS_MAX)
}

/// What a resend waits for per heartbeat: a rate (64 MiB/s at ZooKeeper's default tickTime)
/// that any link between members is expected to beat.
const RESEND_BYTES_PER_HEARTBEAT: u64 = 32 << 20;

struct Promise {
    counted: bool,
    current_epoch: Epoch,
    log: LearnerLog,
}

impl Peer {
    /// The link from the leader of `epoch` to this learner's current attempt.
    fn link(&self, epoch: Epoch) -> Link {
        Link {
            epoch,
            attempt: self.attempt,
        }
    }

    fn new(observer: bool, attempt: Attempt, accepted_epoch: Epoch, now_ms: u64) -> Peer {
        Peer {
            observer,
            attempt,
            accepted_epoch,
            promise: None,
            synced: false,
            awaiting_snapshot: false,
            acked: 0,
            sent: 0,
            acked_at_heartbeat: 0,
            progress_checked_ms: now_ms,
            last_heard_ms: now_ms,
            last_sent_ms: 0,
            sync_sent_ms: 0,
            syncs_sent: 0,
            sync_bytes: 0,
            forwards: PerLane::default(),
            durable_told: 0,
            commit_known: 0,
        }
    }

    /// A `Propose` of the leader of `epoch` to this learner (entries, or none for a heartbeat
    /// or an announcement), noting when it goes and what it tells.
    fn propose(
        &mut self,
        epoch: Epoch,
        entries: Vec<Entry>,
        commit: Position,
        leader_durable: Position,
        now_ms: u64,
    ) -> Message {
        self.last_sent_ms = now_ms;
        self.durable_told = leader_durable;
        self.commit_known = self.commit_known.max(commit);
        Message::Propose {
            link: self.link(epoch),
            entries,
            commit,
            leader_durable,
            forwards: self.forwards.map(Held::heard),
        }
    }
}

impl Zab {
    /// Builds the machine from what the driver recovered. The returned actions (a
    /// truncation, when the log left by a crash does not continue the snapshot) must be
    /// carried out first.
    pub fn new(config: Config, recovered: Recovered, now_ms: u64) -> (Zab, Vec<Action>) {
        config.validate();
        let mut history = History::new(
            recovered.snapshot_position,
            recovered.snapshot_epoch,
            config.history_entries_reserved,
        );
        let mut out = Vec::new();
        let mut stale = false;
        for entry in recovered.entries {
            if entry.position <= recovered.snapshot_position {
                if entry.position == recovered.snapshot_position
                    && entry.epoch != recovered.snapshot_epoch
                {
                    stale = true;
                }
                continue;
            }
            if stale || entry.position != history.last_position() + 1 {
                stale = true;
                break;
            }
            history.append(entry);
        }
        if stale {
            history.truncate_after(recovered.snapshot_position);
            out.push(Action::Truncate {
                after: recovered.snapshot_position,
            });
        }
        let mut zab = Zab {
            pending_appends: VecDeque::new(),
            vote_answers_ms: BTreeMap::new(),
            unreachable_peers: BTreeSet::new(),
            learner_syncs: LearnerSyncs::default(),
            durable: history.last_position(),
            committed: recovered.snapshot_position,
            delivered: recovered.snapshot_position,
            epochs: recovered.epochs,
            history,
            phase: Phase::Taken,
            phase_generation: 0,
            election_round: 0,
            reported_status: Status::Looking,
            stints: 0,
            now_ms,
            out,
            config,
        };
        zab.look();
        let actions = std::mem::take(&mut zab.out);
        (zab, actions)
    }

    /// Feeds one input, at `now_ms` of a monotonic clock, and returns the actions to carry
    /// out in order. A gap between inputs of more than a quarter of the leader timeout is
    /// taken for a stall of this server, which a learner does not count against its leader.
    pub fn handle(&mut self, input: Input, now_ms: u64) -> Vec<Action> {
        self.excuse_own_stall(now_ms);
        self.now_ms = self.now_ms.max(now_ms);
        match input {
            Input::Tick => self.tick(),
            Input::Message { from, message } => self.receive(from, message),
            Input::PeerDisconnected { peer } => self.peer_disconnected(peer),
            Input::Append { lane, payloads } => self.append(lane, payloads),
            Input::Logged { position, epoch } => self.logged(position, epoch),
            Input::SnapshotSaved { position } => {
                if position <= self.delivered {
                    self.history.trim_to(position);
                }
            }
            Input::SnapshotLoaded { position, payload } => self.snapshot_loaded(position, payload),
            Input::SnapshotUnavailable => self.with_leader(|_, leader| {
                leader.stop_awaiting_snapshot();
            }),
        }
        self.history.trim_step(TRIM_ENTRIES_PER_INPUT);
        self.report_status();
        std::mem::take(&mut self.out)
    }

    /// A learner's timeouts on its leader count only the time this server was running.
    /// Inputs (ticks at least) come every few milliseconds while it runs, so a gap of more
    /// than a quarter of the leader timeout means it did not: it was stopped, swapped out or
    /// starved, and the leader's messages of that time still wait unread in its sockets.
    /// Counted, such a pause of its own would send a follower looking as soon as it resumes
    /// (a resync for nothing, and its clients' connections closed), however alive the leader
    /// is. The excess is excused, so a learner that keeps stalling still leaves a silent
    /// leader, only later. A leader is not excused: its followers counted its silence, and
    /// after such a pause they have left it.
    fn excuse_own_stall(&mut self, now_ms: u64) {
        let gap_ms = now_ms.saturating_sub(self.now_ms);
        let counted_max_ms = self.config.leader_timeout_ms / 4;
        let Phase::Learning(learner) = &mut self.phase else {
            return;
        };
        if gap_ms > counted_max_ms {
            let excused_ms = gap_ms - counted_max_ms;
            learner.started_ms += excused_ms;
            learner.last_heard_ms += excused_ms;
        }
    }

    pub fn status(&self) -> Status {
        self.reported_status
    }

    /// How many more commands [`Input::Append`] takes now in `lane` (none when not serving).
    pub fn append_capacity(&self, lane: Lane) -> AppendCapacity {
        let waiting = match &self.phase {
            // Held until there is room, as many as a learner may have forwarded unconfirmed.
            Phase::Leading(leader) if leader.stage == LeaderStage::Broadcast => {
                leader.own_waiting.get(lane)
            }
            // Observers forward their clients' commands too; they only do not vote.
            Phase::Learning(learner) if learner.stage == LearnerStage::Broadcast => {
                &learner.forwards.get(lane).commands
            }
            _ => return AppendCapacity::NONE,
        };
        waiting.room(
            self.config.forwards_in_flight_max,
            self.config.in_flight_bytes_max,
        )
    }

    /// Whether a commit can do without this server's own durable copy: it leads, in
    /// broadcast, and its synchronized voting followers heard from within two heartbeat
    /// intervals (a live one answers every heartbeat) are a quorum by themselves. Its log may
    /// then be made durable later than it is written (the driver's choice); its durable
    /// position counts towards a commit whenever it is reported, as always.
    pub fn own_copy_optional(&self) -> bool {
        let Phase::Leading(leader) = &self.phase else {
            return false;
        };
        let heard_since = self.now_ms.saturating_sub(2 * self.config.heartbeat_ms);
        let live = voting_followers(&self.config, &leader.peers)
            .filter(|(_, peer)| peer.last_heard_ms >= heard_since)
            .count();
        leader.stage == LeaderStage::Broadcast && live >= self.config.quorum_size()
    }

    /// Whether a commit waits for this server's own copy: it leads, and its log, were it
    /// durable through its last entry, would complete a quorum with its followers' durable
    /// copies beyond what is committed.
    pub fn own_copy_awaited(&self) -> bool {
        let Phase::Leading(leader) = &self.phase else {
            return false;
        };
        let last = self.history.last_position();
        if leader.stage != LeaderStage::Broadcast || self.durable >= last {
            return false;
        }
        reached_with_own_copy(&self.config, &leader.peers, last)
            .is_some_and(|commit| commit > self.committed)
    }

    pub fn committed_position(&self) -> Position {
        self.committed
    }

    pub fn delivered_position(&self) -> Position {
        self.delivered
    }

    pub fn last_logged_position(&self) -> Position {
        self.history.last_position()
    }

    pub fn epochs(&self) -> Epochs {
        self.epochs
    }

    /// The epoch of the entry at `position`, while this server still holds it (the driver
    /// stores it with a snapshot taken at `position`).
    pub fn epoch_at(&self, position: Position) -> Option<Epoch> {
        self.history.epoch_at(position)
    }

    /// The learners this server leads, by id (none unless it is leading): the ones that
    /// introduced themselves and have not gone silent, synced or not.
    /// The learner syncs this server started as leader, since it started.
    pub fn learner_syncs(&self) -> LearnerSyncs {
        self.learner_syncs
    }

    pub fn learners(&self) -> impl Iterator<Item = LearnerStatus> + '_ {
        let peers = match &self.phase {
            Phase::Leading(leader) => Some(&leader.peers),
            _ => None,
        };
        peers.into_iter().flatten().map(|(id, peer)| LearnerStatus {
            id: *id,
            observer: peer.observer,
            voting: self.config.is_participant(*id),
            synced: peer.synced,
            sent: peer.sent,
            acked: peer.acked,
            forwards_taken: peer.forwards.commands.taken + peer.forwards.urgent.taken,
        })
    }

    // ----- phases ---------------------------------------------------------------------

    fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.phase_generation += 1;
    }

    fn own_vote(&self) -> Option<Vote> {
        self.config.is_participant(self.config.me).then(|| Vote {
            epoch: self.epochs.current,
            position: self.history.last_position(),
            leader: self.config.me,
        })
    }

    /// Starts (or restarts) looking for a leader.
    fn look(&mut self) {
        self.election_round += 1;
        let election = Election::start(self.election_round, self.own_vote(), self.now_ms);
        self.set_phase(Phase::Looking(election));
        self.broadcast_vote();
        self.poll_election();
    }

    fn broadcast_vote(&mut self) {
        let Phase::Looking(election) = &mut self.phase else {
            return;
        };
        election.last_broadcast_ms = self.now_ms;
        let message = self.looking_vote_message();
        let me = self.config.me;
        let targets: Vec<ServerId> = self.config.members.keys().copied().collect();
        for to in targets.into_iter().filter(|id| *id != me) {
            self.send(to, message.clone());
        }
    }

    fn looking_vote_message(&self) -> Message {
        let (round, vote) = match &self.phase {
            Phase::Looking(election) => (election.round, election.vote),
            Phase::Learning(learner) => (self.election_round, learner.final_vote),
            Phase::Leading(leader) => (self.election_round, leader.final_vote),
            Phase::Taken => unreachable!("phase is always restored"),
        };
        let observer = !self.config.is_participant(self.config.me);
        Message::Vote {
            round,
            // An observer's vote carries no weight; it names itself only to be answered.
            vote: vote.unwrap_or(Vote {
                epoch: 0,
                position: 0,
                leader: self.config.me,
            }),
            state: PeerState::Looking,
            observer,
        }
    }

    /// What a server not yet established answers looking participant `to`: its looking
    /// vote, but its own candidacy while it learns from a leader it has not heard from (which
    /// may be gone), unless `to` is that leader: alive, and still looking because the votes
    /// that chose it were lost (a connection that dropped as the servers started), it needs
    /// them to decide, or it and its learners would wait for each other until `initLimit`.
    fn answer_vote_message(&self, to: ServerId) -> Message {
        let mut message = self.looking_vote_message();
        if let (Phase::Learning(learner), Message::Vote { vote, .. }, Some(own)) =
            (&self.phase, &mut message, self.own_vote())
        {
            if !learner.heard_from_leader && learner.leader != to {
                *vote = own;
            }
        }
        message
    }

    fn poll_election(&mut self) {
        let outcome = match &mut self.phase {
            Phase::Looking(election) => {
                let voters = Voters {
                    config: &self.config,
                    unreachable: &self.unreachable_peers,
                };
                election.poll(voters, self.now_ms)
            }
            _ => return,
        };
        self.follow_outcome(outcome);
    }

    fn follow_outcome(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Undecided => {}
            Outcome::Rebroadcast => {
                self.broadcast_vote();
                self.poll_election();
            }
            Outcome::Decided { leader } => {
                let (final_vote, introductions) = match &mut self.phase {
                    Phase::Looking(election) => {
                        self.election_round = self.election_round.max(election.round);
                        (election.vote, std::mem::take(&mut election.introductions))
                    }
                    _ => (None, BTreeMap::new()),
                };
                if leader == self.config.me {
                    self.lead(final_vote, introductions);
                } else {
                    self.learn(leader, final_vote);
                }
            }
        }
    }

    fn learn(&mut self, leader: ServerId, final_vote: Option<Vote>) {
        let observer = !self.config.is_participant(self.config.me);
        self.set_phase(Phase::Learning(Learner {
            leader,
            observer,
            stage: LearnerStage::Discovering,
            epoch: 0,
            final_vote,
            heard_from_leader: false,
            started_ms: self.now_ms,
            last_heard_ms: self.now_ms,
            last_sent_ms: self.now_ms,
            forwards: PerLane {
                commands: Forwarded::new(self.now_ms),
                urgent: Forwarded::new(self.now_ms),
            },
            last_ack_ms: 0,
            leader_durable: 0,
            follower_durable: 0,
            history_end: 0,
        }));
        self.send_follower_info(leader, observer);
    }

    fn send_follower_info(&mut self, leader: ServerId, observer: bool) {
        let message = Message::FollowerInfo {
            accepted_epoch: self.epochs.accepted,
            observer,
            attempt: self.attempt(),
        };
        self.send(leader, message);
    }

    fn learner_link(&self, epoch: Epoch) -> Link {
        Link {
            epoch,
            attempt: self.attempt(),
        }
    }

    /// This process's current try at following a leader.
    fn attempt(&self) -> Attempt {
        Attempt {
            incarnation: self.config.incarnation,
            round: self.election_round,
        }
    }

    /// Leads, taking up the introductions of learners that decided for it first.
    fn lead(&mut self, final_vote: Option<Vote>, introductions: BTreeMap<ServerId, Introduction>) {
        self.set_phase(Phase::Leading(Leader {
            epoch: 0,
            stage: LeaderStage::Collecting,
            final_vote,
            started_ms: self.now_ms,
            peers: BTreeMap::new(),
            history_end: 0,
            committed_at_tick: 0,
            own_waiting: PerLane::default(),
            next_turn: 0,
        }));
        for (from, introduction) in introductions {
            self.leader_follower_info(from, introduction);
        }
        self.leader_try_choose_epoch();
    }

    // ----- inputs ---------------------------------------------------------------------

    fn tick(&mut self) {
        match &self.phase {
            Phase::Looking(election) => {
                if self.now_ms >= election.last_broadcast_ms + self.config.election_retry_ms {
                    self.broadcast_vote();
                }
                self.poll_election();
            }
            Phase::Learning(_) => self.learner_tick(),
            Phase::Leading(_) => self.leader_tick(),
            Phase::Taken => unreachable!(),
        }
    }

    fn receive(&mut self, from: ServerId, message: Message) {
        if from == self.config.me || !self.config.members.contains_key(&from) {
            return;
        }
        self.unreachable_peers.remove(&from);
        if let (Message::Ack { link, position }, Phase::Learning(_)) = (&message, &self.phase) {
            self.learner_follower_ack(from, link.epoch, *position);
            return;
        }
        if let Some(link) = message.link() {
            let admitted = if message.is_to_learner() {
                link.attempt == self.attempt()
            } else {
                let opens = matches!(message, Message::AckEpoch { .. });
                self.leader_admit(from, link, opens)
            };
            if !admitted {
                return;
            }
        }
        match message {
            Message::Vote {
                round,
                vote,
                state,
                observer,
            } => self.receive_vote(from, round, vote, state, observer),
            Message::FollowerInfo {
                accepted_epoch,
                observer,
                attempt,
            } => {
                let introduction = Introduction {
                    accepted_epoch,
                    observer,
                    attempt,
                };
                match &mut self.phase {
                    Phase::Looking(election) => election.hold_introduction(from, introduction),
                    _ => self.leader_follower_info(from, introduction),
                }
            }
            Message::NewEpoch { link } => self.learner_new_epoch(from, link.epoch),
            Message::AckEpoch {
                link,
                counted,
                current_epoch,
                snapshot_position,
                runs,
                last_position,
            } => self.leader_ack_epoch(
                from,
                link.epoch,
                Promise {
                    counted,
                    current_epoch,
                    log: LearnerLog {
                        snapshot_position,
                        runs,
                        last_position,
                    },
                },
            ),
            Message::NewLeader {
                link,
                truncate_after,
                snapshot,
                entries,
                commit,
                history_end,
            } => {
                let sync = NewLeaderSync {
                    truncate_after,
                    snapshot,
                    entries,
                    commit,
                    history_end,
                };
                self.learner_new_leader(from, link.epoch, sync)
            }
            Message::AckNewLeader {
                link,
                last_position,
            } => self.leader_ack_new_leader(from, link.epoch, last_position),
            Message::Propose {
                link,
                entries,
                commit,
                leader_durable,
                forwards,
            } => self.learner_propose(from, link.epoch, entries, commit, leader_durable, forwards),
            Message::Ack { link, position } => self.leader_ack(from, link.epoch, position),
            Message::Forward {
                link,
                lane,
                first_sequence,
                payloads,
            } => self.leader_forward(from, link.epoch, lane, first_sequence, payloads),
        }
    }

    /// Whether a learner's message belongs to the attempt the leader knows it by. A newer
    /// attempt replaces the old one (the learner started over, and a lost `FollowerInfo` must
    /// not keep it out), but only its promise (`opens`) is worth acting on before it syncs.
    fn leader_admit(&mut self, from: ServerId, link: Link, opens: bool) -> bool {
        let observer = !self.config.is_participant(from);
        let now_ms = self.now_ms;
        let Phase::Leading(leader) = &mut self.phase else {
            return false;
        };
        if link.epoch != leader.epoch {
            return false;
        }
        let peer = leader
            .peers
            .entry(from)
            .or_insert_with(|| Peer::new(observer, link.attempt, 0, now_ms));
        match link.attempt.cmp(&peer.attempt) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => true,
            std::cmp::Ordering::Greater => {
                *peer = Peer::new(observer, link.attempt, 0, now_ms);
                opens
            }
        }
    }

    fn receive_vote(
        &mut self,
        from: ServerId,
        round: u64,
        vote: Vote,
        state: PeerState,
        observer: bool,
    ) {
        let participant = self.config.is_participant(from) && !observer;
        let own = self.own_vote();
        if let Phase::Looking(election) = &mut self.phase {
            let outcome = match state {
                PeerState::Looking if participant => {
                    let behind = round < election.round;
                    // In our round, a vote worse than ours means the sender has not taken
                    // ours (votes are ordered, it would have): it missed it, say because it
                    // still followed the old leader when ours came and answered with that.
                    // Waiting for one of us to resend cost an election retry interval.
                    let missed_ours =
                        round == election.round && election.vote.is_some_and(|mine| vote < mine);
                    let voters = Voters {
                        config: &self.config,
                        unreachable: &self.unreachable_peers,
                    };
                    let outcome =
                        election.receive_vote(voters, from, round, vote, own, self.now_ms);
                    if behind || missed_ours {
                        let message = self.looking_vote_message();
                        self.send(from, message);
                    }
                    if behind {
                        return;
                    }
                    outcome
                }
                PeerState::Looking => {
                    // An observer looking for the leader: nothing to tell it yet.
                    return;
                }
                _ if vote.leader == self.config.me => return,
                _ => election.receive_report(&self.config, from, vote.leader, state),
            };
            self.follow_outcome(outcome);
            return;
        }
        if state != PeerState::Looking {
            return;
        }
        let leader_looks_again = round > self.election_round;
        if leader_looks_again
            && matches!(&self.phase, Phase::Learning(learner) if learner.leader == from)
        {
            // Our leader is looking in a new round: it has lost its quorum, so look too, at
            // once. (In the round this server decided in, the leader's vote is a late copy
            // or the leader's answer to ours: starting over then would drop the attempt the
            // leader is about to answer, and its answers could restart us again and again.)
            self.look();
            self.receive_vote(from, round, vote, state, observer);
            return;
        }
        let answer = match self.serving_report() {
            Some((leader, state)) => Message::Vote {
                round,
                vote: Vote {
                    epoch: 0,
                    position: 0,
                    leader,
                },
                state,
                observer: !self.config.is_participant(self.config.me),
            },
            // Not established yet: our final vote, in the sender's round. (In our own,
            // older round, a looking sender would answer it as a vote from behind, we would
            // answer that, and so on forever; duplicated messages multiply such chains.)
            // Two such servers answer each other's answers, since both say they are
            // looking: answer each peer at most once per election retry interval (a server
            // that really looks re-sends its vote that often).
            None if self
                .vote_answers_ms
                .get(&from)
                .is_some_and(|at| self.now_ms < at + self.config.election_retry_ms) =>
            {
                return;
            }
            None => match self.answer_vote_message(from) {
                Message::Vote {
                    vote,
                    state,
                    observer,
                    ..
                } => Message::Vote {
                    round,
                    vote,
                    state,
                    observer,
                },
                other => other,
            },
        };
        if self.serving_report().is_none() {
            self.vote_answers_ms.insert(from, self.now_ms);
        }
        self.send(from, answer);
    }

    /// (leader, state) once this server is part of an established epoch.
    fn serving_report(&self) -> Option<(ServerId, PeerState)> {
        match &self.phase {
            Phase::Leading(leader) if leader.stage == LeaderStage::Broadcast => Some((
                self.config.me,
                PeerState::Leading {
                    epoch: leader.epoch,
                },
            )),
            Phase::Learning(learner) if learner.stage == LearnerStage::Broadcast => Some((
                learner.leader,
                PeerState::Following {
                    epoch: learner.epoch,
                },
            )),
            _ => None,
        }
    }

    fn peer_disconnected(&mut self, peer: ServerId) {
        self.unreachable_peers.insert(peer);
        match &self.phase {
            Phase::Learning(learner) if learner.leader == peer => self.look(),
            // Its vote may have been the one awaited.
            Phase::Looking(_) => self.poll_election(),
            _ => {}
        }
    }

    fn append(&mut self, lane: Lane, payloads: Vec<Bytes>) {
        assert!(
            self.append_capacity(lane).admits(&payloads),
            "the driver appends only within append_capacity"
        );
        if payloads.is_empty() {
            return;
        }
        match &mut self.phase {
            Phase::Leading(leader) => {
                for payload in payloads {
                    leader.own_waiting.get_mut(lane).push_back(payload);
                }
                self.propose_waiting();
            }
            Phase::Learning(_) => self.forward(lane, payloads),
            _ => unreachable!("append_capacity is 0 when not serving"),
        }
    }

    fn logged(&mut self, position: Position, epoch: Epoch) {
        let Some(index) = self
            .pending_appends
            .iter()
            .position(|(last, last_epoch, _)| (*last, *last_epoch) == (position, epoch))
        else {
            return;
        };
        // Completions come in append order: everything before it is durable too.
        let counted_through = self
            .pending_appends
            .drain(..=index)
            .map(|(_, _, counts_through)| counts_through)
            .max()
            .unwrap_or(0);
        if counted_through <= self.durable {
            return;
        }
        self.durable = counted_through;
        match &self.phase {
            Phase::Leading(_) => {
                self.leader_advance_commit();
                // Its own writer took entries off its queue: room even without a commit.
                self.propose_waiting();
            }
            Phase::Learning(learner) => match learner.stage {
                LearnerStage::Syncing { last } if self.durable >= last => {
                    self.learner_finish_sync()
                }
                LearnerStage::Broadcast => {
                    self.learner_send_ack();
                    self.learn_pair_commit();
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn write_entries(&mut self, entries: Vec<Entry>) {
        let Some(last) = entries.last() else {
            return;
        };
        self.pending_appends
            .push_back((last.position, last.epoch, last.position));
        self.out.push(Action::Append { entries });
    }

    fn truncate_log(&mut self, after: Position) {
        assert!(
            after >= self.delivered,
            "never truncate delivered (committed) entries: {after} < {}",
            self.delivered
        );
        self.history.truncate_after(after);
        self.durable = self.durable.min(after);
        for (_, _, counts_through) in self.pending_appends.iter_mut() {
            *counts_through = (*counts_through).min(after);
        }
        self.out.push(Action::Truncate { after });
    }

    // ----- leader ---------------------------------------------------------------------

    fn take_leader(&mut self) -> Option<(Leader, u64)> {
        if !matches!(self.phase, Phase::Leading(_)) {
            return None;
        }
        let Phase::Leading(leader) = std::mem::replace(&mut self.phase, Phase::Taken) else {
            unreachable!()
        };
        Some((leader, self.phase_generation))
    }

    fn put_leader(&mut self, leader: Leader, generation: u64) {
        if self.phase_generation == generation {
            self.phase = Phase::Leading(leader);
        }
    }

    fn with_leader(&mut self, work: impl FnOnce(&mut Zab, &mut Leader)) {
        if let Some((mut leader, generation)) = self.take_leader() {
            work(self, &mut leader);
            self.put_leader(leader, generation);
        }
    }

    /// Runs `work` for a learner's answer in this leader's epoch, once the learner is noted as
    /// heard from. Answers from other epochs, or from servers that are not our learners, are
    /// dropped: they belong to a leadership that is over or never was.
    fn with_heard_learner(
        &mut self,
        from: ServerId,
        epoch: Epoch,
        work: impl FnOnce(&mut Zab, &mut Leader),
    ) {
        self.with_leader(|zab, leader| {
            if epoch != leader.epoch {
                return;
            }
            let Some(peer) = leader.peers.get_mut(&from) else {
                return;
            };
            peer.last_heard_ms = zab.now_ms;
            work(zab, leader);
        });
    }

    fn leader_follower_info(&mut self, from: ServerId, introduction: Introduction) {
        let Introduction {
            accepted_epoch,
            observer,
            attempt,
        } = introduction;
        let observer = observer || !self.config.is_participant(from);
        let mut give_up = false;
        self.with_leader(|zab, leader| {
            zab.election_round = zab.election_round.max(attempt.round);
            if leader.stage == LeaderStage::Broadcast && accepted_epoch > leader.epoch {
                // It promised a later epoch, to a candidate that never established it, and
                // may not follow an older one: without a new epoch it would stay out for
                // good. Elect again; the next epoch will be above its promise.
                give_up = true;
                return;
            }
            let now_ms = zab.now_ms;
            let fresh = Peer::new(observer, attempt, accepted_epoch, now_ms);
            let peer = leader.peers.entry(from).or_insert(fresh);
            if attempt < peer.attempt {
                return; // a delayed copy from an attempt the learner has given up
            }
            if attempt > peer.attempt {
                // The learner started over (it timed out, or restarted): forget its progress.
                *peer = Peer::new(observer, attempt, accepted_epoch, now_ms);
            }
            peer.accepted_epoch = accepted_epoch;
            peer.last_heard_ms = now_ms;
            if leader.epoch != 0 && peer.promise.is_none() {
                let link = peer.link(leader.epoch);
                zab.send(from, Message::NewEpoch { link });
            }
        });
        if give_up {
            self.look();
            return;
        }
        self.leader_try_choose_epoch();
    }

    fn leader_try_choose_epoch(&mut self) {
        self.with_leader(|zab, leader| {
            if leader.stage != LeaderStage::Collecting {
                return;
            }
            let voters: Vec<(ServerId, Epoch)> = leader
                .peers
                .iter()
                .filter(|(_, peer)| !peer.observer)
                .map(|(id, peer)| (*id, peer.accepted_epoch))
                .collect();
            if voters.len() + 1 < zab.config.quorum_size() {
                return;
            }
            let highest = voters
                .iter()
                .map(|(_, epoch)| *epoch)
                .max()
                .unwrap_or(0)
                .max(zab.epochs.accepted);
            leader.epoch = highest + 1;
            leader.stage = LeaderStage::Promising;
            zab.epochs.accepted = leader.epoch;
            zab.out.push(Action::PersistEpochs(zab.epochs));
            let informed: Vec<(ServerId, Link)> = leader
                .peers
                .iter()
                .map(|(id, peer)| (*id, peer.link(leader.epoch)))
                .collect();
            for (id, link) in informed {
                zab.send(id, Message::NewEpoch { link });
            }
        });
        self.leader_try_fix_history();
    }

    fn leader_ack_epoch(&mut self, from: ServerId, epoch: Epoch, promise: Promise) {
        self.with_heard_learner(from, epoch, |zab, leader| {
            let peer = leader.peer_mut(from);
            if peer.promise.is_some() {
                return;
            }
            peer.promise = Some(promise);
            if matches!(leader.stage, LeaderStage::Syncing | LeaderStage::Broadcast) {
                zab.leader_start_sync(leader, from, SyncStart::New);
            }
        });
        self.leader_try_fix_history();
    }

    /// Once a quorum has promised the epoch, checks that this server's history dominates
    /// theirs, records the epoch as current and starts synchronizing everyone who promised.
    fn leader_try_fix_history(&mut self) {
        let mut give_up = false;
        self.with_leader(|zab, leader| {
            if leader.stage != LeaderStage::Promising {
                return;
            }
            let promised: Vec<&Promise> = leader
                .peers
                .values()
                .filter(|peer| !peer.observer)
                .filter_map(|peer| peer.promise.as_ref())
                .filter(|promise| promise.counted)
                .collect();
            if promised.len() + 1 < zab.config.quorum_size() {
                return;
            }
            let mine = (zab.epochs.current, zab.history.last_position());
            if promised
                .iter()
                .any(|promise| (promise.current_epoch, promise.log.last_position) > mine)
            {
                give_up = true;
                return;
            }
            leader.stage = LeaderStage::Syncing;
            leader.history_end = zab.history.last_position();
            zab.epochs.current = leader.epoch;
            zab.out.push(Action::PersistEpochs(zab.epochs));
            let promisers: Vec<ServerId> = leader
                .peers
                .iter()
                .filter(|(_, peer)| peer.promise.is_some())
                .map(|(id, _)| *id)
                .collect();
            for id in promisers {
                zab.leader_start_sync(leader, id, SyncStart::New);
            }
        });
        if give_up {
            self.look();
            return;
        }
        self.leader_advance_commit();
    }

    fn leader_start_sync(&mut self, leader: &mut Leader, id: ServerId, start: SyncStart) {
        // One load serves every learner waiting when it completes (see `snapshot_loaded`).
        let snapshot_loading = leader
            .peers
            .iter()
            .any(|(other, peer)| *other != id && peer.awaiting_snapshot);
        let Some(peer) = leader.peers.get_mut(&id) else {
            return;
        };
        let Some(promise) = &peer.promise else {
            return;
        };
        peer.synced = false;
        peer.sync_sent_ms = self.now_ms;
        let plan = plan(&self.history, &promise.log);
        if start == SyncStart::New {
            match plan {
                SyncPlan::Diff { .. } => self.learner_syncs.diffs += 1,
                SyncPlan::Snapshot => self.learner_syncs.snapshots += 1,
            }
        }
        match plan {
            SyncPlan::Diff { truncate_after } => {
                peer.awaiting_snapshot = false;
                let message = self.new_leader_message(leader, id, truncate_after, None);
                self.send(id, message);
            }
            SyncPlan::Snapshot => {
                if !peer.awaiting_snapshot {
                    peer.awaiting_snapshot = true;
                    if !snapshot_loading {
                        self.out.push(Action::LoadSnapshot { peer: id });
                    }
                }
            }
        }
    }

    /// A snapshot loaded for one learner goes to every learner waiting for one: learners that
    /// fall behind together (a partition healing, a rolling restart) share one read of the
    /// file and one buffer, which their `NewLeader` messages hold by reference.
    fn snapshot_loaded(&mut self, position: Position, payload: Bytes) {
        self.with_leader(|zab, leader| {
            if leader.stage == LeaderStage::Promising {
                return;
            }
            let waiting = leader.stop_awaiting_snapshot();
            let Some(epoch) = zab.history.epoch_at(position) else {
                // Older than anything held: the next heartbeat asks for a newer one.
                return;
            };
            for id in waiting {
                let image = SnapshotImage {
                    position,
                    epoch,
                    payload: payload.clone(),
                };
                let message = zab.new_leader_message(leader, id, position, Some(image));
                zab.send(id, message);
            }
        });
    }

    /// `NewLeader` for a learner whose log agrees with ours through `after` (or who gets
    /// `snapshot`, exact at `after`): the entries after it, and at least the whole history the
    /// epoch was established with. The learner records the epoch as current once this is
    /// durable, and a current epoch vouches for every entry committed before it (a learner
    /// that recorded it holding only part of that history could later out-rank servers
    /// holding committed entries it lacks, and a leader it elected would cut them).
    fn new_leader_message(
        &self,
        leader: &mut Leader,
        id: ServerId,
        after: Position,
        snapshot: Option<SnapshotImage>,
    ) -> Message {
        let last = (after + self.config.message_entries_max as Position)
            .max(leader.history_end)
            .min(self.history.last_position());
        let peer = leader
            .peers
            .get_mut(&id)
            .expect("the caller holds this learner");
        let entries = self.history.range(after + 1, last);
        let entry_bytes: usize = entries.iter().map(|entry| entry.payload.len()).sum();
        let snapshot_bytes = snapshot.as_ref().map_or(0, |image| image.payload.len());
        peer.sent = last;
        peer.sync_sent_ms = self.now_ms;
        peer.syncs_sent += 1;
        peer.sync_bytes = (entry_bytes + snapshot_bytes) as u64;
        Message::NewLeader {
            link: peer.link(leader.epoch),
            truncate_after: after,
            snapshot,
            entries,
            commit: self.committed.min(last),
            history_end: self.history.last_position(),
        }
    }

    fn leader_ack_new_leader(&mut self, from: ServerId, epoch: Epoch, last_position: Position) {
        self.with_heard_learner(from, epoch, |zab, leader| {
            let peer = leader.peer_mut(from);
            if peer.synced || peer.promise.is_none() {
                return;
            }
            let last_position = last_position.min(zab.history.last_position());
            peer.synced = true;
            peer.acked = last_position;
            peer.acked_at_heartbeat = last_position;
            peer.sent = peer.sent.max(last_position);
            zab.pump(leader, from);
        });
        self.leader_advance_commit();
    }

    fn leader_ack(&mut self, from: ServerId, epoch: Epoch, position: Position) {
        self.with_heard_learner(from, epoch, |zab, leader| {
            let peer = leader.peer_mut(from);
            if !peer.synced {
                return;
            }
            let position = position.min(zab.history.last_position());
            if position > peer.acked {
                peer.acked = position;
                peer.sent = peer.sent.max(position);
            }
            zab.pump(leader, from);
        });
        self.leader_advance_commit();
    }

    /// Queues a learner's forwarded commands behind those it sent before, and proposes
    /// what there is room for. A command is proposed once, by its sequence number: a resent
    /// one already taken or waiting is skipped, and one after a gap (its predecessors lost
    /// with a connection) is dropped until the learner resends from the gap.
    fn leader_forward(
        &mut self,
        from: ServerId,
        epoch: Epoch,
        lane: Lane,
        first_sequence: u64,
        payloads: Vec<Bytes>,
    ) {
        let mut queued = false;
        self.with_leader(|zab, leader| {
            if epoch != leader.epoch || leader.stage != LeaderStage::Broadcast {
                return;
            }
            let Some(peer) = leader.peers.get_mut(&from) else {
                return;
            };
            // The learner keeps no more unconfirmed than this room (see `append_capacity`),
            // so only a duplicate could go beyond it.
            let (commands_max, bytes_max) = (
                zab.config.forwards_in_flight_max,
                zab.config.in_flight_bytes_max,
            );
            let held = peer.forwards.get_mut(lane);
            if !peer.synced || !held.receive(first_sequence, payloads, commands_max, bytes_max) {
                return;
            }
            peer.last_heard_ms = zab.now_ms;
            queued = true;
        });
        if queued {
            self.propose_waiting();
        }
    }

    /// Proposes the waiting commands that the proposals in flight leave room for: every
    /// urgent one first (this server's, then each learner's), then the others (this server's
    /// clients' and each learner's) one from each in turn, so that no server's clients wait
    /// behind another's backlog. The first command that does not fit ends the turns, and its
    /// queue goes first when room is made, so that a large one is not passed again and again
    /// by small ones; otherwise the turns go on next time from where they stopped, so that
    /// when room comes one entry at a time no queue waits for those before it to empty.
    /// Called when commands arrive and whenever a commit makes room.
    fn propose_waiting(&mut self) {
        let mut accepted = Vec::new();
        self.with_leader(|zab, leader| {
            if leader.stage != LeaderStage::Broadcast {
                return;
            }
            let mut room = zab.leader_room();
            if take_urgent(leader, &mut room, &mut accepted) {
                take_commands_in_turn(leader, &mut room, &mut accepted);
            }
        });
        if !accepted.is_empty() {
            self.propose(accepted);
        }
    }

    /// What the leader may still propose. In flight is what it proposed and has not yet
    /// both committed and made durable itself: its own log writer holds the latter, and the
    /// driver sizes that writer's queue by `in_flight_bytes_max`.
    fn leader_room(&self) -> Room {
        let settled = self.committed.min(self.durable);
        let last = self.history.last_position();
        Room {
            entries: self
                .config
                .proposals_in_flight_max
                .saturating_sub(last.saturating_sub(settled)),
            bytes: self
                .config
                .in_flight_bytes_max
                .saturating_sub(self.history.bytes_between(settled, last)),
            idle: last == settled,
        }
    }

    fn propose(&mut self, payloads: Vec<Bytes>) {
        self.with_leader(|zab, leader| {
            let epoch = leader.epoch;
            let entries: Vec<Entry> = payloads
                .into_iter()
                .map(|payload| {
                    let entry = Entry {
                        position: zab.history.last_position() + 1,
                        epoch,
                        payload,
                    };
                    zab.history.append(entry.clone());
                    entry
                })
                .collect();
            zab.write_entries(entries);
            let ids: Vec<ServerId> = leader.peers.keys().copied().collect();
            for id in ids {
                zab.pump(leader, id);
            }
        });
    }

    /// Sends a synced learner what it lacks, within the in-flight window.
    fn pump(&mut self, leader: &mut Leader, id: ServerId) {
        let Some(peer) = leader.peers.get_mut(&id) else {
            return;
        };
        if !peer.synced {
            return;
        }
        // What it has acknowledged it holds, whatever an older plan meant to send.
        peer.sent = peer.sent.max(peer.acked);
        let last = self.history.last_position();
        let window_bytes_max = self.config.in_flight_bytes_max;
        while peer.sent < last
            && peer.sent - peer.acked < self.config.proposals_in_flight_max
            && self.history.bytes_between(peer.acked, peer.sent) < window_bytes_max
        {
            if peer.sent < self.history.base() {
                // What it lacks is only in a snapshot now.
                let acked = peer.acked;
                peer.synced = false;
                if let Some(promise) = peer.promise.as_mut() {
                    promise.log = LearnerLog {
                        snapshot_position: 0,
                        runs: Vec::new(),
                        last_position: acked,
                    };
                }
                self.leader_start_sync(leader, id, SyncStart::New);
                return;
            }
            // Unacknowledged entries wait in the learner's log writer, whose queue is the
            // window: a message fills what is left of it, but for one entry larger than a
            // whole empty window.
            let window_left = window_bytes_max - self.history.bytes_between(peer.acked, peer.sent);
            let to = (peer.sent + self.config.message_entries_max as Position).min(last);
            let mut to = self.history.reach_within(peer.sent, to, window_left);
            if to == peer.sent {
                if peer.sent > peer.acked {
                    break;
                }
                to += 1;
            }
            let entries = self.history.range(peer.sent + 1, to);
            peer.sent = to;
            let message = peer.propose(
                leader.epoch,
                entries,
                self.committed,
                self.durable,
                self.now_ms,
            );
            self.send(id, message);
        }
    }

    /// Commits what a quorum of synchronized participants has made durable, and becomes
    /// established once a quorum has acknowledged `NewLeader`.
    fn leader_advance_commit(&mut self) {
        let mut made_room = false;
        self.with_leader(|zab, leader| {
            if !matches!(leader.stage, LeaderStage::Syncing | LeaderStage::Broadcast) {
                return;
            }
            let Some(commit) = reached_with_own_copy(&zab.config, &leader.peers, zab.durable)
            else {
                return;
            };
            if leader.stage == LeaderStage::Syncing {
                leader.stage = LeaderStage::Broadcast;
            }
            let commit_advanced = commit > zab.committed;
            if commit_advanced {
                zab.committed = commit;
                zab.deliver();
            }
            zab.announce(leader, commit_advanced);
            made_room = commit_advanced;
        });
        if made_room {
            self.propose_waiting();
        }
    }

    /// Whether a follower's durable log and the leader's are a quorum by themselves (two of
    /// two or three voters): then what both hold durably is committed, and a follower that
    /// knows how far the leader's log is durable needs no commit announcement.
    fn pairs_commit(&self) -> bool {
        self.config.quorum_size() <= 2
    }

    /// Learners hear at once (not at the next heartbeat) of what they can now commit: a
    /// follower answers its client only when it learns that the client's write committed.
    /// Where pairs commit, a follower is told how far our log is durable, and works out a
    /// commit from that, its own log and the other follower's acknowledgements (sent to it
    /// too) a hop or a round trip sooner than our announcement could reach it: it is not
    /// announced what two of those three copies reach. Should the other follower's word be
    /// lost, [`Zab::tell_owed_commit`] tells it within two ticks. Others are told of each new
    /// commit position.
    fn announce(&mut self, leader: &mut Leader, commit_advanced: bool) {
        let (now_ms, durable, committed) = (self.now_ms, self.durable, self.committed);
        let pairs_commit = self.pairs_commit();
        let quorum = self.config.quorum_size();
        let followers_acked: Vec<(ServerId, Position)> =
            voting_followers(&self.config, &leader.peers)
                .map(|(id, peer)| (id, peer.acked))
                .collect();
        for (id, peer) in leader.peers.iter_mut().filter(|(_, peer)| peer.synced) {
            let pairs = pairs_commit && !peer.observer;
            let tell_durable = pairs && peer.durable_told < durable;
            // Unless told now, the learner already knows `durable` (it only grows).
            if pairs && peer.acked.min(durable) >= committed {
                peer.commit_known = peer.commit_known.max(committed);
            }
            // Where pairs commit there is one other voting follower at most.
            let other_acked = followers_acked
                .iter()
                .find(|(other, _)| other != id)
                .map_or(0, |(_, acked)| *acked);
            let mut copies = [peer.acked, durable, other_acked];
            let derivable =
                pairs && reached_by_quorum(&mut copies, quorum).is_some_and(|at| at >= committed);
            let tell_commit = commit_advanced && !derivable;
            if !tell_durable && !tell_commit {
                continue;
            }
            let message = peer.propose(leader.epoch, Vec::new(), committed, durable, now_ms);
            self.send(*id, message);
        }
    }

    /// Tells a synchronized learner a commit position reached by the previous tick that it
    /// was not told and could not work out for certain: it was left to learn it from the
    /// other follower's acknowledgement, which may have been lost. Under load the next
    /// proposal carries it first.
    fn tell_owed_commit(&mut self, leader: &mut Leader, id: ServerId) {
        let owed = leader.committed_at_tick;
        let Some(peer) = leader.peers.get_mut(&id) else {
            return;
        };
        if !peer.synced || peer.commit_known >= owed {
            return;
        }
        let message = peer.propose(
            leader.epoch,
            Vec::new(),
            self.committed,
            self.durable,
            self.now_ms,
        );
        self.send(id, message);
    }

    fn leader_tick(&mut self) {
        let mut step_down = false;
        self.with_leader(|zab, leader| {
            let now_ms = zab.now_ms;
            if leader.stage != LeaderStage::Broadcast {
                if now_ms > leader.started_ms + zab.config.sync_timeout_ms {
                    step_down = true;
                    return;
                }
            } else if now_ms > zab.quorum_heard_ms(leader) + zab.config.leader_timeout_ms {
                step_down = true;
                return;
            }
            let ids: Vec<ServerId> = leader.peers.keys().copied().collect();
            for id in ids {
                zab.tell_owed_commit(leader, id);
                zab.leader_heartbeat(leader, id);
            }
            leader.committed_at_tick = zab.committed;
        });
        if step_down {
            self.look();
        }
    }

    /// When this leader last heard from a quorum, itself counted as heard now: a leader steps
    /// down one timeout after, as its followers leave a leader silent for one timeout (a
    /// leader that counted from when it last *knew* of a quorum, checking at its ticks, would
    /// stay up to twice as long, beside the leader they elect).
    fn quorum_heard_ms(&self, leader: &Leader) -> u64 {
        let mut heard: Vec<u64> = voting_followers(&self.config, &leader.peers)
            .map(|(_, peer)| peer.last_heard_ms)
            .chain([self.now_ms])
            .collect();
        reached_by_quorum(&mut heard, self.config.quorum_size()).unwrap_or(0)
    }

    fn leader_heartbeat(&mut self, leader: &mut Leader, id: ServerId) {
        let now_ms = self.now_ms;
        let heartbeat_ms = self.config.heartbeat_ms;
        let Some(peer) = leader.peers.get_mut(&id) else {
            return;
        };
        if now_ms > peer.last_heard_ms + self.config.sync_timeout_ms {
            // Gone: it will introduce itself again with FollowerInfo when it comes back.
            leader.peers.remove(&id);
            return;
        }
        if peer.synced && now_ms >= peer.progress_checked_ms + heartbeat_ms {
            peer.progress_checked_ms = now_ms;
            if peer.acked < peer.sent && peer.acked == peer.acked_at_heartbeat {
                // No progress for a whole interval: something was lost; go back.
                peer.sent = peer.acked;
            }
            peer.acked_at_heartbeat = peer.acked;
            self.pump(leader, id);
        }
        let Some(peer) = leader.peers.get_mut(&id) else {
            return;
        };
        if now_ms < peer.last_sent_ms + heartbeat_ms {
            return;
        }
        if !peer.synced {
            let resend = peer.promise.is_some()
                && !peer.awaiting_snapshot
                && leader.stage != LeaderStage::Promising
                && now_ms
                    >= peer.sync_sent_ms
                        + resend_wait_ms(
                            heartbeat_ms,
                            4,
                            peer.sync_bytes,
                            peer.syncs_sent.saturating_sub(1),
                        );
            peer.last_sent_ms = now_ms;
            if resend {
                self.leader_start_sync(leader, id, SyncStart::Resend);
            } else if peer.promise.is_none() && leader.epoch != 0 {
                let link = peer.link(leader.epoch);
                self.send(id, Message::NewEpoch { link });
            }
            return;
        }
        let message = peer.propose(
            leader.epoch,
            Vec::new(),
            self.committed,
            self.durable,
            now_ms,
        );
        self.send(id, message);
    }

    // ----- learner --------------------------------------------------------------------

    fn with_learner(&mut self, from: ServerId, work: impl FnOnce(&mut Zab, &mut Learner)) {
        let is_my_leader =
            matches!(&self.phase, Phase::Learning(learner) if learner.leader == from);
        if !is_my_leader {
            return;
        }
        self.with_learning(|zab, learner| {
            learner.last_heard_ms = zab.now_ms;
            learner.heard_from_leader = true;
            work(zab, learner);
        });
    }

    /// Runs `work` on this server's learner state, if it is learning.
    fn with_learning(&mut self, work: impl FnOnce(&mut Zab, &mut Learner)) {
        if !matches!(self.phase, Phase::Learning(_)) {
            return;
        }
        let Phase::Learning(mut learner) = std::mem::replace(&mut self.phase, Phase::Taken) else {
            unreachable!()
        };
        let generation = self.phase_generation;
        work(self, &mut learner);
        if self.phase_generation == generation {
            self.phase = Phase::Learning(learner);
        }
    }

    fn learner_new_epoch(&mut self, from: ServerId, epoch: Epoch) {
        let mut give_up = false;
        self.with_learner(from, |zab, learner| {
            let counted = match learner.stage {
                LearnerStage::Discovering => {
                    if epoch < zab.epochs.accepted {
                        give_up = true;
                        return;
                    }
                    let counted = epoch > zab.epochs.accepted;
                    if counted {
                        zab.epochs.accepted = epoch;
                        zab.out.push(Action::PersistEpochs(zab.epochs));
                    }
                    learner.epoch = epoch;
                    learner.stage = LearnerStage::Promised { counted };
                    counted
                }
                LearnerStage::Promised { counted } if epoch == learner.epoch => counted,
                _ => return,
            };
            zab.send_ack_epoch(learner, counted);
        });
        if give_up {
            self.look();
        }
    }

    fn send_ack_epoch(&mut self, learner: &mut Learner, counted: bool) {
        learner.last_sent_ms = self.now_ms;
        let base = self.history.base();
        let message = Message::AckEpoch {
            link: self.learner_link(learner.epoch),
            counted,
            current_epoch: self.epochs.current,
            snapshot_position: base,
            runs: self.history.runs_after(base),
            last_position: self.history.last_position(),
        };
        self.send(learner.leader, message);
    }

    fn learner_new_leader(&mut self, from: ServerId, epoch: Epoch, sync: NewLeaderSync) {
        let NewLeaderSync {
            truncate_after,
            snapshot,
            entries,
            commit,
            history_end,
        } = sync;
        let mut give_up = false;
        let mut ack_again = false;
        self.with_learner(from, |zab, learner| {
            if epoch != learner.epoch || learner.stage == LearnerStage::Discovering {
                return;
            }
            // After a first `NewLeader` of this epoch, our log is a prefix of the leader's
            // history, which only grows within an epoch. A later one (the leader
            // re-synchronizing us, or a late copy of an earlier one) therefore never needs to
            // cut anything, and must not: entries we acknowledged may already count towards
            // a commit. Nor does it take us back to a snapshot of what we already hold.
            let resync = matches!(
                learner.stage,
                LearnerStage::Syncing { .. } | LearnerStage::Broadcast
            );
            // A snapshot older than what we delivered was planned for an earlier attempt of
            // ours (within one epoch, a learner that looks again may rejoin the same leader,
            // and the old plan may arrive late): we hold all it holds, so it is a diff from
            // the snapshot's position.
            let snapshot = snapshot.filter(|image| {
                image.position >= zab.delivered
                    && (!resync || image.position > zab.history.last_position())
            });
            if let Some(image) = snapshot {
                assert!(
                    zab.delivered <= image.position,
                    "a snapshot never takes back delivered entries"
                );
                if zab.reported_status.is_serving() {
                    // Re-synchronized from a snapshot while serving: entries this server's
                    // clients wait for are skipped, not delivered. Leave Serving (and come
                    // back once synchronized), so that the front end fails their requests.
                    zab.reported_status = Status::Looking;
                    zab.out.push(Action::StatusChanged(Status::Looking));
                }
                zab.history.reset(image.position, image.epoch);
                zab.durable = image.position;
                for (_, _, counts_through) in zab.pending_appends.iter_mut() {
                    *counts_through = (*counts_through).min(image.position);
                }
                zab.committed = zab.committed.max(image.position);
                zab.delivered = image.position;
                zab.out.push(Action::InstallSnapshot {
                    position: image.position,
                    epoch: image.epoch,
                    payload: image.payload,
                });
            } else if !resync && truncate_after < zab.history.last_position() {
                if truncate_after < zab.history.base() || truncate_after < zab.delivered {
                    // The leader misjudged our log (it must never cut committed entries).
                    give_up = true;
                    return;
                }
                // Entries the message does not cover cannot be checked against the leader's:
                // cut them, so that everything we acknowledge is the leader's history.
                let covered = entries
                    .last()
                    .map_or(truncate_after, |entry| entry.position);
                if covered < zab.history.last_position() {
                    zab.truncate_log(covered.max(truncate_after));
                }
            }
            let _ = zab.append_from_leader(entries);
            zab.learn_commit(commit);
            if learner.stage == LearnerStage::Broadcast {
                // Still synchronized: say so at once, with what is durable.
                ack_again = true;
            } else {
                let last = zab.history.last_position();
                learner.stage = LearnerStage::Syncing { last };
                learner.history_end = history_end.max(last);
            }
        });
        if give_up {
            self.look();
            return;
        }
        if ack_again {
            let last_position = self.durable;
            self.send(
                from,
                Message::AckNewLeader {
                    link: self.learner_link(epoch),
                    last_position,
                },
            );
            return;
        }
        if let Phase::Learning(learner) = &self.phase {
            if let LearnerStage::Syncing { last } = learner.stage {
                if self.durable >= last {
                    self.learner_finish_sync();
                }
            }
        }
    }

    /// Appends the entries that continue the log. An entry already held with the same epoch is
    /// the same entry (log matching) and is skipped; one held with another epoch was never
    /// committed, and it and everything after it give way to the leader's.
    fn append_from_leader(&mut self, entries: Vec<Entry>) -> bool {
        let mut fresh = Vec::new();
        for entry in entries {
            let last = self.history.last_position();
            if entry.position <= self.history.base() {
                continue;
            }
            if entry.position <= last {
                if self.history.epoch_at(entry.position) == Some(entry.epoch) {
                    continue;
                }
                self.truncate_log(entry.position - 1);
            } else if entry.position != last + 1 {
                break;
            }
            self.history.append(entry.clone());
            fresh.push(entry);
        }
        let appended = !fresh.is_empty();
        self.write_entries(fresh);
        appended
    }

    fn learn_commit(&mut self, commit: Position) {
        let commit = commit.min(self.history.last_position());
        if commit > self.committed {
            self.committed = commit;
            self.deliver();
        }
    }

    fn learner_finish_sync(&mut self) {
        let Phase::Learning(learner) = &mut self.phase else {
            return;
        };
        learner.stage = LearnerStage::Broadcast;
        learner.last_heard_ms = self.now_ms;
        let leader = learner.leader;
        let epoch = learner.epoch;
        self.epochs.current = epoch;
        self.out.push(Action::PersistEpochs(self.epochs));
        let last_position = self.durable;
        self.send(
            leader,
            Message::AckNewLeader {
                link: self.learner_link(epoch),
                last_position,
            },
        );
    }

    fn learner_send_ack(&mut self) {
        let Phase::Learning(learner) = &mut self.phase else {
            return;
        };
        learner.last_ack_ms = self.now_ms;
        let (leader, epoch, observer) = (learner.leader, learner.epoch, learner.observer);
        let ack = Message::Ack {
            link: self.learner_link(epoch),
            position: self.durable,
        };
        if !observer && self.pairs_commit() {
            // Where pairs commit there are at most three voters: one other follower at most.
            let me = self.config.me;
            let other = self
                .config
                .participants()
                .find(|id| *id != me && *id != leader);
            if let Some(other) = other {
                self.send(other, ack.clone());
            }
        }
        self.send(leader, ack);
    }

    /// Another follower's acknowledgement, sent to us as well as to the leader where pairs
    /// commit: how far its log is durable in `epoch`. Only the epoch counts (it has one
    /// leader); which attempt of that follower sent it does not, since a durable position
    /// in the leader's history stays true.
    fn learner_follower_ack(&mut self, from: ServerId, epoch: Epoch, position: Position) {
        let Phase::Learning(learner) = &mut self.phase else {
            return;
        };
        if from == learner.leader
            || !self.config.is_participant(from)
            || epoch != learner.epoch
            || learner.stage != LearnerStage::Broadcast
        {
            return;
        }
        learner.follower_durable = learner.follower_durable.max(position);
        self.learn_pair_commit();
    }

    fn learner_propose(
        &mut self,
        from: ServerId,
        epoch: Epoch,
        entries: Vec<Entry>,
        commit: Position,
        leader_durable: Position,
        forwards: PerLane<ForwardsHeard>,
    ) {
        let mut ack = false;
        self.with_learner(from, |zab, learner| {
            if epoch != learner.epoch || learner.stage != LearnerStage::Broadcast {
                return;
            }
            let heartbeat = entries.is_empty();
            let appended = zab.append_from_leader(entries);
            // Fresh entries are acknowledged once durable. A retransmission of what we hold
            // (or entries beyond a gap) must be answered now, or the leader never learns
            // where we are; heartbeats, once per half interval.
            ack = if heartbeat {
                zab.now_ms >= learner.last_ack_ms + zab.config.heartbeat_ms / 2
            } else {
                !appended
            };
            learner.leader_durable = learner.leader_durable.max(leader_durable);
            zab.learn_commit(commit);
            for lane in Lane::BY_PRIORITY {
                let heard = *forwards.get(lane);
                learner.forwards.get_mut(lane).heard(heard, zab.now_ms);
            }
        });
        if ack {
            self.learner_send_ack();
        }
        self.learn_pair_commit();
    }

    /// Commits what two of the (at most three) voters hold durably, where two are a quorum:
    /// this follower, the leader and the other follower, as each last said. Their logs are
    /// the leader's history up to there (a synchronized follower appends only the leader's
    /// entries, in order), all have made this epoch current, and so these entries are in
    /// every later leader's history exactly as the leader's own commit rule would have it:
    /// it counts the same two durable copies. This follower need not be one of the two (the
    /// leader and the other follower may be ahead of it); it delivers what it holds.
    fn learn_pair_commit(&mut self) {
        let Phase::Learning(learner) = &self.phase else {
            return;
        };
        if learner.observer || learner.stage != LearnerStage::Broadcast || !self.pairs_commit() {
            return;
        }
        let mut durables = [
            self.durable,
            learner.leader_durable,
            learner.follower_durable,
        ];
        if let Some(commit) = reached_by_quorum(&mut durables, self.config.quorum_size()) {
            self.learn_commit(commit);
        }
    }

    fn forward(&mut self, lane: Lane, payloads: Vec<Bytes>) {
        self.with_learning(|zab, learner| {
            let first_new = learner.forwards.get_mut(lane).push(payloads, zab.now_ms);
            zab.send_forwards(learner, lane, first_new);
        });
    }

    /// Sends the learner's forwards of `lane` from index `from` on to the leader, in messages
    /// of at most `message_entries_max` commands and `in_flight_bytes_max` bytes (or one
    /// command).
    fn send_forwards(&mut self, learner: &Learner, lane: Lane, from: usize) {
        let link = self.learner_link(learner.epoch);
        let forwarded = learner.forwards.get(lane);
        let mut first_sequence = forwarded.confirmed + from as u64 + 1;
        let batches = forwarded.commands.batches_from(
            from,
            self.config.message_entries_max,
            self.config.in_flight_bytes_max,
        );
        for payloads in batches {
            let count = payloads.len() as u64;
            let message = Message::Forward {
                link,
                lane,
                first_sequence,
                payloads,
            };
            self.send(learner.leader, message);
            first_sequence += count;
        }
    }

    fn learner_tick(&mut self) {
        let Phase::Learning(learner) = &mut self.phase else {
            return;
        };
        let now_ms = self.now_ms;
        if learner.stage != LearnerStage::Broadcast {
            if now_ms > learner.started_ms + self.config.sync_timeout_ms {
                self.look();
                return;
            }
            if now_ms < learner.last_sent_ms + self.config.election_retry_ms {
                return;
            }
            learner.last_sent_ms = now_ms;
            let (leader, observer) = (learner.leader, learner.observer);
            match learner.stage {
                LearnerStage::Discovering => self.send_follower_info(leader, observer),
                LearnerStage::Promised { counted } => {
                    let Phase::Learning(mut learner) =
                        std::mem::replace(&mut self.phase, Phase::Taken)
                    else {
                        unreachable!()
                    };
                    self.send_ack_epoch(&mut learner, counted);
                    self.phase = Phase::Learning(learner);
                }
                _ => {}
            }
            return;
        }
        if now_ms > learner.last_heard_ms + self.config.leader_timeout_ms {
            self.look();
            return;
        }
        let heartbeat_ms = self.config.heartbeat_ms;
        let due: Vec<(Lane, usize)> = Lane::BY_PRIORITY
            .into_iter()
            .filter_map(|lane| {
                let from = learner
                    .forwards
                    .get_mut(lane)
                    .resend_due(now_ms, heartbeat_ms);
                from.map(|from| (lane, from))
            })
            .collect();
        if !due.is_empty() {
            self.with_learning(|zab, learner| {
                for (lane, from) in due {
                    zab.send_forwards(learner, lane, from);
                }
            });
        }
    }

    // ----- shared ---------------------------------------------------------------------

    fn deliver(&mut self) {
        let through = self.committed.min(self.history.last_position());
        if through <= self.delivered {
            return;
        }
        let entries: Vec<(Position, Bytes)> = self
            .history
            .range(self.delivered + 1, through)
            .into_iter()
            .map(|entry| (entry.position, entry.payload))
            .collect();
        assert_eq!(
            entries.first().map(|(position, _)| *position),
            Some(self.delivered + 1),
            "delivery continues without a gap"
        );
        self.delivered = through;
        self.out.push(Action::Deliver { entries });
    }

    fn send(&mut self, to: ServerId, message: Message) {
        self.out.push(Action::Send { to, message });
    }

    fn report_status(&mut self) {
        let serving = match &self.phase {
            Phase::Leading(leader)
                if leader.stage == LeaderStage::Broadcast
                    && self.delivered >= leader.history_end =>
            {
                Some((ServingRole::Leader, self.config.me, leader.epoch))
            }
            Phase::Learning(learner)
                if learner.stage == LearnerStage::Broadcast
                    && self.delivered >= learner.history_end =>
            {
                let role = if learner.observer {
                    ServingRole::Observer
                } else {
                    ServingRole::Follower
                };
                Some((role, learner.leader, learner.epoch))
            }
            _ => None,
        };
        let status = match (serving, self.reported_status) {
            (None, _) => Status::Looking,
            (
                Some(place),
                Status::Serving {
                    role,
                    leader,
                    epoch,
                    ..
                },
            ) if place == (role, leader, epoch) => self.reported_status,
            (Some((role, leader, epoch)), _) => {
                self.stints += 1;
                Status::Serving {
                    role,
                    leader,
                    epoch,
                    stint: self.stints,
                }
            }
        };
        if status != self.reported_status {
            self.reported_status = status;
            self.out.push(Action::StatusChanged(status));
        }
    }
}

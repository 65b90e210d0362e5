//! zoolog's ensemble protocol: Zab atomic broadcast as a sans-IO state machine.
//!
//! This crate owns the agreement among the servers of an ensemble on one sequence of log
//! entries: who leads, which epoch it leads in, which entries every server must hold, which are
//! committed, and in what order they are delivered to the state machine. It must never do IO,
//! read a clock or draw randomness of its own (time arrives as `now_ms`, randomness as a seed in
//! [`Config`]), never interpret an entry's payload, never deliver an entry that is not
//! committed, never deliver out of order, and never send an acknowledgement for an entry before
//! the driver has reported it durable.
//!
//! # How it is driven
//!
//! A driver (the tokio shell in `zoolog-server`, or the simulator in `zoolog-sim`) feeds
//! [`Input`]s to [`Zab::handle`] and carries out the [`Action`]s returned, **in order**:
//! - [`Action::PersistEpochs`], [`Action::Truncate`] and [`Action::InstallSnapshot`] must be
//!   durable before any later action is carried out.
//! - [`Action::Append`] may complete later; the driver reports [`Input::Logged`] when an
//!   entry and everything before it are durable. Completions come in append order.
//! - [`Action::Send`] may be lost, delayed, duplicated or reordered: the protocol tolerates all
//!   of that (every message says which epoch it belongs to, receivers check positions, and
//!   the leader retransmits what a learner has not acknowledged).
//! - [`Action::Deliver`] hands committed entries to the state machine, consecutive and in
//!   order; [`Action::InstallSnapshot`] replaces the state machine's state.
//!
//! # The protocol
//!
//! Positions are the zxids clients see: consecutive from 1, never reused for a committed
//! entry. Each entry also records the epoch of the leader that proposed it.
//!
//! 1. **Election.** A server that knows no leader is *looking*: it votes for the best server it
//!    has heard of, ordering votes by (current epoch, last logged position, server id), and
//!    adopts any better vote it hears in the same round. When a quorum of participants agree
//!    it stops looking. Observers never vote; they join whichever leader participants report.
//!    A learner looks again at once when its leader does, which it knows by a looking vote
//!    in a round newer than the one it decided in (votes of that round are late copies or
//!    answers). Election is only a heuristic for picking a good leader: safety comes from
//!    step 2.
//! 2. **Discovery.** The prospective leader collects `FollowerInfo` from a quorum (keeping any
//!    that reached it while it was still looking: a learner often decides a hop sooner), picks an
//!    epoch above every accepted epoch it saw, and asks each to promise it (`NewEpoch`). A
//!    server promises an epoch at most once and, after promising, ignores every older leader.
//!    Each `AckEpoch` reports the follower's current epoch and log. If any follower in the
//!    quorum has a better (current epoch, last position) than the leader, the leader gives up
//!    and the ensemble elects again: so an established leader holds every committed entry.
//! 3. **Synchronization.** The leader brings each follower's log to its own history: the
//!    follower cuts off entries the leader does not have (`truncate_after`), installs a
//!    snapshot if the leader no longer has the entries it lacks, and appends the rest. Only when
//!    this is durable does the follower record the new epoch as its current epoch and
//!    acknowledge `NewLeader`. When a quorum of participants has done so, the leader's whole
//!    history is committed, and the leader starts proposing. A learner reports serving to its
//!    front end only once it has delivered the leader's history as far as it reached when the
//!    leader synchronized it (`NewLeader::history_end`): from then on, what its front end
//!    appended in an earlier stint of serving and has not seen delivered is never committed
//!    ([`Status::Serving`]).
//! 4. **Broadcast.** The leader appends proposals to its log and streams them to learners;
//!    a proposal commits once a quorum of participants has logged it. With three voters
//!    (a quorum of two) any two are such a quorum: the leader tells its followers how far its
//!    own log is durable, each follower sends its acknowledgements to the other follower as
//!    well as to the leader, and a follower commits by itself what two of the three hold
//!    durably (itself among them or not), a hop or a round trip before the leader's commit
//!    announcement could reach it. The leader announces only what a follower cannot work out
//!    from those three copies; should the other follower's word be lost, the follower is told
//!    within two ticks (or sooner, by the next proposal, which carries the commit position).
//!    A leader's own copy counts like any other, once durable; while its synchronized voting
//!    followers, heard from lately, are a quorum by themselves it is not needed at all
//!    (`own_copy_optional`), and the driver may make it durable later, and sooner once a
//!    commit has waited for it (`own_copy_awaited`; [`OwnSync`] decides when, for both
//!    drivers). That moves when commits happen, never what they are.
//!    Learners deliver committed entries in log order, and since a new leader's history
//!    contains every entry committed before it and is delivered before anything it proposes,
//!    delivery follows primary order. Followers forward their clients' commands to the
//!    leader, numbered so that a retransmitted forward is proposed once. When the proposals
//!    in flight leave no room, the leader holds commands (for each learner, as many as it may
//!    have unconfirmed, and as many for its own clients) and proposes them as commits make
//!    room, taking from its own clients and each learner in turn, the turns going on where
//!    they stopped (so that no server's clients starve when room comes an entry at a time).
//!    Urgent commands (a server's reports that its sessions' clients are alive) travel in a
//!    lane of their own, numbered apart, and are proposed before any client command waiting:
//!    a report never waits behind a backlog of writes, however slowly commits come.
//!    What is in flight, to the leader's own log and to each learner's ahead of its
//!    acknowledgements, is bounded in entries and in payload bytes: every unacknowledged
//!    entry waits in some server's log writer, whose queue must never fill (a full one would
//!    stall the server's only thread, heartbeats included).
//!
//! # Why it is safe
//!
//! - Two leaders never share an epoch: an epoch is established only with promises from a
//!   quorum, and each server promises each epoch once.
//! - Within an epoch the leader only appends, and a learner accepts entries only at the next
//!   position of its log; so logs of servers with the same current epoch are prefixes of one
//!   another, and an entry at a position with the same epoch is the same entry everywhere.
//! - An entry committed in epoch `e` is logged by a quorum that holds current epoch `e` (or a
//!   later one, whose history contains it). Any later epoch's promise quorum intersects it, and
//!   the leader of that epoch must dominate every promiser's (current epoch, last position),
//!   so its history contains the entry too (by induction over established epochs).
//! - A follower's own commit with three voters counts the same two copies the leader's rule
//!   would: two of its log, the leader's and the other follower's, durable, with current
//!   epoch `e` (a follower broadcasts and acknowledges only after recording it, and an epoch
//!   has one leader), and the leader's history up to there (a synchronized follower appends
//!   only the leader's entries, in order). So what it commits is committed by the rule
//!   above, merely learnt sooner; it delivers only entries it holds, which are that history.
//! - A follower changes its log before it records the new current epoch: a crash in between
//!   leaves the old, lower current epoch with a log that is a prefix of the new leader's
//!   history, which can never out-vote a server that has the new epoch.

mod commands;
mod election;
mod history;
mod machine;
mod message;
mod own_sync;
mod sync;

pub use commands::AppendCapacity;
pub use machine::Zab;
pub use message::{
    Attempt, DecodeError, EntryRange, ForwardsHeard, Lane, Link, Message, PeerState, PerLane,
    SnapshotImage, Vote,
};
pub use own_sync::{OwnSync, OwnSyncSteps, COMMIT_STALL_US, LEADER_SYNC_DELAY_US};

use bytes::Bytes;
use std::collections::BTreeMap;

pub type ServerId = u64;
pub type Epoch = u64;
/// A place in the log and the zxid clients see; the first entry is 1, 0 means "nothing".
pub type Position = u64;

/// One log entry: its place, the epoch of the leader that proposed it, and the opaque payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub position: Position,
    pub epoch: Epoch,
    pub payload: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberRole {
    /// Votes in elections and counts towards quorums.
    Participant,
    /// Learns committed entries and serves clients, but never votes.
    Observer,
}

/// The ensemble and the protocol's timing and size limits.
#[derive(Debug, Clone)]
pub struct Config {
    pub me: ServerId,
    pub members: BTreeMap<ServerId, MemberRole>,
    /// A learner that hears nothing from its leader for this long, or a leader that hears
    /// from less than a quorum for this long, starts looking again (ZooKeeper's syncLimit).
    /// A learner counts only the time it was itself running: see [`Zab::handle`].
    pub leader_timeout_ms: u64,
    /// A looking server re-broadcasts its vote this often, and a learner retransmits its
    /// discovery messages this often until its leader answers.
    pub election_retry_ms: u64,
    /// Once a quorum agrees on a vote, a looking server waits this long for a better vote
    /// before it decides (ZooKeeper's finalizeWait), unless every participant has voted for
    /// it but those whose connection is down (`Input::PeerDisconnected`, until they are
    /// heard from again).
    pub election_finalize_ms: u64,
    /// The leader sends a heartbeat (the commit position) to each learner this often, and
    /// retransmits what a learner has not acknowledged within it; a `NewLeader` (a learner's
    /// whole sync, maybe a snapshot) after four of them and one more per 32 MiB it carries,
    /// then after twice as long each time.
    pub heartbeat_ms: u64,
    /// Entries the leader keeps in flight (see `in_flight_bytes_max`), and sends a learner
    /// ahead of its acknowledgements. Beyond them it holds commands until commits make room.
    pub proposals_in_flight_max: u64,
    /// Payload bytes the leader keeps in flight (proposed, and not yet both committed and
    /// durable on itself), and sends a learner ahead of its acknowledgements; one entry goes
    /// whatever its size when nothing is in flight. Unacknowledged entries wait in a log
    /// writer's queue, so the driver sets this to the size of that queue.
    pub in_flight_bytes_max: u64,
    /// Commands a follower has forwarded that the leader has not yet confirmed; also how
    /// many commands the leader holds, for each learner and for its own clients, while it has
    /// no room to propose them. Each lane has this bound of its own: [`Zab::append_capacity`]
    /// of a lane is zero when it is reached there.
    pub forwards_in_flight_max: u64,
    /// The most entries one `Propose` or `Forward` message carries. A `NewLeader` carries
    /// at least the leader's whole history as of its establishment (the learner records the
    /// new epoch once it holds that), and up to this many entries beyond.
    pub message_entries_max: usize,
    /// A prospective leader or learner that has not finished discovery and synchronization
    /// within this gives up and looks again (ZooKeeper's initLimit × tickTime).
    pub sync_timeout_ms: u64,
    /// Grows with every start of this server's process (the tokio driver takes the wall clock
    /// in microseconds at start, the simulator counts starts), so that a leader can tell this
    /// process's attempts to follow it from a previous process's delayed messages.
    pub incarnation: u64,
    /// Entries the in-memory log has room for from the start: as many as a snapshot
    /// interval brings, so that it does not grow, a stall each time, on a fresh server (see
    /// `history`). Mostly address space until used.
    pub history_entries_reserved: usize,
}

impl Config {
    /// Defaults that suit servers on one LAN; `tick_ms` is ZooKeeper's tickTime.
    pub fn new(me: ServerId, members: BTreeMap<ServerId, MemberRole>, tick_ms: u64) -> Config {
        Config {
            me,
            members,
            leader_timeout_ms: 2 * tick_ms,
            election_retry_ms: 50,
            election_finalize_ms: 10,
            heartbeat_ms: (tick_ms / 4).max(1),
            proposals_in_flight_max: 4096,
            in_flight_bytes_max: 64 << 20,
            forwards_in_flight_max: 4096,
            message_entries_max: 512,
            sync_timeout_ms: 10 * tick_ms,
            incarnation: 0,
            history_entries_reserved: 0,
        }
    }

    /// # Panics
    /// If this server is not a member, or there is no participant: the driver validates user
    /// configuration before building one.
    pub fn validate(&self) {
        assert!(
            self.members.contains_key(&self.me),
            "server {} is not a member of its own ensemble",
            self.me
        );
        assert!(
            self.participants().count() > 0,
            "an ensemble needs at least one participant"
        );
        assert!(self.message_entries_max > 0 && self.heartbeat_ms > 0);
        assert!(self.in_flight_bytes_max > 0);
    }

    pub fn participants(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.members
            .iter()
            .filter(|(_, role)| **role == MemberRole::Participant)
            .map(|(id, _)| *id)
    }

    pub fn is_participant(&self, id: ServerId) -> bool {
        self.members.get(&id) == Some(&MemberRole::Participant)
    }

    /// The number of participants that make a majority.
    pub fn quorum_size(&self) -> usize {
        self.participants().count() / 2 + 1
    }
}

/// The two epochs a server must keep across crashes (ZooKeeper's acceptedEpoch and
/// currentEpoch files).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Epochs {
    /// The highest epoch this server has promised to a prospective leader.
    pub accepted: Epoch,
    /// The epoch of the leader whose history this server's log holds (set once synchronized).
    pub current: Epoch,
}

/// What the driver recovered from disk for [`Zab::new`].
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    pub epochs: Epochs,
    /// The position of the newest snapshot the state machine was restored from (0 if none).
    /// Everything up to it is committed.
    pub snapshot_position: Position,
    /// The epoch of the entry at `snapshot_position` (0 if none), which the driver stores
    /// with the snapshot.
    pub snapshot_epoch: Epoch,
    /// The logged entries, consecutive, from at most `snapshot_position` on; some may not be
    /// committed. Entries after the snapshot are kept only if the log holds the snapshot's
    /// own position with the snapshot's epoch (or starts right after it): a crash while a
    /// snapshot was being installed can leave a log from a history the snapshot replaced.
    pub entries: Vec<Entry>,
}

pub enum Input {
    /// Time passed; the driver sends one every few milliseconds (a tenth of the smallest
    /// timeout is plenty).
    Tick,
    Message {
        from: ServerId,
        message: Message,
    },
    /// The driver's connection to `peer` broke: messages queued to it may be lost. Optional
    /// (the protocol also notices by timeout), but lets a follower look for a new leader at
    /// once when the leader's process dies.
    PeerDisconnected {
        peer: ServerId,
    },
    /// Commands of this server (its clients', or its urgent reports), to be ordered in
    /// their lane's order. Accepted only while [`Zab::append_capacity`] of the lane is above
    /// zero; check it first.
    Append {
        lane: Lane,
        payloads: Vec<Bytes>,
    },
    /// Every entry through `position` is durable; `epoch` is the epoch of the entry at
    /// `position` when it was written (so a completion that a later truncation overtook is
    /// recognised and ignored).
    Logged {
        position: Position,
        epoch: Epoch,
    },
    /// The state machine stored a snapshot at `position` (a committed position): log entries
    /// up to it may be dropped from memory, since a follower that needs them gets the snapshot.
    SnapshotSaved {
        position: Position,
    },
    /// The answer to [`Action::LoadSnapshot`]: the newest snapshot, for every learner that
    /// waits for one.
    SnapshotLoaded {
        position: Position,
        payload: Bytes,
    },
    /// The answer to [`Action::LoadSnapshot`] when no snapshot could be read: the waiting
    /// learners are synced again, and so asked for a new load, after their resend wait.
    SnapshotUnavailable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Send {
        to: ServerId,
        message: Message,
    },
    /// Store both epochs durably before carrying out any later action.
    PersistEpochs(Epochs),
    /// Remove every logged entry after `after`, durably, before any later action.
    Truncate {
        after: Position,
    },
    /// Write these consecutive entries after the last logged one; report [`Input::Logged`]
    /// when they are durable.
    Append {
        entries: Vec<Entry>,
    },
    /// Store this snapshot (with `epoch`, the epoch of its last entry) durably, then replace
    /// the log with an empty one that continues after `position` and the state machine's
    /// state with the snapshot's, before any later action.
    InstallSnapshot {
        position: Position,
        epoch: Epoch,
        payload: Bytes,
    },
    /// Read the newest snapshot and answer with [`Input::SnapshotLoaded`], or with
    /// [`Input::SnapshotUnavailable`] if it cannot be read. `peer` is the
    /// learner that asked first (others may come to wait for the same load), for logs.
    LoadSnapshot {
        peer: ServerId,
    },
    /// Apply these committed entries, in order; they follow the previous delivery (or the
    /// installed snapshot) without a gap.
    Deliver {
        entries: Vec<(Position, Bytes)>,
    },
    /// The server's role changed. A command appended in a stint of serving and not yet
    /// delivered when the stint ended may or may not commit: once a later stint begins, the
    /// command has been delivered or never will be (see [`Status::Serving`]).
    StatusChanged(Status),
}

/// One learner as its leader sees it ([`Zab::learners`]), for operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerStatus {
    pub id: ServerId,
    /// Treated as an observer: it said so, or it is not a participant of the configuration.
    pub observer: bool,
    /// A participant of the configuration.
    pub voting: bool,
    /// It acknowledged `NewLeader`: its log is a prefix of the leader's and it receives
    /// proposals.
    pub synced: bool,
    /// The last position sent to it.
    pub sent: Position,
    /// The last position it reported durable (meaningful once synced).
    pub acked: Position,
    /// How many commands it forwarded that the leader has proposed.
    pub forwards_taken: u64,
}

/// How many learner syncs this server started as leader, by kind (ZooKeeper's `diff_count`
/// and `snap_count`); resends of a sync under way are not counted again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LearnerSyncs {
    /// The learner's log was cut where needed and sent what it lacked.
    pub diffs: u64,
    /// The learner was sent a snapshot.
    pub snapshots: u64,
}

/// Where this server stands, for the front end (read-only mode, `srvr`, metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// No established leader: electing, discovering or synchronizing.
    Looking,
    /// Part of an established epoch: appends are accepted and ordered. Reported once this
    /// server has delivered the history its leader synchronized it to.
    Serving {
        role: ServingRole,
        leader: ServerId,
        epoch: Epoch,
        /// Numbers this server's stints of serving, from 1, anew at each process start; a
        /// stint ends when the status next changes. A command appended in an earlier stint and
        /// not delivered when a later one begins is never committed: a later epoch's history
        /// holds every earlier entry that will ever commit; and a leader that took the server
        /// back into the same epoch dropped the commands it held from its earlier attempt,
        /// and ordered the ones it took within the history it synchronized it to. Except
        /// after a snapshot install, which leaves the attempt's commands in place (the front
        /// end fails their clients at the install).
        stint: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServingRole {
    Leader,
    Follower,
    Observer,
}

impl Status {
    pub fn is_serving(&self) -> bool {
        matches!(self, Status::Serving { .. })
    }
}

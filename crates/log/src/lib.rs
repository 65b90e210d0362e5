//! zoolog's ordering layer.
//!
//! This crate owns the total order of state changes: it takes opaque commands, gives each a
//! position (the zxid clients see: first entry 1, 0 means "nothing"), makes them durable and
//! hands committed entries back, in order, without gaps. It owns the files that make this
//! survive a crash: WAL segments and snapshots, their framing, checksums, recovery and purge.
//!
//! It must never interpret a command (it depends on no other zoolog crate), never acknowledge
//! an entry before it is durable, never renumber, skip or reorder positions, and never start
//! from damaged files by guessing: only an unfinished write at the very end of the log is cut
//! away, anything else stops the server with a message saying where and what to do.
//!
//! - [`OrderingLayer`] is what the server front end talks to; [`SingleLog`] is the standalone
//!   implementation, and a Zab ensemble or a CORFU shared log will implement the same trait.
//! - Committed entries arrive through a bounded channel of [`CommittedBatch`]es returned when
//!   the log is opened, so a slow apply loop slows the log down instead of growing a buffer.
//! - [`ReplicaLog`] is the durable storage of one Zab ensemble member: a WAL whose positions
//!   and epochs the protocol chooses, truncation, the member's epochs, installed snapshots.
//! - [`SnapshotStore`] is separate from the WAL because every ordering layer needs snapshots,
//!   even one without a local WAL (see its module docs).
//!
//! Framing, scanning and recovery decisions are pure functions over bytes (`record`,
//! `recovery`, the snapshot image codec); the writer thread and `open` only move bytes
//! between those functions and the disk.

mod error;
mod fsutil;
mod fsync_stats;
mod limits;
mod record;
mod recovery;
mod replica;
mod segment;
mod single;
mod snapshot;
mod summary;

pub use error::{AppendError, LogError};
pub use fsync_stats::{FsyncTimes, FSYNC_BUCKET_BOUNDS_US, FSYNC_WARNING_THRESHOLD_MS_DEFAULT};
pub use limits::WalLimits;
pub use replica::{
    Durable, ReplicaEntry, ReplicaEpochs, ReplicaLog, ReplicaLogConfig, ReplicaRecovered,
};
pub use segment::ReadTimes;
pub use single::{LogStats, Recovered, SingleLog, SingleLogConfig};
pub use snapshot::{SnapshotPayload, SnapshotSink, SnapshotStore, SNAPSHOTS_RETAINED_MIN};
pub use summary::Summary;

use bytes::Bytes;

/// A place in the total order, and the zxid of the entry there. The first entry is 1; 0 means
/// "nothing" (an empty log, or a snapshot of the empty state).
pub type Position = u64;

/// The largest position this crate accepts from disk. ZooKeeper clients hold zxids in a
/// signed 64-bit integer, so larger values would look negative to them; it also keeps
/// `position + 1` from overflowing on a crafted file name or record.
pub const POSITION_MAX: Position = i64::MAX as Position;

/// What the server front end needs from whatever orders its commands.
pub trait OrderingLayer: Send + Sync + 'static {
    /// Queues one command for ordering; never blocks. The entry's position becomes known when
    /// it comes back in a [`CommittedBatch`]. Errors when the bounded queue is full
    /// ([`AppendError::Full`]), the entry is too large, or the log has failed or closed.
    ///
    /// `stint` is the layer's stint of serving the caller last heard of (0 for a layer that
    /// always serves). A replicated layer drops, unordered, an entry queued for a stint that
    /// has ended: its caller, told of the change meanwhile, counts it as lost with that stint
    /// and may append it again.
    fn append(&self, entry: Bytes, stint: u64) -> Result<(), AppendError>;

    /// Queues a command ahead of the commands not yet handed to ordering, in a lane with a
    /// bound of its own, so that a backlog of client commands neither refuses nor delays it.
    /// For entries whose place among other commands no client can observe: the sessions'
    /// liveness reports, which are worth nothing once they come later than a timeout. A layer
    /// without such a backlog queues it as [`OrderingLayer::append`] does.
    fn append_urgent(&self, entry: Bytes, stint: u64) -> Result<(), AppendError> {
        self.append(entry, stint)
    }

    /// Position of the last entry known committed (durable); never decreases.
    fn committed_position(&self) -> Position;
}

/// An entry queued for a replicated layer's protocol, with the stint of serving its caller
/// appended it for (see [`OrderingLayer::append`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedEntry {
    pub stint: u64,
    pub entry: Bytes,
}

impl QueuedEntry {
    /// The next entry of `queue` appended for `stint`, the layer's current one. The entries
    /// taken before it were appended for a stint that has ended, and are dropped: their
    /// caller counts them as lost with it.
    pub fn next_of_stint(queue: impl Iterator<Item = QueuedEntry>, stint: u64) -> Option<Bytes> {
        queue
            .filter(|queued| queued.stint == stint)
            .map(|queued| queued.entry)
            .next()
    }
}

/// Consecutive committed entries: positions strictly increasing by one, no gaps, never empty.
/// Batches themselves follow each other without gaps either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedBatch {
    entries: Vec<(Position, Bytes)>,
}

impl CommittedBatch {
    /// # Panics
    /// If `entries` is empty or its positions are not consecutive: that would be a bug in the
    /// ordering layer, and applying it would silently diverge the state.
    pub fn new(entries: Vec<(Position, Bytes)>) -> Self {
        assert!(!entries.is_empty(), "a committed batch is never empty");
        assert!(
            entries.windows(2).all(|pair| pair[1].0 == pair[0].0 + 1),
            "committed positions must be consecutive"
        );
        CommittedBatch { entries }
    }

    pub fn entries(&self) -> &[(Position, Bytes)] {
        &self.entries
    }

    pub fn into_entries(self) -> Vec<(Position, Bytes)> {
        self.entries
    }

    pub fn first_position(&self) -> Position {
        self.entries[0].0
    }

    pub fn last_position(&self) -> Position {
        self.entries[self.entries.len() - 1].0
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Always false; present because clippy expects it next to `len`.
    pub fn is_empty(&self) -> bool {
        false
    }
}

//! The durable storage of one ensemble member (Zab): a WAL whose positions the caller
//! chooses, plus the member's two epochs and its snapshots.
//!
//! It owns the files in `wal_dir` (segments, the `epochs` file, the lock) and the snapshot
//! store, and carries out, in order, what the Zab state machine asks of its disk: append
//! consecutive entries (acknowledged asynchronously, with group commit), truncate the log
//! after a position, persist the epochs, install a snapshot received from the leader, save a
//! periodic snapshot of committed state, purge.
//!
//! It must never decide anything the protocol decides: it does not know which entries are
//! committed, it never renumbers or reorders an entry, never reports an entry durable before
//! its fdatasync, and never lets a crash bring back an entry a finished truncation removed or
//! lose one a truncation had not yet removed. Requests that would break the log's own
//! invariants (a gap, truncating below a snapshot, epochs going backwards) are refused as
//! caller bugs instead of being repaired.
//!
//! One writer thread executes every operation in queue order: appends are drained into a
//! batch and fdatasynced once, and their completion is sent (as [`Durable`]) before any
//! later truncation, epoch write or snapshot install runs, so a completion is always true
//! when it is sent. With a sync delay (an ensemble's leader, whose followers make the
//! commits) the writer first lets appends gather for up to that long. The blocking
//! operations (truncate, epochs, install) wait for the writer; the task that receives
//! [`Durable`]s must keep receiving meanwhile (or have dropped the receiver), since the
//! writer waits for room in that bounded channel.
//!
//! A record's payload is the entry's epoch (8 bytes, big endian) followed by the entry; the
//! framing, checksums, segment files and recovery rules are those of [`crate::SingleLog`].

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{
    sync_channel, Receiver as QueueReceiver, SyncSender, TryRecvError, TrySendError,
};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::error::{AppendError, IoContext, LogError};
use crate::fsutil::{create_and_lock_dirs, fsync_dir, remove_file, DirLock};
use crate::fsync_stats::FsyncStats;
use crate::limits::WalLimits;
use crate::record::{scan_segment, RECORD_PAYLOAD_BYTES_MAX};
use crate::recovery::segment_file_name;
use crate::segment::{
    list_segments, purge_segments, read_snapshot_and_wal, truncate_file, ActiveSegment, ReadBack,
    ReadTimes, SegmentFile, SegmentWriter, READ_WINDOW_BYTES,
};
use crate::snapshot::{SnapshotPayload, SnapshotSink, SnapshotStore};
use crate::{LogStats, Position};

/// Bytes the entry's epoch takes at the start of a record's payload.
const EPOCH_BYTES: usize = 8;

const EPOCHS_FILE: &str = "epochs";
const EPOCHS_TMP_FILE: &str = "epochs.tmp";
const EPOCHS_MAGIC: &[u8; 8] = b"ZLEPOCH1";
/// `magic | accepted: u64 | current: u64 | crc32c: u32`, little endian; the checksum covers
/// everything before it.
const EPOCHS_FILE_BYTES: usize = 28;

/// One entry of a replica's log. Its position and epoch are chosen by the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaEntry {
    pub position: Position,
    pub epoch: u64,
    pub payload: Bytes,
}

/// Zab's acceptedEpoch and currentEpoch. Neither ever decreases, and current <= accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaEpochs {
    pub accepted: u64,
    pub current: u64,
}

/// Appends are durable through `position`, whose entry (when the append was written) had
/// `epoch`. Sent in append order, at most once per fdatasync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durable {
    pub position: Position,
    pub epoch: u64,
}

/// Where the replica's files live and the limits of every queue and buffer in it. The queue
/// entry limit is also the capacity of the [`Durable`] channel; `entry_bytes_max` does not
/// count the epoch a record adds; a single append beyond the batch limits is written on its own.
#[derive(Debug, Clone)]
pub struct ReplicaLogConfig {
    /// WAL segments and the epochs file.
    pub wal_dir: PathBuf,
    /// Snapshots; may be the same directory as `wal_dir`.
    pub snapshot_dir: PathBuf,
    pub limits: WalLimits,
}

impl ReplicaLogConfig {
    pub fn new(wal_dir: impl Into<PathBuf>, snapshot_dir: impl Into<PathBuf>) -> Self {
        ReplicaLogConfig {
            wal_dir: wal_dir.into(),
            snapshot_dir: snapshot_dir.into(),
            limits: WalLimits::default(),
        }
    }

    fn validate(&self) -> Result<(), LogError> {
        self.limits.validate(RECORD_PAYLOAD_BYTES_MAX - EPOCH_BYTES)
    }
}

/// What a replica finds on disk when it starts. `S` is what the opener's decoder made of the
/// snapshot: its bytes, by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRecovered<S = Bytes> {
    pub epochs: ReplicaEpochs,
    pub snapshot: Option<(Position, S)>,
    /// Every logged entry after the snapshot, consecutive. Not necessarily committed: the
    /// protocol decides which of them survive.
    pub entries: Vec<ReplicaEntry>,
    pub read_times: ReadTimes,
}

impl<S> ReplicaRecovered<S> {
    /// The position of the last entry the replica holds, logged or in the snapshot.
    pub fn last_position(&self) -> Position {
        match (self.entries.last(), &self.snapshot) {
            (Some(entry), _) => entry.position,
            (None, Some((position, _))) => *position,
            (None, None) => 0,
        }
    }
}

/// State the writer thread publishes and callers read.
#[derive(Debug, Default)]
struct Shared {
    /// What one batch (one write and fdatasync) takes at most.
    batch_entries_max: usize,
    batch_bytes_max: usize,
    queued_entries: AtomicUsize,
    queued_bytes: AtomicUsize,
    entries_durable: AtomicU64,
    batches_durable: AtomicU64,
    /// See [`ReplicaLog::set_sync_delay`]; in microseconds.
    sync_delay_us: AtomicU64,
    /// Set to end the writer's current (or next) sync delay at once.
    sync_asked: AtomicBool,
    /// The writer thread, to wake it from a sync delay.
    writer: OnceLock<Thread>,
    fsync: FsyncStats,
    failure: Mutex<Option<String>>,
}

impl Shared {
    fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// Ends the writer's sync delay, or its next one if it is not in one.
    fn ask_sync(&self) {
        self.sync_asked.store(true, Ordering::Release);
        self.wake_writer();
    }

    /// Wakes the writer if it waits out a sync delay, to look again at why it waits.
    fn wake_writer(&self) {
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }

    /// Whether `entries` entries of `bytes` payload bytes make a full batch.
    fn fills_batch(&self, entries: usize, bytes: usize) -> bool {
        entries >= self.batch_entries_max || bytes >= self.batch_bytes_max
    }

    /// Whether the queued appends, behind `taken` entries already off the queue, make a
    /// full batch.
    fn queue_fills_batch(&self, taken: usize) -> bool {
        self.fills_batch(
            taken + self.queued_entries.load(Ordering::Acquire),
            self.queued_bytes.load(Ordering::Acquire),
        )
    }

    fn release_queued(&self, entries: usize, bytes: usize) {
        self.queued_entries.fetch_sub(entries, Ordering::AcqRel);
        self.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The log as the caller has shaped it so far (queued, not necessarily written): checked
/// and updated under one lock, in the same order as operations enter the writer's queue.
#[derive(Debug)]
struct Order {
    last_queued: Position,
    /// Position of the newest snapshot saved or installed: committed state, never truncated.
    snapshot_floor: Position,
    epochs: ReplicaEpochs,
}

type Reply = SyncSender<Result<(), LogError>>;

enum Op {
    Append(Vec<ReplicaEntry>),
    Truncate {
        after: Position,
        done: Reply,
    },
    PersistEpochs {
        epochs: ReplicaEpochs,
        done: Reply,
    },
    /// The snapshot at `position` is already durable: drop every segment, continue at
    /// `position + 1`.
    RestartAfterSnapshot {
        position: Position,
        done: Reply,
    },
}

fn entries_bytes(entries: &[ReplicaEntry]) -> usize {
    entries.iter().map(|entry| entry.payload.len()).sum()
}

/// The durable storage of one ensemble member; see the module docs.
///
/// Dropping it (or [`ReplicaLog::close`]) writes everything already queued and sends its
/// completions before the writer stops.
#[derive(Debug)]
pub struct ReplicaLog {
    wal_dir: PathBuf,
    entry_bytes_max: usize,
    queue_entries_max: usize,
    queue_bytes_max: usize,
    order: Mutex<Order>,
    queue: RwLock<Option<SyncSender<Op>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    shared: Arc<Shared>,
    snapshots: SnapshotStore,
    /// Held by whoever deletes segments (purge, and the writer truncating or restarting),
    /// so a purge never deletes a segment the writer has just made the last one.
    segments_lock: Arc<Mutex<()>>,
    _dir_locks: Vec<DirLock>,
}

impl ReplicaLog {
    /// Recovers from the files in the configured directories, then starts the writer.
    pub fn open(
        config: ReplicaLogConfig,
    ) -> Result<(ReplicaLog, ReplicaRecovered, mpsc::Receiver<Durable>), LogError> {
        ReplicaLog::open_decoding(config, SnapshotPayload::read_whole)
    }

    /// [`ReplicaLog::open`], with the snapshot's payload streamed through `decode` instead of
    /// read whole (see [`SnapshotStore::decode_newest_valid`]).
    pub fn open_decoding<S>(
        config: ReplicaLogConfig,
        decode: impl FnMut(&mut SnapshotPayload) -> Result<S, String>,
    ) -> Result<(ReplicaLog, ReplicaRecovered<S>, mpsc::Receiver<Durable>), LogError> {
        config.validate()?;
        let dir_locks = create_and_lock_dirs(&config.wal_dir, &config.snapshot_dir)?;
        let epochs = read_epochs(&config.wal_dir)?;
        let snapshots =
            SnapshotStore::open(&config.snapshot_dir, config.limits.snapshots_retained)?;
        let ReadBack {
            snapshot,
            tail: recovered_tail,
            mut last_segment,
            times: read_times,
        } = read_snapshot_and_wal(&snapshots, &config.wal_dir, decode)?;
        let snapshot_position = snapshot.as_ref().map_or(0, |(position, _)| *position);
        let shared = Arc::new(Shared {
            batch_entries_max: config.limits.batch_entries_max,
            batch_bytes_max: config.limits.batch_bytes_max,
            fsync: FsyncStats::new(config.limits.fsync_warning_threshold_ms),
            ..Shared::default()
        });
        if recovered_tail.wal_last_position < snapshot_position && last_segment.is_some() {
            // An install that crashed after saving its snapshot, or a snapshot of entries
            // applied before they were durable: the segments hold only positions the
            // snapshot covers, and appends continue after it, so the segments go.
            tracing::warn!(
                wal_last_position = recovered_tail.wal_last_position,
                snapshot_position,
                "the WAL ends before the newest snapshot; discarding its segments"
            );
            remove_all_segments(&config.wal_dir, &shared.fsync)?;
            last_segment = None;
        }
        let entries = recovered_tail
            .tail
            .into_iter()
            .map(|(position, record)| decode_entry(&config.wal_dir, position, record))
            .collect::<Result<Vec<_>, _>>()?;
        let last_position = recovered_tail.wal_last_position.max(snapshot_position);
        let segment = ActiveSegment::open_or_create(
            &config.wal_dir,
            last_segment,
            last_position + 1,
            &shared.fsync,
        )?;
        let segments_lock = Arc::new(Mutex::new(()));
        let (queue_tx, queue_rx) = sync_channel(config.limits.queue_entries_max);
        let (durable_tx, durable_rx) = mpsc::channel(config.limits.queue_entries_max);
        let writer = Writer {
            segments: SegmentWriter::new(
                config.wal_dir.clone(),
                segment,
                config.limits.segment_bytes_max,
            ),
            next_position: last_position + 1,
            queue: queue_rx,
            held_over: None,
            catching_up: false,
            durable: durable_tx,
            consumer_gone: false,
            shared: Arc::clone(&shared),
            segments_lock: Arc::clone(&segments_lock),
        };
        let handle = std::thread::Builder::new()
            .name("zoolog-replica-writer".into())
            .spawn(move || writer.run())
            .context(|| "spawn the replica WAL writer thread".to_string())?;
        let _ = shared.writer.set(handle.thread().clone());
        tracing::info!(
            wal_dir = %config.wal_dir.display(),
            snapshot_position,
            entries = entries.len(),
            last_position,
            accepted_epoch = epochs.accepted,
            current_epoch = epochs.current,
            "replica log opened"
        );
        let log = ReplicaLog {
            wal_dir: config.wal_dir,
            entry_bytes_max: config.limits.entry_bytes_max,
            queue_entries_max: config.limits.queue_entries_max,
            queue_bytes_max: config.limits.queue_bytes_max,
            order: Mutex::new(Order {
                last_queued: last_position,
                snapshot_floor: snapshot_position,
                epochs,
            }),
            queue: RwLock::new(Some(queue_tx)),
            writer: Mutex::new(Some(handle)),
            shared,
            snapshots,
            segments_lock,
            _dir_locks: dir_locks,
        };
        let recovered = ReplicaRecovered {
            epochs,
            snapshot,
            entries,
            read_times,
        };
        Ok((log, recovered, durable_rx))
    }

    /// Queues consecutive entries continuing the log (the first at `last_position() + 1`);
    /// never blocks. Their durability is reported through the [`Durable`] channel. An empty
    /// append does nothing.
    pub fn append(&self, entries: Vec<ReplicaEntry>) -> Result<(), AppendError> {
        let Some(first) = entries.first() else {
            return Ok(());
        };
        if let Some(entry) = entries
            .iter()
            .find(|entry| entry.payload.len() > self.entry_bytes_max)
        {
            return Err(AppendError::TooLarge {
                entry_bytes: entry.payload.len(),
                entry_bytes_max: self.entry_bytes_max,
            });
        }
        let bytes = entries_bytes(&entries);
        if entries.len() > self.queue_entries_max || bytes > self.queue_bytes_max {
            return Err(AppendError::BatchTooLarge {
                entries: entries.len(),
                bytes,
                queue_entries_max: self.queue_entries_max,
                queue_bytes_max: self.queue_bytes_max,
            });
        }
        let mut order = lock(&self.order);
        let expected = order.last_queued + 1;
        if first.position != expected {
            return Err(AppendError::NotConsecutive {
                expected,
                found: first.position,
            });
        }
        if let Some(pair) = entries
            .windows(2)
            .find(|pair| pair[1].position != pair[0].position + 1)
        {
            return Err(AppendError::NotConsecutive {
                expected: pair[0].position + 1,
                found: pair[1].position,
            });
        }
        let last = entries[entries.len() - 1].position;
        let queue = self
            .queue
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(queue) = queue.as_ref() else {
            return Err(AppendError::Closed);
        };
        let count = entries.len();
        self.reserve_queued(count, bytes)?;
        match queue.try_send(Op::Append(entries)) {
            Ok(()) => {
                order.last_queued = last;
                if self.shared.queue_fills_batch(0) {
                    // A full batch waits for no delay.
                    self.shared.wake_writer();
                }
                Ok(())
            }
            Err(error) => {
                self.shared.release_queued(count, bytes);
                Err(match error {
                    TrySendError::Full(_) => AppendError::Full,
                    TrySendError::Disconnected(_) => AppendError::Failed,
                })
            }
        }
    }

    /// How long the writer may wait, once an append reaches it, before it writes and
    /// fdatasyncs, so that one sync takes in the appends queued meanwhile: zero (the default)
    /// writes and syncs at once. The wait ends early when the queued appends fill a batch,
    /// when any other operation is queued, and at [`ReplicaLog::sync_now`]; it is skipped
    /// while the writer catches up with full batches.
    pub fn set_sync_delay(&self, delay: Duration) {
        let delay_us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared.sync_delay_us.store(delay_us, Ordering::Relaxed);
    }

    /// Ends the writer's current sync delay at once, or its next one if it is not waiting.
    pub fn sync_now(&self) {
        self.shared.ask_sync();
    }

    /// Cuts consecutive entries into appends that each fit the queue's entry and byte
    /// limits, in order. A learner's sync can bring more entries than the queue holds at once;
    /// the caller appends the parts one after the other, waiting for room as the writer drains.
    pub fn split_to_fit(&self, entries: Vec<ReplicaEntry>) -> Vec<Vec<ReplicaEntry>> {
        // Every broadcast batch takes this path: one that fits is not copied.
        if entries.len() <= self.queue_entries_max
            && entries_bytes(&entries) <= self.queue_bytes_max
        {
            return vec![entries];
        }
        let mut parts = Vec::new();
        let mut part: Vec<ReplicaEntry> = Vec::new();
        let mut part_bytes = 0;
        for entry in entries {
            let full = part.len() == self.queue_entries_max
                || part_bytes + entry.payload.len() > self.queue_bytes_max;
            if full && !part.is_empty() {
                parts.push(std::mem::take(&mut part));
                part_bytes = 0;
            }
            part_bytes += entry.payload.len();
            part.push(entry);
        }
        if !part.is_empty() {
            parts.push(part);
        }
        parts
    }

    /// Reserves room in the queue's entry and byte budgets; the writer gives it back when
    /// it takes the append.
    fn reserve_queued(&self, entries: usize, bytes: usize) -> Result<(), AppendError> {
        let entries_before = self
            .shared
            .queued_entries
            .fetch_add(entries, Ordering::AcqRel);
        let bytes_before = self.shared.queued_bytes.fetch_add(bytes, Ordering::AcqRel);
        if entries_before + entries > self.queue_entries_max
            || bytes_before + bytes > self.queue_bytes_max
        {
            self.shared.release_queued(entries, bytes);
            return Err(AppendError::Full);
        }
        Ok(())
    }

    /// Removes every entry after `after`, durably, behind every append queued before it;
    /// the next append continues at `after + 1`. Nothing happens when the log ends at or
    /// before `after`. Refused below the newest snapshot, whose state is committed.
    /// Blocking: returns once the truncation is durable.
    pub fn truncate_after(&self, after: Position) -> Result<(), LogError> {
        self.run_on_writer(|order, done| {
            if after < order.snapshot_floor {
                return Err(LogError::InvalidRequest(format!(
                    "truncating after position {after} would cut below the snapshot at \
                     position {}, which holds committed state",
                    order.snapshot_floor
                )));
            }
            let op = Op::Truncate { after, done };
            Ok((op, move |order: &mut Order| {
                order.last_queued = order.last_queued.min(after)
            }))
        })
    }

    /// Durably records the epochs, behind every append queued before (so those are durable
    /// too when this returns). Blocking.
    pub fn persist_epochs(&self, epochs: ReplicaEpochs) -> Result<(), LogError> {
        self.run_on_writer(|order, done| {
            let previous = order.epochs;
            if epochs.current > epochs.accepted
                || epochs.accepted < previous.accepted
                || epochs.current < previous.current
            {
                return Err(LogError::InvalidRequest(format!(
                    "epochs {epochs:?} after {previous:?}: epochs never decrease and the \
                     current epoch never exceeds the accepted one"
                )));
            }
            let op = Op::PersistEpochs { epochs, done };
            Ok((op, move |order: &mut Order| order.epochs = epochs))
        })
    }

    /// Replaces the log with a snapshot received from the leader: the log must end before
    /// `position` (the protocol truncates it first). Stores the snapshot durably, then
    /// discards every segment, so the next append is `position + 1`. A crash in between
    /// leaves the snapshot and segments holding only positions it covers, which `open`
    /// discards. Blocking.
    pub fn install_snapshot(&self, position: Position, payload: &[u8]) -> Result<(), LogError> {
        self.install_snapshot_streamed(position, |sink| sink.write(payload))
    }

    /// As [`ReplicaLog::install_snapshot`], with the payload written piece by piece by
    /// `produce` (see [`SnapshotStore::save_streamed`]).
    pub fn install_snapshot_streamed(
        &self,
        position: Position,
        produce: impl FnOnce(&mut SnapshotSink<'_>) -> std::io::Result<()>,
    ) -> Result<(), LogError> {
        {
            let order = lock(&self.order);
            check_install(&order, position)?;
        }
        // Saved here rather than on the writer so a large payload is neither copied nor
        // holding up the appends queued before it (all of them at or below `position`).
        self.snapshots.save_streamed(position, produce)?;
        self.run_on_writer(|order, done| {
            check_install(order, position)?;
            let op = Op::RestartAfterSnapshot { position, done };
            Ok((op, move |order: &mut Order| {
                order.last_queued = position;
                order.snapshot_floor = order.snapshot_floor.max(position);
            }))
        })
    }

    /// Durably stores a snapshot of committed state exact at `position` (which the log must
    /// have reached), then purges. Runs on the caller's thread, beside the writer.
    pub fn save_snapshot(&self, position: Position, payload: &[u8]) -> Result<(), LogError> {
        self.save_snapshot_streamed(position, |sink| sink.write(payload))
            .map(|_| ())
    }

    /// As [`ReplicaLog::save_snapshot`], with the payload written piece by piece by `produce`
    /// (see [`SnapshotStore::save_streamed`]); returns its length.
    pub fn save_snapshot_streamed(
        &self,
        position: Position,
        produce: impl FnOnce(&mut SnapshotSink<'_>) -> std::io::Result<()>,
    ) -> Result<u64, LogError> {
        let last_queued = lock(&self.order).last_queued;
        if position > last_queued {
            return Err(LogError::InvalidRequest(format!(
                "snapshot at position {position} is beyond the end of the log at {last_queued}"
            )));
        }
        let payload_len = self.snapshots.save_streamed(position, produce)?;
        {
            let mut order = lock(&self.order);
            order.snapshot_floor = order.snapshot_floor.max(position);
        }
        self.purge()?;
        Ok(payload_len)
    }

    /// Deletes snapshots beyond the retained count and the WAL segments that only hold
    /// entries at or below the oldest retained snapshot, as [`crate::SingleLog::purge`].
    pub fn purge(&self) -> Result<(), LogError> {
        let Some(oldest_retained) = self.snapshots.purge()? else {
            return Ok(());
        };
        let _guard = lock(&self.segments_lock);
        purge_segments(&self.wal_dir, oldest_retained)?;
        Ok(())
    }

    pub fn snapshot_store(&self) -> &SnapshotStore {
        &self.snapshots
    }

    /// Position of the last entry appended (queued, not necessarily durable), after
    /// truncations and installs.
    pub fn last_position(&self) -> Position {
        lock(&self.order).last_queued
    }

    /// Starts the count, sum and extremes of [`crate::FsyncTimes`]'s window over (`srst`).
    pub fn reset_fsync_window(&self) {
        self.shared.fsync.reset_window();
    }

    /// `entries_committed` and `batches_committed` count entries and batches made durable.
    pub fn stats(&self) -> LogStats {
        LogStats {
            entries_committed: self.shared.entries_durable.load(Ordering::Relaxed),
            batches_committed: self.shared.batches_durable.load(Ordering::Relaxed),
            fsync: self.shared.fsync.times(),
        }
    }

    /// Stops accepting operations, lets the writer finish everything queued, and waits for
    /// it. Idempotent. Reports a writer failure, if any.
    pub fn close(&self) -> Result<(), LogError> {
        drop(
            self.queue
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take(),
        );
        self.shared.ask_sync();
        let handle = lock(&self.writer).take();
        if let Some(handle) = handle {
            if handle.join().is_err() {
                return Err(LogError::WriterFailed(
                    "the replica writer thread panicked".into(),
                ));
            }
        }
        match self.shared.failure() {
            Some(failure) => Err(LogError::WriterFailed(failure)),
            None => Ok(()),
        }
    }

    /// Queues the operation `prepare` builds (after checking it against the caller's view
    /// of the log), applies its effect on that view, and waits for the writer to finish it.
    /// Waits for room in the queue without holding the order lock, so appends never block.
    fn run_on_writer<F, U>(&self, prepare: F) -> Result<(), LogError>
    where
        F: Fn(&Order, Reply) -> Result<(Op, U), LogError>,
        U: FnOnce(&mut Order),
    {
        let (done_tx, done_rx) = sync_channel(1);
        loop {
            let mut order = lock(&self.order);
            let (op, update) = prepare(&order, done_tx.clone())?;
            let queue_guard = self
                .queue
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let Some(queue) = queue_guard.as_ref() else {
                return Err(LogError::WriterFailed("the replica log is closed".into()));
            };
            match queue.try_send(op) {
                Ok(()) => {
                    update(&mut order);
                    // Appends ahead of it are not to wait out a sync delay.
                    self.shared.ask_sync();
                    break;
                }
                Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Disconnected(_)) => return Err(self.writer_gone()),
            }
            drop(queue_guard);
            drop(order);
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(done_tx);
        match done_rx.recv() {
            Ok(result) => result,
            Err(_) => Err(self.writer_gone()),
        }
    }

    fn writer_gone(&self) -> LogError {
        LogError::WriterFailed(
            self.shared
                .failure()
                .unwrap_or_else(|| "the replica writer stopped".into()),
        )
    }
}

fn check_install(order: &Order, position: Position) -> Result<(), LogError> {
    if order.last_queued > position {
        return Err(LogError::InvalidRequest(format!(
            "installing a snapshot at position {position} over a log that reaches position {}: \
             truncate the log first",
            order.last_queued
        )));
    }
    if position < order.snapshot_floor {
        return Err(LogError::InvalidRequest(format!(
            "installing a snapshot at position {position} behind the snapshot at position {}",
            order.snapshot_floor
        )));
    }
    Ok(())
}

impl Drop for ReplicaLog {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            tracing::error!(%error, "replica log closed with an error");
        }
    }
}

fn decode_entry(
    wal_dir: &Path,
    position: Position,
    record: Bytes,
) -> Result<ReplicaEntry, LogError> {
    if record.len() < EPOCH_BYTES {
        return Err(LogError::Corrupt(format!(
            "the record for position {position} in {} holds {} bytes, too few for an entry's \
             epoch: these segments were not written by a replica log (a standalone server's \
             WAL?). Point wal_dir at this member's own data directory.",
            wal_dir.display(),
            record.len()
        )));
    }
    let epoch = u64::from_be_bytes(record[..EPOCH_BYTES].try_into().expect("8 bytes"));
    Ok(ReplicaEntry {
        position,
        epoch,
        payload: record.slice(EPOCH_BYTES..),
    })
}

/// Deletes every segment, highest first, then makes the deletions durable.
fn remove_all_segments(wal_dir: &Path, stats: &FsyncStats) -> Result<(), LogError> {
    let first_positions = list_segments(wal_dir)?;
    for first_position in first_positions.iter().rev() {
        remove_file(&wal_dir.join(segment_file_name(*first_position)))?;
    }
    stats.timed_fsync(&wal_dir.display(), || fsync_dir(wal_dir))
}

fn encode_epochs(epochs: ReplicaEpochs) -> [u8; EPOCHS_FILE_BYTES] {
    let mut bytes = [0u8; EPOCHS_FILE_BYTES];
    bytes[0..8].copy_from_slice(EPOCHS_MAGIC);
    bytes[8..16].copy_from_slice(&epochs.accepted.to_le_bytes());
    bytes[16..24].copy_from_slice(&epochs.current.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..24]);
    bytes[24..28].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn decode_epochs(bytes: &[u8]) -> Result<ReplicaEpochs, String> {
    if bytes.len() != EPOCHS_FILE_BYTES {
        return Err(format!(
            "it is {} bytes long instead of {EPOCHS_FILE_BYTES}",
            bytes.len()
        ));
    }
    if &bytes[0..8] != EPOCHS_MAGIC {
        return Err("bad magic, not a zoolog epochs file".into());
    }
    let stored = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&bytes[..24]);
    if stored != computed {
        return Err(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    Ok(ReplicaEpochs {
        accepted: u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
        current: u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")),
    })
}

/// The persisted epochs; (0, 0) when none were ever written. A leftover temporary file is
/// a write a crash interrupted before its rename, so the previous file still holds.
fn read_epochs(wal_dir: &Path) -> Result<ReplicaEpochs, LogError> {
    let tmp_path = wal_dir.join(EPOCHS_TMP_FILE);
    if tmp_path.exists() {
        remove_file(&tmp_path)?;
        fsync_dir(wal_dir)?;
    }
    let path = wal_dir.join(EPOCHS_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(ReplicaEpochs::default()),
        Err(error) => return Err(LogError::io(format!("read {}", path.display()), error)),
    };
    decode_epochs(&bytes).map_err(|reason| {
        LogError::Corrupt(format!(
            "the epochs file {} is damaged: {reason}. It holds the epochs this member promised \
             (Zab's acceptedEpoch and currentEpoch); starting without it could let the member \
             break a promise. Restore it from a backup, or wipe this member's data and WAL \
             directories and let it rejoin and resynchronise from the leader.",
            path.display()
        ))
    })
}

/// Temp file, fsync, rename, fsync the directory: a crash leaves the old or the new epochs.
fn write_epochs(wal_dir: &Path, epochs: ReplicaEpochs, stats: &FsyncStats) -> Result<(), LogError> {
    let tmp_path = wal_dir.join(EPOCHS_TMP_FILE);
    let path = wal_dir.join(EPOCHS_FILE);
    let mut file = File::create(&tmp_path).context(|| format!("create {}", tmp_path.display()))?;
    file.write_all(&encode_epochs(epochs))
        .context(|| format!("write {}", tmp_path.display()))?;
    stats.timed_fsync(&tmp_path.display(), || {
        file.sync_all()
            .context(|| format!("fsync {}", tmp_path.display()))
    })?;
    fs::rename(&tmp_path, &path)
        .context(|| format!("rename {} to {}", tmp_path.display(), path.display()))?;
    stats.timed_fsync(&wal_dir.display(), || fsync_dir(wal_dir))
}

/// A batch written and synced, not yet reported durable.
#[derive(Default)]
struct Written {
    entries: usize,
    bytes: usize,
    last: Option<Durable>,
}

/// The one thread that writes the replica's WAL and epochs, in queue order.
struct Writer {
    segments: SegmentWriter,
    next_position: Position,
    /// Declared before `durable` so that, when a failed writer is dropped, operations
    /// already fail by the time the consumer sees its channel end.
    queue: QueueReceiver<Op>,
    /// An operation taken from the queue that ended the previous batch.
    held_over: Option<Op>,
    /// Whether the last batch was full: the next one is written without a sync delay.
    catching_up: bool,
    durable: mpsc::Sender<Durable>,
    consumer_gone: bool,
    shared: Arc<Shared>,
    segments_lock: Arc<Mutex<()>>,
}

impl Writer {
    fn run(mut self) {
        while let Some(op) = self.next_op() {
            let (result, done) = match op {
                Op::Append(entries) => (self.append(entries), None),
                Op::Truncate { after, done } => (self.truncate_after(after), Some(done)),
                Op::PersistEpochs { epochs, done } => (
                    write_epochs(self.segments.wal_dir(), epochs, &self.shared.fsync),
                    Some(done),
                ),
                Op::RestartAfterSnapshot { position, done } => {
                    (self.restart_after_snapshot(position), Some(done))
                }
            };
            match result {
                Ok(()) => {
                    if let Some(done) = done {
                        // The caller may have given up waiting; nothing to do then.
                        let _ = done.send(Ok(()));
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "replica WAL write failed; the log stops");
                    *lock(&self.shared.failure) = Some(error.to_string());
                    if let Some(done) = done {
                        let _ = done.send(Err(error));
                    }
                    return;
                }
            }
        }
    }

    /// The held-over operation, else the next one queued. Queue budgets are given back
    /// when an append leaves the queue, once (a held-over append already gave them back).
    fn next_op(&mut self) -> Option<Op> {
        if let Some(op) = self.held_over.take() {
            return Some(op);
        }
        let op = self.queue.recv().ok()?;
        if let Op::Append(entries) = &op {
            self.shared
                .release_queued(entries.len(), entries_bytes(entries));
        }
        Some(op)
    }

    /// Adds whatever appends are already queued to `first`, up to the batch limits, and
    /// stops at the first other operation, which must wait for this batch's completion.
    fn gather_batch(&mut self, first: Vec<ReplicaEntry>) -> Vec<Vec<ReplicaEntry>> {
        let mut batch_entries = first.len();
        let mut batch_bytes = entries_bytes(&first);
        let mut batch = vec![first];
        while batch_entries < self.shared.batch_entries_max {
            let op = match self.queue.try_recv() {
                Ok(op) => op,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            };
            let Op::Append(entries) = op else {
                self.held_over = Some(op);
                break;
            };
            let bytes = entries_bytes(&entries);
            self.shared.release_queued(entries.len(), bytes);
            if batch_entries + entries.len() > self.shared.batch_entries_max
                || batch_bytes + bytes > self.shared.batch_bytes_max
            {
                self.held_over = Some(Op::Append(entries));
                break;
            }
            batch_entries += entries.len();
            batch_bytes += bytes;
            batch.push(entries);
        }
        batch
    }

    /// Writes `first` and the appends queued behind it, after the sync delay if there is
    /// one, syncs them and reports them durable.
    fn append(&mut self, first: Vec<ReplicaEntry>) -> Result<(), LogError> {
        let delay_us = self.shared.sync_delay_us.load(Ordering::Relaxed);
        if delay_us > 0 && !self.catching_up {
            self.wait_for_more(first.len(), Duration::from_micros(delay_us));
        }
        let batch = self.gather_batch(first);
        let written = self.write_batch(batch)?;
        self.catching_up = matches!(self.held_over, Some(Op::Append(_)))
            || self.shared.fills_batch(written.entries, written.bytes);
        self.report_durable(written);
        Ok(())
    }

    /// Waits up to `delay` for more appends to queue behind the `taken` entries already off
    /// the queue, until they fill a batch or a sync is asked for.
    fn wait_for_more(&self, taken: usize, delay: Duration) {
        let deadline = Instant::now() + delay;
        loop {
            if self.shared.sync_asked.swap(false, Ordering::AcqRel)
                || self.shared.queue_fills_batch(taken)
            {
                return;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            std::thread::park_timeout(left);
        }
    }

    /// Writes a batch to the active segment and fdatasyncs it.
    fn write_batch(&mut self, batch: Vec<Vec<ReplicaEntry>>) -> Result<Written, LogError> {
        let mut written = Written::default();
        for entry in batch.iter().flatten() {
            assert_eq!(
                entry.position, self.next_position,
                "replica appends continue the log"
            );
            let epoch = entry.epoch.to_be_bytes();
            self.segments.push(
                entry.position,
                &[&epoch, &entry.payload],
                &self.shared.fsync,
            )?;
            self.next_position += 1;
            written.entries += 1;
            written.bytes += entry.payload.len();
            written.last = Some(Durable {
                position: entry.position,
                epoch: entry.epoch,
            });
        }
        self.segments.write_and_sync(&self.shared.fsync)?;
        Ok(written)
    }

    /// Reports synced entries durable. Held_over is not yet run: the completion goes out
    /// while it is still true.
    fn report_durable(&mut self, written: Written) {
        let Some(durable) = written.last else {
            return;
        };
        self.shared
            .entries_durable
            .fetch_add(written.entries as u64, Ordering::Relaxed);
        self.shared.batches_durable.fetch_add(1, Ordering::Relaxed);
        if !self.consumer_gone && self.durable.blocking_send(durable).is_err() {
            tracing::debug!("the Durable receiver is gone; entries stay durable but unreported");
            self.consumer_gone = true;
        }
    }

    /// Deletes later segments from the highest down, each deletion durable before the next
    /// (a crash leaves a shorter, still gap-free log), then cuts the segment holding
    /// `after` at that record's end and continues there.
    fn truncate_after(&mut self, after: Position) -> Result<(), LogError> {
        let last = self.next_position - 1;
        if after >= last {
            return Ok(());
        }
        let _guard = lock(&self.segments_lock);
        let wal_dir = self.segments.wal_dir().to_path_buf();
        let first_positions = list_segments(&wal_dir)?;
        for &first_position in first_positions.iter().rev() {
            if first_position <= after {
                break;
            }
            remove_file(&wal_dir.join(segment_file_name(first_position)))?;
            self.shared
                .fsync
                .timed_fsync(&wal_dir.display(), || fsync_dir(&wal_dir))?;
        }
        let holding = first_positions
            .iter()
            .rev()
            .find(|first| **first <= after)
            .copied();
        let segment = match holding {
            Some(first_position) => {
                let path = wal_dir.join(segment_file_name(first_position));
                let mut after_end = None;
                let scan = SegmentFile::open(&path, READ_WINDOW_BYTES)
                    .and_then(|mut segment| {
                        scan_segment(&mut segment, first_position, |record| {
                            if record.position == after {
                                after_end = Some(record.end as u64);
                            }
                        })
                    })
                    .context(|| format!("read {}", path.display()))?;
                let Some(end) = after_end else {
                    return Err(LogError::Corrupt(format!(
                        "truncating after position {after}: {} does not hold it intact \
                         ({} intact records from position {first_position})",
                        path.display(),
                        scan.records
                    )));
                };
                self.shared
                    .fsync
                    .timed_fsync(&path.display(), || truncate_file(&path, end))?;
                ActiveSegment::open_existing(&wal_dir, first_position, end)?
            }
            // Every segment started after `after`: those entries live only in a snapshot.
            None => ActiveSegment::create(&wal_dir, after + 1, &self.shared.fsync)?,
        };
        self.segments.restart(segment);
        self.next_position = after + 1;
        tracing::info!(
            after,
            discarded_from = after + 1,
            discarded_to = last,
            "truncated the replica log"
        );
        Ok(())
    }

    /// The snapshot at `position` is durable and covers every logged entry: drop all
    /// segments and start a new one at `position + 1`.
    fn restart_after_snapshot(&mut self, position: Position) -> Result<(), LogError> {
        assert!(
            self.next_position - 1 <= position,
            "an installed snapshot covers the whole log"
        );
        let _guard = lock(&self.segments_lock);
        let wal_dir = self.segments.wal_dir().to_path_buf();
        remove_all_segments(&wal_dir, &self.shared.fsync)?;
        let segment = ActiveSegment::create(&wal_dir, position + 1, &self.shared.fsync)?;
        self.segments.restart(segment);
        self.next_position = position + 1;
        tracing::info!(
            position,
            "installed a snapshot; the replica log restarts after it"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_round_trip_and_every_damage_is_rejected() {
        let epochs = ReplicaEpochs {
            accepted: 7,
            current: 5,
        };
        let bytes = encode_epochs(epochs);
        assert_eq!(decode_epochs(&bytes), Ok(epochs));
        for cut in 0..bytes.len() {
            assert!(decode_epochs(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for index in 0..bytes.len() {
            let mut damaged = bytes;
            damaged[index] ^= 0x04;
            assert!(decode_epochs(&damaged).is_err(), "flip at {index}");
        }
    }
}

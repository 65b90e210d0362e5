//! The standalone ordering layer: one process, a local WAL, group commit.
//!
//! Appenders push onto a bounded queue; one writer thread drains what is queued into a
//! batch, writes it, does one fdatasync for the whole batch and only then publishes it as
//! committed. The writer is the only thing that assigns positions, so positions follow queue
//! order, which is append order.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{
    sync_channel, Receiver as QueueReceiver, SyncSender, TryRecvError, TrySendError,
};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::error::{AppendError, IoContext, LogError};
use crate::fsutil::{create_and_lock_dirs, DirLock};
use crate::fsync_stats::{FsyncStats, FsyncTimes};
use crate::limits::WalLimits;
use crate::record::RECORD_PAYLOAD_BYTES_MAX;
use crate::recovery::RecoveredTail;
use crate::segment::{
    purge_segments, read_snapshot_and_wal, ActiveSegment, ReadBack, ReadTimes, SegmentWriter,
};
use crate::snapshot::{SnapshotPayload, SnapshotSink, SnapshotStore};
use crate::{CommittedBatch, OrderingLayer, Position};

/// Where the log lives and the limits of every queue and buffer in it.
#[derive(Debug, Clone)]
pub struct SingleLogConfig {
    /// WAL segments (ZooKeeper's dataLogDir).
    pub wal_dir: PathBuf,
    /// Snapshots (ZooKeeper's dataDir); may be the same directory as `wal_dir`.
    pub snapshot_dir: PathBuf,
    pub limits: WalLimits,
    /// Committed batches the apply loop has not received yet; when full the writer waits.
    pub committed_batches_max: usize,
}

impl SingleLogConfig {
    pub fn new(wal_dir: impl Into<PathBuf>, snapshot_dir: impl Into<PathBuf>) -> Self {
        SingleLogConfig {
            wal_dir: wal_dir.into(),
            snapshot_dir: snapshot_dir.into(),
            limits: WalLimits::default(),
            committed_batches_max: 64,
        }
    }

    fn validate(&self) -> Result<(), LogError> {
        if self.committed_batches_max == 0 {
            return Err(LogError::InvalidConfig(
                "committed_batches_max must be greater than 0".into(),
            ));
        }
        self.limits.validate(RECORD_PAYLOAD_BYTES_MAX)
    }
}

/// What recovery found, for the server to rebuild its state: load the snapshot (if any),
/// then apply the tail in order. `S` is what the opener's decoder made of the snapshot: its
/// bytes, by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered<S = Bytes> {
    pub snapshot: Option<(Position, S)>,
    /// The committed entries after the snapshot, consecutive.
    pub tail: Vec<(Position, Bytes)>,
    pub read_times: ReadTimes,
}

impl<S> Recovered<S> {
    /// The position the state stands at once snapshot and tail are applied.
    pub fn last_position(&self) -> Position {
        match (self.tail.last(), &self.snapshot) {
            (Some((position, _)), _) => *position,
            (None, Some((position, _))) => *position,
            (None, None) => 0,
        }
    }
}

/// Counters for tests and metrics; each value is read independently, not as one snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    pub entries_committed: u64,
    pub batches_committed: u64,
    /// Every fsync and fdatasync the writer issued, of segments and of the WAL directory.
    pub fsync: FsyncTimes,
}

/// State the writer thread publishes and appenders read.
#[derive(Debug, Default)]
struct Shared {
    committed_position: AtomicU64,
    queued_bytes: AtomicUsize,
    entries_committed: AtomicU64,
    batches_committed: AtomicU64,
    fsync: FsyncStats,
    failure: Mutex<Option<String>>,
}

impl Shared {
    fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// The standalone ordering layer. See the module docs for how group commit works.
///
/// Dropping it (or [`SingleLog::close`]) writes and publishes everything already queued
/// before the writer stops; this waits on the apply loop, which must keep receiving
/// committed batches or drop its receiver.
#[derive(Debug)]
pub struct SingleLog {
    wal_dir: PathBuf,
    entry_bytes_max: usize,
    queue_bytes_max: usize,
    queue: RwLock<Option<SyncSender<Bytes>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    shared: Arc<Shared>,
    snapshots: SnapshotStore,
    /// Serialises purges, so a timer purge and a post-snapshot purge never race to delete
    /// the same segment.
    purge_lock: Mutex<()>,
    _dir_locks: Vec<DirLock>,
}

impl SingleLog {
    /// Recovers from the files in the configured directories, then starts the writer.
    pub fn open(
        config: SingleLogConfig,
    ) -> Result<(SingleLog, Recovered, mpsc::Receiver<CommittedBatch>), LogError> {
        SingleLog::open_decoding(config, SnapshotPayload::read_whole)
    }

    /// [`SingleLog::open`], with the snapshot's payload streamed through `decode` instead of
    /// read whole (see [`SnapshotStore::decode_newest_valid`]).
    pub fn open_decoding<S>(
        config: SingleLogConfig,
        decode: impl FnMut(&mut SnapshotPayload) -> Result<S, String>,
    ) -> Result<(SingleLog, Recovered<S>, mpsc::Receiver<CommittedBatch>), LogError> {
        config.validate()?;
        let dir_locks = create_and_lock_dirs(&config.wal_dir, &config.snapshot_dir)?;
        let snapshots =
            SnapshotStore::open(&config.snapshot_dir, config.limits.snapshots_retained)?;
        let ReadBack {
            snapshot,
            tail:
                RecoveredTail {
                    tail,
                    wal_last_position,
                },
            last_segment,
            times: read_times,
        } = read_snapshot_and_wal(&snapshots, &config.wal_dir, decode)?;
        let snapshot_position = snapshot.as_ref().map_or(0, |(position, _)| *position);
        let committed_position = wal_last_position.max(snapshot_position);
        if wal_last_position < snapshot_position {
            tracing::warn!(
                wal_last_position,
                snapshot_position,
                "the WAL ends before the newest snapshot; continuing after the snapshot"
            );
        }

        let shared = Arc::new(Shared {
            fsync: FsyncStats::new(config.limits.fsync_warning_threshold_ms),
            ..Shared::default()
        });
        shared
            .committed_position
            .store(committed_position, Ordering::Release);
        let segment = ActiveSegment::open_or_create(
            &config.wal_dir,
            last_segment,
            committed_position + 1,
            &shared.fsync,
        )?;
        let (handle, queue_tx, committed_rx) =
            Writer::spawn(&config, segment, committed_position, Arc::clone(&shared))?;
        tracing::info!(
            wal_dir = %config.wal_dir.display(),
            snapshot_position,
            tail_entries = tail.len(),
            committed_position,
            "log opened"
        );
        let log = SingleLog {
            wal_dir: config.wal_dir,
            entry_bytes_max: config.limits.entry_bytes_max,
            queue_bytes_max: config.limits.queue_bytes_max,
            queue: RwLock::new(Some(queue_tx)),
            writer: Mutex::new(Some(handle)),
            shared,
            snapshots,
            purge_lock: Mutex::new(()),
            _dir_locks: dir_locks,
        };
        let recovered = Recovered {
            snapshot,
            tail,
            read_times,
        };
        Ok((log, recovered, committed_rx))
    }

    /// Starts the count, sum and extremes of [`FsyncTimes`]'s window over (`srst`).
    pub fn reset_fsync_window(&self) {
        self.shared.fsync.reset_window();
    }

    pub fn stats(&self) -> LogStats {
        LogStats {
            entries_committed: self.shared.entries_committed.load(Ordering::Relaxed),
            batches_committed: self.shared.batches_committed.load(Ordering::Relaxed),
            fsync: self.shared.fsync.times(),
        }
    }

    pub fn snapshot_store(&self) -> &SnapshotStore {
        &self.snapshots
    }

    /// Durably stores the state exact at `position` (which must be committed), then purges.
    /// Blocking IO: call it from a background thread.
    pub fn save_snapshot(&self, position: Position, payload: &[u8]) -> Result<(), LogError> {
        self.save_snapshot_streamed(position, |sink| sink.write(payload))
            .map(|_| ())
    }

    /// As [`SingleLog::save_snapshot`], with the payload written piece by piece by `produce`
    /// (see [`SnapshotStore::save_streamed`]); returns its length.
    pub fn save_snapshot_streamed(
        &self,
        position: Position,
        produce: impl FnOnce(&mut SnapshotSink<'_>) -> std::io::Result<()>,
    ) -> Result<u64, LogError> {
        let committed = self.committed_position();
        if position > committed {
            return Err(LogError::SnapshotBeyondCommitted {
                position,
                committed,
            });
        }
        let payload_len = self.snapshots.save_streamed(position, produce)?;
        self.purge()?;
        Ok(payload_len)
    }

    /// Deletes snapshots beyond the retained count and the WAL segments that only hold
    /// entries at or below the oldest retained snapshot. Blocking IO; safe to call on a timer
    /// (ZooKeeper's autopurge.purgeInterval) while the log is running.
    pub fn purge(&self) -> Result<(), LogError> {
        let _guard = self
            .purge_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(oldest_retained) = self.snapshots.purge()? else {
            return Ok(());
        };
        purge_segments(&self.wal_dir, oldest_retained)?;
        Ok(())
    }

    /// Stops accepting appends, lets the writer commit and publish everything already
    /// queued, and waits for it to stop. Idempotent. Reports a writer failure, if any.
    pub fn close(&self) -> Result<(), LogError> {
        drop(
            self.queue
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take(),
        );
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(handle) = handle {
            if handle.join().is_err() {
                return Err(LogError::WriterFailed("the writer thread panicked".into()));
            }
        }
        match self.shared.failure() {
            Some(failure) => Err(LogError::WriterFailed(failure)),
            None => Ok(()),
        }
    }

    /// Reserves room for `entry_bytes` in the queue's byte budget; the writer gives it back
    /// when it takes the entry.
    fn reserve_queue_bytes(&self, entry_bytes: usize) -> Result<(), AppendError> {
        let before = self
            .shared
            .queued_bytes
            .fetch_add(entry_bytes, Ordering::AcqRel);
        if before + entry_bytes > self.queue_bytes_max {
            self.shared
                .queued_bytes
                .fetch_sub(entry_bytes, Ordering::AcqRel);
            return Err(AppendError::Full);
        }
        Ok(())
    }
}

impl OrderingLayer for SingleLog {
    fn append(&self, entry: Bytes, _stint: u64) -> Result<(), AppendError> {
        let entry_bytes = entry.len();
        if entry_bytes > self.entry_bytes_max {
            return Err(AppendError::TooLarge {
                entry_bytes,
                entry_bytes_max: self.entry_bytes_max,
            });
        }
        let queue = self
            .queue
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(queue) = queue.as_ref() else {
            return Err(AppendError::Closed);
        };
        self.reserve_queue_bytes(entry_bytes)?;
        queue.try_send(entry).map_err(|error| {
            self.shared
                .queued_bytes
                .fetch_sub(entry_bytes, Ordering::AcqRel);
            match error {
                TrySendError::Full(_) => AppendError::Full,
                TrySendError::Disconnected(_) => AppendError::Failed,
            }
        })
    }

    fn committed_position(&self) -> Position {
        self.shared.committed_position.load(Ordering::Acquire)
    }
}

impl Drop for SingleLog {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            tracing::error!(%error, "log closed with an error");
        }
    }
}

/// The one thread that writes the WAL and assigns positions.
struct Writer {
    segments: SegmentWriter,
    next_position: Position,
    batch_entries_max: usize,
    batch_bytes_max: usize,
    /// Declared before `committed` so that, when a failed writer is dropped, appends already
    /// fail by the time the apply loop sees its channel end.
    queue: QueueReceiver<Bytes>,
    /// An entry taken from the queue that did not fit the previous batch.
    held_over: Option<Bytes>,
    committed: mpsc::Sender<CommittedBatch>,
    apply_loop_gone: bool,
    shared: Arc<Shared>,
}

type WriterChannels = (
    JoinHandle<()>,
    SyncSender<Bytes>,
    mpsc::Receiver<CommittedBatch>,
);

impl Writer {
    /// Starts the writer after `committed_position`; returns its thread, the sending end of
    /// its queue and the receiving end of its committed batches.
    fn spawn(
        config: &SingleLogConfig,
        segment: ActiveSegment,
        committed_position: Position,
        shared: Arc<Shared>,
    ) -> Result<WriterChannels, LogError> {
        let (queue_tx, queue_rx) = sync_channel(config.limits.queue_entries_max);
        let (committed_tx, committed_rx) = mpsc::channel(config.committed_batches_max);
        let writer = Writer {
            segments: SegmentWriter::new(
                config.wal_dir.clone(),
                segment,
                config.limits.segment_bytes_max,
            ),
            next_position: committed_position + 1,
            batch_entries_max: config.limits.batch_entries_max,
            batch_bytes_max: config.limits.batch_bytes_max,
            queue: queue_rx,
            held_over: None,
            committed: committed_tx,
            apply_loop_gone: false,
            shared,
        };
        let handle = std::thread::Builder::new()
            .name("zoolog-wal-writer".into())
            .spawn(move || writer.run())
            .context(|| "spawn the WAL writer thread".to_string())?;
        Ok((handle, queue_tx, committed_rx))
    }

    fn run(mut self) {
        while let Some(entries) = self.next_batch() {
            match self.write_batch(entries) {
                Ok(batch) => self.publish(batch),
                Err(error) => {
                    tracing::error!(%error, "WAL write failed; the log stops accepting entries");
                    *self
                        .shared
                        .failure
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(error.to_string());
                    return;
                }
            }
        }
    }

    fn take_from_queue(&self, entry: Bytes) -> Bytes {
        self.shared
            .queued_bytes
            .fetch_sub(entry.len(), Ordering::AcqRel);
        entry
    }

    /// Waits for at least one entry, then takes whatever else is already queued, up to the
    /// batch limits. `None` once the log is closed and the queue is drained.
    fn next_batch(&mut self) -> Option<Vec<Bytes>> {
        let first = match self.held_over.take() {
            Some(entry) => entry,
            None => self.take_from_queue(self.queue.recv().ok()?),
        };
        let mut batch_bytes = first.len();
        let mut entries = vec![first];
        while entries.len() < self.batch_entries_max {
            let entry = match self.queue.try_recv() {
                Ok(entry) => self.take_from_queue(entry),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            };
            if batch_bytes + entry.len() > self.batch_bytes_max {
                self.held_over = Some(entry);
                break;
            }
            batch_bytes += entry.len();
            entries.push(entry);
        }
        Some(entries)
    }

    fn write_batch(&mut self, entries: Vec<Bytes>) -> Result<CommittedBatch, LogError> {
        let mut committed = Vec::with_capacity(entries.len());
        for entry in entries {
            let position = self.next_position;
            self.segments
                .push(position, &[&entry], &self.shared.fsync)?;
            committed.push((position, entry));
            self.next_position = position + 1;
        }
        self.segments.write_and_sync(&self.shared.fsync)?;
        Ok(CommittedBatch::new(committed))
    }

    fn publish(&mut self, batch: CommittedBatch) {
        let previous = self
            .shared
            .committed_position
            .swap(batch.last_position(), Ordering::AcqRel);
        assert_eq!(
            batch.first_position(),
            previous + 1,
            "committed positions must follow each other without gaps"
        );
        self.shared
            .entries_committed
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.shared
            .batches_committed
            .fetch_add(1, Ordering::Relaxed);
        if self.apply_loop_gone {
            return;
        }
        if self.committed.blocking_send(batch).is_err() {
            tracing::debug!(
                "the committed-batch receiver is gone; entries stay durable but unpublished"
            );
            self.apply_loop_gone = true;
        }
    }
}

//! The limits of a WAL writer's queue, batches, segments and snapshots, shared by the
//! standalone log and an ensemble member's replica log so that both are tuned and checked
//! alike.

use crate::error::LogError;

const MIB: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalLimits {
    /// A segment is rolled before a record would take it past this size; a single record
    /// larger than this gets a segment of its own.
    pub segment_bytes_max: u64,
    /// Largest entry payload.
    pub entry_bytes_max: usize,
    /// Appends waiting for the writer, counted in entries and in payload bytes.
    pub queue_entries_max: usize,
    pub queue_bytes_max: usize,
    /// One write and one fsync cover at most this much.
    pub batch_entries_max: usize,
    pub batch_bytes_max: usize,
    /// ZooKeeper's autopurge.snapRetainCount (at least [`crate::SNAPSHOTS_RETAINED_MIN`]).
    pub snapshots_retained: usize,
    /// ZooKeeper's `fsync.warningthresholdms`: a sync slower than this is logged as a
    /// warning and counted in [`crate::FsyncTimes::slow_count`].
    pub fsync_warning_threshold_ms: u64,
}

impl Default for WalLimits {
    fn default() -> Self {
        WalLimits {
            segment_bytes_max: 64 * MIB as u64,
            entry_bytes_max: 4 * MIB,
            queue_entries_max: 16 * 1024,
            queue_bytes_max: 64 * MIB,
            batch_entries_max: 1024,
            batch_bytes_max: 8 * MIB,
            snapshots_retained: 3,
            fsync_warning_threshold_ms: crate::FSYNC_WARNING_THRESHOLD_MS_DEFAULT,
        }
    }
}

impl WalLimits {
    /// Checks the limits against each other and against `entry_bytes_format_max`, the largest
    /// entry the caller's record format can frame.
    pub(crate) fn validate(&self, entry_bytes_format_max: usize) -> Result<(), LogError> {
        let positive = [
            ("segment_bytes_max", self.segment_bytes_max as usize),
            ("queue_entries_max", self.queue_entries_max),
            ("batch_entries_max", self.batch_entries_max),
            ("batch_bytes_max", self.batch_bytes_max),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(LogError::InvalidConfig(format!(
                "{name} must be greater than 0"
            )));
        }
        if self.entry_bytes_max > entry_bytes_format_max {
            return Err(LogError::InvalidConfig(format!(
                "entry_bytes_max {} exceeds the record format limit {entry_bytes_format_max}",
                self.entry_bytes_max
            )));
        }
        if self.queue_bytes_max < self.entry_bytes_max {
            return Err(LogError::InvalidConfig(format!(
                "queue_bytes_max {} is below entry_bytes_max {}, so a maximal entry could never be queued",
                self.queue_bytes_max, self.entry_bytes_max
            )));
        }
        Ok(())
    }
}

//! The timing of every fsync and fdatasync a log issues: what its metrics publish, and a
//! warning for each one slower than ZooKeeper's `fsync.warningthresholdms`. Every write waits
//! for a sync, so their times are the first thing an operator looks at when latency rises, and
//! slow syncs are what their alerts count.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::error::LogError;
use crate::Summary;

/// Upper bounds, in microseconds, of the sync duration histogram's buckets (25 µs to 10 s):
/// fine below a millisecond, where a healthy disk's syncs fall.
pub const FSYNC_BUCKET_BOUNDS_US: [u64; 18] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// ZooKeeper's default `fsync.warningthresholdms`.
pub const FSYNC_WARNING_THRESHOLD_MS_DEFAULT: u64 = 1000;

/// What a log's syncs took, read as one value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsyncTimes {
    /// Every sync since the log opened, of segments and of the WAL directory.
    pub count: u64,
    pub total_us: u64,
    /// `bucket_counts[i]` counts syncs in `(FSYNC_BUCKET_BOUNDS_US[i-1],
    /// FSYNC_BUCKET_BOUNDS_US[i]]`; the last slot those above every bound.
    pub bucket_counts: [u64; FSYNC_BUCKET_BOUNDS_US.len() + 1],
    /// Syncs that took longer than the warning threshold, since the log opened.
    pub slow_count: u64,
    /// Since the log opened or `FsyncStats::reset_window` (ZooKeeper's `srst` resets its
    /// `fsynctime` counter).
    pub window_us: Summary,
}

/// The counters every sync of one log updates; shared by its writer thread and its readers.
#[derive(Debug)]
pub(crate) struct FsyncStats {
    warning_threshold_us: u64,
    count: AtomicU64,
    total_us: AtomicU64,
    bucket_counts: [AtomicU64; FSYNC_BUCKET_BOUNDS_US.len() + 1],
    slow_count: AtomicU64,
    window_us: Mutex<Summary>,
}

impl Default for FsyncStats {
    fn default() -> Self {
        FsyncStats::new(FSYNC_WARNING_THRESHOLD_MS_DEFAULT)
    }
}

impl FsyncStats {
    pub fn new(warning_threshold_ms: u64) -> FsyncStats {
        FsyncStats {
            warning_threshold_us: warning_threshold_ms.saturating_mul(1000),
            count: AtomicU64::new(0),
            total_us: AtomicU64::new(0),
            bucket_counts: Default::default(),
            slow_count: AtomicU64::new(0),
            window_us: Mutex::new(Summary::default()),
        }
    }

    /// Runs `sync` (an fsync or fdatasync of `what`) and records how long it took.
    pub fn timed_fsync(
        &self,
        what: &dyn std::fmt::Display,
        sync: impl FnOnce() -> Result<(), LogError>,
    ) -> Result<(), LogError> {
        let started = Instant::now();
        sync()?;
        let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let slow = self.record(took_us);
        if slow {
            tracing::warn!(
                took_ms = format_args!("{:.3}", took_us as f64 / 1e3),
                threshold_ms = self.warning_threshold_us / 1000,
                "syncing {what} took longer than fsync.warningthresholdms; every write waits \
                 for the log's syncs, so this adds to their latency"
            );
        }
        Ok(())
    }

    /// Counts a sync that took `took_us`; whether it was slower than the warning threshold.
    fn record(&self, took_us: u64) -> bool {
        let bucket = FSYNC_BUCKET_BOUNDS_US.partition_point(|&bound| bound < took_us);
        self.bucket_counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.total_us.fetch_add(took_us, Ordering::Relaxed);
        let slow = took_us > self.warning_threshold_us;
        if slow {
            self.slow_count.fetch_add(1, Ordering::Relaxed);
        }
        self.lock_window().record(took_us);
        // Counted last: a reader that sees the count sees the sync's other numbers too.
        self.count.fetch_add(1, Ordering::Release);
        slow
    }

    pub fn reset_window(&self) {
        *self.lock_window() = Summary::default();
    }

    pub fn times(&self) -> FsyncTimes {
        let count = self.count.load(Ordering::Acquire);
        FsyncTimes {
            count,
            total_us: self.total_us.load(Ordering::Relaxed),
            bucket_counts: std::array::from_fn(|i| self.bucket_counts[i].load(Ordering::Relaxed)),
            slow_count: self.slow_count.load(Ordering::Relaxed),
            window_us: *self.lock_window(),
        }
    }

    fn lock_window(&self) -> std::sync::MutexGuard<'_, Summary> {
        self.window_us
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sync_lands_in_its_bucket_and_the_window_resets_alone() {
        let stats = FsyncStats::new(1);
        for took_us in [10, 25, 26, 999, 1_000, 20_000_000] {
            stats.record(took_us);
        }
        let times = stats.times();
        assert_eq!(times.count, 6);
        assert_eq!(times.total_us, 10 + 25 + 26 + 999 + 1_000 + 20_000_000);
        // 10 and 25 in (0, 25]; 26 in (25, 50]; 999 and 1000 in (500, 1000]; 20 s above all.
        assert_eq!(times.bucket_counts[0], 2);
        assert_eq!(times.bucket_counts[1], 1);
        assert_eq!(times.bucket_counts[5], 2);
        assert_eq!(times.bucket_counts[FSYNC_BUCKET_BOUNDS_US.len()], 1);
        assert_eq!(times.bucket_counts.iter().sum::<u64>(), 6);
        assert_eq!(
            times.slow_count, 1,
            "only 20 s exceeds the 1 ms threshold; 1 ms does not"
        );
        assert_eq!((times.window_us.min, times.window_us.max), (10, 20_000_000));
        assert_eq!(times.window_us.count, 6);

        stats.reset_window();
        let reset = stats.times();
        assert_eq!(
            (
                reset.window_us.count,
                reset.window_us.total,
                reset.window_us.min
            ),
            (0, 0, 0)
        );
        assert_eq!(reset.count, 6, "the monotonic counters stay for Prometheus");
        stats.record(300);
        let after = stats.times();
        assert_eq!((after.window_us.min, after.window_us.max), (300, 300));
        assert_eq!(after.window_us.count, 1);
    }

    #[test]
    fn a_failed_sync_is_not_counted() {
        let stats = FsyncStats::default();
        let failed = stats.timed_fsync(&"a file", || {
            Err(LogError::InvalidRequest("refused".into()))
        });
        assert!(failed.is_err());
        assert_eq!(stats.times(), FsyncTimes::default());
    }
}

//! What a durable write costs the disk before any server code runs. Creates wait for
//! fsyncs, and the disks of the hosts this runs on differ by an order of magnitude (17 against
//! 117 µs at the p50 in stored runs), so a run's summary states its disk's floor beside the
//! servers' latencies. Members of an ensemble on one machine share its disk: their syncs of
//! one write contend, and a write is durable on a quorum of three when the second of three
//! syncs started together is done. Some hosts' disks also stall under a sustained load of syncs
//! (10–20 ms about every 100 ms on one), which sets the create tails of both compared servers,
//! so the floor also counts the stalls of three writers that sync freely for a few seconds.

use std::fmt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// One block, rewritten in place: the steady state of a log writing into recycled segments.
const BLOCK_BYTES: usize = 4096;
/// Syncs per measure of the summary's floor: about a second on a slow disk.
const SUMMARY_SYNCS: usize = 2000;
/// How long the summary's writers sync freely: long enough to meet a stall that comes every
/// 100 ms thirty times.
const SUSTAINED_MS: u64 = 3000;
/// The summary's writers that sync freely: the members of a 3-server ensemble.
const SUSTAINED_WRITERS: usize = 3;
/// A sync slower than this is a stall: ten times a typical sync on the slower hosts measured,
/// and about what a one-worker create through an ensemble takes there.
pub const STALL_US: f64 = 2000.0;

/// Overwrites of one already written block, each followed by fdatasync, in microseconds.
pub fn overwrite_syncs(dir: &Path, syncs: usize) -> std::io::Result<Vec<f64>> {
    timed_overwrites(&block_file(dir)?, |done| done < syncs)
}

/// `writers` threads, each overwriting a block of a file of its own and fdatasyncing it again
/// as soon as the last sync returns, for `duration` (and at least once): every sync's
/// microseconds, all writers' together.
pub fn sustained_syncs(
    dir: &Path,
    writers: usize,
    duration: Duration,
) -> std::io::Result<Vec<f64>> {
    let until = Instant::now() + duration;
    let per_writer = on_threads(writers, || {
        timed_overwrites(&block_file(dir)?, |done| {
            done == 0 || Instant::now() < until
        })
    })?;
    Ok(per_writer.concat())
}

/// Runs `work` on `count` threads at once: their results, or the first error.
fn on_threads<T: Send>(
    count: usize,
    work: impl Fn() -> std::io::Result<T> + Sync,
) -> std::io::Result<Vec<T>> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..count).map(|_| scope.spawn(&work)).collect();
        threads
            .into_iter()
            .map(|thread| thread.join().expect("a measuring thread never panics"))
            .collect()
    })
}

/// Overwrites `file`'s first block and fdatasyncs it while `go_on(syncs done so far)` says
/// so: each round's microseconds.
fn timed_overwrites(
    file: &std::fs::File,
    mut go_on: impl FnMut(usize) -> bool,
) -> std::io::Result<Vec<f64>> {
    let block = [1u8; BLOCK_BYTES];
    let mut samples = Vec::new();
    while go_on(samples.len()) {
        let started = Instant::now();
        file.write_all_at(&block, 0)?;
        file.sync_data()?;
        samples.push(started.elapsed().as_secs_f64() * 1e6);
    }
    Ok(samples)
}

/// What a sustained load of syncs met: how many there were, how many took longer than a
/// threshold, and the longest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stalls {
    pub syncs: usize,
    pub over_threshold: usize,
    pub longest_us: f64,
}

impl Stalls {
    pub fn count(samples_us: &[f64], threshold_us: f64) -> Stalls {
        Stalls {
            syncs: samples_us.len(),
            over_threshold: samples_us.iter().filter(|&&us| us > threshold_us).count(),
            longest_us: samples_us.iter().copied().fold(0.0, f64::max),
        }
    }
}

/// Rounds in which `members` threads each overwrite a block of a file of their own and
/// fdatasync it, all starting together: the microseconds until a majority of them is done.
pub fn quorum_syncs(dir: &Path, members: usize, rounds: usize) -> std::io::Result<Vec<f64>> {
    assert!(members > 0, "a quorum of no members");
    let start = Barrier::new(members);
    // Per member, per round: when it started (left the barrier) and when its sync returned.
    let spans = on_threads(members, || member_syncs(dir, &start, rounds))?;
    Ok((0..rounds)
        .map(|round| {
            let round_spans: Vec<(Instant, Instant)> =
                spans.iter().map(|member| member[round]).collect();
            majority_done_us(&round_spans)
        })
        .collect())
}

/// Microseconds from the first start of a round's (start, finish) spans until a majority of
/// them have finished.
fn majority_done_us(spans: &[(Instant, Instant)]) -> f64 {
    let started = spans
        .iter()
        .map(|span| span.0)
        .min()
        .expect("a round has members");
    let mut finished: Vec<Instant> = spans.iter().map(|span| span.1).collect();
    finished.sort();
    (finished[spans.len() / 2] - started).as_secs_f64() * 1e6
}

/// One member's part of [`quorum_syncs`]. A member that fails still meets the others at the
/// barrier every round, so that they do not wait for it forever.
fn member_syncs(
    dir: &Path,
    start: &Barrier,
    rounds: usize,
) -> std::io::Result<Vec<(Instant, Instant)>> {
    let mut file = block_file(dir);
    let block = [1u8; BLOCK_BYTES];
    let mut spans = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        start.wait();
        let started = Instant::now();
        if let Ok(handle) = &file {
            let synced = handle
                .write_all_at(&block, 0)
                .and_then(|()| handle.sync_data());
            if let Err(error) = synced {
                file = Err(error);
            }
        }
        spans.push((started, Instant::now()));
    }
    file.map(|_| spans)
}

/// A temporary file in `dir` whose first block is written and synced.
fn block_file(dir: &Path) -> std::io::Result<std::fs::File> {
    let file = tempfile::tempfile_in(dir)?;
    file.write_all_at(&[1u8; BLOCK_BYTES], 0)?;
    file.sync_all()?;
    Ok(file)
}

/// The disk's floor as a run's summary states it, in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct DiskFloor {
    sync_p50_us: f64,
    sync_p99_us: f64,
    quorum_p50_us: f64,
    quorum_p99_us: f64,
    sustained: Stalls,
}

impl DiskFloor {
    /// Measures it in `dir`, which should be on the disk the servers write.
    pub fn measure(dir: &Path) -> std::io::Result<DiskFloor> {
        let syncs = overwrite_syncs(dir, SUMMARY_SYNCS)?;
        let quorums = quorum_syncs(dir, 3, SUMMARY_SYNCS)?;
        let sustained =
            sustained_syncs(dir, SUSTAINED_WRITERS, Duration::from_millis(SUSTAINED_MS))?;
        Ok(DiskFloor {
            sync_p50_us: percentile(&syncs, 0.5),
            sync_p99_us: percentile(&syncs, 0.99),
            quorum_p50_us: percentile(&quorums, 0.5),
            quorum_p99_us: percentile(&quorums, 0.99),
            sustained: Stalls::count(&sustained, STALL_US),
        })
    }
}

impl fmt::Display for DiskFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a 4 KiB overwrite + fdatasync p50 {:.0} µs / p99 {:.0} µs; the second of three \
             started together (a quorum of three members sharing the disk) p50 {:.0} µs / p99 \
             {:.0} µs; {SUSTAINED_WRITERS} writers syncing freely for {:.0} s: {} syncs, {} over \
             {:.0} ms, the longest {:.1} ms",
            self.sync_p50_us,
            self.sync_p99_us,
            self.quorum_p50_us,
            self.quorum_p99_us,
            SUSTAINED_MS as f64 / 1e3,
            self.sustained.syncs,
            self.sustained.over_threshold,
            STALL_US / 1e3,
            self.sustained.longest_us / 1e3,
        )
    }
}

/// The `quantile` (0 to 1) of `samples`, by the nearest rank.
pub fn percentile(samples: &[f64], quantile: f64) -> f64 {
    assert!(!samples.is_empty(), "a percentile of no samples");
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * quantile).round() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quorum_of_three_waits_for_the_second_sync_from_the_first_start() {
        let origin = Instant::now();
        let at = |us: u64| origin + std::time::Duration::from_micros(us);
        let spans = [(at(5), at(300)), (at(0), at(900)), (at(2), at(200))];
        assert_eq!(majority_done_us(&spans), 300.0);
        let five = [
            (at(0), at(10)),
            (at(0), at(50)),
            (at(0), at(40)),
            (at(0), at(20)),
            (at(0), at(30)),
        ];
        assert_eq!(majority_done_us(&five), 30.0);
    }

    #[test]
    fn every_round_of_real_syncs_is_measured() {
        let dir = tempfile::tempdir().expect("temp dir");
        let quorums = quorum_syncs(dir.path(), 3, 20).expect("syncs");
        assert_eq!(quorums.len(), 20);
    }

    #[test]
    fn stalls_count_the_syncs_over_the_threshold_and_the_longest() {
        let stalls = Stalls::count(&[120.0, 2000.0, 2000.5, 150.0, 17000.0], 2000.0);
        assert_eq!(
            stalls,
            Stalls {
                syncs: 5,
                over_threshold: 2,
                longest_us: 17000.0,
            }
        );
        assert_eq!(Stalls::count(&[], 2000.0).longest_us, 0.0);
    }

    #[test]
    fn sustained_writers_each_sync_until_the_time_is_up() {
        let dir = tempfile::tempdir().expect("temp dir");
        let started = Instant::now();
        let samples = sustained_syncs(dir.path(), 3, Duration::from_millis(100)).expect("syncs");
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(samples.len() >= 3, "each writer syncs at least once");
        assert!(samples.iter().all(|&us| us > 0.0));
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("missing");
        assert!(quorum_syncs(&missing, 3, 5).is_err());
        assert!(sustained_syncs(&missing, 3, Duration::from_millis(10)).is_err());
        assert!(DiskFloor::measure(&missing).is_err());
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let samples: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(percentile(&samples, 0.5), 51.0);
        assert_eq!(percentile(&samples, 0.99), 100.0);
    }
}

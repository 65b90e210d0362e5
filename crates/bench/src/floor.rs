//! What a durable write costs the disk before any server code runs. Creates wait for
//! fsyncs, and the disks of the hosts this runs on differ by an order of magnitude (17 against
//! 117 µs at the p50 in stored runs), so a run's summary states its disk's floor beside the
//! servers' latencies. Members of an ensemble on one machine share its disk: their syncs of
//! one write contend, and a write is durable on a quorum of three when the second of three
//! syncs started together is done.

use std::fmt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Barrier;
use std::time::Instant;

/// One block, rewritten in place: the steady state of a log writing into recycled segments.
const BLOCK_BYTES: usize = 4096;
/// Syncs per measure of the summary's floor: about a second on a slow disk.
const SUMMARY_SYNCS: usize = 2000;

/// Overwrites of one already written block, each followed by fdatasync, in microseconds.
pub fn overwrite_syncs(dir: &Path, syncs: usize) -> std::io::Result<Vec<f64>> {
    let file = block_file(dir)?;
    let block = [1u8; BLOCK_BYTES];
    let mut samples = Vec::with_capacity(syncs);
    for _ in 0..syncs {
        let started = Instant::now();
        file.write_all_at(&block, 0)?;
        file.sync_data()?;
        samples.push(started.elapsed().as_secs_f64() * 1e6);
    }
    Ok(samples)
}

/// Rounds in which `members` threads each overwrite a block of a file of their own and
/// fdatasync it, all starting together: the microseconds until a majority of them is done.
pub fn quorum_syncs(dir: &Path, members: usize, rounds: usize) -> std::io::Result<Vec<f64>> {
    assert!(members > 0, "a quorum of no members");
    let start = Barrier::new(members);
    // Per member, per round: when it started (left the barrier) and when its sync returned.
    let spans: Vec<Vec<(Instant, Instant)>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..members)
            .map(|_| scope.spawn(|| member_syncs(dir, &start, rounds)))
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().expect("a member thread never panics"))
            .collect::<std::io::Result<_>>()
    })?;
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
}

impl DiskFloor {
    /// Measures it in `dir`, which should be on the disk the servers write.
    pub fn measure(dir: &Path) -> std::io::Result<DiskFloor> {
        let syncs = overwrite_syncs(dir, SUMMARY_SYNCS)?;
        let quorums = quorum_syncs(dir, 3, SUMMARY_SYNCS)?;
        Ok(DiskFloor {
            sync_p50_us: percentile(&syncs, 0.5),
            sync_p99_us: percentile(&syncs, 0.99),
            quorum_p50_us: percentile(&quorums, 0.5),
            quorum_p99_us: percentile(&quorums, 0.99),
        })
    }
}

impl fmt::Display for DiskFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a 4 KiB overwrite + fdatasync p50 {:.0} µs / p99 {:.0} µs; the second of three \
             started together (a quorum of three members sharing the disk) p50 {:.0} µs / p99 \
             {:.0} µs",
            self.sync_p50_us, self.sync_p99_us, self.quorum_p50_us, self.quorum_p99_us
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
    fn a_missing_directory_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("missing");
        assert!(quorum_syncs(&missing, 3, 5).is_err());
        assert!(DiskFloor::measure(&missing).is_err());
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let samples: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(percentile(&samples, 0.5), 51.0);
        assert_eq!(percentile(&samples, 0.99), 100.0);
    }
}

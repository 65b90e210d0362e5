//! Latency histograms and the one row every measurement becomes.
//!
//! A run can record millions of latencies, so they go into a fixed-size log-linear histogram
//! (HDR style) instead of a growing list: memory stays bounded whatever the duration, and every
//! percentile is within 1% of the true value.

use std::time::Duration;

/// Sub-buckets per power of two: 2^7 = 128 keeps the relative error of a bucket under 1%.
const SUB_BUCKET_BITS: u32 = 7;
const SUB_BUCKETS: u64 = 1 << SUB_BUCKET_BITS;
/// Latencies are clamped to about 71 minutes, far beyond any bounded benchmark wait.
const LATENCY_US_MAX: u64 = u32::MAX as u64;
const BUCKETS: usize =
    ((64 - LATENCY_US_MAX.leading_zeros() - SUB_BUCKET_BITS + 1) as usize) * SUB_BUCKETS as usize;

/// Counts of latencies in microseconds, exact below 128 µs and within 1% above.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    count: u64,
    sum_us: u128,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum_us: 0,
        }
    }
}

impl LatencyHistogram {
    pub fn record(&mut self, latency: Duration) {
        let latency_us = u64::try_from(latency.as_micros())
            .unwrap_or(LATENCY_US_MAX)
            .min(LATENCY_US_MAX);
        self.counts[bucket_index(latency_us)] += 1;
        self.count += 1;
        self.sum_us += u128::from(latency_us);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean_us(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_us as f64 / self.count as f64)
    }

    /// The smallest recorded value (bucket midpoint) at or below which a `quantile` share of
    /// the values lie; `None` when nothing was recorded.
    pub fn percentile_us(&self, quantile: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((quantile.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bucket_midpoint_us(index));
            }
        }
        unreachable!("the counts add up to self.count")
    }

    pub fn summary(&self) -> LatencySummary {
        let percentile_ms = |quantile| self.percentile_us(quantile).map(microseconds_to_ms);
        LatencySummary {
            mean_ms: self.mean_us().map(|mean_us| mean_us / 1000.0),
            p50_ms: percentile_ms(0.50),
            p99_ms: percentile_ms(0.99),
            p999_ms: percentile_ms(0.999),
            max_ms: percentile_ms(1.0),
        }
    }
}

fn microseconds_to_ms(latency_us: u64) -> f64 {
    latency_us as f64 / 1000.0
}

/// Values below 128 have a bucket each; above, each power of two [2^e, 2^(e+1)) is cut into
/// 128 equal buckets.
fn bucket_index(latency_us: u64) -> usize {
    if latency_us < SUB_BUCKETS {
        return latency_us as usize;
    }
    let exponent = 63 - latency_us.leading_zeros();
    let shift = exponent - SUB_BUCKET_BITS;
    let sub_bucket = (latency_us >> shift) - SUB_BUCKETS;
    ((shift as u64 + 1) * SUB_BUCKETS + sub_bucket) as usize
}

fn bucket_midpoint_us(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return index;
    }
    let shift = index / SUB_BUCKETS - 1;
    let low = (SUB_BUCKETS + index % SUB_BUCKETS) << shift;
    let width = 1u64 << shift;
    low + (width - 1) / 2
}

/// Latency percentiles in milliseconds; `None` when nothing was measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// The workloads, named as on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// Figure 5 of the ZooKeeper paper: saturated throughput by read ratio.
    Throughput,
    /// Table 2: synchronous creates, asynchronous deletes.
    Creates,
    /// Table 3: double barriers in lock-step.
    Barrier,
    /// Table 1 of the shared-log paper: barrier, lock, queue and query latency.
    Recipes,
    /// An ensemble only: the time from kill -9 of the leader to the first successful write.
    LeaderKill,
}

impl Workload {
    /// What `--workload all` runs: every workload that needs no ensemble.
    pub const ALL: [Workload; 4] = [
        Workload::Throughput,
        Workload::Creates,
        Workload::Barrier,
        Workload::Recipes,
    ];
    /// Every workload, in report order.
    pub const EVERY: [Workload; 5] = [
        Workload::Throughput,
        Workload::Creates,
        Workload::Barrier,
        Workload::Recipes,
        Workload::LeaderKill,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Throughput => "throughput",
            Workload::Creates => "creates",
            Workload::Barrier => "barrier",
            Workload::Recipes => "recipes",
            Workload::LeaderKill => "leader-kill",
        }
    }

    /// What one counted operation of the workload is, for table headers.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Throughput => "ops",
            Workload::Creates => "creates",
            Workload::Barrier => "barriers",
            Workload::Recipes => "recipe ops",
            Workload::LeaderKill => "trials",
        }
    }

    pub fn parse(name: &str) -> Option<Workload> {
        Workload::EVERY
            .into_iter()
            .find(|workload| workload.name() == name)
    }
}

/// One point of one workload against one server: a row of the CSV files and the tables.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// Which server list: "zoolog", "apache", or "target" for `--servers`.
    pub server: String,
    /// Which of the `--rounds` measured it, from 1; 0 for a row that combines all of them.
    pub round: usize,
    pub workload: Workload,
    /// The point's parameter as text, e.g. `read_ratio=0.3`, `workers=10`, `lock`.
    pub point: String,
    /// The point's parameter as a number for plots (read ratio, workers, clients), or the
    /// recipe's index.
    pub x: f64,
    /// Completed units of the workload (see [`Workload::unit`]) inside the measured window.
    pub operations: u64,
    /// Calls that failed (connection loss, unexpected server errors).
    pub errors: u64,
    pub elapsed_s: f64,
    pub latency: LatencySummary,
    /// False when Ctrl-C cut the point short.
    pub complete: bool,
}

impl Measurement {
    pub fn rate_per_s(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.operations as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    fn is_same_point(&self, other: &Measurement) -> bool {
        self.server == other.server && self.workload == other.workload && self.point == other.point
    }
}

/// One row per server, workload and point, in the order they were first measured: the rounds
/// of `results` combined. The rate pools the rounds' operations over their measured time. Each
/// latency percentile, and the mean, is the median of the rounds' values, so that no single
/// round (a machine that was slow for a minute) decides a point; the maximum is the largest.
pub fn combine_rounds(results: &[Measurement]) -> Vec<Measurement> {
    let mut combined: Vec<Measurement> = Vec::new();
    for row in results {
        if combined.iter().any(|done| done.is_same_point(row)) {
            continue;
        }
        let rounds: Vec<&Measurement> = results
            .iter()
            .filter(|other| other.is_same_point(row))
            .collect();
        combined.push(combine(row, &rounds));
    }
    combined
}

fn combine(first: &Measurement, rounds: &[&Measurement]) -> Measurement {
    let median_of = |read: fn(&LatencySummary) -> Option<f64>| {
        median(rounds.iter().filter_map(|row| read(&row.latency)).collect())
    };
    Measurement {
        server: first.server.clone(),
        round: 0,
        workload: first.workload,
        point: first.point.clone(),
        x: first.x,
        operations: rounds.iter().map(|row| row.operations).sum(),
        errors: rounds.iter().map(|row| row.errors).sum(),
        elapsed_s: rounds.iter().map(|row| row.elapsed_s).sum(),
        latency: LatencySummary {
            mean_ms: median_of(|latency| latency.mean_ms),
            p50_ms: median_of(|latency| latency.p50_ms),
            p99_ms: median_of(|latency| latency.p99_ms),
            p999_ms: median_of(|latency| latency.p999_ms),
            max_ms: rounds
                .iter()
                .filter_map(|row| row.latency.max_ms)
                .reduce(f64::max),
        },
        complete: rounds.iter().all(|row| row.complete),
    }
}

/// The middle value, or the mean of the two middle values; `None` for no values.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        count if count % 2 == 1 => Some(values[middle]),
        _ => Some((values[middle - 1] + values[middle]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram_of(latencies_us: impl IntoIterator<Item = u64>) -> LatencyHistogram {
        let mut histogram = LatencyHistogram::default();
        for latency_us in latencies_us {
            histogram.record(Duration::from_micros(latency_us));
        }
        histogram
    }

    fn assert_within_one_percent(actual: u64, expected: u64) {
        let error = (actual as f64 - expected as f64).abs() / expected as f64;
        assert!(error <= 0.01, "{actual} is not within 1% of {expected}");
    }

    #[test]
    fn empty_histogram_has_no_percentiles() {
        let histogram = LatencyHistogram::default();
        assert_eq!(histogram.percentile_us(0.5), None);
        assert_eq!(histogram.summary(), LatencySummary::default());
    }

    #[test]
    fn small_values_are_exact() {
        let histogram = histogram_of(1..=100);
        assert_eq!(histogram.percentile_us(0.0), Some(1));
        assert_eq!(histogram.percentile_us(0.5), Some(50));
        assert_eq!(histogram.percentile_us(0.99), Some(99));
        assert_eq!(histogram.percentile_us(1.0), Some(100));
        assert_eq!(histogram.mean_us(), Some(50.5));
    }

    #[test]
    fn large_values_are_within_one_percent() {
        let histogram = histogram_of((1..=100_000).map(|i| i * 10));
        assert_within_one_percent(histogram.percentile_us(0.5).unwrap(), 500_000);
        assert_within_one_percent(histogram.percentile_us(0.99).unwrap(), 990_000);
        assert_within_one_percent(histogram.percentile_us(0.999).unwrap(), 999_000);
    }

    #[test]
    fn every_bucket_midpoint_maps_back_to_its_bucket() {
        for index in 0..BUCKETS {
            assert_eq!(bucket_index(bucket_midpoint_us(index)), index);
        }
    }

    #[test]
    fn one_slow_outlier_shows_only_in_the_tail() {
        let histogram = histogram_of((0..999).map(|_| 1_000).chain([1_000_000]));
        assert_within_one_percent(histogram.percentile_us(0.5).unwrap(), 1_000);
        assert_within_one_percent(histogram.percentile_us(0.99).unwrap(), 1_000);
        assert_within_one_percent(histogram.percentile_us(1.0).unwrap(), 1_000_000);
    }

    #[test]
    fn huge_latencies_are_clamped_not_lost() {
        let mut histogram = LatencyHistogram::default();
        histogram.record(Duration::from_secs(1_000_000));
        assert_eq!(histogram.count(), 1);
        assert!(histogram.percentile_us(1.0).unwrap() <= LATENCY_US_MAX);
    }

    #[test]
    fn summary_is_in_milliseconds() {
        let summary = histogram_of([2_000, 2_000, 2_000]).summary();
        assert_within_one_percent((summary.p50_ms.unwrap() * 1000.0) as u64, 2_000);
        assert_eq!(summary.mean_ms, Some(2.0));
    }

    #[test]
    fn rate_is_operations_per_second() {
        let measurement = Measurement {
            server: "zoolog".into(),
            round: 1,
            workload: Workload::Creates,
            point: "workers=1".into(),
            x: 1.0,
            operations: 500,
            errors: 0,
            elapsed_s: 2.0,
            latency: LatencySummary::default(),
            complete: true,
        };
        assert_eq!(measurement.rate_per_s(), 250.0);
    }

    fn round_of(round: usize, operations: u64, p99_ms: f64, max_ms: f64) -> Measurement {
        Measurement {
            server: "zoolog".into(),
            round,
            workload: Workload::Creates,
            point: "workers=1".into(),
            x: 1.0,
            operations,
            errors: 1,
            elapsed_s: 10.0,
            latency: LatencySummary {
                p99_ms: Some(p99_ms),
                max_ms: Some(max_ms),
                ..LatencySummary::default()
            },
            complete: true,
        }
    }

    #[test]
    fn rounds_combine_into_one_row_per_point() {
        let mut other_point = round_of(1, 7, 7.0, 7.0);
        other_point.point = "workers=10".into();
        let results = [
            round_of(1, 1000, 0.2, 3.0),
            other_point,
            round_of(2, 2000, 0.9, 9.0),
            round_of(3, 3000, 0.3, 4.0),
        ];
        let combined = combine_rounds(&results);
        assert_eq!(combined.len(), 2);
        let first = &combined[0];
        assert_eq!((first.round, first.point.as_str()), (0, "workers=1"));
        assert_eq!(first.rate_per_s(), 200.0, "6000 operations in 30 s");
        assert_eq!(first.errors, 3);
        assert_eq!(
            first.latency.p99_ms,
            Some(0.3),
            "the slow round is not the median"
        );
        assert_eq!(first.latency.max_ms, Some(9.0));
        assert_eq!(first.latency.p50_ms, None);
        assert_eq!(combined[1].latency.p99_ms, Some(7.0));
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn workload_names_round_trip() {
        for workload in Workload::EVERY {
            assert_eq!(Workload::parse(workload.name()), Some(workload));
        }
        assert_eq!(Workload::parse("nope"), None);
    }
}

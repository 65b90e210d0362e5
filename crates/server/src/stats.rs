//! Counters the four-letter words and metrics report.

use std::collections::VecDeque;
use std::time::Instant;

use zoolog_log::ReadTimes;
pub use zoolog_log::Summary;
use zoolog_proto::OpCode;

/// Server-wide request counters and latency; `srst` starts them all over.
#[derive(Debug, Default, Clone)]
pub struct ServerStats {
    pub packets_received: u64,
    pub packets_sent: u64,
    /// The client packets received, their 4-byte length prefixes included (ZooKeeper's
    /// `bytes_received_count`).
    pub bytes_received: u64,
    /// Replies and watch notifications sent to clients, without their length prefix
    /// (ZooKeeper's `*_client_response_size`; it leaves out the session handshake's answer).
    pub client_response_sizes: BufferSizes,
    /// Session handshakes (ConnectRequests) received.
    pub connect_requests: u64,
    /// Client connections closed as they opened, for the `maxClientCnxns` or `maxCnxns` limit.
    pub connections_rejected: u64,
    /// What this member's leader changes did to its clients (ensemble only); see
    /// [`LeaderChanges`].
    pub leader_changes: LeaderChanges,
    /// Every reply, in milliseconds (`srvr`'s min/avg/max, mntr's `*_latency`).
    pub latency_ms: Summary,
    /// Requests answered from the tree as it is (no log entry), from arrival to reply.
    pub read_latency_us: PercentileSummary,
    /// Requests ordered through the log, from arrival to reply.
    pub update_latency_us: PercentileSummary,
    /// Snapshots: encoding the tree and writing it durably.
    pub snapshot_time_us: Summary,
    /// What this start's recovery took, recorded once (ZooKeeper's `dbinittime` and
    /// `startup_*` summaries, which `srst` clears too); see [`Startup`].
    pub db_init_time_us: Summary,
    pub startup_snapshot_load_time_us: Summary,
    pub startup_log_load_time_us: Summary,
    pub startup_log_entries: Summary,
}

/// What a member's leader changes did to its clients' requests (see
/// `Core::role_changed`): zoolog's own counters, as ZooKeeper keeps no clients through one.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LeaderChanges {
    /// Writes, syncs and closes that came while the member had no leader, held until it had.
    pub requests_held: u64,
    /// Writes that a leader change lost, appended again once the member served again.
    pub writes_appended_again: u64,
    /// Kept clients dropped: still without a leader a tick after losing it.
    pub clients_dropped: u64,
}

impl LeaderChanges {
    /// Each count's name (mntr's without `zk_`, as in /metrics), what it counts, and its value:
    /// one list for both outputs.
    pub fn counts(&self) -> [(&'static str, &'static str, u64); 3] {
        [
            (
                "leader_change_requests_held",
                "Writes, syncs and closes that came while this member had no leader, held \
                 until it had one, since start or srst.",
                self.requests_held,
            ),
            (
                "leader_change_writes_appended_again",
                "Writes a leader change lost, appended again once this member served again, \
                 since start or srst.",
                self.writes_appended_again,
            ),
            (
                "leader_change_clients_dropped",
                "Clients kept through a leader change and then dropped (no leader within a \
                 tick), since start or srst.",
                self.clients_dropped,
            ),
        ]
    }
}

/// ZooKeeper's BufferStats: the size in bytes of the last, smallest and largest of some
/// buffers, each -1 until there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSizes {
    pub last_bytes: i64,
    pub min_bytes: i64,
    pub max_bytes: i64,
}

impl Default for BufferSizes {
    fn default() -> BufferSizes {
        BufferSizes {
            last_bytes: -1,
            min_bytes: -1,
            max_bytes: -1,
        }
    }
}

impl BufferSizes {
    pub fn record(&mut self, bytes: i64) {
        assert!(bytes >= 0, "a size is never negative");
        self.last_bytes = bytes;
        if self.min_bytes < 0 || bytes < self.min_bytes {
            self.min_bytes = bytes;
        }
        self.max_bytes = self.max_bytes.max(bytes);
    }
}

/// Values a [`PercentileSummary`] keeps to estimate its percentiles from, at most: ZooKeeper's
/// reservoir size.
const PERCENTILE_SAMPLES_MAX: usize = 4096;

/// ZooKeeper's AvgMinMaxPercentileCounter: a [`Summary`], and percentiles estimated from a
/// uniform random sample of the values (reservoir sampling), so that memory stays bounded
/// however many values come. The sampling's random numbers come from a fixed seed: the core
/// must behave alike in every run of the simulator.
#[derive(Debug, Clone)]
pub struct PercentileSummary {
    pub summary: Summary,
    sample: Vec<u64>,
    samples_max: usize,
    random_state: u64,
}

impl Default for PercentileSummary {
    fn default() -> Self {
        PercentileSummary::with_samples_max(PERCENTILE_SAMPLES_MAX)
    }
}

impl PercentileSummary {
    fn with_samples_max(samples_max: usize) -> Self {
        assert!(samples_max > 0, "a sample holds at least one value");
        PercentileSummary {
            summary: Summary::default(),
            sample: Vec::new(),
            samples_max,
            random_state: 0x9e37_79b9_7f4a_7c15,
        }
    }

    pub fn record(&mut self, value: u64) {
        self.summary.record(value);
        if self.sample.len() < self.samples_max {
            self.sample.push(value);
            return;
        }
        // Algorithm R: the n-th value replaces a random sampled one with probability max/n.
        let slot = self.next_random() % self.summary.count;
        if let Some(sampled) = self.sample.get_mut(slot as usize) {
            *sampled = value;
        }
    }

    /// The values at `fractions` (0.5 for the median) of the sampled values, by nearest rank;
    /// 0 before any value.
    pub fn percentiles<const N: usize>(&self, fractions: [f64; N]) -> [u64; N] {
        let unweighted = self.sample.iter().map(|&value| (value, 1.0)).collect();
        nearest_ranks(unweighted, fractions).unwrap_or([0; N])
    }

    /// xorshift64*: plenty for picking sample slots.
    fn next_random(&mut self) -> u64 {
        let mut x = self.random_state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random_state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// How far back the quantiles of the Prometheus summaries look: the Prometheus clients'
/// default (`maxAgeSeconds`, ten minutes), which ZooKeeper's provider keeps.
const QUANTILE_WINDOW_MS: u64 = 600_000;
/// The window moves on in steps of a fifth of it (the clients' `ageBuckets`).
const QUANTILE_WINDOW_PERIODS: u64 = 5;
/// Values each period keeps: the window's periods together sample about as many values as one
/// [`PercentileSummary`], so that a scrape sorts no more than that.
const PERIOD_SAMPLES_MAX: usize = PERCENTILE_SAMPLES_MAX / QUANTILE_WINDOW_PERIODS as usize;

/// A Prometheus summary's values: the sum and count of every value, and percentiles of the
/// last ten minutes only (`QUANTILE_WINDOW_MS`; between four fifths of that and all of it), so
/// that a server that has run for months still shows its last minutes' latency in its
/// quantiles. Each period of the window keeps a uniform sample of its own values; a
/// percentile weighs each sampled value by the number of values it stands for, so a busy
/// period counts for more than a quiet one, as its values do.
#[derive(Debug, Clone, Default)]
pub struct WindowedPercentiles {
    pub summary: Summary,
    /// The periods of the window that have values, oldest first, by number
    /// (milliseconds / period length).
    periods: VecDeque<(u64, PercentileSummary)>,
}

impl WindowedPercentiles {
    pub fn record(&mut self, value: u64, now_ms: u64) {
        self.summary.record(value);
        let current = period_number(now_ms);
        if self
            .periods
            .back()
            .is_none_or(|(newest, _)| *newest < current)
        {
            let values = PercentileSummary::with_samples_max(PERIOD_SAMPLES_MAX);
            self.periods.push_back((current, values));
        }
        while self
            .periods
            .front()
            .is_some_and(|(oldest, _)| !in_window(*oldest, current))
        {
            self.periods.pop_front();
        }
        let (_, values) = self
            .periods
            .back_mut()
            .expect("the current period is there");
        values.record(value);
    }

    /// The values at `fractions` (0.5 for the median) of the window's values at `now_ms`, by
    /// nearest rank over the weighted samples; `None` without a value in the window.
    pub fn percentiles<const N: usize>(
        &self,
        fractions: [f64; N],
        now_ms: u64,
    ) -> Option<[u64; N]> {
        let current = period_number(now_ms);
        let weighted = self
            .periods
            .iter()
            .filter(|(period, _)| in_window(*period, current))
            .flat_map(|(_, values)| {
                let weight = values.summary.count as f64 / values.sample.len() as f64;
                values.sample.iter().map(move |&value| (value, weight))
            })
            .collect();
        nearest_ranks(weighted, fractions)
    }
}

/// The values at `fractions` of `weighted` values (each standing for `weight` values), by
/// nearest rank: the smallest value at or below which lies at least that fraction of the
/// weight. `None` without a value.
fn nearest_ranks<const N: usize>(
    mut weighted: Vec<(u64, f64)>,
    fractions: [f64; N],
) -> Option<[u64; N]> {
    weighted.sort_unstable_by_key(|(value, _)| *value);
    let weight_total: f64 = weighted.iter().map(|(_, weight)| weight).sum();
    let &(largest, _) = weighted.last()?;
    Some(fractions.map(|fraction| {
        assert!((0.0..=1.0).contains(&fraction), "a fraction: {fraction}");
        let rank = fraction * weight_total;
        let mut at_or_below = 0.0;
        weighted
            .iter()
            .find(|(_, weight)| {
                at_or_below += weight;
                at_or_below >= rank
            })
            // Rounding can leave the running sum a hair under the total.
            .map_or(largest, |(value, _)| *value)
    }))
}

fn period_number(now_ms: u64) -> u64 {
    now_ms / (QUANTILE_WINDOW_MS / QUANTILE_WINDOW_PERIODS)
}

/// Whether `period` is one of the window's when `current` is the newest.
fn in_window(period: u64, current: u64) -> bool {
    period + QUANTILE_WINDOW_PERIODS > current
}

/// What start-up recovery did before the server took its first client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Startup {
    /// The whole load: opening the log (its files read) and rebuilding the tree, ZooKeeper's
    /// `dbinittime`.
    pub total_us: u64,
    /// Reading and decoding the snapshot; `None` without one.
    pub snapshot_load_us: Option<u64>,
    /// The log's entries after the snapshot; `None` when it held none (a first start).
    pub log_load: Option<LogLoad>,
}

/// The log's entries after the snapshot, loaded at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLoad {
    pub entries: u64,
    /// Reading them, and on a standalone server applying them to the tree. An ensemble member
    /// applies its logged entries only once its leader has confirmed them, after start-up.
    pub took_us: u64,
}

impl Startup {
    /// Adds the time the logged entries took to apply.
    pub fn add_replay(&mut self, replay_us: u64) {
        self.total_us += replay_us;
        if let Some(log_load) = &mut self.log_load {
            log_load.took_us += replay_us;
        }
    }
}

impl ServerStats {
    pub fn record_startup(&mut self, startup: Startup) {
        self.db_init_time_us.record(startup.total_us);
        if let Some(load_us) = startup.snapshot_load_us {
            self.startup_snapshot_load_time_us.record(load_us);
        }
        if let Some(log_load) = startup.log_load {
            self.startup_log_entries.record(log_load.entries);
            self.startup_log_load_time_us.record(log_load.took_us);
        }
    }
}

/// What opening either log found, for the start-up metrics.
#[derive(Debug, Clone, Copy)]
pub struct LogOpened {
    /// The whole opening, its reads included.
    pub took_us: u64,
    pub read_times: ReadTimes,
    /// Logged entries after the snapshot.
    pub entries: u64,
}

pub fn elapsed_us(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

/// Per-connection counters for `cons` and `stat`.
#[derive(Debug, Clone)]
pub struct ConnectionStats {
    pub established_wall_ms: i64,
    pub received: u64,
    pub sent: u64,
    pub last_opcode: Option<OpCode>,
    pub last_cxid: i32,
    pub last_zxid: i64,
    pub last_request_ms: u64,
    pub last_response_ms: u64,
    pub last_latency_ms: u64,
    pub latency_ms: Summary,
}

impl ConnectionStats {
    pub fn new(monotonic_ms: u64, wall_ms: i64) -> Self {
        ConnectionStats {
            established_wall_ms: wall_ms,
            received: 0,
            sent: 0,
            last_opcode: None,
            last_cxid: 0,
            last_zxid: 0,
            last_request_ms: monotonic_ms,
            last_response_ms: 0,
            last_latency_ms: 0,
            latency_ms: Summary::default(),
        }
    }

    pub fn on_request(&mut self, xid: i32, opcode: OpCode, now_ms: u64) {
        self.received += 1;
        self.last_opcode = Some(opcode);
        if xid > 0 {
            self.last_cxid = xid;
        }
        self.last_request_ms = now_ms;
    }

    /// `crst`: as ZooKeeper's `ServerCnxn.resetStats`, the session fields stay and the last
    /// cxid and zxid read -1 until the next request.
    pub fn reset(&mut self) {
        *self = ConnectionStats {
            last_cxid: -1,
            last_zxid: -1,
            last_request_ms: self.last_request_ms,
            ..ConnectionStats::new(0, self.established_wall_ms)
        };
    }

    pub fn on_reply(&mut self, zxid: i64, now_ms: u64) {
        self.last_zxid = zxid;
        self.last_response_ms = now_ms;
        self.last_latency_ms = now_ms.saturating_sub(self.last_request_ms);
        self.latency_ms.record(self.last_latency_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_exact_while_every_value_is_kept_and_close_once_sampled() {
        let mut few = PercentileSummary::default();
        assert_eq!(few.percentiles([0.5]), [0], "no value yet");
        for value in (1..=100).rev() {
            few.record(value);
        }
        assert_eq!(few.percentiles([0.5, 0.95, 0.99, 0.999]), [50, 95, 99, 100]);

        let mut many = PercentileSummary::default();
        for value in 1..=100_000 {
            many.record(value);
        }
        assert_eq!(many.summary.count, 100_000);
        assert_eq!(many.sample.len(), PERCENTILE_SAMPLES_MAX);
        let estimates = many.percentiles([0.5, 0.95, 0.99]);
        for (estimate, exact) in estimates.into_iter().zip([50_000.0, 95_000.0, 99_000.0]) {
            let estimate = estimate as f64;
            // A uniform sample of 4096 puts the median within about 1.6% of the values'
            // range with 95% confidence; 3% leaves the fixed seed room.
            assert!(
                (estimate - exact).abs() < 3_000.0,
                "{estimate} against {exact}"
            );
        }
    }

    #[test]
    fn windowed_percentiles_forget_values_older_than_the_window() {
        let mut times = WindowedPercentiles::default();
        // A slow first hour, then ten fast minutes.
        for second in 0..3_600 {
            times.record(50_000, second * 1_000);
        }
        let fast_from_ms = 3_600_000;
        for second in 0..600 {
            times.record(1_000, fast_from_ms + second * 1_000);
        }
        let now_ms = fast_from_ms + 600_000;
        assert_eq!(times.percentiles([0.5, 0.99], now_ms), Some([1_000, 1_000]));
        assert_eq!(
            times.summary.count, 4_200,
            "the sum and count keep every value"
        );
        assert_eq!(
            times.percentiles([0.5], now_ms + QUANTILE_WINDOW_MS),
            None,
            "a window without values has no percentiles"
        );
    }

    #[test]
    fn windowed_percentiles_move_as_the_window_does() {
        let mut times = WindowedPercentiles::default();
        let period_ms = QUANTILE_WINDOW_MS / QUANTILE_WINDOW_PERIODS;
        times.record(7, 0);
        times.record(9, period_ms);
        assert_eq!(times.percentiles([0.0, 1.0], period_ms), Some([7, 9]));
        // The first period is the oldest of the window until the window has moved past it.
        let last_with_first_ms = QUANTILE_WINDOW_MS - 1;
        assert_eq!(times.percentiles([0.0], last_with_first_ms), Some([7]));
        assert_eq!(times.percentiles([0.0], QUANTILE_WINDOW_MS), Some([9]));
    }

    #[test]
    fn a_busy_period_weighs_more_than_a_quiet_one_though_both_keep_samples_of_one_size() {
        let mut times = WindowedPercentiles::default();
        let period_ms = QUANTILE_WINDOW_MS / QUANTILE_WINDOW_PERIODS;
        // 100,000 fast values in one period, then 1,000 slow ones in the next: each period
        // keeps the same number of samples, but the slow values are about 1% of all.
        for index in 0..100_000 {
            times.record(1_000, index % period_ms);
        }
        for index in 0..1_000 {
            times.record(50_000, period_ms + index);
        }
        let now_ms = 2 * period_ms;
        assert_eq!(
            times.percentiles([0.5, 0.95, 0.995], now_ms),
            Some([1_000, 1_000, 50_000])
        );
    }

    #[test]
    fn a_start_records_each_part_it_had_once_and_the_replay_counts_in_the_log_load() {
        let mut first_start = Startup {
            total_us: 500,
            snapshot_load_us: None,
            log_load: None,
        };
        first_start.add_replay(7);
        let mut stats = ServerStats::default();
        stats.record_startup(first_start);
        assert_eq!(
            (stats.db_init_time_us.count, stats.db_init_time_us.total),
            (1, 507)
        );
        assert_eq!(stats.startup_snapshot_load_time_us.count, 0);
        assert_eq!(stats.startup_log_entries.count, 0);

        let mut restart = Startup {
            total_us: 3_000,
            snapshot_load_us: Some(1_000),
            log_load: Some(LogLoad {
                entries: 40,
                took_us: 200,
            }),
        };
        restart.add_replay(800);
        let mut stats = ServerStats::default();
        stats.record_startup(restart);
        assert_eq!(stats.db_init_time_us.total, 3_800);
        assert_eq!(stats.startup_snapshot_load_time_us.total, 1_000);
        assert_eq!(stats.startup_log_entries.total, 40);
        assert_eq!(stats.startup_log_load_time_us.total, 1_000);
    }
}

//! Counters the four-letter words and metrics report.

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
    random_state: u64,
}

impl Default for PercentileSummary {
    fn default() -> Self {
        PercentileSummary {
            summary: Summary::default(),
            sample: Vec::new(),
            random_state: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

impl PercentileSummary {
    pub fn record(&mut self, value: u64) {
        self.summary.record(value);
        if self.sample.len() < PERCENTILE_SAMPLES_MAX {
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
        let mut sorted = self.sample.clone();
        sorted.sort_unstable();
        fractions.map(|fraction| {
            assert!((0.0..=1.0).contains(&fraction), "a fraction: {fraction}");
            let rank = (fraction * sorted.len() as f64).ceil() as usize;
            sorted.get(rank.saturating_sub(1)).copied().unwrap_or(0)
        })
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

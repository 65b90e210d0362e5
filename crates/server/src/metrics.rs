//! The server's Prometheus metrics: a small registry of fixed-bucket histograms the core task
//! records into (plain integer adds, no locks: one task owns them), and the text exposition
//! format 0.0.4 it is scraped in.
//!
//! Names: what Apache ZooKeeper's PrometheusMetricsProvider exports keeps ZooKeeper's name
//! (`znode_count`, `num_alive_connections`, …, no `zk_` prefix), so existing dashboards and alert
//! rules work. What zoolog adds is prefixed `zoolog_` and follows Prometheus conventions
//! (seconds, bytes, `_total` counters). Like ZooKeeper's provider, `srst` does not reset what is
//! exported here except the mntr gauges it shares with `srvr` (packets, min/avg/max latency):
//! Prometheus computes rates from monotonic counters and histograms.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use zoolog_log::{FsyncTimes, FSYNC_BUCKET_BOUNDS_US};
use zoolog_proto::OpCode;

use crate::core::Role;
use crate::four_letter::View;
use crate::stats::{Startup, WindowedPercentiles};

/// Upper bounds, in microseconds, of request latency buckets (100 µs to 10 s); the log's
/// sync buckets are its own ([`FSYNC_BUCKET_BOUNDS_US`]).
const LATENCY_BOUNDS_US: &[u64] = &[
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Upper bounds, in microseconds, of snapshot duration buckets (10 ms to 2 min).
const SNAPSHOT_BOUNDS_US: &[u64] = &[
    10_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    120_000_000,
];

/// Observations counted into fixed buckets; `counts[i]` holds those in
/// `(bounds[i-1], bounds[i]]`, the last slot those above every bound.
#[derive(Debug, Clone)]
pub struct Histogram {
    bounds_us: &'static [u64],
    counts: Vec<u64>,
    sum_us: u64,
    count: u64,
}

impl Histogram {
    pub fn new(bounds_us: &'static [u64]) -> Histogram {
        debug_assert!(bounds_us.windows(2).all(|w| w[0] < w[1]), "bounds ascend");
        Histogram {
            bounds_us,
            counts: vec![0; bounds_us.len() + 1],
            sum_us: 0,
            count: 0,
        }
    }

    pub fn record(&mut self, value_us: u64) {
        // Prometheus buckets are inclusive: a value equal to a bound falls in that bound's bucket.
        let bucket = self.bounds_us.partition_point(|&bound| bound < value_us);
        self.counts[bucket] += 1;
        self.sum_us = self.sum_us.saturating_add(value_us);
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The log's sync times, every sync counted where the log timed it.
    fn of_fsyncs(fsync: &FsyncTimes) -> Histogram {
        Histogram {
            bounds_us: &FSYNC_BUCKET_BOUNDS_US,
            counts: fsync.bucket_counts.to_vec(),
            sum_us: fsync.total_us,
            count: fsync.count,
        }
    }
}

/// Whether a request was answered from the tree as it is or ordered through the log:
/// ZooKeeper's `readlatency` and `updatelatency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestPath {
    Read,
    Update,
}

/// What the core and its driver record between scrapes. Unlike the four-letter words'
/// statistics, `srst` leaves it.
#[derive(Debug, Clone)]
pub struct Metrics {
    request_latency: BTreeMap<&'static str, Histogram>,
    read_latency_us: WindowedPercentiles,
    update_latency_us: WindowedPercentiles,
    /// Client packets' bytes, prefixes included (ZooKeeper's `bytes_received_count`).
    bytes_received: u64,
    snapshot_duration: Histogram,
    last_snapshot: Option<SnapshotRecord>,
    startup: Option<Startup>,
}

/// The newest snapshot this process wrote or recovered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotRecord {
    pub zxid: i64,
    pub size_bytes: u64,
    /// When it was written, in seconds since the epoch (ZooKeeper's `lsnp` unit).
    pub written_s: i64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            request_latency: BTreeMap::new(),
            read_latency_us: WindowedPercentiles::default(),
            update_latency_us: WindowedPercentiles::default(),
            bytes_received: 0,
            snapshot_duration: Histogram::new(SNAPSHOT_BOUNDS_US),
            last_snapshot: None,
            startup: None,
        }
    }
}

impl Metrics {
    /// One answered request: the time from its arrival at the core to its reply, which came
    /// at `now_ms` on the monotonic clock.
    pub fn record_request(
        &mut self,
        opcode: OpCode,
        path: RequestPath,
        latency_us: u64,
        now_ms: u64,
    ) {
        self.request_latency
            .entry(operation_label(opcode))
            .or_insert_with(|| Histogram::new(LATENCY_BOUNDS_US))
            .record(latency_us);
        let times_us = match path {
            RequestPath::Read => &mut self.read_latency_us,
            RequestPath::Update => &mut self.update_latency_us,
        };
        times_us.record(latency_us, now_ms);
    }

    pub fn record_packet(&mut self, frame_bytes: usize) {
        self.bytes_received += frame_bytes as u64;
    }

    pub fn record_snapshot(&mut self, snapshot: SnapshotRecord, duration_us: u64) {
        self.snapshot_duration.record(duration_us);
        self.last_snapshot = Some(snapshot);
    }

    /// A snapshot found at startup: known, but its writing was not timed by this process.
    pub fn recovered_snapshot(&mut self, snapshot: SnapshotRecord) {
        self.last_snapshot = Some(snapshot);
    }

    pub fn last_snapshot(&self) -> Option<SnapshotRecord> {
        self.last_snapshot
    }

    pub fn record_startup(&mut self, startup: Startup) {
        self.startup = Some(startup);
    }
}

/// ZooKeeper's name of an operation (`Request.op2String`), the `op` label of latencies.
pub fn operation_label(opcode: OpCode) -> &'static str {
    match opcode {
        OpCode::Notification => "notification",
        OpCode::Create => "create",
        OpCode::Delete => "delete",
        OpCode::Exists => "exists",
        OpCode::GetData => "getData",
        OpCode::SetData => "setData",
        OpCode::GetAcl => "getACL",
        OpCode::SetAcl => "setACL",
        OpCode::GetChildren => "getChildren",
        OpCode::Sync => "sync",
        OpCode::Ping => "ping",
        OpCode::GetChildren2 => "getChildren2",
        OpCode::Check => "check",
        OpCode::Multi => "multi",
        OpCode::Create2 => "create2",
        OpCode::Reconfig => "reconfig",
        OpCode::CheckWatches => "checkWatches",
        OpCode::RemoveWatches => "removeWatches",
        OpCode::CreateContainer => "createContainer",
        OpCode::DeleteContainer => "deleteContainer",
        OpCode::CreateTtl => "createTtl",
        OpCode::MultiRead => "multiRead",
        OpCode::Auth => "auth",
        OpCode::SetWatches => "setWatches",
        OpCode::Sasl => "sasl",
        OpCode::GetEphemerals => "getEphemerals",
        OpCode::GetAllChildrenNumber => "getAllChildrenNumber",
        OpCode::SetWatches2 => "setWatches2",
        OpCode::AddWatch => "addWatch",
        OpCode::WhoAmI => "whoAmI",
        OpCode::CreateSession => "createSession",
        OpCode::CloseSession => "closeSession",
        OpCode::Error => "error",
    }
}

/// The metric families of one scrape, in text exposition format 0.0.4.
pub fn render(view: &View<'_>) -> String {
    let log = &view.log;
    let mut out = Exposition::default();
    let stats = view.stats;
    for (name, help, value) in [
        (
            "znode_count",
            "Number of znodes.",
            view.tree.node_count() as f64,
        ),
        (
            "watch_count",
            "Number of watches.",
            view.watches.watch_count() as f64,
        ),
        (
            "ephemerals_count",
            "Number of ephemeral znodes.",
            view.tree.ephemeral_count() as f64,
        ),
        (
            "approximate_data_size",
            "Approximate size of znode paths and data, in bytes.",
            view.tree.approximate_data_bytes() as f64,
        ),
        (
            "outstanding_requests",
            "Requests received and not yet answered.",
            view.outstanding as f64,
        ),
        (
            "num_alive_connections",
            "Open client connections.",
            view.connections.len() as f64,
        ),
        (
            "global_sessions",
            "Live sessions.",
            view.sessions.len() as f64,
        ),
        (
            "packets_received",
            "Packets received since start or srst.",
            stats.packets_received as f64,
        ),
        (
            "packets_sent",
            "Packets sent since start or srst.",
            stats.packets_sent as f64,
        ),
        (
            "last_client_response_size",
            "Bytes of the last reply or watch notification sent to a client, without the length \
             prefix; -1 before one (since start or srst).",
            stats.client_response_sizes.last_bytes as f64,
        ),
        (
            "min_client_response_size",
            "Bytes of the smallest reply or watch notification since start or srst; -1 before one.",
            stats.client_response_sizes.min_bytes as f64,
        ),
        (
            "max_client_response_size",
            "Bytes of the largest reply or watch notification since start or srst; -1 before one.",
            stats.client_response_sizes.max_bytes as f64,
        ),
        (
            "min_latency",
            "Smallest request latency since start or srst, in ms.",
            stats.latency_ms.min as f64,
        ),
        (
            "avg_latency",
            "Average request latency since start or srst, in ms.",
            stats.latency_ms.average(),
        ),
        (
            "max_latency",
            "Largest request latency since start or srst, in ms.",
            stats.latency_ms.max as f64,
        ),
        (
            "uptime",
            "Time since the server started, in ms.",
            view.now.monotonic_ms as f64,
        ),
        (
            "open_file_descriptor_count",
            "Open file descriptors.",
            crate::four_letter::open_file_descriptors() as f64,
        ),
        (
            "max_file_descriptor_count",
            "Limit on open file descriptors.",
            crate::four_letter::max_file_descriptors() as f64,
        ),
        (
            "zoolog_last_zxid",
            "Log position of the last applied entry.",
            view.tree.last_applied_zxid() as f64,
        ),
        (
            "zoolog_snapshot_size_bytes",
            "Size of the newest snapshot.",
            view.metrics.last_snapshot.map_or(0, |s| s.size_bytes) as f64,
        ),
        (
            "zoolog_quorum_members",
            "Voting members of the ensemble (1 when standalone).",
            view.config
                .ensemble
                .as_ref()
                .map_or(1, |ensemble| ensemble.participants().count()) as f64,
        ),
        (
            "zoolog_quorum_up",
            "1 when a quorum is available to commit writes.",
            if view.role.is_serving() { 1.0 } else { 0.0 },
        ),
    ] {
        out.scalar(name, help, "gauge", value);
    }
    out.scalar(
        "bytes_received_count",
        "Bytes of the client packets received, their length prefixes included.",
        "counter",
        view.metrics.bytes_received as f64,
    );
    out.family(
        "zoolog_server_role",
        "The server's role; the sample with value 1 names it.",
        "gauge",
    );
    out.sample("zoolog_server_role", &[("role", view.mode_name())], 1.0);
    for (name, help, value) in [
        (
            "zoolog_log_fsyncs_total",
            "fsync and fdatasync calls of the log writer.",
            log.fsync.count,
        ),
        (
            "zoolog_log_slow_fsyncs_total",
            "Log syncs slower than fsync.warningthresholdms (each also logged as a warning).",
            log.fsync.slow_count,
        ),
        (
            "zoolog_log_entries_committed_total",
            "Log entries made durable.",
            log.entries_committed,
        ),
        (
            "zoolog_log_batches_committed_total",
            "Group commits (batches made durable).",
            log.batches_committed,
        ),
    ] {
        out.scalar(name, help, "counter", value as f64);
    }
    let metrics = view.metrics;
    out.family(
        "zoolog_request_latency_seconds",
        "Time from a request's arrival at the core to its reply, by operation.",
        "histogram",
    );
    for (op, histogram) in &metrics.request_latency {
        out.histogram("zoolog_request_latency_seconds", &[("op", op)], histogram);
    }
    out.family(
        "zoolog_log_fsync_duration_seconds",
        "Duration of every fsync and fdatasync of the log.",
        "histogram",
    );
    out.histogram(
        "zoolog_log_fsync_duration_seconds",
        &[],
        &Histogram::of_fsyncs(&log.fsync),
    );
    // ZooKeeper's own names and units (milliseconds), so that its dashboards find them.
    out.summary_ms(
        "fsynctime",
        "Time to fsync the transaction log, in milliseconds.",
        log.fsync.total_us,
        log.fsync.count,
    );
    out.percentile_summary_ms(
        "readlatency",
        "Time from a request's arrival to its reply, for requests answered from the tree as \
         it is (no log entry), in milliseconds.",
        &metrics.read_latency_us,
        view.now.monotonic_ms,
    );
    out.percentile_summary_ms(
        "updatelatency",
        "Time from a request's arrival to its reply, for requests ordered through the log, in \
         milliseconds.",
        &metrics.update_latency_us,
        view.now.monotonic_ms,
    );
    render_quorum(view, &mut out);
    render_startup(view.metrics.startup, &mut out);
    out.family(
        "zoolog_snapshot_duration_seconds",
        "Time to encode and durably write a snapshot.",
        "histogram",
    );
    out.histogram(
        "zoolog_snapshot_duration_seconds",
        &[],
        &metrics.snapshot_duration,
    );
    out.text
}

/// ZooKeeper's start-up summaries under its names: one observation each per start, none for
/// a part the start did not have (see [`Startup`]). Unlike mntr's, `srst` leaves them, as it
/// leaves every monotonic series here.
fn render_startup(startup: Option<Startup>, out: &mut Exposition) {
    let observed = |value: Option<u64>| value.map_or((0, 0), |value| (value, 1));
    let (total_us, loads) = observed(startup.map(|startup| startup.total_us));
    out.summary_ms(
        "dbinittime",
        "Time to load the data tree at start-up (snapshot and log), in milliseconds.",
        total_us,
        loads,
    );
    let (snapshot_us, snapshots) = observed(startup.and_then(|startup| startup.snapshot_load_us));
    out.summary_ms(
        "startup_snap_load_time",
        "Time to read and decode the snapshot at start-up, in milliseconds.",
        snapshot_us,
        snapshots,
    );
    let log_load = startup.and_then(|startup| startup.log_load);
    let (log_us, logs) = observed(log_load.map(|log_load| log_load.took_us));
    out.summary_ms(
        "startup_txns_load_time",
        "Time to load the log's entries after the snapshot at start-up, in milliseconds.",
        log_us,
        logs,
    );
    let (entries, logs) = observed(log_load.map(|log_load| log_load.entries));
    out.summary(
        "startup_txns_loaded",
        "Log entries after the snapshot loaded at start-up.",
        entries as f64,
        logs,
    );
}

/// ZooKeeper's metrics of an ensemble member's elections, quorum and leadership, under its
/// names, as its ServerMetrics registers them (without `_total`; not compared with the output of
/// its Prometheus provider, which Debian's package does not ship).
fn render_quorum(view: &View<'_>, out: &mut Exposition) {
    let quorum = &view.quorum;
    out.summary_ms(
        "election_time",
        "Time from going looking to serving, per election, in milliseconds.",
        quorum.election_time_us.total,
        quorum.election_time_us.count,
    );
    for (name, help, value) in [
        (
            "looking_count",
            "Times this member went looking for a leader, since start or srst.",
            quorum.lookings,
        ),
        (
            "peer_messages_refused",
            "Hellos and messages from other members refused as corrupt or undecodable, since start or srst.",
            quorum.peer_messages_refused,
        ),
        (
            "proposal_count",
            "Entries this member proposed as leader, since start or srst.",
            quorum.proposed_entries,
        ),
        (
            "commit_count",
            "Entries this member committed as leader, since start or srst.",
            quorum.committed_entries,
        ),
        (
            "diff_count",
            "Learners this member synced by sending what they lacked, since start or srst.",
            quorum.learner_syncs.diffs,
        ),
        (
            "snap_count",
            "Learners this member synced by sending a snapshot, since start or srst.",
            quorum.learner_syncs.snapshots,
        ),
        (
            "learner_proposal_received_count",
            "Entries this member logged as learner, since start or srst.",
            quorum.learned_entries,
        ),
        (
            "learner_commit_received_count",
            "Entries this member learned committed as learner, since start or srst.",
            quorum.learned_commits,
        ),
    ]
    .into_iter()
    .chain(view.stats.leader_changes.counts())
    {
        out.scalar(name, help, "counter", value as f64);
    }
    if let Some(ensemble) = &view.config.ensemble {
        let voting_members = ensemble.participants().count() as f64;
        out.scalar(
            "quorum_size",
            "Voting members of the ensemble.",
            "gauge",
            voting_members,
        );
    }
    if matches!(view.role, Role::Leader { .. }) {
        out.scalar(
            "leader_uptime",
            "Time since this member began to lead, in ms.",
            "gauge",
            view.leader_report.leading_for_ms as f64,
        );
    }
}

/// A text exposition under construction.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// A family of one unlabelled sample.
    fn scalar(&mut self, name: &str, help: &str, kind: &str, value: f64) {
        self.family(name, help, kind);
        self.sample(name, &[], value);
    }

    /// A summary of times in ms without quantiles, from their sum in µs and their count.
    fn summary_ms(&mut self, name: &str, help: &str, total_us: u64, count: u64) {
        self.summary(name, help, total_us as f64 / 1e3, count);
    }

    /// A summary without quantiles: its sum and count.
    fn summary(&mut self, name: &str, help: &str, sum: f64, count: u64) {
        self.family(name, help, "summary");
        self.summary_totals(name, sum, count);
    }

    fn summary_totals(&mut self, name: &str, sum: f64, count: u64) {
        self.sample(&format!("{name}_sum"), &[], sum);
        self.sample(&format!("{name}_count"), &[], count as f64);
    }

    /// A summary of times in ms with the quantiles ZooKeeper's Prometheus provider gives its
    /// detailed summaries (0.5, 0.9, 0.99), estimated from the values of the window that
    /// `times_us` keeps at `now_ms`; NaN without a value in it, as Prometheus clients answer.
    fn percentile_summary_ms(
        &mut self,
        name: &str,
        help: &str,
        times_us: &WindowedPercentiles,
        now_ms: u64,
    ) {
        const QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];
        self.family(name, help, "summary");
        let values_ms = match times_us.percentiles(QUANTILES, now_ms) {
            Some(values_us) => values_us.map(|value_us| value_us as f64 / 1e3),
            None => [f64::NAN; 3],
        };
        for (quantile, value_ms) in QUANTILES.into_iter().zip(values_ms) {
            self.sample(name, &[("quantile", &format_value(quantile))], value_ms);
        }
        let summary = &times_us.summary;
        self.summary_totals(name, summary.total as f64 / 1e3, summary.count);
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        write_labels(&mut self.text, labels);
        let _ = writeln!(self.text, " {}", format_value(value));
    }

    /// Cumulative `_bucket` samples up to `+Inf`, then `_sum` (seconds) and `_count`.
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], histogram: &Histogram) {
        let bucket_name = format!("{name}_bucket");
        let mut cumulative = 0;
        for (index, count) in histogram.counts.iter().enumerate() {
            cumulative += count;
            let bound = match histogram.bounds_us.get(index) {
                Some(&bound_us) => format_value(bound_us as f64 / 1e6),
                None => "+Inf".to_owned(),
            };
            let mut with_le = labels.to_vec();
            with_le.push(("le", &bound));
            self.sample(&bucket_name, &with_le, cumulative as f64);
        }
        self.sample(
            &format!("{name}_sum"),
            labels,
            histogram.sum_us as f64 / 1e6,
        );
        self.sample(&format!("{name}_count"), labels, histogram.count as f64);
    }
}

fn write_labels(out: &mut String, labels: &[(&str, &str)]) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (index, (name, value)) in labels.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        let _ = write!(out, "{name}=\"{}\"", escape_label_value(value));
    }
    out.push('}');
}

/// Go's float syntax, which the format uses; Rust prints integral values without a fraction.
fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        value.to_string()
    }
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label_value(text: &str) -> String {
    escape_help(text).replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_on_a_bound_fall_in_that_bucket() {
        let mut histogram = Histogram::new(&[10, 20]);
        for value in [0, 10, 11, 20, 21, 1_000] {
            histogram.record(value);
        }
        assert_eq!(histogram.counts, vec![2, 2, 2]);
        assert_eq!(histogram.count(), 6);
        assert_eq!(histogram.sum_us, 1_062);
    }

    #[test]
    fn histogram_exposition_is_cumulative_and_ends_with_inf_sum_count() {
        let mut histogram = Histogram::new(&[1_000, 500_000]);
        histogram.record(200);
        histogram.record(300_000);
        histogram.record(2_000_000);
        let mut out = Exposition::default();
        out.family("x_seconds", "Help.", "histogram");
        out.histogram("x_seconds", &[("op", "get\"Data")], &histogram);
        assert_eq!(
            out.text,
            "# HELP x_seconds Help.\n\
             # TYPE x_seconds histogram\n\
             x_seconds_bucket{op=\"get\\\"Data\",le=\"0.001\"} 1\n\
             x_seconds_bucket{op=\"get\\\"Data\",le=\"0.5\"} 2\n\
             x_seconds_bucket{op=\"get\\\"Data\",le=\"+Inf\"} 3\n\
             x_seconds_sum{op=\"get\\\"Data\"} 2.3002\n\
             x_seconds_count{op=\"get\\\"Data\"} 3\n"
        );
    }

    #[test]
    fn help_and_label_values_are_escaped() {
        assert_eq!(escape_help("a\\b\nc\""), "a\\\\b\\nc\"");
        assert_eq!(escape_label_value("a\\b\nc\""), "a\\\\b\\nc\\\"");
    }

    #[test]
    fn values_use_go_float_syntax() {
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.25), "0.25");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
    }

    #[test]
    fn the_fsync_histogram_is_the_logs_buckets_with_the_log_bounds() {
        let mut fsync = FsyncTimes {
            count: 3,
            total_us: 1_300,
            ..FsyncTimes::default()
        };
        fsync.bucket_counts[2] = 2; // (50, 100] µs
        fsync.bucket_counts[5] = 1; // (500, 1000] µs
        let mut out = Exposition::default();
        out.histogram("f_seconds", &[], &Histogram::of_fsyncs(&fsync));
        for line in [
            "f_seconds_bucket{le=\"0.00005\"} 0\n",
            "f_seconds_bucket{le=\"0.0001\"} 2\n",
            "f_seconds_bucket{le=\"0.001\"} 3\n",
            "f_seconds_bucket{le=\"+Inf\"} 3\n",
            "f_seconds_sum 0.0013\n",
            "f_seconds_count 3\n",
        ] {
            assert!(out.text.contains(line), "{line} in {}", out.text);
        }
    }

    #[test]
    fn request_latencies_are_kept_per_operation() {
        let mut metrics = Metrics::default();
        metrics.record_request(OpCode::GetData, RequestPath::Read, 5, 0);
        metrics.record_request(OpCode::GetData, RequestPath::Read, 7, 1);
        metrics.record_request(OpCode::Create, RequestPath::Update, 9, 2);
        assert_eq!(metrics.request_latency["getData"].count(), 2);
        assert_eq!(metrics.request_latency["create"].count(), 1);
        assert_eq!(metrics.read_latency_us.summary.count, 2);
        assert_eq!(metrics.update_latency_us.summary.count, 1);
    }

    #[test]
    fn a_latency_summary_has_zookeepers_quantiles_in_milliseconds() {
        let mut times_us = WindowedPercentiles::default();
        let mut out = Exposition::default();
        out.percentile_summary_ms("l", "help", &times_us, 0);
        assert!(
            out.text.contains("l{quantile=\"0.5\"} NaN\n"),
            "{}",
            out.text
        );
        for value_us in 1..=100 {
            times_us.record(value_us * 1000, value_us);
        }
        let mut out = Exposition::default();
        out.percentile_summary_ms("l", "help", &times_us, 100);
        for line in [
            "# TYPE l summary\n",
            "l{quantile=\"0.5\"} 50\n",
            "l{quantile=\"0.9\"} 90\n",
            "l{quantile=\"0.99\"} 99\n",
            "l_sum 5050\n",
            "l_count 100\n",
        ] {
            assert!(out.text.contains(line), "{line} in {}", out.text);
        }
    }

    #[test]
    fn a_quiet_hour_leaves_no_quantiles_but_keeps_the_sum_and_count() {
        let mut times_us = WindowedPercentiles::default();
        times_us.record(2_000, 0);
        let an_hour_later_ms = 3_600_000;
        let mut out = Exposition::default();
        out.percentile_summary_ms("l", "help", &times_us, an_hour_later_ms);
        for line in ["l{quantile=\"0.99\"} NaN\n", "l_sum 2\n", "l_count 1\n"] {
            assert!(out.text.contains(line), "{line} in {}", out.text);
        }
    }
}

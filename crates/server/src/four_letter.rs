//! The four-letter words, in Apache ZooKeeper 3.9's text formats: monitoring tools, kazoo's
//! `server_version()`, go-zookeeper's `FLWSrvr` and `zkServer.sh status` parse them.

use std::fmt::Write as _;
use std::net::SocketAddr;

use zoolog_log::LogStats;
use zoolog_proto::OpCode;
use zoolog_tree::{ConnectionId, DataTree, WatchRegistry};

use crate::config::ServerConfig;
use crate::core::{Now, OperatorAction, Role};
use crate::ensemble::{LeaderReport, LearnerReport, QuorumCounters};

/// What ZooKeeper answers `srvr` and `stat` with while it is not serving.
const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests\n";
use crate::json::Json;
use crate::metrics::Metrics;
use crate::stats::{ConnectionStats, PercentileSummary, ServerStats, Summary};

pub use zoolog_proto::ZOOKEEPER_VERSION;

/// The words this server answers, ZooKeeper 3.9's list; any other first four bytes are read as
/// a frame length.
pub const WORDS: &[&str] = &[
    "ruok", "isro", "srvr", "stat", "cons", "conf", "envi", "mntr", "wchs", "wchc", "wchp", "dump",
    "dirs", "crst", "srst", "gtmk", "stmk", "hash",
];

/// The word followed on the wire by an 8-byte big-endian trace mask.
pub const SET_TRACE_MASK: &str = "stmk";

/// ZooTrace's default mask: client requests, server packets, sessions and warnings.
pub const DEFAULT_TRACE_MASK: i64 = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 8);

/// A read-only picture of the server for rendering.
pub struct View<'a> {
    pub config: &'a ServerConfig,
    pub tree: &'a DataTree,
    pub watches: &'a WatchRegistry,
    pub stats: &'a ServerStats,
    pub connections: Vec<ConnectionView<'a>>,
    /// (session id, timeout ms, deadline on the monotonic clock)
    pub sessions: Vec<(i64, i32, u64)>,
    pub now: Now,
    pub outstanding: usize,
    pub metrics: &'a Metrics,
    /// ZooKeeper's text trace mask (`gtmk`/`stmk`); zoolog keeps it for tools that set and read
    /// it, its tracing levels come from RUST_LOG.
    pub trace_mask: i64,
    pub role: Role,
    /// The ensemble's picture of this server as a leader (empty when it does not lead, or
    /// runs standalone); the core does not know it, its caller fills it in.
    pub leader_report: LeaderReport,
    /// The member's elections and leadership's entries (zero when standalone); filled in by
    /// the caller, like `leader_report`.
    pub quorum: QuorumCounters,
    /// The ordering layer's log (its syncs' times); filled in by the caller, like
    /// `leader_report`.
    pub log: LogStats,
}

impl View<'_> {
    /// ZooKeeper's name for the server's state (`srvr`'s Mode, mntr's zk_server_state).
    pub fn mode_name(&self) -> &'static str {
        self.role.mode_name(self.config.read_only_mode_enabled)
    }

    /// A member cut off from its quorum serving read-only sessions.
    pub fn is_read_only(&self) -> bool {
        !self.role.is_serving()
    }

    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader { .. })
    }

    /// The learners that acknowledged this leader's history and receive its proposals, as
    /// observers or not (ZooKeeper's observingLearners, forwardingFollowers).
    pub fn synced_learners(&self, observers: bool) -> impl Iterator<Item = &LearnerReport> {
        self.leader_report
            .learners
            .iter()
            .filter(move |learner| learner.status.synced && learner.status.observer == observers)
    }
}

pub struct ConnectionView<'a> {
    pub id: ConnectionId,
    pub peer: SocketAddr,
    pub session_id: i64,
    pub timeout_ms: i32,
    pub queued: usize,
    pub stats: &'a ConnectionStats,
}

/// Sizes of the data directories, measured by the caller (the view itself does no IO).
pub struct DirSizes {
    pub data_bytes: u64,
    pub log_bytes: u64,
}

/// What `word` changes before it is answered; `argument` is `stmk`'s mask.
pub fn action(word: &str, argument: Option<i64>) -> Option<OperatorAction> {
    match word {
        "crst" => Some(OperatorAction::ResetConnectionStats),
        "srst" => Some(OperatorAction::ResetServerStats),
        "stmk" => argument.map(OperatorAction::SetTraceMask),
        _ => None,
    }
}

/// The text of `word`. `crst`, `srst` and `stmk` report what the caller already did to the core.
pub fn answer(word: &str, view: &View<'_>, dirs: &DirSizes) -> String {
    match word {
        "ruok" => "imok".to_owned(),
        "isro" => if view.is_read_only() { "ro" } else { "rw" }.to_owned(),
        "srvr" | "stat" if !view.role.is_serving() && !view.config.read_only_mode_enabled => {
            NOT_SERVING.to_owned()
        }
        "srvr" => srvr(view),
        "stat" => stat(view),
        "cons" => cons(view),
        "conf" => conf(view, dirs),
        "envi" => envi(),
        "mntr" => mntr(view),
        "crst" => "Connection stats reset.\n".to_owned(),
        "srst" => "Server stats reset.\n".to_owned(),
        "gtmk" | "stmk" => view.trace_mask.to_string(),
        // ZooKeeper prints its digest log; with digests disabled (zoolog keeps none) it is empty.
        "hash" => String::new(),
        "wchs" => wchs(view),
        "wchc" => wchc(view),
        "wchp" => wchp(view),
        "dump" => dump(view),
        "dirs" => format!(
            "datadir_size: {}\nlogdir_size: {}\n",
            dirs.data_bytes, dirs.log_bytes
        ),
        other => unreachable!("{other} is not in WORDS"),
    }
}

fn version_line() -> String {
    format!("Zookeeper version: {}", full_version())
}

fn summary(view: &View<'_>, out: &mut String) {
    let latency_ms = &view.stats.latency_ms;
    let _ = writeln!(
        out,
        "Latency min/avg/max: {}/{:.4}/{}",
        latency_ms.min,
        latency_ms.average(),
        latency_ms.max
    );
    let _ = writeln!(out, "Received: {}", view.stats.packets_received);
    let _ = writeln!(out, "Sent: {}", view.stats.packets_sent);
    let _ = writeln!(out, "Connections: {}", view.connections.len());
    let _ = writeln!(out, "Outstanding: {}", view.outstanding);
    let _ = writeln!(out, "Zxid: {:#x}", view.tree.last_applied_zxid());
    let _ = writeln!(out, "Mode: {}", view.mode_name());
    let _ = writeln!(out, "Node count: {}", view.tree.node_count());
    if view.is_leader() {
        let sizes = view.leader_report.proposal_sizes;
        let _ = writeln!(
            out,
            "Proposal sizes last/min/max: {}/{}/{}",
            sizes.last_bytes, sizes.min_bytes, sizes.max_bytes
        );
    }
}

fn srvr(view: &View<'_>) -> String {
    let mut out = version_line();
    out.push('\n');
    summary(view, &mut out);
    out
}

fn stat(view: &View<'_>) -> String {
    let mut out = version_line();
    out.push_str("\nClients:\n");
    for connection in &view.connections {
        let stats = connection.stats;
        let _ = writeln!(
            out,
            " {}[1](queued={},recved={},sent={})",
            peer(connection.peer),
            connection.queued,
            stats.received,
            stats.sent
        );
    }
    out.push('\n');
    summary(view, &mut out);
    out
}

pub(crate) fn peer(address: SocketAddr) -> String {
    format!("/{}:{}", address.ip(), address.port())
}

/// ZooKeeper's four-character names of the last operation, as `cons` prints them.
pub(crate) fn operation_name(opcode: Option<OpCode>) -> &'static str {
    let Some(opcode) = opcode else { return "NA" };
    match opcode {
        OpCode::Ping => "PING",
        OpCode::CloseSession => "SESS",
        OpCode::GetData => "GETD",
        OpCode::SetData => "SETD",
        OpCode::Create | OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => "CREA",
        OpCode::Delete | OpCode::DeleteContainer => "DELE",
        OpCode::Exists => "EXIS",
        OpCode::GetChildren | OpCode::GetChildren2 => "GETC",
        OpCode::GetAllChildrenNumber => "GETACN",
        OpCode::GetAcl => "GETA",
        OpCode::SetAcl => "SETA",
        OpCode::Sync => "SYNC",
        OpCode::Check => "CHEC",
        OpCode::Multi => "MULT",
        OpCode::MultiRead => "MLTR",
        OpCode::Reconfig => "RECO",
        OpCode::SetWatches | OpCode::SetWatches2 => "SETW",
        OpCode::CheckWatches => "CHKW",
        OpCode::RemoveWatches => "REMW",
        OpCode::AddWatch => "ADDW",
        OpCode::GetEphemerals => "GETE",
        OpCode::WhoAmI => "HOMI",
        OpCode::Auth => "AUTH",
        OpCode::Sasl => "SASL",
        OpCode::Notification | OpCode::CreateSession | OpCode::Error => "NA",
    }
}

fn cons(view: &View<'_>) -> String {
    let mut out = String::new();
    for connection in &view.connections {
        let stats = connection.stats;
        let _ = write!(
            out,
            " {}[1](queued={},recved={},sent={}",
            peer(connection.peer),
            connection.queued,
            stats.received,
            stats.sent
        );
        if connection.session_id != 0 {
            let _ = write!(
                out,
                ",sid={:#x},lop={},est={},to={},lcxid={:#x},lzxid={:#x},lresp={},llat={},minlat={},avglat={},maxlat={}",
                connection.session_id,
                operation_name(stats.last_opcode),
                stats.established_wall_ms,
                connection.timeout_ms,
                // A Java long in ZooKeeper: -1 after crst prints as 0xffffffffffffffff.
                i64::from(stats.last_cxid),
                stats.last_zxid,
                stats.last_response_ms,
                stats.last_latency_ms,
                stats.latency_ms.min,
                // An integer, as ZooKeeper prints it and go-zookeeper parses it.
                stats.latency_ms.average() as u64,
                stats.latency_ms.max,
            );
        }
        out.push_str(")\n");
    }
    out.push('\n');
    out
}

fn conf(view: &View<'_>, dirs: &DirSizes) -> String {
    let config = view.config;
    let mut out = String::new();
    let _ = writeln!(out, "clientPort={}", config.client_addr.port());
    let _ = writeln!(out, "secureClientPort=-1");
    let _ = writeln!(out, "dataDir={}", config.data_dir.display());
    let _ = writeln!(out, "dataDirSize={}", dirs.data_bytes);
    let _ = writeln!(out, "dataLogDir={}", config.data_log_dir.display());
    let _ = writeln!(out, "dataLogSize={}", dirs.log_bytes);
    let _ = writeln!(out, "tickTime={}", config.tick_ms);
    let _ = writeln!(out, "maxClientCnxns={}", config.connections_per_ip_max);
    let _ = writeln!(out, "minSessionTimeout={}", config.session_timeout_min_ms);
    let _ = writeln!(out, "maxSessionTimeout={}", config.session_timeout_max_ms);
    let _ = writeln!(out, "clientPortListenBacklog=-1");
    let _ = writeln!(out, "serverId=0");
    out
}

fn envi() -> String {
    let mut out = String::from("Environment:\n");
    for (key, value) in environment() {
        let _ = writeln!(out, "{key}={value}");
    }
    out
}

/// The `envi` entries, shared with the AdminServer's `environment` command.
pub fn environment() -> Vec<(&'static str, String)> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let current_dir = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    vec![
        ("zookeeper.version", full_version()),
        ("host.name", host.trim().to_owned()),
        ("zoolog.version", env!("CARGO_PKG_VERSION").to_owned()),
        ("os.name", std::env::consts::OS.to_owned()),
        ("os.arch", std::env::consts::ARCH.to_owned()),
        ("user.name", std::env::var("USER").unwrap_or_default()),
        ("user.home", std::env::var("HOME").unwrap_or_default()),
        ("user.dir", current_dir),
    ]
}

/// ZooKeeper's `Version.getFullVersion()`: version and build date.
pub fn full_version() -> String {
    format!(
        "{ZOOKEEPER_VERSION}, built on {}",
        env!("ZOOLOG_BUILD_DATE")
    )
}

/// ZooKeeper's `auth_failed_count`: it counts client certificates its TLS port refuses (an
/// addAuth refused does not count there), and zoolog has no TLS port.
pub const TLS_AUTH_FAILURES: u64 = 0;

/// ZooKeeper's five mntr keys of the AvgMinMaxCounter `name`: in milliseconds from a summary
/// in microseconds, or (`counts`) as they are. ZooKeeper counts whole milliseconds, so its
/// average of sub-millisecond times reads 0 where this one keeps the fraction.
macro_rules! summary_values {
    ($name:literal, $summary_us:expr) => {
        summary_values!($name, $summary_us, 1000)
    };
    ($name:literal, $summary:expr, counts) => {
        summary_values!($name, $summary, 1)
    };
    ($name:literal, $summary:expr, $per_unit:expr) => {{
        let summary: Summary = $summary;
        let per_unit: u64 = $per_unit;
        [
            (
                concat!("avg_", $name),
                Json::Float(summary.average() / per_unit as f64),
            ),
            (concat!("min_", $name), Json::count(summary.min / per_unit)),
            (concat!("max_", $name), Json::count(summary.max / per_unit)),
            (concat!("cnt_", $name), Json::count(summary.count)),
            (
                concat!("sum_", $name),
                Json::count(summary.total / per_unit),
            ),
        ]
    }};
}

/// ZooKeeper's nine mntr keys of the AvgMinMaxPercentileCounter `name`, in milliseconds from
/// microseconds: the summary's five, then the 50th, 95th, 99th and 99.9th percentiles.
macro_rules! percentile_summary_values {
    ($name:literal, $latencies_us:expr) => {{
        let latencies_us: &PercentileSummary = $latencies_us;
        let [avg, min, max, cnt, sum] = summary_values!($name, latencies_us.summary);
        let [p50, p95, p99, p999] = latencies_us
            .percentiles([0.5, 0.95, 0.99, 0.999])
            .map(|percentile_us| Json::count(percentile_us / 1000));
        [
            avg,
            min,
            max,
            cnt,
            sum,
            (concat!("p50_", $name), p50),
            (concat!("p95_", $name), p95),
            (concat!("p99_", $name), p99),
            (concat!("p999_", $name), p999),
        ]
    }};
}

fn mntr(view: &View<'_>) -> String {
    monitor_values(view)
        .iter()
        .map(|(key, value)| format!("zk_{key}\t{}\n", value.to_plain_text()))
        .collect()
}

/// The `mntr` values without the `zk_` prefix, as the AdminServer's `monitor` names them.
pub fn monitor_values(view: &View<'_>) -> Vec<(&'static str, Json)> {
    let mut values = server_values(view);
    if view.is_leader() {
        values.extend(leader_values(view));
    }
    values
}

fn server_values(view: &View<'_>) -> Vec<(&'static str, Json)> {
    let latency_ms = &view.stats.latency_ms;
    let mut values = vec![
        ("version", Json::str(full_version())),
        ("server_state", Json::str(view.mode_name())),
        ("uptime", Json::count(view.now.monotonic_ms)),
        ("avg_latency", Json::Float(latency_ms.average())),
        ("max_latency", Json::count(latency_ms.max)),
        ("min_latency", Json::count(latency_ms.min)),
        ("packets_received", Json::count(view.stats.packets_received)),
        ("packets_sent", Json::count(view.stats.packets_sent)),
        (
            "bytes_received_count",
            Json::count(view.stats.bytes_received),
        ),
        (
            "last_client_response_size",
            Json::Int(view.stats.client_response_sizes.last_bytes),
        ),
        (
            "min_client_response_size",
            Json::Int(view.stats.client_response_sizes.min_bytes),
        ),
        (
            "max_client_response_size",
            Json::Int(view.stats.client_response_sizes.max_bytes),
        ),
        ("num_alive_connections", Json::count(view.connections.len())),
        ("outstanding_requests", Json::count(view.outstanding)),
        ("znode_count", Json::count(view.tree.node_count())),
        ("watch_count", Json::count(view.watches.watch_count())),
        ("ephemerals_count", Json::count(view.tree.ephemeral_count())),
        (
            "approximate_data_size",
            Json::count(view.tree.approximate_data_bytes()),
        ),
        (
            "open_file_descriptor_count",
            Json::count(open_file_descriptors()),
        ),
        (
            "max_file_descriptor_count",
            Json::count(max_file_descriptors()),
        ),
        (
            "connection_request_count",
            Json::count(view.stats.connect_requests),
        ),
        (
            "connection_rejected",
            Json::count(view.stats.connections_rejected),
        ),
        ("auth_failed_count", Json::count(TLS_AUTH_FAILURES)),
        ("global_sessions", Json::count(view.sessions.len())),
        ("local_sessions", Json::Int(0)),
        ("last_zxid", Json::Int(view.tree.last_applied_zxid())),
        ("looking_count", Json::count(view.quorum.lookings)),
        (
            "peer_messages_refused",
            Json::count(view.quorum.peer_messages_refused),
        ),
        ("proposal_count", Json::count(view.quorum.proposed_entries)),
        ("commit_count", Json::count(view.quorum.committed_entries)),
        ("diff_count", Json::count(view.quorum.learner_syncs.diffs)),
        (
            "snap_count",
            Json::count(view.quorum.learner_syncs.snapshots),
        ),
        (
            "learner_proposal_received_count",
            Json::count(view.quorum.learned_entries),
        ),
        (
            "learner_commit_received_count",
            Json::count(view.quorum.learned_commits),
        ),
    ];
    let leader_changes = view.stats.leader_changes.counts();
    values.extend(leader_changes.map(|(name, _, count)| (name, Json::count(count))));
    if let (Some(peer_state), Some(ensemble)) = (view.role.peer_state(), &view.config.ensemble) {
        values.push(("peer_state", Json::str(peer_state)));
        values.push(("quorum_size", Json::count(ensemble.participants().count())));
    }
    values.extend(summary_values!(
        "election_time",
        view.quorum.election_time_us
    ));
    values.extend(summary_values!("fsynctime", view.log.fsync.window_us));
    values.extend(percentile_summary_values!(
        "readlatency",
        &view.stats.read_latency_us
    ));
    values.extend(percentile_summary_values!(
        "updatelatency",
        &view.stats.update_latency_us
    ));
    values.extend(summary_values!("snapshottime", view.stats.snapshot_time_us));
    values.extend(summary_values!("dbinittime", view.stats.db_init_time_us));
    values.extend(summary_values!(
        "startup_snap_load_time",
        view.stats.startup_snapshot_load_time_us
    ));
    values.extend(summary_values!(
        "startup_txns_load_time",
        view.stats.startup_log_load_time_us
    ));
    values.extend(summary_values!(
        "startup_txns_loaded",
        view.stats.startup_log_entries,
        counts
    ));
    values
}

/// ZooKeeper's leader-only gauges (LeaderZooKeeperServer's), which other servers leave out.
/// Not among them: `pending_syncs`, ZooKeeper's count of learners' syncs waiting for the
/// proposals ahead of them to commit. zoolog orders a sync as an entry of the log like any
/// write, and the leader does not read entries, so no sync is ever pending apart from them.
fn leader_values(view: &View<'_>) -> Vec<(&'static str, Json)> {
    let sizes = view.leader_report.proposal_sizes;
    // A learner follows as a participant only when it is one (the leader treats any other as
    // an observer), so this stays 0 until zoolog has dynamic reconfiguration.
    let synced_non_voting_followers = view
        .synced_learners(false)
        .filter(|learner| !learner.status.voting)
        .count();
    vec![
        ("learners", Json::count(view.leader_report.learners.len())),
        (
            "synced_followers",
            Json::count(view.synced_learners(false).count()),
        ),
        (
            "synced_non_voting_followers",
            Json::count(synced_non_voting_followers),
        ),
        (
            "synced_observers",
            Json::count(view.synced_learners(true).count()),
        ),
        ("last_proposal_size", Json::Int(sizes.last_bytes)),
        ("max_proposal_size", Json::Int(sizes.max_bytes)),
        ("min_proposal_size", Json::Int(sizes.min_bytes)),
        (
            "leader_uptime",
            Json::count(view.leader_report.leading_for_ms),
        ),
    ]
}

pub(crate) fn open_file_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|entries| entries.count())
        .unwrap_or(0)
}

pub(crate) fn max_file_descriptors() -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|soft| soft.parse().ok())
        .unwrap_or(0)
}

fn wchs(view: &View<'_>) -> String {
    let summary = view.watches.summary();
    format!(
        "{} connections watching {} paths\nTotal watches:{}\n",
        summary.connections, summary.paths, summary.watches
    )
}

pub(crate) fn session_of(view: &View<'_>, connection: ConnectionId) -> i64 {
    view.connections
        .iter()
        .find(|c| c.id == connection)
        .map_or(0, |c| c.session_id)
}

fn wchc(view: &View<'_>) -> String {
    let mut out = String::new();
    for (connection, paths) in view.watches.paths_by_connection() {
        let _ = writeln!(out, "{:#x}", session_of(view, connection));
        for path in paths {
            let _ = writeln!(out, "\t{path}");
        }
    }
    out.push('\n');
    out
}

fn wchp(view: &View<'_>) -> String {
    let mut out = String::new();
    for (path, connections) in view.watches.connections_by_path() {
        let _ = writeln!(out, "{path}");
        for connection in connections {
            let _ = writeln!(out, "\t{:#x}", session_of(view, connection));
        }
    }
    out.push('\n');
    out
}

fn dump(view: &View<'_>) -> String {
    let mut out = String::from("SessionTracker dump:\n");
    let _ = writeln!(
        out,
        "Session Sets ({})/({}):",
        view.sessions.len(),
        view.sessions.len()
    );
    let mut sessions = view.sessions.clone();
    sessions.sort_by_key(|&(_, _, deadline)| deadline);
    for (session_id, _, deadline_ms) in &sessions {
        let remaining_ms = deadline_ms.saturating_sub(view.now.monotonic_ms);
        let _ = writeln!(
            out,
            "1 expire at {}:",
            view.now.wall_ms + remaining_ms as i64
        );
        let _ = writeln!(out, "\t{session_id:#x}");
    }
    out.push_str("ephemeral nodes dump:\n");
    let owners: Vec<_> = view
        .tree
        .sessions()
        .filter(|(_, info)| !info.ephemerals.is_empty())
        .collect();
    let _ = writeln!(out, "Sessions with Ephemerals ({}):", owners.len());
    for (session_id, info) in owners {
        let _ = writeln!(out, "{session_id:#x}:");
        for path in &info.ephemerals {
            let _ = writeln!(out, "\t{path}");
        }
    }
    out.push_str("Connections dump:\n");
    let _ = writeln!(out, "Connections Sets (1)/({}):", view.connections.len());
    let _ = writeln!(
        out,
        "{} expire at {}:",
        view.connections.len(),
        view.now.wall_ms
    );
    for connection in &view.connections {
        let _ = writeln!(
            out,
            "\tip: {} sessionId: {:#x}",
            peer(connection.peer),
            connection.session_id
        );
    }
    out
}

//! Server settings: what `zoolog serve` reads from a TOML file or a ZooKeeper `zoo.cfg`, from
//! `-Dname=value` arguments and from SERVER_JVMFLAGS, so a ZooKeeper user keeps the files and
//! scripts they already have.
//!
//! Entry point: [`ServerConfig::from_args`]. Precedence, lowest first: [`ServerConfig::default`],
//! the config file, `-D` tokens of SERVER_JVMFLAGS, `-D` arguments. Settings derived from others
//! (session timeouts from tickTime, dataLogDir from dataDir) are derived after everything is read.
//!
//! # Files
//!
//! A file whose name ends in `.toml` is TOML; any other is a Java properties file, as zoo.cfg:
//! `key=value`, `key: value` or `key value`, `#` and `!` comment lines, backslash line
//! continuations and escapes; keys and values are trimmed. A later line overrides an earlier one.
//!
//! TOML uses the zoo.cfg names. Dotted names may be written flat, quoted or as tables; these
//! are the same setting (setting one twice is an error):
//!
//! ```toml
//! tickTime = 2000
//! dataDir = "/var/lib/zoolog"
//! clientPort = 2181
//! "4lw.commands.whitelist" = ["srvr", "ruok"]   # or "srvr, ruok", or "*"
//! autopurge.snapRetainCount = 5                  # or [autopurge] snapRetainCount = 5
//!
//! [zookeeper]                                    # system properties may be given too
//! extendedTypesEnabled = true                    # = zookeeper.extendedTypesEnabled
//! ```
//!
//! Integers, booleans and strings are all accepted where a value is expected (`tickTime = "2000"`).
//!
//! # Keys
//!
//! | key | field |
//! |---|---|
//! | `tickTime` | `tick_ms` (≥ 1) |
//! | `dataDir`, `dataLogDir` | `data_dir`, `data_log_dir` (relative to the current directory) |
//! | `clientPort` (0..=65535; 0 picks a free port), `clientPortAddress` (IP or host name) | `client_addr` |
//! | `minSessionTimeout`, `maxSessionTimeout` (-1: derived) | `session_timeout_min_ms`, `session_timeout_max_ms` |
//! | `maxClientCnxns` | `connections_per_ip_max` |
//! | `maxCnxns`, `zookeeper.maxCnxns` | `connections_max` |
//! | `autopurge.snapRetainCount` (values below 3 become 3) | `snapshots_retained` |
//! | `autopurge.purgeInterval` | `purge_interval_hours` |
//! | `snapCount`, `zookeeper.snapCount` (values below 2 become 2) | `entries_per_snapshot` |
//! | `snapSizeLimitInKb`, `zookeeper.snapSizeLimitInKb` (0 or less: no limit; default 512 MiB, not ZooKeeper's 4 GiB, since an ensemble member holds the entries since its last snapshot in memory) | `log_bytes_per_snapshot` |
//! | `fsync.warningthresholdms`, `zookeeper.fsync.warningthresholdms` (≥ 0; default 1000) | `fsync_warning_threshold_ms` |
//! | `4lw.commands.whitelist`, `zookeeper.4lw.commands.whitelist` | `four_letter_words` |
//! | `reconfigEnabled` | `reconfig_enabled` |
//! | `globalOutstandingLimit`, `zookeeper.globalOutstandingLimit` | `outstanding_requests_per_connection_max` |
//! | `zoolog.requestBytesMax` (at least `jute.maxbuffer` is used) | `request_bytes_max` |
//! | `jute.maxbuffer` | `packet_bytes_max` |
//! | `zookeeper.DigestAuthenticationProvider.superDigest` | `super_digest` |
//! | `zookeeper.extendedTypesEnabled`, `zookeeper.enforceQuota` | `extended_types_enabled`, `enforce_quota` |
//! | `zookeeper.skipACL` (`yes`/`true`) | `skip_acl` |
//! | `readonlymode.enabled` | `read_only_mode_enabled` |
//! | `zoolog.serverThreads` (0: one per CPU; 1: everything on one thread) | `server_threads` |
//! | `znode.container.checkIntervalMs`, `znode.container.maxNeverUsedIntervalMs` | `container_check_interval_ms`, `container_never_used_ms` |
//! | `zookeeper.nio.sessionlessCnxnTimeout` | `handshake_timeout_ms` |
//! | `<dataDir>/myid` (a file, 1..=255) | `server_id` |
//! | `server.N` (N in 1..=255), `initLimit`, `syncLimit`, `standaloneEnabled`, `peerType` | `ensemble` (see below) |
//! | `admin.enableServer`, `admin.serverAddress`, `admin.serverPort`, `admin.commandURL`, `admin.idleTimeout` (or `zookeeper.admin.*`) | `admin` |
//! | `metricsProvider.className` (ZooKeeper's `PrometheusMetricsProvider`), `metricsProvider.httpHost`, `metricsProvider.httpPort` | `prometheus_addr` |
//!
//! The AdminServer is on by default, as in ZooKeeper 3.9, on port 8080 under `/commands`; it
//! listens on 127.0.0.1 (ZooKeeper: 0.0.0.0), as zoolog's client port does, and so does the
//! Prometheus endpoint (ZooKeeper: 0.0.0.0, port 7000). Set the address to `0.0.0.0` to reach
//! them from other machines.
//!
//! In a file, as in ZooKeeper, a key `k` that is not a zoo.cfg key is read as the system
//! property `zookeeper.k` (`skipACL=yes`); system property names work as they are. As `-D`
//! arguments and in SERVER_JVMFLAGS, zoo.cfg keys are accepted besides system properties
//! (`-DclientPort=2182`, a zoolog extension). Booleans are `true`/`false` (any case). Numbers
//! are decimal, or hexadecimal with `0x` or `#` (Java's `Integer.decode`). Anything else —
//! `group.*` and `weight.*` (hierarchical quorums), other `admin.*` and `metricsProvider.*`
//! keys, unknown keys — is ignored with one log line each (a warning for unknown keys and for
//! security settings zoolog does not enforce, such as `authProvider.*` or `secureClientPort`).
//!
//! # Ensembles
//!
//! `server.N=host:quorumPort:electionPort[:participant|observer][;[clientHost:]clientPort]`
//! lines (ZooKeeper's form; `[v6 address]` in brackets; a client port alone means
//! `0.0.0.0:port`) list the members, and make [`ServerConfig::ensemble`] `Some`. In TOML they
//! are `server.1 = "zk1:2888:3888"`, or `1 = "zk1:2888:3888"` under `[server]`; as `-D`
//! arguments, `-Dserver.1=zk1:2888:3888`. The rules are ZooKeeper's:
//!
//! - one participant and `standaloneEnabled=true` (the default) is a standalone server (the
//!   line is ignored, as ZooKeeper does for HBase's sake); `standaloneEnabled=false` makes
//!   even one server an ensemble;
//! - observers need participants (and, with `standaloneEnabled=true`, at least two);
//! - an ensemble member needs `<dataDir>/myid` holding one of the ids (a standalone server
//!   only warns about a bad myid, since standalone ZooKeeper never reads it);
//! - `peerType` (default: what the server's own line says) must agree with its own line;
//! - the server's own line's client address (`0.0.0.0` when it gives only a port, as in
//!   ZooKeeper) becomes the client address; an explicit `clientPort` that disagrees is an
//!   error, and so is a `clientPortAddress` that disagrees unless it is the wildcard;
//! - ids are 1..=255 (session ids carry the server id in their top byte); a repeated id within
//!   one source (the file, SERVER_JVMFLAGS or the arguments) is an error, a later source
//!   overrides an earlier one's line;
//! - `initLimit` and `syncLimit` are in ticks, defaults 10 and 5 (ZooKeeper's sample config).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Every setting the standalone server honours, with ZooKeeper's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// tickTime: the unit of session timeouts and of expiry checks.
    pub tick_ms: u64,
    /// dataDir: snapshots (and `myid`).
    pub data_dir: PathBuf,
    /// dataLogDir: the write-ahead log; defaults to data_dir.
    pub data_log_dir: PathBuf,
    /// clientPortAddress:clientPort.
    pub client_addr: SocketAddr,
    /// minSessionTimeout; defaults to 2 × tick.
    pub session_timeout_min_ms: u64,
    /// maxSessionTimeout; defaults to 20 × tick.
    pub session_timeout_max_ms: u64,
    /// maxClientCnxns: connections per client IP; 0 means no limit. Default 60.
    pub connections_per_ip_max: usize,
    /// maxCnxns: connections in all; 0 means no limit.
    pub connections_max: usize,
    /// Requests a connection may have outstanding before the server stops reading from it.
    pub outstanding_requests_per_connection_max: usize,
    /// Bytes of requests read and not yet answered, over all connections, before the server
    /// stops reading requests (see [`ServerConfig::request_budget_bytes`]).
    pub request_bytes_max: usize,
    /// Bytes queued towards one slow client before its connection is dropped.
    pub outbound_bytes_per_connection_max: usize,
    /// jute.maxbuffer: the largest frame accepted.
    pub packet_bytes_max: usize,
    /// 4lw.commands.whitelist; `["*"]` enables all. Default: srvr only.
    pub four_letter_words: Vec<String>,
    /// autopurge.snapRetainCount (minimum 3).
    pub snapshots_retained: usize,
    /// autopurge.purgeInterval in hours; 0 disables the timer.
    pub purge_interval_hours: u64,
    /// snapCount: entries between snapshots.
    pub entries_per_snapshot: u64,
    /// snapSizeLimitInKb, in bytes: log bytes between snapshots (None: no limit).
    pub log_bytes_per_snapshot: Option<u64>,
    /// fsync.warningthresholdms: a log sync slower than this is logged and counted.
    pub fsync_warning_threshold_ms: u64,
    /// myid from dataDir (1 in standalone when absent, as ZooKeeper's standalone session ids).
    pub server_id: u8,
    /// zookeeper.DigestAuthenticationProvider.superDigest: `super:<base64 sha1>`.
    pub super_digest: Option<String>,
    /// zookeeper.extendedTypesEnabled: TTL nodes.
    pub extended_types_enabled: bool,
    /// zookeeper.enforceQuota.
    pub enforce_quota: bool,
    /// zookeeper.skipACL.
    pub skip_acl: bool,
    /// readonlymode.enabled: an ensemble member cut off from its quorum keeps serving reads
    /// to clients that asked for read-only sessions.
    pub read_only_mode_enabled: bool,
    /// zoolog.serverThreads: threads running connections and the core; 0 means one per CPU.
    /// Servers sharing a small machine do better with 1: no hand-offs between threads.
    pub server_threads: usize,
    /// znode.container.checkIntervalMs.
    pub container_check_interval_ms: u64,
    /// znode.container.maxNeverUsedIntervalMs.
    pub container_never_used_ms: i64,
    /// Containers and TTL nodes the reaper goes over at one tick at least (no key: the
    /// simulator makes it small, so that its checks span ticks).
    pub reap_scan_per_tick_min: usize,
    /// zookeeper.nio.sessionlessCnxnTimeout: time allowed to complete the handshake.
    pub handshake_timeout_ms: u64,
    /// reconfigEnabled.
    pub reconfig_enabled: bool,
    /// admin.*: the HTTP AdminServer, which also serves /metrics.
    pub admin: AdminServerConfig,
    /// metricsProvider.httpHost/httpPort when metricsProvider.className names ZooKeeper's
    /// PrometheusMetricsProvider: a second listener serving /metrics only.
    pub prometheus_addr: Option<SocketAddr>,
    /// The config file's text, for the AdminServer's `initial_configuration`.
    pub initial_configuration: Option<String>,
    /// The replicated ensemble this server belongs to (`server.N` lines); `None` for a
    /// standalone server. When `Some`, `server_id` is this server's id, a key of `members`.
    pub ensemble: Option<EnsembleConfig>,
}

/// The members of a ZooKeeper-style ensemble and its timing, from `server.N` lines,
/// `initLimit`, `syncLimit` and `peerType`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleConfig {
    /// Every member (participants and observers) by server id, 1..=255.
    pub members: BTreeMap<u64, PeerConfig>,
    /// initLimit, in ticks: how long a follower may take to connect to and sync with a leader.
    pub init_limit: u32,
    /// syncLimit, in ticks: how far a follower may fall behind a leader before it is dropped.
    pub sync_limit: u32,
    /// peerType: this server is an observer (it agrees with its own `server.N` line).
    pub observer: bool,
}

impl EnsembleConfig {
    /// The text of `/zookeeper/config`, as ZooKeeper writes it from a static configuration: one
    /// `server.N=host:quorum:election:role[;clientHost:clientPort]` line per member, then the
    /// configuration's version (0 until dynamic reconfiguration exists).
    pub fn membership_text(&self) -> String {
        let mut text = String::new();
        for (id, peer) in &self.members {
            let role = if peer.observer {
                "observer"
            } else {
                "participant"
            };
            text.push_str(&format!(
                "server.{id}={}:{}:{}:{role}",
                peer.host, peer.quorum_port, peer.election_port
            ));
            if let Some((host, port)) = &peer.client_address {
                text.push_str(&format!(";{host}:{port}"));
            }
            text.push('\n');
        }
        text.push_str("version=0");
        text
    }

    /// The members that vote (not observers), in id order.
    pub fn participants(&self) -> impl Iterator<Item = (u64, &PeerConfig)> {
        self.members
            .iter()
            .filter(|(_, peer)| !peer.observer)
            .map(|(id, peer)| (*id, peer))
    }
}

/// One `server.N=host:quorumPort:electionPort[:role][;[clientHost:]clientPort]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// The host name or IP address peers reach this member at (IPv6 without brackets).
    pub host: String,
    /// The port followers and observers connect to the leader on.
    pub quorum_port: u16,
    /// The port of leader election.
    pub election_port: u16,
    /// The line says `observer` (a non-voting member).
    pub observer: bool,
    /// The client address after `;` (`"0.0.0.0"` when only a port is given), if any.
    pub client_address: Option<(String, u16)>,
}

#[cfg(test)]
impl PeerConfig {
    /// A participant on 127.0.0.1 at ZooKeeper's usual ports, for tests that need a member.
    pub(crate) fn local_participant() -> PeerConfig {
        PeerConfig {
            host: "127.0.0.1".into(),
            quorum_port: 2888,
            election_port: 3888,
            observer: false,
            client_address: None,
        }
    }
}

/// ZooKeeper's AdminServer settings (`zookeeper.admin.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct AdminServerConfig {
    pub enabled: bool,
    pub addr: SocketAddr,
    /// The path prefix of commands, `/commands`.
    pub command_url: String,
    /// How long a connection may take to send its request, and stay idle.
    pub idle_timeout_ms: u64,
}

impl Default for AdminServerConfig {
    fn default() -> Self {
        AdminServerConfig {
            enabled: true,
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080),
            command_url: "/commands".to_owned(),
            idle_timeout_ms: 30_000,
        }
    }
}

/// The class name that turns on the Prometheus endpoint, as ZooKeeper users configure it.
pub const PROMETHEUS_PROVIDER_CLASS: &str =
    "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
const PROMETHEUS_DEFAULT_PORT: u16 = 7000;

impl Default for ServerConfig {
    /// ZooKeeper's defaults, with zoolog's embedded choices for what ZooKeeper leaves unset:
    /// tickTime 3000, dataDir `./zoolog-data` (dataLogDir the same), client address
    /// 127.0.0.1:2181, session timeouts 2 × / 20 × tickTime, maxClientCnxns 60, srvr only.
    fn default() -> Self {
        let tick_ms = DEFAULT_TICK_MS;
        let data_dir = PathBuf::from(DEFAULT_DATA_DIR);
        ServerConfig {
            tick_ms,
            data_log_dir: data_dir.clone(),
            data_dir,
            client_addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 2181),
            session_timeout_min_ms: 2 * tick_ms,
            session_timeout_max_ms: 20 * tick_ms,
            connections_per_ip_max: 60,
            connections_max: 0,
            outstanding_requests_per_connection_max: 1000,
            request_bytes_max: REQUEST_BYTES_MAX_DEFAULT,
            outbound_bytes_per_connection_max: 64 << 20,
            packet_bytes_max: 0xfffff,
            four_letter_words: vec!["srvr".to_owned()],
            snapshots_retained: 3,
            purge_interval_hours: 0,
            entries_per_snapshot: 100_000,
            log_bytes_per_snapshot: Some(LOG_BYTES_PER_SNAPSHOT_DEFAULT),
            fsync_warning_threshold_ms: zoolog_log::FSYNC_WARNING_THRESHOLD_MS_DEFAULT,
            server_id: 1,
            super_digest: None,
            extended_types_enabled: false,
            enforce_quota: false,
            skip_acl: false,
            read_only_mode_enabled: false,
            server_threads: 0,
            container_check_interval_ms: 60_000,
            container_never_used_ms: 300_000,
            reap_scan_per_tick_min: 1024,
            handshake_timeout_ms: 10_000,
            reconfig_enabled: false,
            admin: AdminServerConfig::default(),
            prometheus_addr: None,
            initial_configuration: None,
            ensemble: None,
        }
    }
}

const DEFAULT_TICK_MS: u64 = 3000;
const DEFAULT_DATA_DIR: &str = "./zoolog-data";
/// snapSizeLimitInKb's default: ZooKeeper's 4 GiB bounds a log on disk, but an ensemble
/// member here holds the entries since its last snapshot in memory as well.
const LOG_BYTES_PER_SNAPSHOT_DEFAULT: u64 = 512 << 20;
/// ZooKeeper reads most numeric settings into a Java `int`.
const INT_MAX: i64 = i32::MAX as i64;
/// More threads than this is a typo, not a machine.
const SERVER_THREADS_MAX: i64 = 1024;
/// What an ensemble's leader keeps in flight, and so what keeps its pipeline full; more
/// requests waiting at a member would only wait longer, in memory.
const REQUEST_BYTES_MAX_DEFAULT: usize = 64 << 20;

impl ServerConfig {
    /// The limits of the write-ahead log, standalone or replica: room for the largest request
    /// this configuration accepts (twice jute.maxbuffer, for the command around it), and the
    /// snapshots autopurge keeps.
    pub fn wal_limits(&self) -> zoolog_log::WalLimits {
        let defaults = zoolog_log::WalLimits::default();
        let entry_bytes_max = defaults.entry_bytes_max.max(self.packet_bytes_max * 2);
        zoolog_log::WalLimits {
            entry_bytes_max,
            queue_bytes_max: defaults.queue_bytes_max.max(entry_bytes_max),
            snapshots_retained: self.snapshots_retained,
            fsync_warning_threshold_ms: self.fsync_warning_threshold_ms,
            ..defaults
        }
    }

    /// Reads the settings for `zoolog serve`; `args` are the arguments after `serve`.
    ///
    /// Accepted arguments, in any order:
    /// - `--config FILE` or `--config=FILE`, or a bare `FILE` (as `zkServer.sh` passes the
    ///   zoo.cfg path); at most one file;
    /// - `-Dname=value`: a ZooKeeper system property (see the module documentation); as a
    ///   zoolog extension, a zoo.cfg key (`-DclientPort=2182`) is accepted too;
    /// - ZooKeeperServerMain's form `PORT DATADIR [TICKTIME [MAXCLIENTCNXNS]]` instead of a file.
    ///
    /// `env_jvm_flags` is the value of SERVER_JVMFLAGS: its `-Dname=value` tokens are read,
    /// other tokens (`-Xmx1g`, …) are ignored with a log line.
    ///
    /// Precedence, lowest first: defaults, the file, SERVER_JVMFLAGS, `-D` arguments.
    /// Session timeouts not set explicitly are derived from the final tickTime, dataLogDir
    /// defaults to the final dataDir, and `<dataDir>/myid`, when present, sets `server_id`.
    ///
    /// Log lines (ignored keys, adjusted values) go through `tracing`, so a subscriber should be
    /// installed before this is called.
    pub fn from_args(
        args: &[String],
        env_jvm_flags: Option<&str>,
    ) -> Result<ServerConfig, ConfigError> {
        let parsed = parse_command_line(args)?;
        let mut b = Builder::new();

        if let Some(path) = &parsed.file {
            let (text, entries) = read_config_file(path)?;
            b.config.initial_configuration = Some(text);
            for entry in entries {
                let origin = Origin::File {
                    path: path.clone(),
                    line: entry.line,
                };
                b.apply(
                    &entry.key,
                    &entry.value,
                    &origin,
                    KeySpace::File,
                    entry.array,
                )?;
            }
        }
        if !parsed.positional.is_empty() {
            // ZooKeeperServerMain: port dataDir [tickTime [maxClientCnxns]].
            let keys = ["clientPort", "dataDir", "tickTime", "maxClientCnxns"];
            for (key, value) in keys.iter().zip(&parsed.positional) {
                b.apply(key, value, &Origin::Argument, KeySpace::File, false)?;
            }
        }
        if let Some(flags) = env_jvm_flags {
            for token in flags.split_whitespace() {
                match token.strip_prefix("-D") {
                    Some(property) => {
                        let (name, value) = property.split_once('=').unwrap_or((property, ""));
                        if name.is_empty() {
                            tracing::warn!("SERVER_JVMFLAGS: {token:?}: no property name; ignored");
                            continue;
                        }
                        b.apply(
                            name,
                            value,
                            &Origin::JvmFlags,
                            KeySpace::SystemProperty,
                            false,
                        )?;
                    }
                    None => tracing::info!("SERVER_JVMFLAGS: {token:?} is a JVM option; ignored"),
                }
            }
        }
        for (name, value) in &parsed.properties {
            b.apply(
                name,
                value,
                &Origin::Argument,
                KeySpace::SystemProperty,
                false,
            )?;
        }
        b.finish()
    }

    /// The bytes of requests the server holds, read and not yet answered, over all its
    /// connections: `request_bytes_max`, but never less than one frame of the largest size
    /// accepted, so that every request can be read.
    pub fn request_budget_bytes(&self) -> usize {
        self.request_bytes_max.max(self.packet_bytes_max)
    }

    /// Whether the four-letter word `word` (e.g. `"ruok"`) may be answered: it is in the
    /// whitelist, or the whitelist holds `*`. As in ZooKeeper, `srvr` is always answered
    /// (`zkServer.sh status` needs it), and `isro` too in read-only mode (clients probe with it).
    pub fn four_letter_word_enabled(&self, word: &str) -> bool {
        word == "srvr"
            || (word == "isro" && self.read_only_mode_enabled)
            || self.four_letter_words.iter().any(|w| w == "*" || w == word)
    }
}

/// Where a setting came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A line of a config file (1-based; for a continued line, the line where it starts).
    File { path: PathBuf, line: usize },
    /// A `-Dname=value` token in SERVER_JVMFLAGS.
    JvmFlags,
    /// A command-line argument (`-Dname=value`, or ZooKeeperServerMain's positional form).
    Argument,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{}, line {line}", path.display()),
            Origin::JvmFlags => f.write_str("SERVER_JVMFLAGS"),
            Origin::Argument => f.write_str("command line"),
        }
    }
}

/// Why the settings could not be read. Every message names where the problem is (file and
/// line, SERVER_JVMFLAGS or the command line) and the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The arguments of `zoolog serve` are malformed.
    #[error("usage: zoolog serve [--config FILE | FILE] [-Dname=value ...]: {0}")]
    Usage(String),
    /// The config file does not exist.
    #[error("config file {}: not found", .path.display())]
    NotFound { path: PathBuf },
    /// The config file exists but cannot be read (permissions, a directory, …).
    #[error("config file {}: cannot be read: {source}", .path.display())]
    Unreadable { path: PathBuf, source: io::Error },
    /// The file is not valid TOML (or holds a malformed `\uXXXX` escape).
    #[error("{}, line {line}: {message}", .path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// A setting has a value that cannot be used.
    #[error("{origin}: {key}: {reason} (value {value:?})")]
    Invalid {
        origin: Origin,
        key: String,
        value: String,
        reason: String,
    },
    /// minSessionTimeout ended up larger than maxSessionTimeout.
    #[error("{}", session_timeouts_message(*.min_ms, .min_origin, *.max_ms, .max_origin))]
    SessionTimeouts {
        min_ms: u64,
        min_origin: Option<Origin>,
        max_ms: u64,
        max_origin: Option<Origin>,
    },
    /// `<dataDir>/myid` does not hold a server id, or (for an ensemble member) is missing or
    /// names no member.
    #[error("{}: {reason}", .path.display())]
    MyId { path: PathBuf, reason: String },
    /// The `server.N` lines do not make an ensemble (observers without participants, …).
    #[error("ensemble configuration: {0}")]
    Ensemble(String),
}

fn session_timeouts_message(
    min_ms: u64,
    min_origin: &Option<Origin>,
    max_ms: u64,
    max_origin: &Option<Origin>,
) -> String {
    let from = |origin: &Option<Origin>, multiple: u32| match origin {
        Some(origin) => format!("set at {origin}"),
        None => format!("the default, {multiple} × tickTime"),
    };
    format!(
        "minSessionTimeout ({min_ms} ms, {}) must not be larger than maxSessionTimeout ({max_ms} ms, {})",
        from(min_origin, 2),
        from(max_origin, 20)
    )
}

// ---------------------------------------------------------------------------------------------
// Command line.

#[derive(Default)]
struct CommandLine {
    file: Option<PathBuf>,
    positional: Vec<String>,
    properties: Vec<(String, String)>,
}

fn parse_command_line(args: &[String]) -> Result<CommandLine, ConfigError> {
    let mut out = CommandLine::default();
    let mut config_flag: Option<PathBuf> = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--config" {
            let Some(value) = iter.next() else {
                return Err(ConfigError::Usage("--config needs a file name".into()));
            };
            set_config_flag(&mut config_flag, value)?;
        } else if let Some(value) = arg.strip_prefix("--config=") {
            set_config_flag(&mut config_flag, value)?;
        } else if let Some(property) = arg.strip_prefix("-D") {
            let (name, value) = property.split_once('=').unwrap_or((property, ""));
            if name.is_empty() {
                return Err(ConfigError::Usage(format!(
                    "{arg:?}: expected -Dname=value"
                )));
            }
            out.properties.push((name.to_owned(), value.to_owned()));
        } else if arg.starts_with('-') && arg.len() > 1 {
            return Err(ConfigError::Usage(format!("unknown option {arg:?}")));
        } else {
            out.positional.push(arg.clone());
        }
    }
    match (config_flag, out.positional.len()) {
        (Some(file), 0) => out.file = Some(file),
        (Some(_), _) => {
            return Err(ConfigError::Usage(format!(
                "--config given, and also {:?}; give one config file",
                out.positional.join(" ")
            )))
        }
        (None, 0) => {}
        (None, 1) => out.file = Some(PathBuf::from(out.positional.pop().expect("one positional"))),
        (None, 2..=4) => {}
        (None, _) => {
            return Err(ConfigError::Usage(format!(
                "too many arguments: {:?}",
                out.positional.join(" ")
            )));
        }
    }
    Ok(out)
}

fn set_config_flag(slot: &mut Option<PathBuf>, value: &str) -> Result<(), ConfigError> {
    if value.is_empty() {
        return Err(ConfigError::Usage("--config needs a file name".into()));
    }
    if slot.is_some() {
        return Err(ConfigError::Usage("--config given more than once".into()));
    }
    *slot = Some(PathBuf::from(value));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Files.

/// One `key = value` of a file, in file order.
struct Entry {
    key: String,
    value: String,
    line: usize,
    /// A TOML array (only the 4lw whitelist takes one).
    array: bool,
}

/// The file's text and its entries.
fn read_config_file(path: &Path) -> Result<(String, Vec<Entry>), ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => ConfigError::NotFound {
            path: path.to_owned(),
        },
        _ => ConfigError::Unreadable {
            path: path.to_owned(),
            source,
        },
    })?;
    let is_toml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    if is_toml {
        let text = String::from_utf8(bytes).map_err(|e| ConfigError::Unreadable {
            path: path.to_owned(),
            source: io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8: {e}")),
        })?;
        let entries = parse_toml(path, &text)?;
        Ok((text, entries))
    } else {
        // Java reads properties files as ISO-8859-1; UTF-8 is what people write today.
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => e.into_bytes().iter().map(|&b| b as char).collect(),
        };
        let entries = parse_properties(path, &text)?;
        Ok((text, entries))
    }
}

/// Parses a Java properties file as `java.util.Properties.load` does: `#`/`!` comment lines,
/// `key=value`, `key: value` or `key value`, backslash continuations and escapes. Keys and
/// values are then trimmed, as ZooKeeper does.
fn parse_properties(path: &Path, text: &str) -> Result<Vec<Entry>, ConfigError> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut entries = Vec::new();
    let mut lines = text.split('\n').enumerate();
    while let Some((index, natural)) = lines.next() {
        let first = natural.trim_start_matches(is_properties_space);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let line = index + 1;
        let mut logical = String::new();
        let mut piece = first;
        loop {
            let backslashes = piece.len() - piece.trim_end_matches('\\').len();
            if backslashes % 2 == 1 {
                logical.push_str(&piece[..piece.len() - 1]);
                match lines.next() {
                    Some((_, next)) => piece = next.trim_start_matches(is_properties_space),
                    None => break,
                }
            } else {
                logical.push_str(piece);
                break;
            }
        }
        let (raw_key, raw_value) = split_property(&logical);
        let syntax = |message: String| ConfigError::Syntax {
            path: path.to_owned(),
            line,
            message,
        };
        let key = unescape_property(raw_key).map_err(syntax)?;
        let value = unescape_property(raw_value).map_err(syntax)?;
        entries.push(Entry {
            key: key.trim().to_owned(),
            value: value.trim().to_owned(),
            line,
            array: false,
        });
    }
    Ok(entries)
}

fn is_properties_space(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\x0c'
}

/// Splits a logical line into its raw (still escaped) key and value.
fn split_property(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    let mut value_start = line.len();
    let mut has_separator = false;
    for (i, c) in line.char_indices() {
        if !escaped && (c == '=' || c == ':') {
            key_end = i;
            value_start = i + 1;
            has_separator = true;
            break;
        }
        if !escaped && is_properties_space(c) {
            key_end = i;
            value_start = i + 1;
            break;
        }
        escaped = c == '\\' && !escaped;
    }
    let mut rest = &line[value_start..];
    loop {
        let trimmed = rest.trim_start_matches(is_properties_space);
        match trimmed.strip_prefix(['=', ':']) {
            Some(after) if !has_separator => {
                has_separator = true;
                rest = after;
            }
            _ => {
                rest = trimmed;
                break;
            }
        }
    }
    (&line[..key_end], rest)
}

fn unescape_property(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| format!("malformed \\uxxxx escape \"\\u{hex}\""))?;
                // A lone surrogate cannot be represented; Java would keep it.
                out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// A TOML document, kept with the position of every value for error messages.
enum TomlNode {
    Table(Vec<(String, Located)>),
    Array(Vec<TomlNode>),
    Scalar(String),
}

/// A TOML value and the byte offset where it starts. toml gives positions through
/// serde_spanned's protocol (a struct with these names); implicit tables made by dotted keys
/// have no position, which `toml::Spanned` cannot take, hence this small reimplementation.
struct Located {
    start: Option<usize>,
    node: TomlNode,
}

const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
const SPANNED_START: &str = "$__serde_spanned_private_start";
const SPANNED_END: &str = "$__serde_spanned_private_end";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];
/// How toml presents a datetime to serde: a one-entry map with this key.
const TOML_DATETIME_FIELD: &str = "$__toml_private_datetime";

impl<'de> Deserialize<'de> for TomlNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(deserializer.deserialize_any(NodeVisitor)?.node)
    }
}

impl<'de> Deserialize<'de> for Located {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, NodeVisitor)
    }
}

struct NodeVisitor;

fn unlocated<E>(node: TomlNode) -> Result<Located, E> {
    Ok(Located { start: None, node })
}

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Located;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Located, E> {
        unlocated(TomlNode::Scalar(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Located, E> {
        unlocated(TomlNode::Scalar(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Located, E> {
        unlocated(TomlNode::Scalar(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Located, E> {
        unlocated(TomlNode::Scalar(v.to_string()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Located, E> {
        unlocated(TomlNode::Scalar(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Located, E> {
        unlocated(TomlNode::Scalar(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Located, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<TomlNode>()? {
            items.push(item);
        }
        unlocated(TomlNode::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Located, A::Error> {
        let mut items = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if items.is_empty() && key == SPANNED_START {
                let start = map.next_value::<usize>()?;
                let mut node = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == SPANNED_VALUE {
                        node = Some(map.next_value::<TomlNode>()?);
                    } else {
                        map.next_value::<de::IgnoredAny>()?;
                    }
                }
                let node = node.ok_or_else(|| de::Error::missing_field(SPANNED_VALUE))?;
                return Ok(Located {
                    start: Some(start),
                    node,
                });
            }
            if items.is_empty() && key == TOML_DATETIME_FIELD {
                return unlocated(TomlNode::Scalar(map.next_value::<String>()?));
            }
            items.push((key, map.next_value::<Located>()?));
        }
        unlocated(TomlNode::Table(items))
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Reads a TOML file into dotted keys: nested tables are flattened, so `[autopurge]`
/// `snapRetainCount = 5`, `autopurge.snapRetainCount = 5` and `"autopurge.snapRetainCount" = 5`
/// are the same setting.
fn parse_toml(path: &Path, text: &str) -> Result<Vec<Entry>, ConfigError> {
    let root: TomlNode = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        line: e.span().map_or(1, |span| line_of(text, span.start)),
        message: e.message().trim().to_owned(),
    })?;
    let mut entries = Vec::new();
    if let TomlNode::Table(items) = root {
        flatten_toml(path, text, "", items, &mut entries)?;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for entry in &entries {
        if let Some(first) = seen.insert(&entry.key, entry.line) {
            return Err(ConfigError::Invalid {
                origin: Origin::File {
                    path: path.to_owned(),
                    line: entry.line,
                },
                key: entry.key.clone(),
                value: entry.value.clone(),
                reason: format!("already set on line {first}"),
            });
        }
    }
    Ok(entries)
}

fn flatten_toml(
    path: &Path,
    text: &str,
    prefix: &str,
    items: Vec<(String, Located)>,
    out: &mut Vec<Entry>,
) -> Result<(), ConfigError> {
    for (key, located) in items {
        let key = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        let line = located.start.map_or(0, |start| line_of(text, start));
        match located.node {
            TomlNode::Table(children) => flatten_toml(path, text, &key, children, out)?,
            TomlNode::Scalar(value) => out.push(Entry {
                key,
                value,
                line,
                array: false,
            }),
            TomlNode::Array(items) => {
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        TomlNode::Scalar(value) => values.push(value),
                        _ => {
                            return Err(ConfigError::Invalid {
                                origin: Origin::File {
                                    path: path.to_owned(),
                                    line,
                                },
                                key,
                                value: "[...]".to_owned(),
                                reason: "expected an array of strings".to_owned(),
                            })
                        }
                    }
                }
                out.push(Entry {
                    key,
                    value: values.join(","),
                    line,
                    array: true,
                });
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Settings.

/// Which names a key is looked up among.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeySpace {
    /// zoo.cfg / TOML: zoo.cfg keys and system property names; like ZooKeeper, an unknown key
    /// `k` is also tried as the system property `zookeeper.k` (`skipACL=yes`).
    File,
    /// `-D`: system property names, and zoo.cfg keys as a zoolog extension.
    SystemProperty,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    TickTime,
    DataDir,
    DataLogDir,
    ClientPort,
    ClientPortAddress,
    MinSessionTimeout,
    MaxSessionTimeout,
    MaxClientCnxns,
    MaxCnxns,
    SnapRetainCount,
    PurgeInterval,
    SnapCount,
    SnapSizeLimit,
    FsyncWarningThreshold,
    FourLetterWords,
    ReconfigEnabled,
    GlobalOutstandingLimit,
    JuteMaxBuffer,
    SuperDigest,
    ExtendedTypesEnabled,
    EnforceQuota,
    SkipAcl,
    ReadOnlyMode,
    ServerThreads,
    RequestBytesMax,
    ContainerCheckInterval,
    ContainerNeverUsed,
    SessionlessCnxnTimeout,
    AdminEnableServer,
    AdminServerAddress,
    AdminServerPort,
    AdminCommandUrl,
    AdminIdleTimeout,
    MetricsProviderClass,
    MetricsProviderHost,
    MetricsProviderPort,
    InitLimit,
    SyncLimit,
    StandaloneEnabled,
    PeerType,
}

/// Every name zoolog acts on, with the setting it sets.
const SETTINGS: &[(&str, Setting)] = &[
    ("tickTime", Setting::TickTime),
    ("dataDir", Setting::DataDir),
    ("dataLogDir", Setting::DataLogDir),
    ("clientPort", Setting::ClientPort),
    ("clientPortAddress", Setting::ClientPortAddress),
    ("minSessionTimeout", Setting::MinSessionTimeout),
    ("maxSessionTimeout", Setting::MaxSessionTimeout),
    ("maxClientCnxns", Setting::MaxClientCnxns),
    ("maxCnxns", Setting::MaxCnxns),
    ("zookeeper.maxCnxns", Setting::MaxCnxns),
    ("autopurge.snapRetainCount", Setting::SnapRetainCount),
    ("autopurge.purgeInterval", Setting::PurgeInterval),
    ("snapCount", Setting::SnapCount),
    ("zookeeper.snapCount", Setting::SnapCount),
    ("snapSizeLimitInKb", Setting::SnapSizeLimit),
    ("zookeeper.snapSizeLimitInKb", Setting::SnapSizeLimit),
    ("fsync.warningthresholdms", Setting::FsyncWarningThreshold),
    (
        "zookeeper.fsync.warningthresholdms",
        Setting::FsyncWarningThreshold,
    ),
    ("4lw.commands.whitelist", Setting::FourLetterWords),
    ("zookeeper.4lw.commands.whitelist", Setting::FourLetterWords),
    ("reconfigEnabled", Setting::ReconfigEnabled),
    ("globalOutstandingLimit", Setting::GlobalOutstandingLimit),
    (
        "zookeeper.globalOutstandingLimit",
        Setting::GlobalOutstandingLimit,
    ),
    ("jute.maxbuffer", Setting::JuteMaxBuffer),
    (
        "zookeeper.DigestAuthenticationProvider.superDigest",
        Setting::SuperDigest,
    ),
    (
        "zookeeper.extendedTypesEnabled",
        Setting::ExtendedTypesEnabled,
    ),
    ("zookeeper.enforceQuota", Setting::EnforceQuota),
    ("zookeeper.skipACL", Setting::SkipAcl),
    ("readonlymode.enabled", Setting::ReadOnlyMode),
    ("zoolog.serverThreads", Setting::ServerThreads),
    ("zoolog.requestBytesMax", Setting::RequestBytesMax),
    (
        "znode.container.checkIntervalMs",
        Setting::ContainerCheckInterval,
    ),
    (
        "znode.container.maxNeverUsedIntervalMs",
        Setting::ContainerNeverUsed,
    ),
    (
        "zookeeper.nio.sessionlessCnxnTimeout",
        Setting::SessionlessCnxnTimeout,
    ),
    ("zookeeper.admin.enableServer", Setting::AdminEnableServer),
    ("zookeeper.admin.serverAddress", Setting::AdminServerAddress),
    ("zookeeper.admin.serverPort", Setting::AdminServerPort),
    ("zookeeper.admin.commandURL", Setting::AdminCommandUrl),
    ("zookeeper.admin.idleTimeout", Setting::AdminIdleTimeout),
    ("metricsProvider.className", Setting::MetricsProviderClass),
    ("metricsProvider.httpHost", Setting::MetricsProviderHost),
    ("metricsProvider.httpPort", Setting::MetricsProviderPort),
    ("initLimit", Setting::InitLimit),
    ("syncLimit", Setting::SyncLimit),
    ("standaloneEnabled", Setting::StandaloneEnabled),
    ("peerType", Setting::PeerType),
];

fn lookup(name: &str) -> Option<Setting> {
    SETTINGS.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
}

/// Keys ZooKeeper knows that mean nothing to zoolog (logged at info).
fn not_applicable(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "electionAlg",
        "quorumListenOnAllIPs",
        "dynamicConfigFile",
        "leaderServes",
        "syncEnabled",
        "connectToLearnerMasterLimit",
        "localSessionsEnabled",
        "localSessionsUpgradingEnabled",
        "clientPortListenBacklog",
        "serverCnxnFactory",
        "zookeeper.serverCnxnFactory",
        "zookeeper.log.dir",
        "zookeeper.log.file",
        "zookeeper.root.logger",
        "zookeeper.jmx.log4j.disable",
        "zookeeper.datadir.autocreate",
        "zookeeper.log.threshold",
        "zookeeper.tracelog.dir",
        "zookeeper.tracelog.file",
        "log4j.configuration",
        "logback.configurationFile",
    ];
    const PREFIXES: &[&str] = &[
        "group.",
        "weight.",
        "admin.",
        "zookeeper.admin.",
        "metricsProvider.",
        "com.sun.management.",
        "java.",
        "sun.",
        "jdk.",
    ];
    EXACT.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

/// Why a key that names no setting is ignored, and how loudly to say so.
#[derive(Debug, PartialEq, Eq)]
enum Ignored {
    Info(String),
    Warn(String),
}

fn ignored(key: &str, space: KeySpace) -> Ignored {
    let prefixed = format!("zookeeper.{key}");
    if space == KeySpace::SystemProperty && lookup(&prefixed).is_some() {
        // A config file line is read under its `zookeeper.` name too; a -D flag is not,
        // in ZooKeeper either.
        return Ignored::Warn(format!(
            "not a system property ZooKeeper reads, so ignored; did you mean -D{prefixed}?"
        ));
    }
    if not_applicable(key) {
        return Ignored::Info("not used by zoolog; ignored".into());
    }
    if unsupported_security(key) {
        return Ignored::Warn("not supported by zoolog; ignored, so it is NOT enforced".into());
    }
    match SETTINGS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
    {
        Some((known, _)) => Ignored::Warn(format!(
            "unknown setting, ignored (keys are case-sensitive: did you mean {known}?)"
        )),
        None => Ignored::Warn("unknown setting; ignored".into()),
    }
}

/// Keys that ask for protection zoolog does not give (logged as a warning that says so).
fn unsupported_security(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "secureClientPort",
        "secureClientPortAddress",
        "requireClientAuthScheme",
        "sslQuorum",
        "portUnification",
        "client.portUnification",
        "zookeeper.sessionRequireClientSASLAuth",
        "sessionRequireClientSASLAuth",
        "enforce.auth.enabled",
        "zookeeper.enforce.auth.enabled",
        "enforce.auth.schemes",
        "zookeeper.enforce.auth.schemes",
        "zookeeper.serverCnxnFactory",
    ];
    const PREFIXES: &[&str] = &[
        "authProvider.",
        "zookeeper.authProvider.",
        "ssl.",
        "zookeeper.ssl.",
        "sasl",
        "zookeeper.sasl",
    ];
    EXACT.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

struct Builder {
    config: ServerConfig,
    data_log_dir: Option<PathBuf>,
    min_session: Option<(u64, Origin)>,
    max_session: Option<(u64, Origin)>,
    prometheus_enabled: bool,
    prometheus_ip: IpAddr,
    prometheus_port: u16,
    /// `server.N` lines by id, with where each came from.
    servers: BTreeMap<u64, (PeerConfig, Origin)>,
    init_limit: u32,
    sync_limit: u32,
    standalone_enabled: bool,
    /// peerType when set: observer?, and where.
    peer_type: Option<(bool, Origin)>,
    client_port_set: bool,
    client_ip_set: bool,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            config: ServerConfig::default(),
            data_log_dir: None,
            min_session: None,
            max_session: None,
            prometheus_enabled: false,
            prometheus_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            prometheus_port: PROMETHEUS_DEFAULT_PORT,
            servers: BTreeMap::new(),
            init_limit: 10,
            sync_limit: 5,
            standalone_enabled: true,
            peer_type: None,
            client_port_set: false,
            client_ip_set: false,
        }
    }

    fn apply(
        &mut self,
        key: &str,
        value: &str,
        origin: &Origin,
        space: KeySpace,
        array: bool,
    ) -> Result<(), ConfigError> {
        if let Some(id) = key.strip_prefix("server.") {
            return self.server_line(key, id, value, origin, array);
        }
        let setting = match space {
            KeySpace::File => lookup(key).or_else(|| lookup(&format!("zookeeper.{key}"))),
            KeySpace::SystemProperty => lookup(key),
        };
        let Some(setting) = setting else {
            match ignored(key, space) {
                Ignored::Info(reason) => tracing::info!("{origin}: {key}: {reason}"),
                Ignored::Warn(reason) => tracing::warn!("{origin}: {key}: {reason}"),
            }
            return Ok(());
        };
        let invalid = |reason: String| ConfigError::Invalid {
            origin: origin.clone(),
            key: key.to_owned(),
            value: value.to_owned(),
            reason,
        };
        if array && setting != Setting::FourLetterWords {
            return Err(invalid("expected a single value, not an array".into()));
        }
        let value = value.trim();
        let int = |min: i64, max: i64| parse_int(value, min, max).map_err(invalid);
        let c = &mut self.config;
        match setting {
            Setting::TickTime => c.tick_ms = int(1, INT_MAX)? as u64,
            Setting::DataDir => c.data_dir = parse_dir(value).map_err(invalid)?,
            Setting::DataLogDir => self.data_log_dir = Some(parse_dir(value).map_err(invalid)?),
            Setting::ClientPort => {
                c.client_addr.set_port(parse_port(value).map_err(invalid)?);
                self.client_port_set = true;
            }
            Setting::ClientPortAddress => {
                c.client_addr.set_ip(parse_address(value).map_err(invalid)?);
                self.client_ip_set = true;
            }
            Setting::MinSessionTimeout | Setting::MaxSessionTimeout => {
                // ZooKeeper's -1 means "derive from tickTime".
                let ms = if value == "-1" {
                    None
                } else {
                    Some((int(1, INT_MAX)? as u64, origin.clone()))
                };
                if setting == Setting::MinSessionTimeout {
                    self.min_session = ms;
                } else {
                    self.max_session = ms;
                }
            }
            Setting::MaxClientCnxns => c.connections_per_ip_max = int(0, INT_MAX)? as usize,
            Setting::MaxCnxns => c.connections_max = int(0, INT_MAX)? as usize,
            Setting::SnapRetainCount => {
                let count = int(i64::MIN, INT_MAX)?;
                if count < 3 {
                    tracing::warn!(
                        "{origin}: {key} = {count}: at least 3 snapshots are retained; using 3"
                    );
                }
                c.snapshots_retained = count.max(3) as usize;
            }
            Setting::PurgeInterval => {
                let hours = int(i64::MIN, INT_MAX)?;
                if hours < 0 {
                    tracing::info!("{origin}: {key} = {hours}: not positive; purging is disabled");
                }
                c.purge_interval_hours = hours.max(0) as u64;
            }
            Setting::SnapCount => {
                let count = int(i64::MIN, INT_MAX)?;
                if count < 2 {
                    tracing::warn!(
                        "{origin}: {key} = {count}: snapCount should be 2 or more; using 2"
                    );
                }
                c.entries_per_snapshot = count.max(2) as u64;
            }
            Setting::SnapSizeLimit => {
                let kib = int(i64::MIN, i64::MAX / 1024)?;
                c.log_bytes_per_snapshot = (kib > 0).then(|| kib as u64 * 1024);
            }
            Setting::FsyncWarningThreshold => {
                c.fsync_warning_threshold_ms = int(0, i64::MAX)? as u64
            }
            Setting::FourLetterWords => {
                c.four_letter_words = parse_four_letter_words(value, origin, key)
            }
            Setting::ReconfigEnabled => {
                c.reconfig_enabled = parse_bool(value, false).map_err(invalid)?
            }
            Setting::GlobalOutstandingLimit => {
                c.outstanding_requests_per_connection_max = int(1, INT_MAX)? as usize
            }
            Setting::JuteMaxBuffer => c.packet_bytes_max = int(1, INT_MAX)? as usize,
            Setting::SuperDigest => {
                c.super_digest = if value.is_empty() {
                    None
                } else if value
                    .split_once(':')
                    .is_some_and(|(user, digest)| !user.is_empty() && !digest.is_empty())
                {
                    Some(value.to_owned())
                } else {
                    return Err(invalid(
                        "expected user:base64(sha1(user:password)), e.g. super:...".into(),
                    ));
                }
            }
            Setting::ExtendedTypesEnabled => {
                c.extended_types_enabled = parse_bool(value, false).map_err(invalid)?
            }
            Setting::EnforceQuota => c.enforce_quota = parse_bool(value, false).map_err(invalid)?,
            Setting::SkipAcl => c.skip_acl = parse_bool(value, true).map_err(invalid)?,
            Setting::ReadOnlyMode => {
                c.read_only_mode_enabled = parse_bool(value, false).map_err(invalid)?
            }
            Setting::ServerThreads => c.server_threads = int(0, SERVER_THREADS_MAX)? as usize,
            Setting::RequestBytesMax => c.request_bytes_max = int(1, i64::MAX)? as usize,
            Setting::ContainerCheckInterval => {
                c.container_check_interval_ms = int(1, INT_MAX)? as u64
            }
            Setting::ContainerNeverUsed => c.container_never_used_ms = int(0, i64::MAX)?,
            Setting::SessionlessCnxnTimeout => c.handshake_timeout_ms = int(1, INT_MAX)? as u64,
            Setting::AdminEnableServer => {
                c.admin.enabled = parse_bool(value, false).map_err(invalid)?
            }
            Setting::AdminServerAddress => {
                c.admin.addr.set_ip(parse_address(value).map_err(invalid)?)
            }
            Setting::AdminServerPort => c.admin.addr.set_port(parse_port(value).map_err(invalid)?),
            Setting::AdminCommandUrl => {
                c.admin.command_url = parse_command_url(value).map_err(invalid)?
            }
            Setting::AdminIdleTimeout => c.admin.idle_timeout_ms = int(1, INT_MAX)? as u64,
            Setting::MetricsProviderClass => {
                self.prometheus_enabled = value == PROMETHEUS_PROVIDER_CLASS;
                if !self.prometheus_enabled {
                    tracing::warn!("{origin}: {key} = {value}: only {PROMETHEUS_PROVIDER_CLASS} is provided; no metrics endpoint besides the AdminServer's");
                }
            }
            Setting::MetricsProviderHost => {
                self.prometheus_ip = parse_address(value).map_err(invalid)?
            }
            Setting::MetricsProviderPort => {
                self.prometheus_port = parse_port(value).map_err(invalid)?
            }
            Setting::InitLimit => self.init_limit = int(1, INT_MAX)? as u32,
            Setting::SyncLimit => self.sync_limit = int(1, INT_MAX)? as u32,
            Setting::StandaloneEnabled => {
                self.standalone_enabled = parse_bool(value, false).map_err(invalid)?
            }
            Setting::PeerType => {
                let observer = parse_role(value).map_err(invalid)?;
                self.peer_type = Some((observer, origin.clone()));
            }
        }
        Ok(())
    }

    /// One `server.N` line (`id` is the text after `server.`).
    fn server_line(
        &mut self,
        key: &str,
        id: &str,
        value: &str,
        origin: &Origin,
        array: bool,
    ) -> Result<(), ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid {
            origin: origin.clone(),
            key: key.to_owned(),
            value: value.to_owned(),
            reason,
        };
        if array {
            return Err(invalid("expected a single value, not an array".into()));
        }
        let id = match id.parse::<u64>() {
            Ok(id @ 1..=255) => id,
            _ => {
                return Err(invalid(
                    "the server id after \"server.\" must be a whole number between 1 and 255"
                        .into(),
                ))
            }
        };
        let peer = parse_server_line(value.trim()).map_err(invalid)?;
        if let Some((_, first)) = self.servers.get(&id) {
            if same_source(first, origin) {
                return Err(invalid(format!("server id {id} already given at {first}")));
            }
        }
        self.servers.insert(id, (peer, origin.clone()));
        Ok(())
    }

    /// Decides standalone or ensemble from the `server.N` lines, ZooKeeper's way, and reads
    /// myid accordingly.
    fn finish_ensemble(&mut self) -> Result<(), ConfigError> {
        let c = &mut self.config;
        let participants = self.servers.values().filter(|(p, _)| !p.observer).count();
        let observers = self.servers.len() - participants;
        let line_list = |observer: bool| {
            self.servers
                .iter()
                .filter(|(_, (p, _))| p.observer == observer)
                .map(|(id, (_, origin))| format!("server.{id} ({origin})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let distributed = if participants == 0 {
            if observers > 0 {
                return Err(ConfigError::Ensemble(format!(
                    "observers without participants: {}",
                    line_list(true)
                )));
            }
            if !self.standalone_enabled {
                return Err(ConfigError::Ensemble(
                    "standaloneEnabled=false needs server.N lines with at least one participant"
                        .into(),
                ));
            }
            false
        } else if participants == 1 && self.standalone_enabled {
            if observers > 0 {
                return Err(ConfigError::Ensemble(format!(
                    "observers without a quorum: one participant ({}) and standaloneEnabled=true; \
                     add participants or set standaloneEnabled=false",
                    line_list(false)
                )));
            }
            tracing::info!(
                "one server line ({}) and standaloneEnabled=true: running standalone, as ZooKeeper does",
                line_list(false)
            );
            false
        } else {
            true
        };
        if !distributed {
            // Standalone ZooKeeper never reads myid, and Debian's /var/lib/zookeeper/myid holds
            // placeholder text: a bad one must not stop a standalone server.
            match read_myid(&c.data_dir) {
                Ok(Some(id)) => c.server_id = id,
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!("{error}; ignored by a standalone server, which uses id 1")
                }
            }
            return Ok(());
        }
        let ids = self
            .servers
            .keys()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let myid_path = c.data_dir.join("myid");
        let id = match read_myid(&c.data_dir) {
            Ok(Some(id)) => id,
            Ok(None) => {
                return Err(ConfigError::MyId {
                    path: myid_path,
                    reason: format!(
                        "missing; a member of an ensemble (server.N lines) needs it, holding its \
                         id: one of {ids}"
                    ),
                })
            }
            Err(ConfigError::MyId { path, reason }) => {
                return Err(ConfigError::MyId {
                    path,
                    reason: format!("{reason}; an ensemble member needs its id, one of {ids}"),
                })
            }
            Err(other) => return Err(other),
        };
        let Some((me, my_origin)) = self.servers.get(&u64::from(id)) else {
            return Err(ConfigError::MyId {
                path: myid_path,
                reason: format!("holds {id}, which is not among the server ids ({ids})"),
            });
        };
        c.server_id = id;
        let role = |observer: bool| if observer { "observer" } else { "participant" };
        if let Some((observer, origin)) = &self.peer_type {
            if *observer != me.observer {
                return Err(ConfigError::Invalid {
                    origin: origin.clone(),
                    key: "peerType".into(),
                    value: role(*observer).into(),
                    reason: format!(
                        "this server's own line, server.{id} at {my_origin}, makes it a {}",
                        role(me.observer)
                    ),
                });
            }
        }
        if let Some((host, port)) = &me.client_address {
            let line_error = |reason: String| ConfigError::Invalid {
                origin: my_origin.clone(),
                key: format!("server.{id}"),
                value: format!("{host}:{port}"),
                reason,
            };
            if self.client_port_set && c.client_addr.port() != *port {
                return Err(line_error(format!(
                    "the client port of this server's own line differs from clientPort {}",
                    c.client_addr.port()
                )));
            }
            c.client_addr.set_port(*port);
            let ip = parse_address(host).map_err(line_error)?;
            if !self.client_ip_set {
                c.client_addr.set_ip(ip);
            } else if !c.client_addr.ip().is_unspecified() && c.client_addr.ip() != ip {
                // ZooKeeper's rule: an explicit clientPortAddress must match, unless it is the
                // wildcard (then only the ports must).
                return Err(line_error(format!(
                    "the client address of this server's own line differs from \
                     clientPortAddress {}",
                    c.client_addr.ip()
                )));
            }
        }
        c.ensemble = Some(EnsembleConfig {
            members: self
                .servers
                .iter()
                .map(|(id, (peer, _))| (*id, peer.clone()))
                .collect(),
            init_limit: self.init_limit,
            sync_limit: self.sync_limit,
            observer: me.observer,
        });
        Ok(())
    }

    fn finish(mut self) -> Result<ServerConfig, ConfigError> {
        let mut c = std::mem::take(&mut self.config);
        c.data_log_dir = self
            .data_log_dir
            .take()
            .unwrap_or_else(|| c.data_dir.clone());
        c.session_timeout_min_ms = self
            .min_session
            .as_ref()
            .map_or(c.tick_ms.saturating_mul(2), |(ms, _)| *ms);
        c.session_timeout_max_ms = self
            .max_session
            .as_ref()
            .map_or(c.tick_ms.saturating_mul(20), |(ms, _)| *ms);
        if c.session_timeout_min_ms > c.session_timeout_max_ms {
            return Err(ConfigError::SessionTimeouts {
                min_ms: c.session_timeout_min_ms,
                min_origin: self.min_session.map(|(_, o)| o),
                max_ms: c.session_timeout_max_ms,
                max_origin: self.max_session.map(|(_, o)| o),
            });
        }
        self.config = c;
        self.finish_ensemble()?;
        let mut c = self.config;
        c.prometheus_addr = self
            .prometheus_enabled
            .then(|| SocketAddr::new(self.prometheus_ip, self.prometheus_port));
        Ok(c)
    }
}

/// Reads `<data_dir>/myid` if it exists: a server id 1..=255, surrounding whitespace allowed.
fn read_myid(data_dir: &Path) -> Result<Option<u8>, ConfigError> {
    let path = data_dir.join("myid");
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ConfigError::MyId {
                path,
                reason: format!("cannot be read: {e}"),
            })
        }
    };
    let text = String::from_utf8_lossy(&text);
    let trimmed = text.trim();
    match trimmed.parse::<u8>() {
        Ok(id @ 1..=255) => Ok(Some(id)),
        _ => {
            let shown: String = trimmed.chars().take(60).collect();
            Err(ConfigError::MyId {
                path,
                reason: format!("expected a server id between 1 and 255, found {shown:?}"),
            })
        }
    }
}

/// A whole number as ZooKeeper reads one (decimal; `0x`/`#` hexadecimal as in Java's
/// `Integer.decode`, which ZooKeeper uses for system properties), within `min..=max`.
fn parse_int(value: &str, min: i64, max: i64) -> Result<i64, String> {
    let (negative, body) = match value.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    let (digits, radix) = match body
        .strip_prefix("0x")
        .or_else(|| body.strip_prefix("0X"))
        .or_else(|| body.strip_prefix('#'))
    {
        Some(hex) => (hex, 16),
        None => (body, 10),
    };
    let range = || {
        if max == i64::MAX {
            format!("must be at least {min}")
        } else if min == i64::MIN {
            format!("must be at most {max}")
        } else {
            format!("must be between {min} and {max}")
        }
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        let hint = if value.contains('#') && radix == 10 {
            " (a comment must be on a line of its own)"
        } else {
            ""
        };
        return Err(format!("expected a whole number{hint}"));
    }
    let magnitude = i128::from_str_radix(digits, radix).map_err(|_| range())?;
    let number = if negative { -magnitude } else { magnitude };
    if number < min as i128 || number > max as i128 {
        return Err(range());
    }
    Ok(number as i64)
}

/// Whether two settings came from the same source (so a repeated server id is a mistake, not an
/// override).
fn same_source(a: &Origin, b: &Origin) -> bool {
    match (a, b) {
        (Origin::File { path: a, .. }, Origin::File { path: b, .. }) => a == b,
        (Origin::JvmFlags, Origin::JvmFlags) | (Origin::Argument, Origin::Argument) => true,
        _ => false,
    }
}

/// `participant` or `observer`, any case, as ZooKeeper reads peerType and server line roles.
fn parse_role(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "participant" => Ok(false),
        "observer" => Ok(true),
        _ => Err("expected participant or observer".into()),
    }
}

/// Splits `host:port...` where host may be `[v6]`: the host, then the `:`-separated rest.
fn split_host(text: &str) -> Result<(String, Vec<&str>), String> {
    let (host, rest) = if let Some(bracketed) = text.strip_prefix('[') {
        let (host, rest) = bracketed
            .split_once(']')
            .ok_or("an IPv6 address opened with [ is not closed with ]")?;
        let rest = match rest.strip_prefix(':') {
            Some(rest) => rest,
            None if rest.is_empty() => "",
            None => return Err(format!("unexpected {rest:?} after [{host}]")),
        };
        (host, rest)
    } else {
        text.split_once(':').unwrap_or((text, ""))
    };
    let parts = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split(':').collect()
    };
    Ok((host.trim().to_owned(), parts))
}

const SERVER_LINE_FORM: &str =
    "expected host:quorumPort:electionPort[:participant|observer][;[clientHost:]clientPort]";

/// `host:quorumPort:electionPort[:role][;[clientHost:]clientPort]`, as ZooKeeper's QuorumServer.
fn parse_server_line(value: &str) -> Result<PeerConfig, String> {
    let mut halves = value.split(';');
    let server = halves.next().unwrap_or("").trim();
    let client = halves.next().map(str::trim);
    if halves.next().is_some() {
        return Err(format!("more than one ';'; {SERVER_LINE_FORM}"));
    }
    if server.contains('|') {
        return Err(
            "several addresses for one server (a|b) are not supported; give one address".into(),
        );
    }
    let (host, parts) = split_host(server).map_err(|e| format!("{e}; {SERVER_LINE_FORM}"))?;
    if host.is_empty() || !(2..=3).contains(&parts.len()) {
        return Err(SERVER_LINE_FORM.into());
    }
    let peer_port = |name: &str, text: &str| match parse_int(text.trim(), 1, 65535) {
        Ok(port) => Ok(port as u16),
        Err(_) => Err(format!(
            "{name} {text:?} is not a port number between 1 and 65535; {SERVER_LINE_FORM}"
        )),
    };
    let quorum_port = peer_port("quorum port", parts[0])?;
    let election_port = peer_port("election port", parts[1])?;
    let observer = match parts.get(2) {
        None => false,
        Some(role) => parse_role(role.trim())
            .map_err(|_| format!("unknown role {role:?}: expected participant or observer"))?,
    };
    let client_address = match client {
        None => None,
        Some(client) => {
            let (host, port) = match client.rsplit_once(':') {
                Some(_) => {
                    let (host, parts) = split_host(client)?;
                    match parts.as_slice() {
                        [port] if !host.is_empty() => (host, *port),
                        _ => {
                            return Err(format!(
                                "bad client address {client:?}; {SERVER_LINE_FORM}"
                            ))
                        }
                    }
                }
                None => ("0.0.0.0".to_owned(), client),
            };
            let port = parse_port(port.trim()).map_err(|e| format!("client port {port:?}: {e}"))?;
            Some((host, port))
        }
    };
    Ok(PeerConfig {
        host,
        quorum_port,
        election_port,
        observer,
        client_address,
    })
}

fn parse_port(value: &str) -> Result<u16, String> {
    parse_int(value, 0, 65535)
        .map(|port| port as u16)
        .map_err(|_| "expected a port number between 0 and 65535".into())
}

/// A path prefix such as `/commands`: leading slash, no trailing one, no query.
fn parse_command_url(value: &str) -> Result<String, String> {
    let trimmed = value.trim_end_matches('/');
    if !trimmed.starts_with('/') || trimmed.contains(['?', '#', ' ']) {
        return Err("expected a path such as /commands".into());
    }
    Ok(trimmed.to_owned())
}

fn parse_bool(value: &str, allow_yes_no: bool) -> Result<bool, String> {
    if value.eq_ignore_ascii_case("true") || (allow_yes_no && value.eq_ignore_ascii_case("yes")) {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false")
        || (allow_yes_no && value.eq_ignore_ascii_case("no"))
    {
        Ok(false)
    } else if allow_yes_no {
        Err("expected yes, no, true or false".into())
    } else {
        Err("expected true or false".into())
    }
}

fn parse_dir(value: &str) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err("expected a directory".into());
    }
    // Relative paths stay relative: the process's current directory, as in ZooKeeper.
    Ok(PathBuf::from(value))
}

/// An IP address, `[v6]`, or a host name (resolved now; IPv4 preferred).
fn parse_address(value: &str) -> Result<IpAddr, String> {
    let host = value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .unwrap_or(value);
    if host.is_empty() {
        return Err("expected an IP address or host name".into());
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    let addrs: Vec<SocketAddr> = (host, 0u16)
        .to_socket_addrs()
        .map_err(|e| format!("not an IP address, and the host name cannot be resolved: {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .map(|a| a.ip())
        .ok_or_else(|| "the host name resolves to no address".to_owned())
}

fn parse_four_letter_words(value: &str, origin: &Origin, key: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
    {
        if word == "*" {
            return vec!["*".to_owned()];
        }
        // Others in a whitelist get a warning, and are kept.
        if !crate::four_letter::WORDS.contains(&word) {
            tracing::warn!("{origin}: {key}: {word:?} is not a four-letter word ZooKeeper knows");
        }
        if !words.iter().any(|w| w == word) {
            words.push(word.to_owned());
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ignored_key_says_why_and_suggests_the_name_meant() {
        let warning = ignored("admin.enableServer", KeySpace::SystemProperty);
        assert_eq!(
            warning,
            Ignored::Warn(
                "not a system property ZooKeeper reads, so ignored; did you mean \
                 -Dzookeeper.admin.enableServer?"
                    .into()
            )
        );
        assert_eq!(
            ignored("admin.unknownThing", KeySpace::File),
            Ignored::Info("not used by zoolog; ignored".into())
        );
        assert!(matches!(
            ignored("sslQuorum", KeySpace::File),
            Ignored::Warn(reason) if reason.contains("NOT enforced")
        ));
        assert!(matches!(
            ignored("ticktime", KeySpace::File),
            Ignored::Warn(reason) if reason.contains("did you mean tickTime?")
        ));
        assert_eq!(
            ignored("noSuchKey", KeySpace::File),
            Ignored::Warn("unknown setting; ignored".into())
        );
    }
}

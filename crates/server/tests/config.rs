//! `zoolog serve` settings: defaults, zoo.cfg and TOML files, SERVER_JVMFLAGS and `-D`
//! arguments, derived values, myid, and the error messages. Every file here is a real file in
//! a fresh temporary directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use std::collections::BTreeMap;

use zoolog_server::config::{
    AdminServerConfig, ConfigError, EnsembleConfig, Origin, PeerConfig, ServerConfig,
};

/// A directory removed when dropped (no dev-dependency needed).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("zoolog-config-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write temp file");
        path
    }

    /// A data directory inside this one (created), as a string for config files.
    fn data_dir(&self) -> String {
        let dir = self.0.join("data");
        std::fs::create_dir_all(&dir).expect("create data dir");
        dir.to_str().expect("utf-8 temp path").to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The settings read from `list`; the config file's text (`initial_configuration`) is left out
/// here and checked by its own test.
fn load(list: &[&str]) -> ServerConfig {
    let config =
        ServerConfig::from_args(&args(list), None).unwrap_or_else(|e| panic!("{list:?}: {e}"));
    ServerConfig {
        initial_configuration: None,
        ..config
    }
}

fn load_file(path: &Path) -> ServerConfig {
    load(&[path.to_str().unwrap()])
}

fn error(list: &[&str], jvm_flags: Option<&str>) -> String {
    match ServerConfig::from_args(&args(list), jvm_flags) {
        Ok(config) => panic!("{list:?} was accepted: {config:?}"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "{message:?} does not mention {part:?}"
        );
    }
}

/// Debian's /etc/zookeeper/conf/zoo.cfg (zookeeper 3.9 package), verbatim but for dataDir.
const DEBIAN_ZOO_CFG: &str = "\
# The number of milliseconds of each tick
tickTime=2000
# The number of ticks that the initial 
# synchronization phase can take
initLimit=10
# The number of ticks that can pass between 
# sending a request and getting an acknowledgement
syncLimit=5
# the directory where the snapshot is stored.
# do not use /tmp for storage, /tmp here is just 
# example sakes.
dataDir=DATADIR
# the port at which the clients will connect
clientPort=2181
# the maximum number of client connections.
# increase this if you need to handle more clients
#maxClientCnxns=60
#
# Be sure to read the maintenance section of the 
# administrator guide before turning on autopurge.
#
# https://zookeeper.apache.org/doc/current/zookeeperAdmin.html#sc_maintenance
#
# The number of snapshots to retain in dataDir
#autopurge.snapRetainCount=3
# Purge task interval in hours
# Set to \"0\" to disable auto purge feature
#autopurge.purgeInterval=1

## Metrics Providers
#
# https://prometheus.io Metrics Exporter
#metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider
#metricsProvider.httpHost=0.0.0.0
#metricsProvider.httpPort=7000
#metricsProvider.exportJvmInfo=true
";

// --- defaults ---------------------------------------------------------------------------------

#[test]
fn defaults_are_zookeepers_and_zoologs() {
    let c = ServerConfig::default();
    assert_eq!(c.tick_ms, 3000);
    assert_eq!(c.data_dir, PathBuf::from("./zoolog-data"));
    assert_eq!(c.data_log_dir, c.data_dir);
    assert_eq!(
        c.client_addr,
        "127.0.0.1:2181".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(c.session_timeout_min_ms, 6000);
    assert_eq!(c.session_timeout_max_ms, 60000);
    assert_eq!(c.connections_per_ip_max, 60);
    assert_eq!(c.connections_max, 0);
    assert_eq!(c.outstanding_requests_per_connection_max, 1000);
    assert_eq!(c.outbound_bytes_per_connection_max, 64 * 1024 * 1024);
    assert_eq!(c.packet_bytes_max, 0xfffff);
    assert_eq!(c.four_letter_words, vec!["srvr".to_owned()]);
    assert_eq!(c.snapshots_retained, 3);
    assert_eq!(c.purge_interval_hours, 0);
    assert_eq!(c.entries_per_snapshot, 100_000);
    assert_eq!(c.server_id, 1);
    assert_eq!(c.super_digest, None);
    assert!(!c.extended_types_enabled && !c.enforce_quota && !c.skip_acl && !c.reconfig_enabled);
    assert_eq!(c.container_check_interval_ms, 60_000);
    assert_eq!(c.container_never_used_ms, 300_000);
    assert_eq!(c.handshake_timeout_ms, 10_000);
    assert_eq!(c.ensemble, None);

    assert!(c.four_letter_word_enabled("srvr"));
    assert!(!c.four_letter_word_enabled("ruok"));
    assert!(!c.four_letter_word_enabled("stat"));
}

#[test]
fn no_arguments_give_the_defaults() {
    if Path::new("zoolog-data/myid").exists() {
        return; // someone's data directory in the test's working directory; not ours to judge
    }
    assert_eq!(load(&[]), ServerConfig::default());
    assert_eq!(
        ServerConfig::from_args(&[], Some("")).unwrap(),
        ServerConfig::default()
    );
}

// --- zoo.cfg ----------------------------------------------------------------------------------

#[test]
fn debian_zoo_cfg() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let path = dir.write("zoo.cfg", &DEBIAN_ZOO_CFG.replace("DATADIR", &data));
    let c = load_file(&path);
    let expected = ServerConfig {
        tick_ms: 2000,
        data_dir: PathBuf::from(&data),
        data_log_dir: PathBuf::from(&data),
        session_timeout_min_ms: 4000,
        session_timeout_max_ms: 40000,
        ..ServerConfig::default()
    };
    assert_eq!(c, expected);
}

#[test]
fn full_zoo_cfg_with_every_key() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let log = dir.path().join("log");
    let text = format!(
        "# a production-like standalone config\r\n\
         tickTime = 1000\r\n\
         dataDir={data}\r\n\
         dataLogDir : {log}\r\n\
         clientPortAddress=0.0.0.0\r\n\
         clientPort=2191\r\n\
         minSessionTimeout=3000\r\n\
         maxSessionTimeout=90000\r\n\
         maxClientCnxns=0\r\n\
         maxCnxns=500\r\n\
         autopurge.snapRetainCount=10\r\n\
         autopurge.purgeInterval=24\r\n\
         snapCount=50000\r\n\
         snapSizeLimitInKb=1048576\r\n\
         fsync.warningthresholdms=250\r\n\
         4lw.commands.whitelist=srvr, ruok,stat mntr\r\n\
         reconfigEnabled=false\r\n\
         globalOutstandingLimit=2000\r\n\
         jute.maxbuffer=4194304\r\n\
         ! a properties-style comment\r\n\
         zookeeper.DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=\r\n\
         zookeeper.extendedTypesEnabled=true\r\n\
         enforceQuota=true\r\n\
         skipACL=yes\r\n\
         znode.container.checkIntervalMs=5000\r\n\
         znode.container.maxNeverUsedIntervalMs=0\r\n\
         zookeeper.nio.sessionlessCnxnTimeout=2500\r\n\
         readonlymode.enabled=true\r\n\
         zoolog.serverThreads=1\r\n\
         zoolog.requestBytesMax=8388608\r\n\
         standaloneEnabled=true\r\n\
         admin.enableServer=false\r\n",
        log = log.display()
    );
    let c = load_file(&dir.write("zoo.cfg", &text));
    let expected = ServerConfig {
        tick_ms: 1000,
        data_dir: PathBuf::from(&data),
        data_log_dir: log,
        client_addr: "0.0.0.0:2191".parse().unwrap(),
        session_timeout_min_ms: 3000,
        session_timeout_max_ms: 90000,
        connections_per_ip_max: 0,
        connections_max: 500,
        outstanding_requests_per_connection_max: 2000,
        request_bytes_max: 8 << 20,
        outbound_bytes_per_connection_max: 64 << 20,
        packet_bytes_max: 4 << 20,
        four_letter_words: vec!["srvr".into(), "ruok".into(), "stat".into(), "mntr".into()],
        snapshots_retained: 10,
        purge_interval_hours: 24,
        entries_per_snapshot: 50000,
        log_bytes_per_snapshot: Some(1 << 30),
        fsync_warning_threshold_ms: 250,
        server_id: 1,
        super_digest: Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=".into()),
        extended_types_enabled: true,
        enforce_quota: true,
        skip_acl: true,
        read_only_mode_enabled: true,
        server_threads: 1,
        container_check_interval_ms: 5000,
        container_never_used_ms: 0,
        reap_scan_per_tick_min: 1024,
        handshake_timeout_ms: 2500,
        reconfig_enabled: false,
        admin: AdminServerConfig {
            enabled: false,
            ..AdminServerConfig::default()
        },
        prometheus_addr: None,
        initial_configuration: None,
        ensemble: None,
    };
    assert_eq!(c, expected);
    assert!(c.four_letter_word_enabled("mntr"));
    assert!(!c.four_letter_word_enabled("dump"));
}

#[test]
fn properties_syntax_continuations_separators_escapes() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let text = format!(
        "   # indented comment\n\
         \n\
         dataDir   {data}\n\
         tickTime:2500\n\
         4lw.commands.whitelist=srvr,\\\n\
         \x20   ruok,\\\n\
         \x20   # not a comment but a continuation: conf\n\
         snapCount = 7000   \n\
         snapCount=8000\n\
         zookeeper.DigestAuthenticationProvider.superDigest = super\\:abc\\u003d\n\
         \tclientPort\t=\t3181\n"
    );
    let c = load_file(&dir.write("zoo.cfg", &text));
    assert_eq!(c.data_dir, PathBuf::from(&data));
    assert_eq!(c.tick_ms, 2500);
    assert_eq!(
        c.four_letter_words,
        vec![
            "srvr",
            "ruok",
            "#",
            "not",
            "a",
            "comment",
            "but",
            "continuation:",
            "conf"
        ]
    );
    assert!(c.four_letter_word_enabled("conf"));
    assert_eq!(
        c.entries_per_snapshot, 8000,
        "a later line overrides an earlier one"
    );
    assert_eq!(c.super_digest.as_deref(), Some("super:abc="));
    assert_eq!(c.client_addr.port(), 3181);
}

#[test]
fn adjusted_values() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let path = dir.write(
        "zoo.cfg",
        &format!("dataDir={data}\nautopurge.snapRetainCount=1\nautopurge.purgeInterval=-1\nsnapCount=1\n"),
    );
    let c = load_file(&path);
    assert_eq!(c.snapshots_retained, 3);
    assert_eq!(c.purge_interval_hours, 0);
    assert_eq!(c.entries_per_snapshot, 2);
}

#[test]
fn four_letter_word_whitelists() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let star = load(&["-D4lw.commands.whitelist=*", &format!("-DdataDir={data}")]);
    assert_eq!(star.four_letter_words, vec!["*"]);
    for word in ["ruok", "srvr", "stat", "dump", "wchc"] {
        assert!(star.four_letter_word_enabled(word), "{word}");
    }
    let mixed = load(&[
        "-Dzookeeper.4lw.commands.whitelist=ruok, *",
        &format!("-DdataDir={data}"),
    ]);
    assert!(mixed.four_letter_word_enabled("cons"));
    let none = load(&[
        "-Dzookeeper.4lw.commands.whitelist=",
        &format!("-DdataDir={data}"),
    ]);
    assert!(none.four_letter_words.is_empty());
    assert!(!none.four_letter_word_enabled("ruok"));
    // As in ZooKeeper: srvr always, isro in read-only mode.
    assert!(none.four_letter_word_enabled("srvr"));
    assert!(!none.four_letter_word_enabled("isro"));
    let read_only = load(&[
        "-Dzookeeper.4lw.commands.whitelist=ruok",
        "-Dreadonlymode.enabled=true",
        &format!("-DdataDir={data}"),
    ]);
    assert!(read_only.four_letter_word_enabled("isro"));
    assert!(!read_only.four_letter_word_enabled("stat"));
}

#[test]
fn client_address_forms() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let d = format!("-DdataDir={data}");
    // Order does not matter: the port set before the address is kept.
    let c = load(&["-DclientPort=2300", "-DclientPortAddress=[::1]", &d]);
    assert_eq!(c.client_addr, "[::1]:2300".parse::<SocketAddr>().unwrap());
    let c = load(&["-DclientPortAddress=localhost", &d]);
    assert!(c.client_addr.ip().is_loopback());
    assert_eq!(c.client_addr.port(), 2181);
    let c = load(&["-DclientPort=0", &d]);
    assert_eq!(c.client_addr.port(), 0);
}

#[test]
fn relative_data_dir_stays_relative_to_the_current_directory() {
    let c = load(&["-DdataDir=some/relative/dir"]);
    assert_eq!(c.data_dir, PathBuf::from("some/relative/dir"));
    assert_eq!(c.data_log_dir, c.data_dir);
}

// --- TOML -------------------------------------------------------------------------------------

#[test]
fn toml_file() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let text = format!(
        r#"# zoolog.toml
tickTime = 2000
dataDir = "{data}"
clientPort = 2182
clientPortAddress = "127.0.0.1"
maxClientCnxns = 100
"4lw.commands.whitelist" = ["srvr", "ruok", "mntr"]
reconfigEnabled = false
jute.maxbuffer = 0x200000

[autopurge]
snapRetainCount = 4
purgeInterval = 12

[zookeeper]
extendedTypesEnabled = true
skipACL = "yes"
"DigestAuthenticationProvider.superDigest" = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="

[znode.container]
checkIntervalMs = 1000

[server]
1 = "localhost:2888:3888"

[metricsProvider]
className = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"
"#
    );
    let c = load(&[
        "--config",
        dir.write("zoolog.toml", &text).to_str().unwrap(),
    ]);
    let expected = ServerConfig {
        tick_ms: 2000,
        data_dir: PathBuf::from(&data),
        data_log_dir: PathBuf::from(&data),
        client_addr: "127.0.0.1:2182".parse().unwrap(),
        session_timeout_min_ms: 4000,
        session_timeout_max_ms: 40000,
        connections_per_ip_max: 100,
        four_letter_words: vec!["srvr".into(), "ruok".into(), "mntr".into()],
        packet_bytes_max: 0x200000,
        snapshots_retained: 4,
        purge_interval_hours: 12,
        extended_types_enabled: true,
        skip_acl: true,
        super_digest: Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=".into()),
        container_check_interval_ms: 1000,
        prometheus_addr: Some("127.0.0.1:7000".parse().unwrap()),
        ..ServerConfig::default()
    };
    assert_eq!(c, expected);
}

#[test]
fn toml_dotted_quoted_and_string_forms_are_the_same_setting() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let text = format!(
        "dataDir = \"{data}\"\ntickTime = \"1500\"\nautopurge.snapRetainCount = 6\n4lw.commands.whitelist = \"*\"\n"
    );
    let c = load(&[&format!(
        "--config={}",
        dir.write("z.toml", &text).display()
    )]);
    assert_eq!(c.tick_ms, 1500);
    assert_eq!(c.snapshots_retained, 6);
    assert!(c.four_letter_word_enabled("dump"));

    let twice = "\"autopurge.snapRetainCount\" = 5\n\n[autopurge]\nsnapRetainCount = 6\n";
    let message = error(&[dir.write("twice.toml", twice).to_str().unwrap()], None);
    assert_mentions(
        &message,
        &[
            "twice.toml",
            "line 4",
            "autopurge.snapRetainCount",
            "already set on line 1",
        ],
    );
}

#[test]
fn toml_errors_name_file_line_and_key() {
    let dir = TempDir::new();
    let path = dir.write("bad.toml", "clientPort = 2181\ntickTime = \"soon\"\n");
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["bad.toml", "line 2", "tickTime", "soon", "whole number"],
    );

    let path = dir.write("syntax.toml", "tickTime = 2000\n\ndataDir = \n");
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["syntax.toml", "line 3"],
    );

    let path = dir.write("array.toml", "dataDir = [\"a\", \"b\"]\n");
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["array.toml", "line 1", "dataDir", "array"],
    );
}

// --- precedence -------------------------------------------------------------------------------

#[test]
fn precedence_file_then_jvm_flags_then_arguments() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let path = dir.write(
        "zoo.cfg",
        &format!("dataDir={data}\nsnapCount=1000\nzookeeper.extendedTypesEnabled=false\njute.maxbuffer=1000\n"),
    );
    let file = path.to_str().unwrap();
    let flags = "-Xmx1g -server -Dzookeeper.snapCount=2000 -XX:+UseG1GC -Dzookeeper.extendedTypesEnabled=true \
                 -Dcom.sun.management.jmxremote -Dzookeeper.log.dir=/var/log/zookeeper";

    let c = ServerConfig::from_args(&args(&[file]), None).unwrap();
    assert_eq!(
        (
            c.entries_per_snapshot,
            c.extended_types_enabled,
            c.packet_bytes_max
        ),
        (1000, false, 1000)
    );

    let c = ServerConfig::from_args(&args(&[file]), Some(flags)).unwrap();
    assert_eq!(
        (
            c.entries_per_snapshot,
            c.extended_types_enabled,
            c.packet_bytes_max
        ),
        (2000, true, 1000)
    );

    let c = ServerConfig::from_args(
        &args(&[
            "-Dzookeeper.snapCount=3000",
            file,
            "-Djute.maxbuffer=0x1000",
        ]),
        Some(flags),
    )
    .unwrap();
    assert_eq!(
        (
            c.entries_per_snapshot,
            c.extended_types_enabled,
            c.packet_bytes_max
        ),
        (3000, true, 4096)
    );

    // A later -D argument wins over an earlier one.
    let c = ServerConfig::from_args(
        &args(&[file, "-DsnapCount=5", "-Dzookeeper.snapCount=6"]),
        Some(flags),
    )
    .unwrap();
    assert_eq!(c.entries_per_snapshot, 6);
}

#[test]
fn snap_size_limit_is_in_kib_and_non_positive_turns_it_off() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let file = dir.write("zoo.cfg", &format!("dataDir={data}\n"));
    let file = file.to_str().unwrap();
    let limit = |flags: &str| {
        ServerConfig::from_args(&args(&[file]), Some(flags))
            .unwrap()
            .log_bytes_per_snapshot
    };
    assert_eq!(limit(""), Some(512 << 20), "the default");
    assert_eq!(limit("-Dzookeeper.snapSizeLimitInKb=64"), Some(64 << 10));
    assert_eq!(limit("-Dzookeeper.snapSizeLimitInKb=0"), None);
    assert_eq!(limit("-Dzookeeper.snapSizeLimitInKb=-1"), None);
    assert!(
        error(&[file], Some("-Dzookeeper.snapSizeLimitInKb=lots")).contains("snapSizeLimitInKb"),
        "a value that is not a number is refused, by name"
    );
}

#[test]
fn config_flag_forms_and_zookeeper_server_main_positionals() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let path = dir.write("zoo.cfg", &format!("dataDir={data}\ntickTime=1234\n"));
    let p = path.to_str().unwrap();
    assert_eq!(load(&["--config", p]).tick_ms, 1234);
    assert_eq!(load(&[&format!("--config={p}")]).tick_ms, 1234);
    assert_eq!(load(&[p]).tick_ms, 1234);

    // ZooKeeperServerMain: port dataDir [tickTime [maxClientCnxns]]
    let c = load(&["2999", &data, "500", "7"]);
    assert_eq!(c.client_addr.port(), 2999);
    assert_eq!(c.data_dir, PathBuf::from(&data));
    assert_eq!(c.data_log_dir, PathBuf::from(&data));
    assert_eq!(c.tick_ms, 500);
    assert_eq!(c.connections_per_ip_max, 7);
    assert_eq!(c.session_timeout_max_ms, 10_000);
}

// --- derived session timeouts -----------------------------------------------------------------

#[test]
fn session_timeouts_follow_tick_time_unless_set() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let d = format!("-DdataDir={data}");

    let c = load(&["-DtickTime=1000", &d]);
    assert_eq!(
        (c.session_timeout_min_ms, c.session_timeout_max_ms),
        (2000, 20000)
    );

    // tickTime set after the timeouts' source (file first, -D later) still drives derivation.
    let path = dir.write(
        "zoo.cfg",
        &format!("dataDir={data}\nmaxSessionTimeout=50000\ntickTime=2000\n"),
    );
    let c = load(&[path.to_str().unwrap(), "-DtickTime=500"]);
    assert_eq!(
        (
            c.tick_ms,
            c.session_timeout_min_ms,
            c.session_timeout_max_ms
        ),
        (500, 1000, 50000)
    );

    let c = load(&["-DtickTime=1000", "-DminSessionTimeout=7000", &d]);
    assert_eq!(
        (c.session_timeout_min_ms, c.session_timeout_max_ms),
        (7000, 20000)
    );

    let c = load(&["-DtickTime=100", "-DminSessionTimeout=300", &d]);
    assert_eq!(
        (c.session_timeout_min_ms, c.session_timeout_max_ms),
        (300, 2000)
    );

    // ZooKeeper's -1 means "derive".
    let c = load(&[
        "-DtickTime=100",
        "-DminSessionTimeout=300",
        "-DminSessionTimeout=-1",
        &d,
    ]);
    assert_eq!(c.session_timeout_min_ms, 200);
}

#[test]
fn min_session_timeout_above_max_is_an_error() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let path = dir.write(
        "zoo.cfg",
        &format!("dataDir={data}\nminSessionTimeout=30000\nmaxSessionTimeout=20000\n"),
    );
    let message = error(&[path.to_str().unwrap()], None);
    assert_mentions(
        &message,
        &[
            "minSessionTimeout",
            "maxSessionTimeout",
            "30000",
            "20000",
            "zoo.cfg, line 2",
            "line 3",
        ],
    );

    // Explicit min above the max derived from tickTime (20 × 1000).
    let message = error(
        &[
            "-DtickTime=1000",
            "-DminSessionTimeout=25000",
            &format!("-DdataDir={data}"),
        ],
        None,
    );
    assert_mentions(
        &message,
        &[
            "minSessionTimeout",
            "maxSessionTimeout",
            "20 × tickTime",
            "command line",
        ],
    );
}

// --- myid -------------------------------------------------------------------------------------

#[test]
fn myid_sets_the_server_id() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let d = format!("-DdataDir={data}");
    assert_eq!(load(&[&d]).server_id, 1);

    std::fs::write(Path::new(&data).join("myid"), "7\n").unwrap();
    assert_eq!(load(&[&d]).server_id, 7);
    std::fs::write(Path::new(&data).join("myid"), "  254 \r\n").unwrap();
    assert_eq!(load(&[&d]).server_id, 254);
}

#[test]
fn bad_myid_is_ignored_by_a_standalone_server() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let d = format!("-DdataDir={data}");
    // Debian's placeholder, as /var/lib/zookeeper/myid links to.
    for bad in [
        "replace this text with the cluster-unique zookeeper's instance id (1-255)\n",
        "0",
        "256",
        "-3",
        "",
        "1 2",
    ] {
        std::fs::write(Path::new(&data).join("myid"), bad).unwrap();
        assert_eq!(
            load(&[&d]).server_id,
            1,
            "myid {bad:?} is ignored, as standalone ZooKeeper does"
        );
    }
}

// --- errors -----------------------------------------------------------------------------------

#[test]
fn non_numeric_numbers_name_file_line_and_key() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    for key in [
        "tickTime",
        "maxClientCnxns",
        "maxCnxns",
        "minSessionTimeout",
        "maxSessionTimeout",
        "autopurge.snapRetainCount",
        "autopurge.purgeInterval",
        "snapCount",
        "globalOutstandingLimit",
        "jute.maxbuffer",
        "znode.container.checkIntervalMs",
        "znode.container.maxNeverUsedIntervalMs",
        "zookeeper.nio.sessionlessCnxnTimeout",
    ] {
        let path = dir.write(
            "zoo.cfg",
            &format!("dataDir={data}\n# comment\n\n{key}=12abc\n"),
        );
        let message = error(&[path.to_str().unwrap()], None);
        assert_mentions(&message, &["zoo.cfg, line 4", key, "12abc", "whole number"]);
    }
    // A trailing comment is part of the value, as in ZooKeeper; the message says so.
    let path = dir.write("zoo.cfg", "tickTime=2000 # two seconds\n");
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["line 1", "tickTime", "comment"],
    );
}

#[test]
fn out_of_range_values() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    for (line, needle) in [
        ("clientPort=65536", "clientPort"),
        ("clientPort=-1", "clientPort"),
        ("clientPort=http", "clientPort"),
        ("tickTime=0", "tickTime"),
        ("tickTime=-5", "tickTime"),
        ("tickTime=99999999999", "tickTime"),
        ("maxClientCnxns=-1", "maxClientCnxns"),
        ("jute.maxbuffer=0", "jute.maxbuffer"),
        ("minSessionTimeout=0", "minSessionTimeout"),
    ] {
        let path = dir.write("zoo.cfg", &format!("dataDir={data}\n{line}\n"));
        let message = error(&[path.to_str().unwrap()], None);
        assert_mentions(&message, &["zoo.cfg, line 2", needle]);
    }
    let path = dir.write("zoo.cfg", "clientPort=70000\n");
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["clientPort", "65535", "70000"],
    );
    let path = dir.write("zoo.cfg", "tickTime=0\n");
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["tickTime", "between 1 and"],
    );
}

#[test]
fn other_bad_values() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    for (line, needle) in [
        ("reconfigEnabled=maybe", "true or false"),
        ("zookeeper.skipACL=sure", "yes, no, true or false"),
        (
            "zookeeper.DigestAuthenticationProvider.superDigest=nocolon",
            "user:",
        ),
        ("dataDir=", "directory"),
        (
            "clientPortAddress=no.such.host.invalid",
            "clientPortAddress",
        ),
    ] {
        let path = dir.write("zoo.cfg", &format!("dataDir={data}\n{line}\n"));
        let message = error(&[path.to_str().unwrap()], None);
        assert_mentions(
            &message,
            &["zoo.cfg, line 2", line.split('=').next().unwrap(), needle],
        );
    }
}

#[test]
fn errors_from_jvm_flags_and_arguments_say_where() {
    let message = error(&[], Some("-Xmx1g -Dzookeeper.snapCount=lots"));
    assert_mentions(
        &message,
        &["SERVER_JVMFLAGS", "zookeeper.snapCount", "lots"],
    );
    let message = error(&["-Djute.maxbuffer=big"], None);
    assert_mentions(&message, &["command line", "jute.maxbuffer", "big"]);
}

#[test]
fn missing_and_unreadable_files() {
    let dir = TempDir::new();
    let missing = dir.path().join("nope.cfg");
    let message = error(&[missing.to_str().unwrap()], None);
    assert_mentions(&message, &["nope.cfg", "not found"]);
    assert!(matches!(
        ServerConfig::from_args(&args(&[missing.to_str().unwrap()]), None),
        Err(ConfigError::NotFound { .. })
    ));

    // A directory cannot be read as a file (permission tests would pass as root).
    let subdir = dir.path().join("conf.cfg");
    std::fs::create_dir(&subdir).unwrap();
    let message = error(&["--config", subdir.to_str().unwrap()], None);
    assert_mentions(&message, &["conf.cfg", "cannot be read"]);

    let path = dir.path().join("latin.toml");
    std::fs::write(&path, b"dataDir = \"caf\xe9\"\n").unwrap();
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["latin.toml", "UTF-8"],
    );
}

#[test]
fn usage_errors() {
    let dir = TempDir::new();
    let path = dir.write("zoo.cfg", "tickTime=2000\n");
    let p = path.to_str().unwrap();
    assert_mentions(&error(&["--config"], None), &["--config needs a file name"]);
    assert_mentions(
        &error(&["--config="], None),
        &["--config needs a file name"],
    );
    assert_mentions(&error(&["--config", p, p], None), &["one config file"]);
    assert_mentions(
        &error(&["--config", p, "--config", p], None),
        &["more than once"],
    );
    assert_mentions(
        &error(&["--verbose"], None),
        &["unknown option", "--verbose"],
    );
    assert_mentions(&error(&["-D=3"], None), &["-Dname=value"]);
    assert_mentions(
        &error(&["a", "b", "c", "d", "e"], None),
        &["too many arguments"],
    );
}

#[test]
fn error_values_carry_the_origin_and_key() {
    let dir = TempDir::new();
    let path = dir.write("zoo.cfg", "\n\nmaxCnxns=x\n");
    match ServerConfig::from_args(&args(&[path.to_str().unwrap()]), None) {
        Err(ConfigError::Invalid {
            origin, key, value, ..
        }) => {
            assert_eq!(
                origin,
                Origin::File {
                    path: path.clone(),
                    line: 3
                }
            );
            assert_eq!(key, "maxCnxns");
            assert_eq!(value, "x");
        }
        other => panic!("{other:?}"),
    }
}

// --- ignored keys -----------------------------------------------------------------------------

#[test]
fn unknown_and_inapplicable_keys_are_ignored() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let text = format!(
        "dataDir={data}\n\
         tickTime=2000\n\
         initLimit=10\n\
         syncLimit=5\n\
         server.1=zk1:2888:3888\n\
         admin.serverPort=8080\n\
         admin.enableServer=false\n\
         metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
         metricsProvider.httpPort=7000\n\
         authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
         secureClientPort=2281\n\
         ticktime=9999\n\
         someFutureSetting=whatever it is\n\
         =value without a key\n"
    );
    let path = dir.write("zoo.cfg", &text);
    let flags = "-Dzookeeper.admin.enableServer=false -Dsome.unknown.property=1 -Dzookeeper.root.logger=INFO,CONSOLE";
    let c = ServerConfig::from_args(
        &args(&[
            path.to_str().unwrap(),
            "-Dno.such=thing",
            "-Dzookeeper.tickTime=1",
        ]),
        Some(flags),
    )
    .unwrap();
    let expected = ServerConfig {
        tick_ms: 2000,
        data_dir: PathBuf::from(&data),
        data_log_dir: PathBuf::from(&data),
        session_timeout_min_ms: 4000,
        session_timeout_max_ms: 40000,
        // The AdminServer and Prometheus keys among them are honoured.
        admin: AdminServerConfig {
            enabled: false,
            ..AdminServerConfig::default()
        },
        prometheus_addr: Some("127.0.0.1:7000".parse().unwrap()),
        initial_configuration: Some(text),
        ..ServerConfig::default()
    };
    assert_eq!(c, expected);
}

#[test]
fn admin_server_and_prometheus_settings() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let text = format!(
        "dataDir={data}\n\
         admin.serverAddress=0.0.0.0\n\
         admin.serverPort=9090\n\
         admin.commandURL=/ops/\n\
         admin.idleTimeout=5000\n\
         metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
         metricsProvider.httpHost=127.0.0.2\n\
         metricsProvider.httpPort=7001\n"
    );
    let path = dir.write("zoo.cfg", &text);
    let c = ServerConfig::from_args(
        &args(&[path.to_str().unwrap(), "-Dzookeeper.admin.serverPort=9091"]),
        None,
    )
    .unwrap();
    assert_eq!(
        c.admin,
        AdminServerConfig {
            enabled: true,
            addr: "0.0.0.0:9091".parse().unwrap(),
            command_url: "/ops".into(),
            idle_timeout_ms: 5000,
        }
    );
    assert_eq!(c.prometheus_addr, Some("127.0.0.2:7001".parse().unwrap()));
    assert_eq!(c.initial_configuration, Some(text));

    let defaults = load(&[]);
    assert_eq!(defaults.admin, AdminServerConfig::default());
    assert!(defaults.admin.enabled, "on by default, as in ZooKeeper 3.9");
    assert_eq!(defaults.prometheus_addr, None);
    assert_mentions(
        &error(&["-Dzookeeper.admin.commandURL=commands"], None),
        &["zookeeper.admin.commandURL", "/commands"],
    );
    assert_mentions(
        &error(&["-Dzookeeper.admin.serverPort=70000"], None),
        &["zookeeper.admin.serverPort", "65535"],
    );
}

// --- ensembles --------------------------------------------------------------------------------

fn peer(host: &str, quorum_port: u16, election_port: u16) -> PeerConfig {
    PeerConfig {
        host: host.into(),
        quorum_port,
        election_port,
        observer: false,
        client_address: None,
    }
}

/// A temp dir with a data dir holding `myid` (when given), and the data dir's path.
fn with_myid(myid: Option<&str>) -> (TempDir, String) {
    let dir = TempDir::new();
    let data = dir.data_dir();
    if let Some(myid) = myid {
        std::fs::write(Path::new(&data).join("myid"), myid).unwrap();
    }
    (dir, data)
}

/// The ensemble the zoo.cfg, TOML and -D tests below all describe.
fn three_servers_and_an_observer() -> EnsembleConfig {
    let mut members = BTreeMap::new();
    members.insert(1, peer("zk1.example", 2888, 3888));
    members.insert(
        2,
        PeerConfig {
            client_address: Some(("127.0.0.1".into(), 2182)),
            ..peer("127.0.0.1", 2889, 3889)
        },
    );
    members.insert(
        3,
        PeerConfig {
            observer: false,
            client_address: Some(("0.0.0.0".into(), 2181)),
            ..peer("::1", 2890, 3890)
        },
    );
    members.insert(
        200,
        PeerConfig {
            observer: true,
            ..peer("zk200.example", 2891, 3891)
        },
    );
    EnsembleConfig {
        members,
        init_limit: 20,
        sync_limit: 7,
        observer: false,
    }
}

#[test]
fn ensemble_from_zoo_cfg() {
    let (dir, data) = with_myid(Some("2\n"));
    let text = format!(
        "tickTime=2000\n\
         dataDir={data}\n\
         initLimit=20\n\
         syncLimit=7\n\
         server.1=zk1.example:2888:3888\n\
         server.2 = 127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
         server.3=[::1]:2890:3890:Participant;2181\n\
         server.200=zk200.example:2891:3891:observer\n"
    );
    let c = load_file(&dir.write("zoo.cfg", &text));
    assert_eq!(c.ensemble, Some(three_servers_and_an_observer()));
    assert_eq!(c.server_id, 2);
    // The server's own line gives its client address.
    assert_eq!(c.client_addr, "127.0.0.1:2182".parse().unwrap());
    let ensemble = c.ensemble.unwrap();
    let voters: Vec<u64> = ensemble.participants().map(|(id, _)| id).collect();
    assert_eq!(voters, [1, 2, 3]);
}

#[test]
fn ensemble_from_toml_in_both_forms() {
    let (dir, data) = with_myid(Some("2"));
    let text = format!(
        r#"dataDir = "{data}"
initLimit = 20
syncLimit = "7"
"server.1" = "zk1.example:2888:3888"

[server]
2 = "127.0.0.1:2889:3889:participant;127.0.0.1:2182"
3 = "[::1]:2890:3890:Participant;2181"
200 = "zk200.example:2891:3891:observer"
"#
    );
    let c = load_file(&dir.write("zoolog.toml", &text));
    assert_eq!(c.ensemble, Some(three_servers_and_an_observer()));
    assert_eq!(c.server_id, 2);

    // The same id in the flat and the table form is one setting given twice.
    let twice =
        format!("dataDir = \"{data}\"\n\"server.1\" = \"a:1:2\"\n[server]\n1 = \"b:1:2\"\n");
    assert_mentions(
        &error(&[dir.write("twice.toml", &twice).to_str().unwrap()], None),
        &["twice.toml", "line 4", "server.1", "already set on line 2"],
    );
    // Dotted keys, TOML's third form.
    let dotted = format!(
        "dataDir = \"{data}\"\ninitLimit = 20\nsyncLimit = 7\nserver.1 = \"zk1.example:2888:3888\"\n\
         server.2 = \"127.0.0.1:2889:3889:participant;127.0.0.1:2182\"\n\
         server.3 = \"[::1]:2890:3890:Participant;2181\"\n\
         server.200 = \"zk200.example:2891:3891:observer\"\n"
    );
    let c = load_file(&dir.write("dotted.toml", &dotted));
    assert_eq!(c.ensemble, Some(three_servers_and_an_observer()));
    // An array is no server line.
    let array = format!("dataDir = \"{data}\"\nserver.1 = [\"a:1:2\"]\n");
    assert_mentions(
        &error(&[dir.write("array.toml", &array).to_str().unwrap()], None),
        &["array.toml", "server.1", "single value"],
    );
}

#[test]
fn ensemble_from_system_properties() {
    let (dir, data) = with_myid(Some("2"));
    let d = format!("-DdataDir={data}");
    let c = ServerConfig::from_args(
        &args(&[
            &d,
            "-DinitLimit=20",
            "-DsyncLimit=7",
            "-Dserver.1=zk1.example:2888:3888",
            "-Dserver.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182",
        ]),
        Some("-Dserver.3=[::1]:2890:3890:Participant;2181 -Dserver.200=zk200.example:2891:3891:observer"),
    )
    .unwrap();
    assert_eq!(c.ensemble, Some(three_servers_and_an_observer()));

    // A later source overrides a line of an earlier one; within one source a repeat is an error.
    let file = dir.write(
        "zoo.cfg",
        &format!("dataDir={data}\nserver.1=old:1:2\nserver.2=127.0.0.1:2889:3889\n"),
    );
    let c = load(&[file.to_str().unwrap(), "-Dserver.1=new:3:4"]);
    assert_eq!(c.ensemble.unwrap().members[&1], peer("new", 3, 4));
    assert_mentions(
        &error(&[&d, "-Dserver.1=a:1:2", "-Dserver.1=b:1:2"], None),
        &["command line", "server.1", "already given at command line"],
    );
}

#[test]
fn ensemble_limits_default_to_ten_and_five_ticks() {
    let (dir, data) = with_myid(Some("1"));
    let text = format!("dataDir={data}\nserver.1=a:2888:3888\nserver.2=b:2888:3888\n");
    let ensemble = load_file(&dir.write("zoo.cfg", &text)).ensemble.unwrap();
    assert_eq!((ensemble.init_limit, ensemble.sync_limit), (10, 5));
    assert!(!ensemble.observer);
    for bad in ["initLimit=0", "syncLimit=-1", "initLimit=soon"] {
        let path = dir.write("bad.cfg", &format!("{text}{bad}\n"));
        let key = bad.split('=').next().unwrap();
        assert_mentions(
            &error(&[path.to_str().unwrap()], None),
            &["bad.cfg", "line 4", key],
        );
    }
}

#[test]
fn an_ensemble_member_needs_a_myid_among_the_ids() {
    let two = |data: &str| format!("dataDir={data}\nserver.1=a:2888:3888\nserver.3=b:2888:3888\n");

    let (dir, data) = with_myid(None);
    let message = error(&[dir.write("zoo.cfg", &two(&data)).to_str().unwrap()], None);
    assert_mentions(&message, &["myid", "missing", "1, 3"]);

    let (dir, data) = with_myid(Some(
        "replace this text with the cluster-unique zookeeper's instance id (1-255)\n",
    ));
    let message = error(&[dir.write("zoo.cfg", &two(&data)).to_str().unwrap()], None);
    assert_mentions(
        &message,
        &["myid", "between 1 and 255", "replace this", "1, 3"],
    );

    let (dir, data) = with_myid(Some("2"));
    let message = error(&[dir.write("zoo.cfg", &two(&data)).to_str().unwrap()], None);
    assert_mentions(&message, &["myid", "holds 2", "1, 3"]);
    assert!(matches!(
        ServerConfig::from_args(&args(&[dir.path().join("zoo.cfg").to_str().unwrap()]), None),
        Err(ConfigError::MyId { .. })
    ));

    let (dir, data) = with_myid(Some(" 3 \n"));
    let c = load_file(&dir.write("zoo.cfg", &two(&data)));
    assert_eq!(c.server_id, 3);
}

#[test]
fn server_ids_are_1_to_255() {
    let (dir, data) = with_myid(Some("255"));
    let text = format!("dataDir={data}\nserver.1=a:2888:3888\nserver.255=b:2888:3888\n");
    let c = load_file(&dir.write("zoo.cfg", &text));
    assert_eq!(c.server_id, 255);
    assert_eq!(
        c.ensemble
            .unwrap()
            .members
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        [1, 255]
    );
    for bad in ["server.0", "server.256", "server.x", "server.", "server.-1"] {
        let path = dir.write(
            "bad.cfg",
            &format!("dataDir={data}\nserver.1=a:2888:3888\n{bad}=b:2888:3888\n"),
        );
        assert_mentions(
            &error(&[path.to_str().unwrap()], None),
            &["bad.cfg", "line 3", bad, "between 1 and 255"],
        );
    }
}

#[test]
fn duplicate_server_ids_name_both_lines() {
    let (dir, data) = with_myid(Some("1"));
    for second in ["server.1=b:2888:3888", "server.01=b:2888:3888"] {
        let path = dir.write(
            "zoo.cfg",
            &format!("dataDir={data}\nserver.1=a:2888:3888\nserver.2=c:1:2\n{second}\n"),
        );
        let key = second.split('=').next().unwrap();
        assert_mentions(
            &error(&[path.to_str().unwrap()], None),
            &[
                "zoo.cfg, line 4",
                key,
                "server id 1 already given at",
                "line 2",
            ],
        );
    }
}

#[test]
fn malformed_server_lines_name_line_and_reason() {
    let (dir, data) = with_myid(Some("1"));
    for (line, reason) in [
        ("zk2:0:3888", "quorum port"),
        ("zk2:2888", "host:quorumPort:electionPort"),
        ("zk2", "host:quorumPort:electionPort"),
        (":2888:3888", "host:quorumPort:electionPort"),
        ("zk2:2888:99999", "election port"),
        ("zk2:abc:3888", "quorum port"),
        ("zk2:2888:3888:leader", "unknown role"),
        ("zk2:2888:3888:observer:x", "host:quorumPort:electionPort"),
        ("zk2:2888:3888;70000", "client port"),
        ("zk2:2888:3888;a:b:2181", "client address"),
        ("zk2:2888:3888;2181;2182", "more than one ';'"),
        ("[::1:2888:3888", "not closed"),
        ("a:1:2|b:1:2", "several addresses"),
    ] {
        let path = dir.write(
            "zoo.cfg",
            &format!("dataDir={data}\nserver.1=zk1:2888:3888\nserver.2={line}\n"),
        );
        assert_mentions(
            &error(&[path.to_str().unwrap()], None),
            &["zoo.cfg, line 3", "server.2", line, reason],
        );
    }
}

#[test]
fn one_server_line_is_standalone_unless_standalone_is_disabled() {
    // As ZooKeeper (for HBase): one participant and standaloneEnabled=true is standalone, and a
    // bad myid is then only a warning.
    let (dir, data) = with_myid(Some("placeholder"));
    let one = format!("dataDir={data}\nserver.5=localhost:2888:3888;2999\n");
    let c = load_file(&dir.write("zoo.cfg", &one));
    assert_eq!(c.ensemble, None);
    assert_eq!(c.server_id, 1);
    assert_eq!(c.client_addr.port(), 2181, "the ignored line sets nothing");

    let forced = format!("{one}standaloneEnabled=false\n");
    let path = dir.write("forced.cfg", &forced);
    assert_mentions(&error(&[path.to_str().unwrap()], None), &["myid", "5"]);
    std::fs::write(Path::new(&data).join("myid"), "5").unwrap();
    let c = load_file(&path);
    let ensemble = c.ensemble.expect("an ensemble of one");
    assert_eq!(ensemble.members.len(), 1);
    assert_eq!(c.server_id, 5);
    assert_eq!(c.client_addr, "0.0.0.0:2999".parse().unwrap());

    // standaloneEnabled=false without any participant is an error, as in ZooKeeper.
    let path = dir.write(
        "none.cfg",
        &format!("dataDir={data}\nstandaloneEnabled=false\n"),
    );
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["standaloneEnabled=false", "participant"],
    );
}

#[test]
fn observers_need_a_quorum() {
    let (dir, data) = with_myid(Some("1"));
    let only_observers =
        format!("dataDir={data}\nserver.1=a:2888:3888:observer\nserver.2=b:2888:3888:observer\n");
    assert_mentions(
        &error(
            &[dir.write("a.cfg", &only_observers).to_str().unwrap()],
            None,
        ),
        &[
            "observers without participants",
            "server.1",
            "a.cfg, line 2",
        ],
    );
    let one_participant =
        format!("dataDir={data}\nserver.1=a:2888:3888\nserver.2=b:2888:3888:observer\n");
    assert_mentions(
        &error(
            &[dir.write("b.cfg", &one_participant).to_str().unwrap()],
            None,
        ),
        &["observers without a quorum", "standaloneEnabled"],
    );
    let forced = format!("{one_participant}standaloneEnabled=false\n");
    let c = load_file(&dir.write("c.cfg", &forced));
    let ensemble = c.ensemble.unwrap();
    assert_eq!(ensemble.members.len(), 2);
    assert!(ensemble.members[&2].observer && !ensemble.observer);
}

#[test]
fn peer_type_must_agree_with_the_servers_own_line() {
    let (dir, data) = with_myid(Some("3"));
    let lines = format!(
        "dataDir={data}\nserver.1=a:2888:3888\nserver.2=b:2888:3888\nserver.3=c:2888:3888:observer\n"
    );
    // Unset: the own line decides.
    let c = load_file(&dir.write("zoo.cfg", &lines));
    assert!(c.ensemble.unwrap().observer);
    let c = load_file(&dir.write("zoo.cfg", &format!("{lines}peerType=observer\n")));
    assert!(c.ensemble.unwrap().observer);

    let path = dir.write("zoo.cfg", &format!("{lines}peerType=participant\n"));
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &[
            "zoo.cfg, line 5",
            "peerType",
            "server.3",
            "line 4",
            "observer",
        ],
    );
    let path = dir.write("zoo.cfg", &format!("{lines}peerType=spectator\n"));
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["line 5", "peerType", "participant or observer"],
    );
    std::fs::write(Path::new(&data).join("myid"), "1").unwrap();
    let path = dir.write("zoo.cfg", &format!("{lines}peerType=observer\n"));
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["peerType", "server.1", "participant"],
    );
}

#[test]
fn the_own_lines_client_address_must_agree_with_client_port() {
    let (dir, data) = with_myid(Some("1"));
    let lines =
        format!("dataDir={data}\nserver.1=a:2888:3888;127.0.0.1:2182\nserver.2=b:2888:3888\n");
    let c = load_file(&dir.write("zoo.cfg", &format!("{lines}clientPort=2182\n")));
    assert_eq!(c.client_addr, "127.0.0.1:2182".parse().unwrap());
    let path = dir.write("zoo.cfg", &format!("{lines}clientPort=2181\n"));
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["zoo.cfg, line 2", "server.1", "clientPort 2181"],
    );
    let path = dir.write("zoo.cfg", &format!("{lines}clientPortAddress=10.1.2.3\n"));
    assert_mentions(
        &error(&[path.to_str().unwrap()], None),
        &["server.1", "clientPortAddress 10.1.2.3"],
    );
    // A wildcard clientPortAddress only needs the port to agree, and is kept.
    let c = load_file(&dir.write("zoo.cfg", &format!("{lines}clientPortAddress=0.0.0.0\n")));
    assert_eq!(c.client_addr, "0.0.0.0:2182".parse().unwrap());
    // No client address on the own line: clientPort as usual.
    std::fs::write(Path::new(&data).join("myid"), "2").unwrap();
    let c = load_file(&dir.write("zoo.cfg", &format!("{lines}clientPort=2185\n")));
    assert_eq!(c.client_addr, "127.0.0.1:2185".parse().unwrap());
}

#[test]
fn the_request_budget_holds_at_least_one_frame_of_the_largest_size() {
    let dir = TempDir::new();
    let data = dir.data_dir();
    let text = format!("dataDir={data}\nzoolog.requestBytesMax=1000\njute.maxbuffer=4194304\n");
    let c = load_file(&dir.write("zoo.cfg", &text));
    assert_eq!(c.request_bytes_max, 1000);
    assert_eq!(c.request_budget_bytes(), 4 << 20);
    assert_eq!(ServerConfig::default().request_budget_bytes(), 64 << 20);
}

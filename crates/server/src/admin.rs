//! The AdminServer's commands, as Apache ZooKeeper 3.9 answers them over HTTP: every answer is
//! a JSON object `{"command": <primary name>, "error": null, ...}` whose data fields carry
//! ZooKeeper's names (its Jackson output in snake_case). Rendering is pure: it reads a
//! [`View`]; the commands that change counters return an [`OperatorAction`] for the core first.
//!
//! Not provided: `snapshot` and `restore` (they need ZooKeeper's HTTP authentication), which
//! answer as unknown commands.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::config::ServerConfig;
use crate::core::{OperatorAction, Role};
use crate::ensemble::LearnerReport;
use crate::four_letter::{self, DirSizes, View, TLS_AUTH_FAILURES};
use crate::json::Json;

/// Every command, primary name first, then its aliases (ZooKeeper's `Commands` table).
pub const COMMANDS: &[&[&str]] = &[
    &["connection_stat_reset", "crst"],
    &["configuration", "conf", "config"],
    &["connections", "cons"],
    &["hash"],
    &["dirs"],
    &["dump"],
    &["environment", "env", "envi"],
    &["get_trace_mask", "gtmk"],
    &["initial_configuration", "icfg"],
    &["is_read_only", "isro"],
    &["last_snapshot", "lsnp"],
    &["leader", "lead"],
    &["monitor", "mntr"],
    &["observer_connection_stat_reset", "orst"],
    &["ruok"],
    &["set_trace_mask", "stmk"],
    &["server_stats", "srvr"],
    &["stats", "stat"],
    &["stat_reset", "srst"],
    &["observers", "obsr"],
    &["system_properties", "sysp"],
    &["voting_view"],
    &["watches", "wchc"],
    &["watches_by_path", "wchp"],
    &["watch_summary", "wchs"],
    &["zabstate"],
];

/// The primary name of the command called `name` (primary or alias).
pub fn primary_name(name: &str) -> Option<&'static str> {
    COMMANDS
        .iter()
        .find(|names| names.contains(&name))
        .map(|names| names[0])
}

/// The answer to an unknown command, still HTTP 200 as in ZooKeeper.
pub fn unknown(name: &str) -> Json {
    response(name, Some(format!("Unknown command: {name}")), Vec::new())
}

/// What `set_trace_mask` needs: its `traceMask` argument as a Java long.
fn trace_mask_argument(args: &[(String, String)]) -> Result<i64, String> {
    let value = args
        .iter()
        .find(|(name, _)| name == "traceMask")
        .map(|(_, value)| value)
        .ok_or("setTraceMask requires long traceMask argument")?;
    value
        .parse()
        .map_err(|_| format!("setTraceMask requires long traceMask argument, got {value}"))
}

/// What the command `primary` changes before it is rendered.
pub fn action(primary: &str, args: &[(String, String)]) -> Option<OperatorAction> {
    match primary {
        "connection_stat_reset" => Some(OperatorAction::ResetConnectionStats),
        "stat_reset" => Some(OperatorAction::ResetServerStats),
        "set_trace_mask" => trace_mask_argument(args)
            .ok()
            .map(OperatorAction::SetTraceMask),
        _ => None,
    }
}

/// Runs the command `primary` (from [`primary_name`]) against the view.
pub fn run(primary: &str, args: &[(String, String)], view: &View<'_>, dirs: &DirSizes) -> Json {
    let (error, fields) = match data(primary, args, view, dirs) {
        Ok(fields) => (None, fields),
        Err(error) => (Some(error), Vec::new()),
    };
    response(primary, error, fields)
}

fn response(command: &str, error: Option<String>, fields: Vec<(&str, Json)>) -> Json {
    let head = [
        ("command", Json::str(command)),
        ("error", error.map_or(Json::Null, Json::Str)),
    ];
    Json::object(head.into_iter().chain(fields))
}

type Fields = Vec<(&'static str, Json)>;

fn data(
    primary: &str,
    args: &[(String, String)],
    view: &View<'_>,
    dirs: &DirSizes,
) -> Result<Fields, String> {
    Ok(match primary {
        "ruok" | "connection_stat_reset" | "stat_reset" | "observer_connection_stat_reset" => {
            Vec::new()
        }
        "configuration" => configuration(view.config),
        "connections" => vec![
            ("connections", connections(view, false)),
            ("secure_connections", Json::Array(Vec::new())),
        ],
        "hash" => vec![("digests", Json::Array(Vec::new()))],
        "dirs" => vec![
            ("datadir_size", Json::count(dirs.data_bytes)),
            ("logdir_size", Json::count(dirs.log_bytes)),
        ],
        "dump" => dump(view),
        "environment" | "system_properties" => environment(primary),
        "get_trace_mask" => vec![("tracemask", Json::Int(view.trace_mask))],
        "set_trace_mask" => vec![("tracemask", Json::Int(trace_mask_argument(args)?))],
        "initial_configuration" => vec![(
            "initial_configuration",
            view.config
                .initial_configuration
                .clone()
                .map_or(Json::Null, Json::Str),
        )],
        "is_read_only" => vec![("read_only", Json::Bool(view.is_read_only()))],
        "last_snapshot" => last_snapshot(view),
        "leader" => leader(view)?,
        "monitor" => four_letter::monitor_values(view),
        "server_stats" => server_stats(view, dirs),
        "stats" => {
            let mut fields = server_stats(view, dirs);
            fields.push(("connections", connections(view, true)));
            fields.push(("secure_connections", Json::Array(Vec::new())));
            fields
        }
        "observers" => observers(view),
        "voting_view" => vec![("current_config", voting_view(view))],
        "watches" => vec![("session_id_to_watched_paths", watches_by_session(view))],
        "watches_by_path" => vec![("path_to_session_ids", watches_by_path(view))],
        "watch_summary" => {
            let summary = view.watches.summary();
            vec![
                ("num_connections", Json::count(summary.connections)),
                ("num_paths", Json::count(summary.paths)),
                ("num_total_watches", Json::count(summary.watches)),
            ]
        }
        "zabstate" => zab_state(view),
        other => unreachable!("{other} is not a primary name in COMMANDS"),
    })
}

/// The HTML index ZooKeeper serves at the command URL: one link per primary name, sorted.
pub fn index_html(command_url: &str) -> String {
    let mut names: Vec<&str> = COMMANDS.iter().map(|names| names[0]).collect();
    names.sort_unstable();
    let mut out = String::new();
    for name in names {
        let _ = writeln!(out, "<a href=\"{command_url}/{name}\">{name}</a>\n<br/>");
    }
    out
}

fn configuration(config: &ServerConfig) -> Fields {
    vec![
        ("client_port", Json::Int(config.client_addr.port().into())),
        ("data_dir", Json::str(config.data_dir.display().to_string())),
        (
            "data_log_dir",
            Json::str(config.data_log_dir.display().to_string()),
        ),
        ("tick_time", Json::count(config.tick_ms)),
        (
            "max_client_cnxns",
            Json::count(config.connections_per_ip_max),
        ),
        (
            "min_session_timeout",
            Json::count(config.session_timeout_min_ms),
        ),
        (
            "max_session_timeout",
            Json::count(config.session_timeout_max_ms),
        ),
        ("server_id", Json::Int(config.server_id.into())),
        ("client_port_listen_backlog", Json::Int(-1)),
    ]
}

fn environment(primary: &str) -> Fields {
    let mut entries = four_letter::environment();
    // ZooKeeper sorts system properties; zoolog has no JVM, so they are the environment's.
    if primary == "system_properties" {
        entries.sort_by(|a, b| a.0.cmp(b.0));
    }
    entries
        .into_iter()
        .map(|(key, value)| (key, Json::Str(value)))
        .collect()
}

/// ZooKeeper's `ServerCnxn.getConnectionInfo`: `brief` for `stats`, full for `connections`.
fn connections(view: &View<'_>, brief: bool) -> Json {
    let list = view.connections.iter().map(|connection| {
        let stats = connection.stats;
        let mut fields = vec![
            (
                "remote_socket_address",
                Json::str(connection.peer.to_string()),
            ),
            ("interest_ops", Json::Int(1)),
            ("outstanding_requests", Json::count(connection.queued)),
            ("packets_received", Json::count(stats.received)),
            ("packets_sent", Json::count(stats.sent)),
        ];
        if !brief {
            fields.extend([
                ("session_id", Json::Int(connection.session_id)),
                (
                    "last_operation",
                    Json::str(four_letter::operation_name(stats.last_opcode)),
                ),
                ("established", Json::Int(stats.established_wall_ms)),
                ("session_timeout", Json::Int(connection.timeout_ms.into())),
                ("last_cxid", Json::Int(stats.last_cxid.into())),
                ("last_zxid", Json::Int(stats.last_zxid)),
                ("last_response_time", Json::count(stats.last_response_ms)),
                ("last_latency", Json::count(stats.last_latency_ms)),
                ("min_latency", Json::count(stats.latency_ms.min)),
                (
                    "avg_latency",
                    Json::count(stats.latency_ms.average() as u64),
                ),
                ("max_latency", Json::count(stats.latency_ms.max)),
            ]);
        }
        Json::object(fields)
    });
    Json::Array(list.collect())
}

/// ZooKeeper's `srvr` JSON: the version, `server_stats` (its `ServerStats` bean) and node count.
fn server_stats(view: &View<'_>, dirs: &DirSizes) -> Fields {
    let stats = view.stats;
    let client_response = || {
        // zoolog does not track response buffer sizes; ZooKeeper reports -1 until it has one.
        Json::object([
            ("last_buffer_size", Json::Int(-1)),
            ("min_buffer_size", Json::Int(-1)),
            ("max_buffer_size", Json::Int(-1)),
        ])
    };
    let server_stats = Json::object([
        ("packets_sent", Json::count(stats.packets_sent)),
        ("packets_received", Json::count(stats.packets_received)),
        (
            "fsync_threshold_exceed_count",
            Json::count(view.log.fsync.slow_count),
        ),
        ("client_response_stats", client_response()),
        ("max_latency", Json::count(stats.latency_ms.max)),
        ("min_latency", Json::count(stats.latency_ms.min)),
        ("avg_latency", Json::Float(stats.latency_ms.average())),
        ("outstanding_requests", Json::count(view.outstanding)),
        (
            "last_processed_zxid",
            Json::Int(view.tree.last_applied_zxid()),
        ),
        ("data_dir_size", Json::count(dirs.data_bytes)),
        ("log_dir_size", Json::count(dirs.log_bytes)),
        ("server_state", Json::str(view.mode_name())),
        (
            "num_alive_client_connections",
            Json::count(view.connections.len()),
        ),
        ("uptime", Json::count(view.now.monotonic_ms)),
        ("auth_failed_count", Json::count(TLS_AUTH_FAILURES)),
        ("non_mtls_local_conn_count", Json::Int(0)),
        ("non_mtls_remote_conn_count", Json::Int(0)),
    ]);
    vec![
        ("version", Json::str(four_letter::full_version())),
        ("read_only", Json::Bool(false)),
        ("server_stats", server_stats),
        ("client_response", client_response()),
        ("node_count", Json::count(view.tree.node_count())),
    ]
}

fn dump(view: &View<'_>) -> Fields {
    // Session ids by expiry time (wall clock, ms), as ZooKeeper's session tracker buckets them.
    let mut by_expiry: BTreeMap<i64, Vec<Json>> = BTreeMap::new();
    for &(session_id, _, deadline_ms) in &view.sessions {
        let remaining_ms = deadline_ms.saturating_sub(view.now.monotonic_ms);
        let expiry_ms = view.now.wall_ms.saturating_add(remaining_ms as i64);
        by_expiry
            .entry(expiry_ms)
            .or_default()
            .push(Json::Int(session_id));
    }
    let ephemerals = view
        .tree
        .sessions()
        .filter(|(_, info)| !info.ephemerals.is_empty())
        .map(|(session_id, info)| {
            let paths = info.ephemerals.iter().map(|p| Json::str(p.as_str()));
            (session_id.to_string(), Json::Array(paths.collect()))
        });
    vec![
        (
            "expiry_time_to_session_ids",
            Json::object(
                by_expiry
                    .into_iter()
                    .map(|(expiry, ids)| (expiry.to_string(), Json::Array(ids))),
            ),
        ),
        ("session_id_to_ephemeral_paths", Json::object(ephemerals)),
    ]
}

fn watches_by_session(view: &View<'_>) -> Json {
    Json::object(
        view.watches
            .paths_by_connection()
            .into_iter()
            .map(|(connection, paths)| {
                let session_id = four_letter::session_of(view, connection);
                let paths = paths.into_iter().map(Json::Str).collect();
                (session_id.to_string(), Json::Array(paths))
            }),
    )
}

fn watches_by_path(view: &View<'_>) -> Json {
    Json::object(
        view.watches
            .connections_by_path()
            .into_iter()
            .map(|(path, connections)| {
                let sessions = connections
                    .into_iter()
                    .map(|c| Json::Int(four_letter::session_of(view, c)))
                    .collect();
                (path, Json::Array(sessions))
            }),
    )
}

/// ZooKeeper's `lsnp`: the zxid in hex without `0x` (`-1` as a Java long when there is none)
/// and the time in seconds.
fn last_snapshot(view: &View<'_>) -> Fields {
    let (zxid, written_s) = view
        .metrics
        .last_snapshot()
        .map_or((-1, -1), |s| (s.zxid, s.written_s));
    vec![
        ("zxid", Json::str(format!("{:x}", zxid))),
        ("timestamp", Json::Int(written_s)),
    ]
}

/// ZooKeeper's `leader`: who leads this server's quorum. A standalone server is no quorum
/// server, and one without a leader has none to name; both answer as ZooKeeper does.
fn leader(view: &View<'_>) -> Result<Vec<(&'static str, Json)>, String> {
    let leader_id = match view.role {
        Role::Leader { .. } => u64::from(view.config.server_id),
        Role::Follower { leader, .. } | Role::Observer { leader, .. } => leader,
        Role::Standalone | Role::Looking => return Err("server is not initialized".to_owned()),
    };
    let leader_ip = view
        .config
        .ensemble
        .as_ref()
        .and_then(|ensemble| ensemble.members.get(&leader_id))
        .map_or(Json::Null, |peer| Json::str(peer.host.as_str()));
    Ok(vec![
        (
            "is_leader",
            Json::Bool(matches!(view.role, Role::Leader { .. })),
        ),
        ("leader_id", Json::Int(leader_id as i64)),
        ("leader_ip", leader_ip),
    ])
}

/// `host:port`, an IPv6 host in brackets, as ZooKeeper writes addresses.
fn address_text(host: &str, port: u16) -> String {
    match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}

fn client_address_text(config: &ServerConfig) -> String {
    address_text(
        &config.client_addr.ip().to_string(),
        config.client_addr.port(),
    )
}

/// One address as ZooKeeper's `zabstate` shows it: Jackson's rendering of its
/// `MultipleAddresses` (every getter of the class), for a member with one address per port.
fn multiple_addresses(host: &str, port: u16) -> Json {
    let address = address_text(host, port);
    let list = || Json::Array(vec![Json::str(address.clone())]);
    Json::object([
        ("empty", Json::Bool(false)),
        (
            "wildcard_addresses",
            Json::Array(vec![Json::str(format!("0.0.0.0:{port}"))]),
        ),
        ("all_ports", Json::Array(vec![Json::Int(i64::from(port))])),
        ("all_host_strings", Json::Array(vec![Json::str(host)])),
        ("all_reachable_addresses_or_all", list()),
        ("reachable_or_one", Json::str(address.clone())),
        ("all_addresses", list()),
        ("all_reachable_addresses", list()),
        ("one", Json::str(address.clone())),
        ("reachable_address", Json::str(address.clone())),
    ])
}

/// ZooKeeper's `voting_view`: the voting members (not observers) of the configuration, by
/// server id; empty for a standalone server.
fn voting_view(view: &View<'_>) -> Json {
    let Some(ensemble) = &view.config.ensemble else {
        return Json::object(Vec::<(String, Json)>::new());
    };
    let my_id = u64::from(view.config.server_id);
    Json::object(ensemble.participants().map(|(id, peer)| {
        // A member knows its own client address; of the others only what their line says.
        let client_address = match (id == my_id, &peer.client_address) {
            (true, _) => client_address_text(view.config),
            (false, Some((host, port))) => address_text(host, *port),
            (false, None) => String::new(),
        };
        let member = Json::object([
            (
                "server_addresses",
                Json::Array(vec![Json::str(address_text(&peer.host, peer.quorum_port))]),
            ),
            (
                "election_addresses",
                Json::Array(vec![Json::str(address_text(
                    &peer.host,
                    peer.election_port,
                ))]),
            ),
            ("client_address", Json::str(client_address)),
            ("learner_type", Json::str("participant")),
        ]);
        (id.to_string(), member)
    }))
}

/// ZooKeeper's `observers`: a leader's synced observers with their connections' statistics
/// (LearnerHandler's info). Followers answer none, as ZooKeeper's do unless they are observer
/// masters, which zoolog's are not; observers and standalone servers have none.
fn observers(view: &View<'_>) -> Fields {
    let observers: Vec<Json> = if view.is_leader() {
        view.synced_learners(true).map(observer_info).collect()
    } else {
        Vec::new()
    };
    vec![
        ("synced_observers", Json::count(observers.len())),
        ("observers", Json::Array(observers)),
    ]
}

fn observer_info(learner: &LearnerReport) -> Json {
    let status = &learner.status;
    // ZooKeeper's zxid of the last packet sent, -1 before any: zoolog's zxids are positions.
    let last_zxid = if status.sent == 0 {
        -1
    } else {
        status.sent as i64
    };
    Json::object([
        (
            "remote_socket_address",
            // What ZooKeeper prints for a learner without a socket.
            Json::str(
                learner
                    .remote_address
                    .map_or("<null>".to_owned(), four_letter::peer),
            ),
        ),
        ("sid", Json::count(status.id)),
        (
            "established",
            learner.established_wall_ms.map_or(Json::Null, Json::Int),
        ),
        ("queued_packets", Json::count(learner.queued_frames)),
        ("queued_packets_size", Json::count(learner.queued_bytes)),
        ("packets_received", Json::count(learner.frames_received)),
        ("packets_sent", Json::count(learner.frames_sent)),
        // ZooKeeper counts the requests a learner forwarded; zoolog, those it proposed (a
        // retransmitted forward is proposed once).
        ("requests", Json::count(status.forwards_taken)),
        ("last_zxid", Json::Int(last_zxid)),
    ])
}

/// ZooKeeper's `zabstate`: for an ensemble member its identity, addresses, whether it votes,
/// its last zxid and its phase (`election` while it has no leader, else `broadcast`); a
/// standalone server does not vote and has no phase.
fn zab_state(view: &View<'_>) -> Fields {
    let Some(ensemble) = &view.config.ensemble else {
        return vec![("voting", Json::Bool(false)), ("zabstate", Json::str(""))];
    };
    let my_id = u64::from(view.config.server_id);
    let me = ensemble
        .members
        .get(&my_id)
        .expect("an ensemble member is in its own configuration");
    let last_zxid = view.tree.last_applied_zxid();
    let phase = view
        .role
        .zab_phase()
        .expect("a standalone server has no ensemble configuration");
    vec![
        ("myid", Json::Int(my_id as i64)),
        (
            "is_leader",
            Json::Bool(matches!(view.role, Role::Leader { .. })),
        ),
        (
            "quorum_address",
            multiple_addresses(&me.host, me.quorum_port),
        ),
        (
            "election_address",
            multiple_addresses(&me.host, me.election_port),
        ),
        (
            "client_address",
            Json::str(client_address_text(view.config)),
        ),
        ("voting", Json::Bool(!me.observer)),
        ("last_zxid", Json::str(format!("{last_zxid:#x}"))),
        ("zab_epoch", Json::Int(last_zxid >> 32)),
        ("zab_counter", Json::Int(last_zxid & 0xffff_ffff)),
        ("zabstate", Json::str(phase)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_find_their_primary_name() {
        assert_eq!(primary_name("mntr"), Some("monitor"));
        assert_eq!(primary_name("monitor"), Some("monitor"));
        assert_eq!(primary_name("config"), Some("configuration"));
        assert_eq!(primary_name("nope"), None);
    }

    #[test]
    fn unknown_commands_name_themselves_in_the_error() {
        assert_eq!(
            unknown("nope").to_json_string(),
            r#"{"command":"nope","error":"Unknown command: nope"}"#
        );
    }

    #[test]
    fn set_trace_mask_takes_a_long_argument() {
        let args = |value: &str| vec![("traceMask".to_owned(), value.to_owned())];
        assert_eq!(
            action("set_trace_mask", &args("-5")),
            Some(OperatorAction::SetTraceMask(-5))
        );
        assert_eq!(action("set_trace_mask", &args("x")), None);
        assert_eq!(action("set_trace_mask", &[]), None);
        assert_eq!(
            trace_mask_argument(&args("x")),
            Err("setTraceMask requires long traceMask argument, got x".to_owned())
        );
    }

    #[test]
    fn index_links_every_primary_name_under_the_command_url() {
        let html = index_html("/commands");
        assert!(html.starts_with("<a href=\"/commands/configuration\">configuration</a>\n<br/>\n"));
        assert_eq!(html.matches("<a href").count(), COMMANDS.len());
    }

    #[test]
    fn every_name_is_unique() {
        let mut names: Vec<&str> = COMMANDS.iter().flat_map(|n| n.iter().copied()).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}

//! zkCli's text for the values it prints: Stat blocks, dates, lists, watch events and errors.

use std::borrow::Cow;

use zoolog_client::{Error, ErrorCode, EventType, SessionState, Stat, WatchedEvent};

/// Node data as zkCli prints it: as UTF-8 text, and null data (not empty data) as the word `null`.
pub(crate) fn data_text(data: Option<&[u8]>) -> Cow<'_, str> {
    data.map_or(Cow::Borrowed("null"), String::from_utf8_lossy)
}

/// A Stat the way zkCli prints it, one `name = value` line each, in zkCli's order.
pub(crate) fn stat_text(stat: &Stat) -> String {
    format!(
        "cZxid = 0x{:x}\nctime = {}\nmZxid = 0x{:x}\nmtime = {}\npZxid = 0x{:x}\n\
         cversion = {}\ndataVersion = {}\naclVersion = {}\nephemeralOwner = 0x{:x}\n\
         dataLength = {}\nnumChildren = {}",
        stat.czxid,
        java_date(stat.ctime),
        stat.mzxid,
        java_date(stat.mtime),
        stat.pzxid,
        stat.cversion,
        stat.version,
        stat.aversion,
        stat.ephemeral_owner,
        stat.data_length,
        stat.num_children
    )
}

/// Milliseconds since the epoch as Java's `Date.toString()` writes them, in the local time zone:
/// `Sat Nov 21 20:58:25 UTC 2026`.
pub(crate) fn java_date(epoch_ms: i64) -> String {
    let seconds = epoch_ms.div_euclid(1000) as libc::time_t;
    // SAFETY: `tm` is plain old data that localtime_r fills in; both pointers are valid for the
    // call, and localtime_r is the thread-safe variant.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&seconds, &mut tm) }.is_null() {
        return epoch_ms.to_string();
    }
    let mut buffer = [0u8; 64];
    // SAFETY: strftime writes at most `buffer.len()` bytes into `buffer` and returns how many;
    // the format is NUL-terminated. No setlocale call is made, so names are the C locale's (English).
    let written = unsafe {
        libc::strftime(
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            c"%a %b %d %H:%M:%S %Z %Y".as_ptr(),
            &tm,
        )
    };
    String::from_utf8_lossy(&buffer[..written]).into_owned()
}

/// A list as Java's `List.toString()` writes it: `[a, b, c]`.
pub(crate) fn list_text(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// A watch firing, as zkCli 3.9's default watcher prints it.
pub(crate) fn watched_event_text(event: &WatchedEvent) -> String {
    event_block("SyncConnected", event.event_type, &event.path, event.zxid)
}

/// A session state change, which zkCli prints as a path-less event.
pub(crate) fn session_event_text(state: SessionState) -> String {
    event_block(keeper_state_name(state), EventType::None, "null", -1)
}

fn event_block(state: &str, event_type: EventType, path: &str, zxid: i64) -> String {
    format!(
        "\nWATCHER::\n\nWatchedEvent state:{state} type:{event_type:?} path:{path} zxid: {zxid}\n"
    )
}

/// Java's `Watcher.Event.KeeperState` name for a session state.
fn keeper_state_name(state: SessionState) -> &'static str {
    match state {
        SessionState::Disconnected => "Disconnected",
        SessionState::Connected => "SyncConnected",
        SessionState::ConnectedReadOnly => "ConnectedReadOnly",
        SessionState::Expired => "Expired",
        SessionState::AuthFailed => "AuthFailed",
        SessionState::Closed => "Closed",
    }
}

/// Java's `ZooKeeper.States` name, shown in the prompt.
pub(crate) fn prompt_state_name(state: Option<SessionState>) -> &'static str {
    match state {
        None => "NOT_CONNECTED",
        Some(SessionState::Disconnected) => "CONNECTING",
        Some(SessionState::Connected) => "CONNECTED",
        Some(SessionState::ConnectedReadOnly) => "CONNECTEDREADONLY",
        Some(SessionState::AuthFailed) => "AUTH_FAILED",
        Some(SessionState::Expired | SessionState::Closed) => "CLOSED",
    }
}

/// What zkCli says when a call on `path` fails: its own sentences for the common codes,
/// KeeperException's message for the rest.
pub(crate) fn error_text(error: &Error, path: Option<&str>) -> String {
    let code = error.code();
    let path_text = path.unwrap_or("null");
    match code {
        ErrorCode::NoNode => format!("Node does not exist: {path_text}"),
        ErrorCode::NodeExists => format!("Node already exists: {path_text}"),
        ErrorCode::BadVersion => format!("version No is not valid : {path_text}"),
        ErrorCode::NoAuth => format!("Insufficient permission : {path_text}"),
        ErrorCode::NotEmpty => format!("Node not empty: {path_text}"),
        ErrorCode::NoChildrenForEphemerals => {
            format!("Ephemerals cannot have children: {path_text}")
        }
        ErrorCode::InvalidAcl => format!("Acl is not valid : {path_text}"),
        ErrorCode::NotReadOnly => format!("Not a read-only call: {path_text}"),
        ErrorCode::BadArguments => format!("Arguments are not valid : {path_text}"),
        ErrorCode::QuotaExceeded => format!("Quota has exceeded : {path_text}"),
        ErrorCode::ReconfigInProgress => {
            "Another reconfiguration is in progress -- concurrent reconfigs not supported (yet)"
                .to_owned()
        }
        // zkCli's sentence, its typo included.
        ErrorCode::NewConfigNoQuorum => "No quorum of new config is connected and up-to-date \
            with the leader of last commmitted config - try invoking reconfiguration after new \
            servers are connected and synced"
            .to_owned(),
        _ => match path {
            Some(path) => format!("KeeperErrorCode = {} for {path}", code_message(code)),
            None => format!("KeeperErrorCode = {}", code_message(code)),
        },
    }
}

/// KeeperException's text for each code.
fn code_message(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Ok => "ok",
        ErrorCode::SystemError => "SystemError",
        ErrorCode::RuntimeInconsistency => "RuntimeInconsistency",
        ErrorCode::DataInconsistency => "DataInconsistency",
        ErrorCode::ConnectionLoss => "ConnectionLoss",
        ErrorCode::MarshallingError => "MarshallingError",
        ErrorCode::Unimplemented => "Unimplemented",
        ErrorCode::OperationTimeout => "OperationTimeout",
        ErrorCode::BadArguments => "BadArguments",
        ErrorCode::UnknownSession => "Unknown session id",
        ErrorCode::NewConfigNoQuorum => "NewConfigNoQuorum",
        ErrorCode::ReconfigInProgress => "ReconfigInProgress",
        ErrorCode::ApiError => "APIError",
        ErrorCode::NoNode => "NoNode",
        ErrorCode::NoAuth => "NoAuth",
        ErrorCode::BadVersion => "BadVersion",
        ErrorCode::NoChildrenForEphemerals => "NoChildrenForEphemerals",
        ErrorCode::NodeExists => "NodeExists",
        ErrorCode::NotEmpty => "Directory not empty",
        ErrorCode::SessionExpired => "Session expired",
        ErrorCode::InvalidCallback => "Invalid callback",
        ErrorCode::InvalidAcl => "InvalidACL",
        ErrorCode::AuthFailed => "AuthFailed",
        ErrorCode::SessionMoved => "Session moved",
        ErrorCode::NotReadOnly => "Not a read-only call",
        ErrorCode::EphemeralOnLocalSession => "Ephemeral node on local session",
        ErrorCode::NoWatcher => "No such watcher",
        ErrorCode::RequestTimeout => "Request timeout",
        ErrorCode::ReconfigDisabled => "Reconfig is disabled",
        ErrorCode::SessionClosedRequireSaslAuth => {
            "Session closed because client failed to authenticate"
        }
        ErrorCode::QuotaExceeded => "Quota has exceeded",
        ErrorCode::ThrottledOp => "Op throttled due to high load",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_reads_like_zkclis() {
        let stat = Stat {
            czxid: 2,
            mzxid: 12,
            ctime: 0,
            mtime: 0,
            version: 2,
            cversion: 4,
            aversion: 0,
            ephemeral_owner: 0x1000_0abc,
            data_length: 6,
            num_children: 4,
            pzxid: 7,
        };
        let text = stat_text(&stat);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "cZxid = 0x2");
        assert_eq!(lines[2], "mZxid = 0xc");
        assert_eq!(lines[4], "pZxid = 0x7");
        assert_eq!(lines[8], "ephemeralOwner = 0x10000abc");
        assert_eq!(lines[10], "numChildren = 4");
        assert_eq!(lines.len(), 11);
    }

    #[test]
    fn null_data_reads_null_and_empty_data_reads_empty() {
        assert_eq!(data_text(None), "null");
        assert_eq!(data_text(Some(b"")), "");
        assert_eq!(data_text(Some(b"v1")), "v1");
    }

    #[test]
    fn dates_read_like_javas_in_utc() {
        // The test process may run in any zone; only the zone-independent parts are compared.
        let text = java_date(0);
        let words: Vec<&str> = text.split(' ').collect();
        assert_eq!(words.len(), 6, "{text}");
        assert!(
            words[3].len() == 8 && words[3].matches(':').count() == 2,
            "{text}"
        );
    }

    #[test]
    fn errors_use_zkclis_sentences() {
        let error = |code| Error::Server(code);
        assert_eq!(
            error_text(&error(ErrorCode::NoNode), Some("/x")),
            "Node does not exist: /x"
        );
        assert_eq!(
            error_text(&error(ErrorCode::BadVersion), Some("/x")),
            "version No is not valid : /x"
        );
        assert_eq!(
            error_text(&error(ErrorCode::NoAuth), Some("/x")),
            "Insufficient permission : /x"
        );
        assert_eq!(
            error_text(&error(ErrorCode::NoWatcher), Some("/x")),
            "KeeperErrorCode = No such watcher for /x"
        );
        assert_eq!(
            error_text(&Error::ConnectionLoss, None),
            "KeeperErrorCode = ConnectionLoss"
        );
    }

    #[test]
    fn events_carry_state_type_path_and_zxid() {
        let event = WatchedEvent {
            event_type: EventType::NodeDataChanged,
            path: "/x".into(),
            zxid: 45,
        };
        assert_eq!(
            watched_event_text(&event),
            "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:/x zxid: 45\n"
        );
        assert!(session_event_text(SessionState::Closed)
            .contains("state:Closed type:None path:null zxid: -1"));
    }
}

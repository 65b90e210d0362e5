//! The plain values of the API: options, session states, events, multi ops and their results.

use zoolog_proto::codes::perms;
use zoolog_proto::{Acl, CreateMode, EventType, Id, Stat, PACKET_BYTES_MAX_DEFAULT};

/// How the client connects and how much it may buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Asked of the server, which clamps it to its own bounds; pings and read timeouts follow
    /// the negotiated value.
    pub session_timeout_ms: u32,
    /// How long [`Client::connect`](crate::Client::connect) waits for the first session.
    pub connect_timeout_ms: u64,
    /// Accept a read-only server (an ensemble member cut off from its quorum, started with
    /// `readonlymode.enabled`): the session is then [`SessionState::ConnectedReadOnly`], reads
    /// work and writes fail with `NotReadOnly`. Meanwhile the client asks the other servers of
    /// its list, with a pause that grows from 100 ms to 60 s, whether they are read-write (the
    /// `isro` four-letter word, which those servers must whitelist), and moves the session to
    /// the first that is: the state goes `Disconnected`, then `Connected`. As in Apache's client,
    /// a session that has only ever been on read-only servers is local to the one that made it,
    /// so it becomes a new session there (a new [`Client::session_id`](crate::Client::session_id));
    /// one that was read-write before keeps its id.
    pub read_only_allowed: bool,
    /// Requests sent but not yet answered; further callers wait for a slot.
    pub requests_outstanding_max: usize,
    /// Largest frame accepted from or sent to the server (jute.maxbuffer).
    pub packet_bytes_max: usize,
    /// Events a persistent watch stream buffers before its reader is told it lagged.
    pub persistent_watch_events_max: usize,
    /// Session events buffered for each [`Client::session_events`](crate::Client::session_events)
    /// receiver.
    pub session_events_max: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            session_timeout_ms: 10_000,
            connect_timeout_ms: 10_000,
            read_only_allowed: false,
            requests_outstanding_max: 1024,
            packet_bytes_max: PACKET_BYTES_MAX_DEFAULT,
            persistent_watch_events_max: 1024,
            session_events_max: 64,
        }
    }
}

/// Where the session stands; also the session event, published each time it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// No connection; the client is (re)connecting and calls wait.
    Disconnected,
    Connected,
    /// Connected to a server that serves reads only.
    ConnectedReadOnly,
    /// Final: the server forgot the session; calls fail with `SessionExpired`.
    Expired,
    /// Final: the server refused an identity; calls fail with `AuthFailed`.
    AuthFailed,
    /// Final: [`Client::close`](crate::Client::close) ended the session.
    Closed,
}

impl SessionState {
    /// True for the states a session never leaves.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            SessionState::Expired | SessionState::AuthFailed | SessionState::Closed
        )
    }
}

/// A watch firing, with the path as the caller named it (chroot removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    pub event_type: EventType,
    pub path: String,
    /// The zxid of the change (ZooKeeper ≥ 3.9), or −1 when the server does not say.
    pub zxid: i64,
}

/// One operation of a [`Client::multi`](crate::Client::multi). `version: None` matches any;
/// `data: None` is null data, as opposed to empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        data: Option<Vec<u8>>,
        acl: Vec<Acl>,
        mode: CreateMode,
    },
    CreateTtl {
        path: String,
        data: Option<Vec<u8>>,
        acl: Vec<Acl>,
        mode: CreateMode,
        ttl_ms: i64,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    SetData {
        path: String,
        data: Option<Vec<u8>>,
        version: Option<i32>,
    },
    /// Succeeds if the node exists (and has this version).
    Check {
        path: String,
        version: Option<i32>,
    },
}

/// The result of one op of a successful multi, in op order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// `stat` is `None` when the server reports a plain create result: ZooKeeper 3.8 does so
    /// even for create2 inside a multi.
    Create {
        path: String,
        stat: Option<Stat>,
    },
    Delete,
    SetData {
        stat: Stat,
    },
    Check,
}

/// One read of a [`Client::multi_read`](crate::Client::multi_read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOp {
    GetData { path: String },
    GetChildren { path: String },
}

/// The result of one successful read of a multi_read; `data: None` is null data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult {
    Data { data: Option<Vec<u8>>, stat: Stat },
    Children { children: Vec<String> },
}

/// Everyone may do everything.
pub fn open_acl_unsafe() -> Vec<Acl> {
    vec![Acl {
        perms: perms::ALL,
        id: Id::new("world", "anyone"),
    }]
}

/// Everyone may read.
pub fn read_acl_unsafe() -> Vec<Acl> {
    vec![Acl {
        perms: perms::READ,
        id: Id::new("world", "anyone"),
    }]
}

/// Every permission for the identities the creating connection authenticated as.
pub fn creator_all_acl() -> Vec<Acl> {
    vec![Acl {
        perms: perms::ALL,
        id: Id::new("auth", ""),
    }]
}

/// `version: None` is the wire's −1, "any version".
pub(crate) fn wire_version(version: Option<i32>) -> i32 {
    version.unwrap_or(-1)
}

//! The front end as a state machine: connections, handshakes, sessions, the per-session FIFO
//! pipeline, watches and replies. It is fed [`Input`]s (what clients sent, what the log
//! committed, the passing of time) and answers with [`Output`]s (bytes for a connection, a
//! connection to close, a command to append, a snapshot to save). It never touches a socket or
//! a file, so the tokio shell and a simulator drive the same code.
//!
//! Ordering rules it keeps (protocol sheet §2.4, §8.8):
//! - replies leave a connection in request order; only ping replies may overtake;
//! - a read waits until the same connection's earlier writes are applied;
//! - when an entry is applied, its watch events are queued on every affected connection before
//!   any reply that reflects it, its writer's own reply included.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use zoolog_log::OrderingLayer;
use zoolog_proto::{
    encode_notification, encode_reply, frame_with, framed, ClientInfo, ConnectRequest,
    ConnectResponse, DecodeError, ErrorCode, Id, Jute, OpCode, PathRequest, Reader, Request,
    RequestHeader, Response, WatcherEvent, WatcherType, WhoAmIResponse, FRAME_PREFIX_BYTES,
    REPLY_BYTES_MIN,
};
use zoolog_tree::{
    Command, CommandOp, ConnectionId, DataTree, Outcome, SessionSeen, WatchKind, WatchRegistry,
    Zxid,
};

use crate::config::ServerConfig;
use crate::four_letter::DEFAULT_TRACE_MASK;
use crate::metrics::{Metrics, RequestPath, SnapshotRecord};
use crate::stats::{ConnectionStats, ServerStats, Startup};

/// The clocks the driver hands in with every input: wall time stamps commands (ctime, mtime,
/// TTL), monotonic time drives deadlines.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub wall_ms: i64,
    pub monotonic_ms: u64,
    /// The same monotonic instant in microseconds, for request latencies.
    pub monotonic_us: u64,
}

#[derive(Debug)]
pub enum Input {
    Opened {
        connection: ConnectionId,
        peer: std::net::SocketAddr,
    },
    /// `frame_bytes`, here and below: the packet's length, its 4-byte prefix included.
    Handshake {
        connection: ConnectionId,
        request: ConnectRequest,
        frame_bytes: usize,
    },
    Request {
        connection: ConnectionId,
        xid: i32,
        request: Request,
        frame_bytes: usize,
    },
    Undecodable {
        connection: ConnectionId,
        xid: i32,
        error: DecodeError,
        frame_bytes: usize,
    },
    Closed {
        connection: ConnectionId,
    },
    Committed {
        position: Zxid,
        entry: bytes::Bytes,
    },
    /// The ordering layer replaced this server's state with a snapshot (a learner that fell
    /// too far behind its leader): the tree's snapshot as the leader sent it. Committed
    /// entries continue after it.
    InstallSnapshot {
        tree_bytes: bytes::Bytes,
    },
    /// This server's part in ordering changed.
    Role(Role),
    Tick,
}

/// This server's part in ordering, as its ordering layer reports it. A serving role's `stint`
/// numbers the layer's stints of serving (see [`zoolog_zab::Status::Serving`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Standalone,
    /// An ensemble member without an established leader (electing or synchronizing): it
    /// orders nothing, and serves only read-only sessions (when read-only mode is enabled).
    Looking,
    Leader {
        epoch: u64,
        stint: u64,
    },
    Follower {
        leader: u64,
        epoch: u64,
        stint: u64,
    },
    Observer {
        leader: u64,
        epoch: u64,
        stint: u64,
    },
}

impl Role {
    pub fn is_serving(&self) -> bool {
        !matches!(self, Role::Looking)
    }

    /// Whether this server appends session expiries: exactly one server does at a time.
    fn decides_expiry(&self) -> bool {
        matches!(self, Role::Standalone | Role::Leader { .. })
    }

    /// ZooKeeper's name for it, as in `srvr`'s Mode line and mntr's zk_server_state.
    pub fn mode_name(&self, read_only_mode_enabled: bool) -> &'static str {
        match self {
            Role::Standalone => "standalone",
            Role::Looking if read_only_mode_enabled => "read-only",
            Role::Looking => "looking",
            Role::Leader { .. } => "leader",
            Role::Follower { .. } => "follower",
            Role::Observer { .. } => "observer",
        }
    }

    /// ZooKeeper's Zab phase of an ensemble member, as in the AdminServer's `zabstate`:
    /// `election` while it has no leader (zoolog's discovery and synchronization included),
    /// else `broadcast`; None for a standalone server.
    pub fn zab_phase(&self) -> Option<&'static str> {
        match self {
            Role::Standalone => None,
            Role::Looking => Some("election"),
            Role::Leader { .. } | Role::Follower { .. } | Role::Observer { .. } => {
                Some("broadcast")
            }
        }
    }

    /// The ordering layer's stint of serving; 0 when standalone or looking.
    fn stint(&self) -> u64 {
        match self {
            Role::Standalone | Role::Looking => 0,
            Role::Leader { stint, .. }
            | Role::Follower { stint, .. }
            | Role::Observer { stint, .. } => *stint,
        }
    }

    /// ZooKeeper's detailed peer state (mntr's `zk_peer_state`): the quorum peer's state, then
    /// its Zab phase; None for a standalone server.
    pub fn peer_state(&self) -> Option<String> {
        let state = match self {
            Role::Standalone => return None,
            Role::Looking => "looking",
            Role::Leader { .. } => "leading",
            Role::Follower { .. } => "following",
            Role::Observer { .. } => "observing",
        };
        Some(format!("{state} - {}", self.zab_phase()?))
    }
}

/// What `crst`, `srst` and `stmk` change, from a four-letter word or the AdminServer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorAction {
    /// Every connection's counters start again, as ZooKeeper's `resetAllConnectionStats`.
    ResetConnectionStats,
    /// The server's packet counters and latencies start again (not the Prometheus histograms,
    /// as in ZooKeeper's Prometheus provider: rates need monotonic counters).
    ResetServerStats,
    /// ZooKeeper's trace mask, kept so that `gtmk` reads back what was set.
    SetTraceMask(i64),
}

#[derive(Debug)]
pub enum Output {
    /// Bytes to write on a connection; `reply` marks one request answered (for the
    /// outstanding-requests limit).
    Write {
        connection: ConnectionId,
        bytes: Vec<u8>,
        reply: bool,
    },
    /// Close after everything written before has been flushed.
    Close { connection: ConnectionId },
    /// The handshake decision: the reader resumes reading requests only when accepted.
    HandshakeDone {
        connection: ConnectionId,
        accepted: bool,
    },
    /// Persist this frozen tree (cheap clone) as the snapshot at its last applied zxid.
    SaveSnapshot { tree: DataTree },
    /// This server cannot go on: the state it would serve is not the ensemble's.
    Stop { reason: String },
}

/// Which server and connection proposed a log entry, so that only the proposing server answers
/// it. `origin` is random per process start: entries replayed after a restart match nobody.
struct Envelope {
    origin: u64,
    connection: ConnectionId,
    command: Command,
}

impl Envelope {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&self.origin.to_be_bytes());
        out.extend_from_slice(&self.connection.to_be_bytes());
        out.extend_from_slice(&self.command.encode());
        out
    }

    fn decode(bytes: &[u8]) -> Result<Envelope, DecodeError> {
        let mut reader = zoolog_proto::Reader::new(bytes);
        let origin = i64::read_from(&mut reader)? as u64;
        let connection = i64::read_from(&mut reader)? as u64;
        let command = Command::decode(&bytes[16..])?;
        Ok(Envelope {
            origin,
            connection,
            command,
        })
    }
}

/// Whether every member running this binary can apply `entry`. A leader checks each command a
/// learner forwards before proposing it: once in the log, an entry that does not decode would
/// stop every member at its apply (see [`Core::committed`]), and again at each restart.
pub(crate) fn check_entry(entry: &[u8]) -> Result<(), DecodeError> {
    Envelope::decode(entry).map(drop)
}

/// A request's place in its connection's reply order.
enum Slot {
    /// A write in the log; answered when applied. `entry` is what was appended, appended
    /// again if a leader change lost it (see [`Core::role_changed`]).
    AwaitingApply {
        xid: i32,
        opcode: OpCode,
        received_us: u64,
        entry: bytes::Bytes,
    },
    /// A read or local operation that must wait for the writes before it.
    Deferred {
        xid: i32,
        request: Request,
        identities: Arc<[Id]>,
        received_us: u64,
    },
    /// Answered; `close` when the connection ends after this reply.
    Ready { bytes: Vec<u8>, close: bool },
    /// A write (or sync, or close) that came while this member had no leader: ordered when
    /// it has one again (see [`Core::role_changed`]). Its identities are those at arrival.
    Held {
        xid: i32,
        request: Request,
        identities: Arc<[Id]>,
        received_us: u64,
    },
}

#[derive(PartialEq, Eq)]
enum Phase {
    AwaitingHandshake,
    /// A new session is being created through the log; `password` matches it on apply.
    CreatingSession {
        password: Vec<u8>,
        timeout_ms: i32,
    },
    /// An existing session is being taken over through the log (ensemble only): the Attach
    /// checks the password where the session is surely known, and once applied here this
    /// server has caught up with everything the client saw.
    AttachingSession {
        session_id: i64,
        password: Vec<u8>,
        timeout_ms: i32,
    },
    Open,
    Closing,
}

struct Connection {
    peer: std::net::SocketAddr,
    phase: Phase,
    session_id: i64,
    /// Old-form handshake (no readOnly byte) gets an old-form reply.
    read_only_flag: Option<bool>,
    /// Accepted while the server was cut off from its quorum: reads only.
    read_only: bool,
    /// The newest zxid the client says it has seen (its handshake's lastZxidSeen).
    last_zxid_seen: Zxid,
    /// This connection's token in the log ([`Command::owner`]); 0 in standalone, where a
    /// session cannot move to another server.
    owner: u64,
    identities: Arc<[Id]>,
    slots: VecDeque<Slot>,
    stats: ConnectionStats,
}

struct LiveSession {
    timeout_ms: i32,
    deadline_ms: u64,
    /// When this server last heard from the client (ensemble only: its Touch entries say how
    /// long ago that was).
    heard_ms: u64,
    /// When the client was last heard from anywhere, as far as the log has told this server
    /// (on this server's clock): its Touch entries wait until that, and the contact it
    /// reported last, are a third of the session's timeout old.
    logged_heard_ms: u64,
    /// The latest contact this server put in a report of its own, ordered or not: the next
    /// report waits a third of the timeout from it too, so that reports slower to order than
    /// to make do not pile up in the queue, each behind the last (0: none since this server
    /// last began serving).
    reported_heard_ms: u64,
    connection: Option<ConnectionId>,
    /// A close has been appended; the session accepts nothing more.
    closing: bool,
    /// An expiry has been appended and not applied yet: none is appended again meanwhile.
    expiring: bool,
}

impl LiveSession {
    fn new(timeout_ms: i32, now_ms: u64) -> LiveSession {
        LiveSession {
            timeout_ms,
            deadline_ms: now_ms + timeout_ms as u64,
            heard_ms: now_ms,
            logged_heard_ms: now_ms,
            reported_heard_ms: 0,
            connection: None,
            closing: false,
            expiring: false,
        }
    }

    /// The latest contact with the client that is reported, or on its way to the log.
    fn news_ms(&self) -> u64 {
        self.logged_heard_ms.max(self.reported_heard_ms)
    }

    fn refresh(&mut self, now_ms: u64) {
        self.deadline_ms = now_ms + self.timeout_ms as u64;
    }

    /// The log says the client was heard from at `heard_ms` (this server's clock).
    fn heard_in_log(&mut self, heard_ms: u64) {
        self.logged_heard_ms = self.logged_heard_ms.max(heard_ms);
        let deadline_ms = self.logged_heard_ms + self.timeout_ms as u64;
        self.deadline_ms = self.deadline_ms.max(deadline_ms);
    }
}

/// A container or TTL node's last change as the reaper saw it, when a check first saw it, and
/// the check that saw the node last (entries no check saw are of nodes gone).
struct FirstSeen {
    change: Zxid,
    seen_ms: u64,
    check: u64,
}

/// A reaper's check in progress (the latest one begun): the last path it went over ("" before
/// the first), and how many reaps it has appended.
struct ReapCheck {
    after: String,
    reaps: usize,
}

/// A check goes over the containers and TTL nodes in at most this many ticks once there are
/// many (each tick takes at least [`ServerConfig::reap_scan_per_tick_min`] of them): one tick
/// over them all would stall everything else on this thread, 75 ms for 100,000 of them.
const REAP_CHECK_TICKS: usize = 64;
/// Reaps one check appends at most: more wait for the next check.
const REAPS_PER_CHECK_MAX: usize = 10_000;

pub struct Core {
    config: Arc<ServerConfig>,
    log: Arc<dyn OrderingLayer>,
    origin: u64,
    tree: DataTree,
    watches: WatchRegistry,
    connections: HashMap<ConnectionId, Connection>,
    sessions: HashMap<i64, LiveSession>,
    per_ip: HashMap<IpAddr, usize>,
    pending_handshakes: HashMap<Vec<u8>, ConnectionId>,
    role: Role,
    /// Set when this member left its quorum: until then it keeps its clients' connections
    /// (see [`Core::role_changed`]).
    clients_kept_until_ms: Option<u64>,
    /// The stint of serving this member ended when it last left its quorum, until it serves
    /// again: the stint the writes its kept clients wait for were appended in.
    left_stint: Option<u64>,
    /// Sessions heard from here since this server last reported them (ensemble only).
    touched: std::collections::HashSet<i64>,
    next_touch_ms: u64,
    /// Read-only sessions exist only on the server that made them, never in the log.
    local_sessions_made: u64,
    snapshot_schedule: SnapshotSchedule,
    snapshots_started: u64,
    snapshot_in_flight: bool,
    next_reap_ms: u64,
    /// Each container and TTL node as the reaper last checked it: its last change, and when
    /// (by this server's monotonic clock) a check first saw that change. Its idle time counts
    /// from there, never from an mtime another server's wall clock stamped.
    reap_first_seen: HashMap<String, FirstSeen>,
    /// The reaper's check under way, if one is: it goes over the nodes a chunk at each tick.
    reap_check: Option<ReapCheck>,
    /// Checks begun since this server started: the one under way, or the last, is this one.
    reap_checks: u64,
    now: Now,
    pub stats: ServerStats,
    /// Latency histograms and log/snapshot numbers for /metrics; the driver records the IO ones.
    pub metrics: Metrics,
    trace_mask: i64,
    out: Vec<Output>,
    /// Where new session passwords come from: OS randomness unless a driver that must be
    /// deterministic (the simulator) injects its own with [`Core::set_password_source`].
    password_source: Option<PasswordSource>,
}

/// Makes the bytes of a new session password.
pub type PasswordSource = Box<dyn FnMut() -> Vec<u8> + Send>;

const SESSION_PASSWORD_BYTES: usize = 16;

impl Core {
    /// Builds the front end over a recovered tree; every session the tree knows gets a fresh
    /// full timeout, as ZooKeeper does after a restart.
    pub fn new(
        config: Arc<ServerConfig>,
        log: Arc<dyn OrderingLayer>,
        mut tree: DataTree,
        origin: u64,
        now: Now,
    ) -> Core {
        publish_membership(&config, &mut tree, now);
        let sessions = live_sessions(&tree, now.monotonic_ms);
        let role = if config.ensemble.is_some() {
            Role::Looking
        } else {
            Role::Standalone
        };
        let snapshot_schedule = SnapshotSchedule::new(&config, 0);
        Core {
            role,
            clients_kept_until_ms: None,
            left_stint: None,
            touched: Default::default(),
            next_touch_ms: now.monotonic_ms,
            local_sessions_made: 0,
            next_reap_ms: now.monotonic_ms + config.container_check_interval_ms,
            reap_first_seen: HashMap::new(),
            reap_check: None,
            reap_checks: 0,
            config,
            log,
            origin,
            tree,
            watches: WatchRegistry::default(),
            connections: HashMap::new(),
            sessions,
            per_ip: HashMap::new(),
            pending_handshakes: HashMap::new(),
            snapshot_schedule,
            snapshots_started: 0,
            snapshot_in_flight: false,
            now,
            stats: ServerStats::default(),
            metrics: Metrics::default(),
            trace_mask: DEFAULT_TRACE_MASK,
            out: Vec::new(),
            password_source: None,
        }
    }

    /// Replaces OS randomness as the source of session passwords (for a deterministic driver).
    pub fn set_password_source(&mut self, source: PasswordSource) {
        self.password_source = Some(source);
    }

    /// Feeds one input; the outputs it caused are returned in the order they must happen.
    pub fn handle(&mut self, input: Input, now: Now) -> Vec<Output> {
        self.now = now;
        match input {
            Input::Opened { connection, peer } => self.opened(connection, peer),
            Input::Handshake {
                connection,
                request,
                frame_bytes,
            } => {
                self.packet_received(frame_bytes);
                self.handshake(connection, request)
            }
            Input::Request {
                connection,
                xid,
                request,
                frame_bytes,
            } => {
                self.packet_received(frame_bytes);
                self.request(connection, xid, request)
            }
            Input::Undecodable {
                connection,
                xid,
                error,
                frame_bytes,
            } => {
                self.packet_received(frame_bytes);
                self.undecodable(connection, xid, error)
            }
            Input::Closed { connection } => self.closed(connection),
            Input::Committed { position, entry } => self.committed(position, &entry),
            Input::InstallSnapshot { tree_bytes } => self.install_snapshot(tree_bytes),
            Input::Role(role) => self.role_changed(role),
            Input::Tick => self.tick(),
        }
        std::mem::take(&mut self.out)
    }

    /// The driver reports a snapshot done, allowing the next one: written, with how long it
    /// took in microseconds, or `None` when none was written (it failed, or the driver keeps
    /// no snapshots, as the simulator).
    pub fn snapshot_finished(&mut self, written: Option<(SnapshotRecord, u64)>) {
        self.snapshot_in_flight = false;
        if let Some((snapshot, took_us)) = written {
            self.metrics.record_snapshot(snapshot, took_us);
            self.stats.snapshot_time_us.record(took_us);
        }
    }

    /// What start-up recovery did, for mntr (until `srst`) and /metrics.
    pub fn record_startup(&mut self, startup: Startup) {
        self.stats.record_startup(startup);
        self.metrics.record_startup(startup);
    }

    /// Carries out an operator command (four-letter word or AdminServer).
    pub fn operate(&mut self, action: OperatorAction) {
        match action {
            OperatorAction::ResetConnectionStats => {
                for connection in self.connections.values_mut() {
                    connection.stats.reset();
                }
            }
            OperatorAction::ResetServerStats => self.stats = ServerStats::default(),
            OperatorAction::SetTraceMask(mask) => self.trace_mask = mask,
        }
    }

    // ---- connections -------------------------------------------------------------------

    fn opened(&mut self, connection: ConnectionId, peer: std::net::SocketAddr) {
        let limit = self.config.connections_per_ip_max;
        let from_ip = self.per_ip.get(&peer.ip()).copied().unwrap_or(0);
        let total_limit = self.config.connections_max;
        if (limit != 0 && from_ip >= limit)
            || (total_limit != 0 && self.connections.len() >= total_limit)
        {
            tracing::warn!(%peer, from_ip, "connection refused: too many connections");
            self.stats.connections_rejected += 1;
            self.out.push(Output::Close { connection });
            return;
        }
        *self.per_ip.entry(peer.ip()).or_default() += 1;
        let identities: Arc<[Id]> = Arc::from(vec![Id::new("ip", &peer.ip().to_string())]);
        let stats = ConnectionStats::new(self.now.monotonic_ms, self.now.wall_ms);
        let owner = if self.replicated() {
            // Unique per connection across the ensemble: origin is random per process.
            (self.origin ^ connection.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1
        } else {
            0
        };
        let state = Connection {
            peer,
            phase: Phase::AwaitingHandshake,
            session_id: 0,
            read_only_flag: None,
            read_only: false,
            last_zxid_seen: 0,
            owner,
            identities,
            slots: VecDeque::new(),
            stats,
        };
        self.connections.insert(connection, state);
    }

    fn closed(&mut self, connection: ConnectionId) {
        let Some(state) = self.connections.remove(&connection) else {
            return;
        };
        if let Some(count) = self.per_ip.get_mut(&state.peer.ip()) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&state.peer.ip());
            }
        }
        self.watches.drop_connection(connection);
        if let Phase::CreatingSession { password, .. } = &state.phase {
            self.pending_handshakes.remove(password);
        }
        if let Some(session) = self.sessions.get_mut(&state.session_id) {
            if session.connection == Some(connection) {
                session.connection = None;
            }
        }
    }

    fn close(&mut self, connection: ConnectionId) {
        if let Some(state) = self.connections.get_mut(&connection) {
            // A session being created for it is no longer this connection's: once Closing,
            // `closed` would not find the password, and the CreateSession applied later
            // would bind a connection that is gone.
            if let Phase::CreatingSession { password, .. } = &state.phase {
                self.pending_handshakes.remove(password);
            }
            state.phase = Phase::Closing;
        }
        self.out.push(Output::Close { connection });
    }

    /// Every client packet counts, whatever becomes of it, as in ZooKeeper.
    fn packet_received(&mut self, frame_bytes: usize) {
        self.stats.packets_received += 1;
        self.stats.bytes_received += frame_bytes as u64;
        self.metrics.record_packet(frame_bytes);
    }

    /// Writes a reply or a watch notification: what ZooKeeper counts as a client response.
    fn respond(&mut self, connection: ConnectionId, frame: Vec<u8>, reply: bool) {
        let response_bytes = frame.len() - FRAME_PREFIX_BYTES;
        self.stats
            .client_response_sizes
            .record(response_bytes as i64);
        self.write(connection, frame, reply);
    }

    fn write(&mut self, connection: ConnectionId, bytes: Vec<u8>, reply: bool) {
        if let Some(state) = self.connections.get_mut(&connection) {
            state.stats.sent += 1;
        }
        self.stats.packets_sent += 1;
        self.out.push(Output::Write {
            connection,
            bytes,
            reply,
        });
    }

    pub fn view(&self) -> crate::four_letter::View<'_> {
        crate::four_letter::View {
            config: &self.config,
            tree: &self.tree,
            watches: &self.watches,
            stats: &self.stats,
            connections: self
                .connections
                .iter()
                .map(|(id, c)| crate::four_letter::ConnectionView {
                    id: *id,
                    peer: c.peer,
                    session_id: c.session_id,
                    timeout_ms: self.sessions.get(&c.session_id).map_or(0, |s| s.timeout_ms),
                    queued: c.slots.len(),
                    stats: &c.stats,
                })
                .collect(),
            sessions: self
                .sessions
                .iter()
                .map(|(id, s)| (*id, s.timeout_ms, s.deadline_ms))
                .collect(),
            now: self.now,
            outstanding: self.connections.values().map(|c| c.slots.len()).sum(),
            metrics: &self.metrics,
            trace_mask: self.trace_mask,
            role: self.role,
            leader_report: crate::ensemble::LeaderReport::default(),
            quorum: crate::ensemble::QuorumCounters::default(),
            log: zoolog_log::LogStats::default(),
        }
    }

    // ---- handshake and sessions ----------------------------------------------------------

    fn negotiated_timeout_ms(&self, requested_ms: i32) -> i32 {
        let min = self.config.session_timeout_min_ms as i64;
        let max = self.config.session_timeout_max_ms as i64;
        (requested_ms as i64).clamp(min, max) as i32
    }

    fn handshake(&mut self, connection: ConnectionId, request: ConnectRequest) {
        let Some(state) = self.connections.get_mut(&connection) else {
            return;
        };
        if state.phase != Phase::AwaitingHandshake {
            return;
        }
        state.read_only_flag = request.read_only;
        state.last_zxid_seen = request.last_zxid_seen;
        self.stats.connect_requests += 1;
        let timeout_ms = self.negotiated_timeout_ms(request.timeout_ms);
        if !self.role.is_serving() {
            let wants_read_only = request.read_only == Some(true);
            if wants_read_only && self.config.read_only_mode_enabled {
                return self.read_only_session(connection, request, timeout_ms);
            }
            // Nothing can be ordered now: the client tries another server.
            return self.refuse_handshake(connection);
        }
        // In an ensemble every session is created or taken over by a log entry, ordered after
        // everything the client saw; once it applies here this server has caught up.
        if !self.replicated() && request.last_zxid_seen > self.tree.last_applied_zxid() {
            tracing::info!(
                client_zxid = request.last_zxid_seen,
                our_zxid = self.tree.last_applied_zxid(),
                "refusing a client that is ahead of this server"
            );
            return self.refuse_handshake(connection);
        }
        if request.session_id == 0 {
            self.begin_session(connection, timeout_ms);
        } else if self.replicated() {
            self.attach_session(connection, request, timeout_ms);
        } else {
            self.resume_session(connection, request, timeout_ms);
        }
    }

    fn refuse_handshake(&mut self, connection: ConnectionId) {
        self.out.push(Output::HandshakeDone {
            connection,
            accepted: false,
        });
        self.close(connection);
    }

    fn new_password(&mut self) -> Vec<u8> {
        match &mut self.password_source {
            Some(source) => source(),
            None => (0..SESSION_PASSWORD_BYTES)
                .map(|_| rand::random::<u8>())
                .collect(),
        }
    }

    /// A session on a server cut off from its quorum: served from the local tree, never
    /// logged. A new one gets a local id that no logged session can have; a client resuming
    /// a logged session keeps it (without taking ownership: that needs the log).
    fn read_only_session(
        &mut self,
        connection: ConnectionId,
        request: ConnectRequest,
        timeout_ms: i32,
    ) {
        if request.last_zxid_seen > self.tree.last_applied_zxid() {
            return self.refuse_handshake(connection);
        }
        let (session_id, password) = if request.session_id == 0 {
            self.local_sessions_made += 1;
            let id = (i64::from(self.config.server_id) << 56)
                | (1 << 55)
                | self.local_sessions_made as i64;
            (id, self.new_password())
        } else {
            match self.tree.session(request.session_id) {
                Some(info) if info.password == request.password => {
                    (request.session_id, request.password.clone())
                }
                // Behind the log, this server cannot tell a session that ended from one
                // created after what it holds: the client tries another server.
                None if !self.tree.has_applied_creation_of(request.session_id) => {
                    return self.refuse_handshake(connection)
                }
                _ => return self.reply_expired(connection, request.read_only),
            }
        };
        let state = self
            .connections
            .get_mut(&connection)
            .expect("caller checked");
        state.read_only = true;
        self.bind_session(connection, session_id, timeout_ms, password);
    }

    fn reply_expired(&mut self, connection: ConnectionId, read_only: Option<bool>) {
        let reply = ConnectResponse::expired(read_only);
        self.write(connection, framed(&reply.encode()), false);
        self.out.push(Output::HandshakeDone {
            connection,
            accepted: false,
        });
        self.close(connection);
    }

    /// Ensemble: takes the session over through the log (see [`Phase::AttachingSession`]).
    fn attach_session(
        &mut self,
        connection: ConnectionId,
        request: ConnectRequest,
        timeout_ms: i32,
    ) {
        let state = self
            .connections
            .get_mut(&connection)
            .expect("caller checked");
        let owner = state.owner;
        state.phase = Phase::AttachingSession {
            session_id: request.session_id,
            password: request.password.clone(),
            timeout_ms,
        };
        let command = Command {
            session_id: request.session_id,
            cxid: 0,
            time_ms: self.now.wall_ms,
            owner,
            op: CommandOp::Attach {
                owner,
                password: request.password,
            },
        };
        if !self.append(connection, command) {
            self.refuse_handshake(connection);
        }
    }

    fn begin_session(&mut self, connection: ConnectionId, timeout_ms: i32) {
        let password = self.new_password();
        self.pending_handshakes.insert(password.clone(), connection);
        let state = self
            .connections
            .get_mut(&connection)
            .expect("caller checked");
        state.phase = Phase::CreatingSession {
            password: password.clone(),
            timeout_ms,
        };
        let owner = state.owner;
        let command = Command {
            session_id: 0,
            cxid: 0,
            time_ms: self.now.wall_ms,
            owner,
            op: CommandOp::CreateSession {
                timeout_ms,
                password,
            },
        };
        if !self.append(connection, command) {
            self.refuse_handshake(connection);
        }
    }

    fn resume_session(
        &mut self,
        connection: ConnectionId,
        request: ConnectRequest,
        timeout_ms: i32,
    ) {
        let valid = match (
            self.tree.session(request.session_id),
            self.sessions.get(&request.session_id),
        ) {
            (Some(info), Some(live)) => !live.closing && info.password == request.password,
            _ => false,
        };
        if !valid {
            return self.reply_expired(connection, request.read_only);
        }
        let password = request.password.clone();
        self.bind_session(connection, request.session_id, timeout_ms, password);
    }

    /// Makes `connection` the one connection of `session_id` and sends the ConnectResponse.
    fn bind_session(
        &mut self,
        connection: ConnectionId,
        session_id: i64,
        timeout_ms: i32,
        password: Vec<u8>,
    ) {
        let now_ms = self.now.monotonic_ms;
        let session = self
            .sessions
            .entry(session_id)
            .or_insert_with(|| LiveSession::new(timeout_ms, now_ms));
        session.timeout_ms = timeout_ms;
        session.refresh(now_ms);
        let previous = session.connection.replace(connection);
        if let Some(previous) = previous.filter(|&p| p != connection) {
            self.close(previous);
        }
        let state = self
            .connections
            .get_mut(&connection)
            .expect("bound connections exist");
        state.phase = Phase::Open;
        state.session_id = session_id;
        let read_only = state.read_only;
        let reply = ConnectResponse {
            protocol_version: 0,
            timeout_ms,
            session_id,
            password,
            read_only: state.read_only_flag.map(|_| read_only),
        };
        self.write(connection, framed(&reply.encode()), false);
        self.out.push(Output::HandshakeDone {
            connection,
            accepted: true,
        });
    }

    fn touch(&mut self, session_id: i64) {
        let now_ms = self.now.monotonic_ms;
        if let Some(session) = self.sessions.get_mut(&session_id) {
            session.refresh(now_ms);
            session.heard_ms = now_ms;
            if self.config.ensemble.is_some() {
                self.touched.insert(session_id);
            }
        }
    }

    fn replicated(&self) -> bool {
        self.config.ensemble.is_some()
    }

    fn tick(&mut self) {
        self.drop_kept_clients_when_due();
        if self.role.decides_expiry() {
            self.expire_sessions();
        }
        self.reap_nodes();
        self.forget_expired_local_sessions();
        self.append_touches();
    }

    /// Tells the ensemble, in one entry, which sessions were heard from here and how long ago:
    /// whoever decides expiry sees them applied and counts their timeouts from then (the
    /// ordering delay only adds to that). A session is reported once the latest news of it
    /// (in the log, or in a report of this server's still on its way) is a third of its
    /// timeout old, less the check interval. Its client pings every third
    /// of the timeout, so each report still comes at most a ping interval and a check interval
    /// after the contact reported last, as when every ping was reported: a live session keeps
    /// the same margin before its deadline, and a dead client's session ends no later. A
    /// member whose clients only read so appends a Touch about every third of a timeout, not
    /// every half tick. Sessions half as stale ride along, so that the reports of
    /// many sessions share one entry.
    fn append_touches(&mut self) {
        let now_ms = self.now.monotonic_ms;
        if !self.replicated() || !self.role.is_serving() || now_ms < self.next_touch_ms {
            return;
        }
        let interval_ms = self.touch_interval_ms();
        self.next_touch_ms = now_ms + interval_ms;
        let sessions = &self.sessions;
        self.touched.retain(|id| sessions.contains_key(id));
        let staleness = |id: &i64| {
            let session = &sessions[id];
            let stale_ms = now_ms.saturating_sub(session.news_ms());
            let report_after_ms = (session.timeout_ms as u64 / 3).saturating_sub(interval_ms);
            (stale_ms, report_after_ms)
        };
        if !self
            .touched
            .iter()
            .map(staleness)
            .any(|(stale, after)| stale >= after)
        {
            return;
        }
        let mut sessions: Vec<SessionSeen> = self
            .touched
            .iter()
            .filter(|id| {
                let (stale, after) = staleness(id);
                stale >= after / 2
            })
            .map(|&session_id| SessionSeen {
                session_id,
                idle_ms: u32::try_from(now_ms.saturating_sub(sessions[&session_id].heard_ms))
                    .unwrap_or(u32::MAX),
            })
            .collect();
        sessions.sort_unstable_by_key(|seen| seen.session_id);
        let reported: Vec<i64> = sessions.iter().map(|seen| seen.session_id).collect();
        for session_id in &reported {
            self.touched.remove(session_id);
        }
        let command = Command {
            session_id: 0,
            cxid: 0,
            time_ms: self.now.wall_ms,
            owner: 0,
            op: CommandOp::Touch { sessions },
        };
        // Ahead of client commands: behind a backlog of writes, a report could come later
        // than the timeout it guards. A full lane refuses the entry: the sessions stay due and
        // are reported at the next check, not after their clients' next pings (which may come
        // too late, as a third of the timeout is already gone).
        if !self.append_urgent(command) {
            self.touched.extend(reported);
            return;
        }
        for session_id in &reported {
            let session = self.sessions.get_mut(session_id).expect("reported live");
            session.reported_heard_ms = session.heard_ms;
        }
    }

    /// Well inside the shortest session timeout (two ticks), so a touch always lands before
    /// the session could expire.
    fn touch_interval_ms(&self) -> u64 {
        (self.config.tick_ms / 2).max(1)
    }

    /// Appends an expiry for every session whose deadline passed. It is conditional on no sign
    /// of life being ordered after the last one this server applied, so it is harmless if the
    /// client was active elsewhere meanwhile. Connections close when the expiry applies: the
    /// client learns of it when it reconnects, as in ZooKeeper. Expiries queue with the
    /// client commands, not ahead of them as the reports do: a reconnecting client's Attach
    /// (or a write) already waiting at the leader then usually goes first and cancels the
    /// expiry, whereas an expiry in the reports' lane overtook one in the simulator (core
    /// seed 2601899). The leader takes its queues in turn, so this is no guarantee.
    fn expire_sessions(&mut self) {
        let now_ms = self.now.monotonic_ms;
        let mut expired: Vec<i64> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.closing && !s.expiring && s.deadline_ms <= now_ms)
            .map(|(&id, _)| id)
            .collect();
        expired.sort_unstable(); // hash-map order would make the log differ from run to run
        for session_id in expired {
            let Some(info) = self.tree.session(session_id) else {
                continue; // a local read-only session: nothing in the log to expire
            };
            let command = Command {
                session_id,
                cxid: 0,
                time_ms: self.now.wall_ms,
                owner: 0,
                op: CommandOp::Expire {
                    unless_touched_after: info.touched_at,
                },
            };
            if !self.append(0, command) {
                return; // tried again at the next tick
            }
            tracing::info!(
                session = format_args!("{session_id:#018x}"),
                "session expired"
            );
            self.sessions
                .get_mut(&session_id)
                .expect("just listed")
                .expiring = true;
        }
    }

    /// Read-only sessions are only in this server's memory: they simply end.
    fn forget_expired_local_sessions(&mut self) {
        let now_ms = self.now.monotonic_ms;
        let mut gone: Vec<(i64, Option<ConnectionId>)> = self
            .sessions
            .iter()
            .filter(|(id, s)| s.deadline_ms <= now_ms && self.is_local(**id))
            .map(|(id, s)| (*id, s.connection))
            .collect();
        gone.sort_unstable();
        for (session_id, connection) in gone {
            self.sessions.remove(&session_id);
            if let Some(connection) = connection {
                self.close(connection);
            }
        }
    }

    /// Every server checks its containers and TTL nodes, so that one that comes to decide
    /// has seen the changes since it started; only the decider appends the `Reap`s. A node
    /// is due once it has stayed unchanged, since a check here first saw its last change,
    /// for longer than it must: it was changed no later than that, so it is never reaped
    /// early, whatever any wall clock says. The price: it is reaped up to a check interval
    /// (and the check's own ticks) late, and up to a whole wait late on a server that started
    /// after its last change. A check goes over the nodes in path order, a chunk at each
    /// tick, so that many nodes do not stall this thread.
    fn reap_nodes(&mut self) {
        let now_ms = self.now.monotonic_ms;
        let mut check = match self.reap_check.take() {
            Some(check) => check,
            None if now_ms < self.next_reap_ms => return,
            None => {
                self.next_reap_ms = now_ms + self.config.container_check_interval_ms;
                self.reap_checks += 1;
                ReapCheck {
                    after: String::new(),
                    reaps: 0,
                }
            }
        };
        let chunk = (self.tree.reapable_count() / REAP_CHECK_TICKS)
            .max(self.config.reap_scan_per_tick_min)
            .max(1);
        let (decides, this_check) = (self.role.decides_expiry(), self.reap_checks);
        let mut due = Vec::new();
        let mut last_path = None;
        let mut scanned = 0;
        for (path, candidate) in self.tree.reapable_after(&check.after).take(chunk) {
            (last_path, scanned) = (Some(path), scanned + 1);
            let Some(candidate) = candidate else {
                continue;
            };
            // Looked up by reference first: a key is allocated only for a node new here.
            let seen_ms = match self.reap_first_seen.get_mut(path) {
                Some(seen) => {
                    if seen.change != candidate.last_change {
                        (seen.change, seen.seen_ms) = (candidate.last_change, now_ms);
                    }
                    seen.check = this_check;
                    seen.seen_ms
                }
                None => {
                    let seen = FirstSeen {
                        change: candidate.last_change,
                        seen_ms: now_ms,
                        check: this_check,
                    };
                    self.reap_first_seen.insert(path.to_owned(), seen);
                    now_ms
                }
            };
            let idle_ms = i64::try_from(now_ms - seen_ms).unwrap_or(i64::MAX);
            if decides
                && candidate.childless
                && candidate.after.is_due(idle_ms)
                && check.reaps < REAPS_PER_CHECK_MAX
            {
                due.push((path.to_owned(), candidate.last_change));
                check.reaps += 1;
            }
        }
        match last_path {
            Some(path) if scanned == chunk => {
                check.after = path.to_owned();
                self.reap_check = Some(check);
            }
            _ => self
                .reap_first_seen
                .retain(|_, seen| seen.check == this_check),
        }
        for (path, last_change) in due {
            let command = Command {
                session_id: 0,
                cxid: 0,
                time_ms: self.now.wall_ms,
                owner: 0,
                op: CommandOp::Reap {
                    path,
                    unchanged_since: Some(last_change),
                },
            };
            if !self.append(0, command) {
                return; // the node is found due again at the next check
            }
        }
    }

    /// Hands a command to the ordering layer; false when it refused (queue full, log failed).
    fn append(&mut self, connection: ConnectionId, command: Command) -> bool {
        let entry = self.envelope(connection, command);
        accepted(self.log.append(entry, self.role.stint()))
    }

    /// Hands a command to the ordering layer ahead of the client commands it holds.
    fn append_urgent(&mut self, command: Command) -> bool {
        let entry = self.envelope(0, command);
        accepted(self.log.append_urgent(entry, self.role.stint()))
    }

    fn envelope(&self, connection: ConnectionId, command: Command) -> bytes::Bytes {
        let entry = Envelope {
            origin: self.origin,
            connection,
            command,
        };
        bytes::Bytes::from(entry.encode())
    }

    // ---- requests ------------------------------------------------------------------------

    fn request(&mut self, connection: ConnectionId, xid: i32, request: Request) {
        let Some(state) = self.connections.get_mut(&connection) else {
            return;
        };
        if state.phase != Phase::Open {
            return;
        }
        state
            .stats
            .on_request(xid, request.opcode(), self.now.monotonic_ms);
        let session_id = state.session_id;
        let read_only = state.read_only;
        self.touch(session_id);
        let received_us = self.now.monotonic_us;
        match request {
            // Clients match pings out of band, so the reply may overtake slower replies.
            Request::Ping => {
                self.reply(
                    connection,
                    zoolog_proto::codes::xid::PING,
                    Ok(&Response::Empty),
                );
                let latency_us = self.now.monotonic_us.saturating_sub(received_us);
                self.record_latency(OpCode::Ping, RequestPath::Read, latency_us);
            }
            Request::Check(_) => self.unimplemented(connection, xid),
            Request::CloseSession if read_only && self.is_local(session_id) => {
                self.close_local_session(connection, xid, session_id)
            }
            request if read_only && self.is_logged(&request) => {
                self.queue_error(connection, xid, ErrorCode::NotReadOnly, false)
            }
            // A client kept through the search for a leader (see `role_changed`).
            request if self.is_logged(&request) && !self.role.is_serving() => {
                self.hold(connection, xid, request, received_us)
            }
            request if self.is_logged(&request) => {
                let state = self.connections.get(&connection).expect("checked above");
                let identities = state.identities.clone();
                let slot = self.order(connection, xid, request, &identities, received_us);
                self.queue(connection, slot);
            }
            request => {
                let state = self
                    .connections
                    .get_mut(&connection)
                    .expect("checked above");
                if let Request::Auth(auth) = &request {
                    // Identities change at arrival: later requests carry them, earlier ones not.
                    if let Some(ids) =
                        crate::auth::authenticate(auth, self.config.super_digest.as_deref())
                    {
                        let mut all = state.identities.to_vec();
                        all.extend(ids.into_iter().filter(|id| !state.identities.contains(id)));
                        state.identities = Arc::from(all);
                    }
                }
                let identities = state.identities.clone();
                if state.slots.is_empty() {
                    self.execute_local(connection, xid, request, &identities, received_us);
                } else {
                    state.slots.push_back(Slot::Deferred {
                        xid,
                        request,
                        identities,
                        received_us,
                    });
                }
            }
        }
    }

    /// A session made by this server while cut off from its quorum: the log never held it.
    fn is_local(&self, session_id: i64) -> bool {
        self.tree.session(session_id).is_none()
    }

    /// Only this server's memory holds a local session, so closing it needs no log entry:
    /// the reply comes in request order and the connection closes, as after a logged close.
    fn close_local_session(&mut self, connection: ConnectionId, xid: i32, session_id: i64) {
        self.sessions.remove(&session_id);
        let zxid = self.tree.last_applied_zxid();
        self.queue_ready(
            connection,
            reply_frame(xid, zxid, Ok(&Response::Empty)),
            true,
        );
    }

    /// Writes go through the log; so does `sync` in an ensemble, where its place in the log is
    /// what makes a read after it see every write committed before it, even across a
    /// change of leader (ZooKeeper's sync has no such guarantee: ZOOKEEPER-1675). Reconfig is
    /// answered at the front end.
    fn is_logged(&self, request: &Request) -> bool {
        match request {
            Request::Reconfig(_) => false,
            Request::Sync(_) => self.replicated(),
            request => request.is_write(),
        }
    }

    fn undecodable(&mut self, connection: ConnectionId, xid: i32, error: DecodeError) {
        match error {
            DecodeError::UnknownOpcode { .. } => self.unimplemented(connection, xid),
            DecodeError::BadMultiOp { .. } => {
                self.queue_error(connection, xid, ErrorCode::MarshallingError, false)
            }
            error => {
                tracing::info!(connection, %error, "closing a connection that sent an undecodable request");
                self.close(connection);
            }
        }
    }

    fn unimplemented(&mut self, connection: ConnectionId, xid: i32) {
        self.queue_error(connection, xid, ErrorCode::Unimplemented, true);
    }

    /// Queues an error reply in request order; reply zxid −1 as the reference server sends.
    fn queue_error(&mut self, connection: ConnectionId, xid: i32, code: ErrorCode, close: bool) {
        self.queue_ready(connection, reply_frame(xid, -1, Err(code)), close);
    }

    fn queue_ready(&mut self, connection: ConnectionId, bytes: Vec<u8>, close: bool) {
        self.queue(connection, Slot::Ready { bytes, close });
    }

    /// Queues `slot` behind the connection's earlier requests, and answers what can be.
    fn queue(&mut self, connection: ConnectionId, slot: Slot) {
        let Some(state) = self.connections.get_mut(&connection) else {
            return;
        };
        state.slots.push_back(slot);
        self.drain(connection);
    }

    /// Keeps a logged request that came while this member has no leader, behind the
    /// connection's earlier requests, for [`Core::order_kept`].
    fn hold(&mut self, connection: ConnectionId, xid: i32, request: Request, received_us: u64) {
        self.stats.leader_changes.requests_held += 1;
        let state = self.connections.get(&connection).expect("caller checked");
        let slot = Slot::Held {
            xid,
            request,
            identities: state.identities.clone(),
            received_us,
        };
        self.queue(connection, slot);
    }

    /// On joining a quorum: appends again the writes that the kept clients still wait for
    /// (appended in an earlier stint, which lost them: see [`Core::role_changed`]), and orders
    /// the requests held while this member had no leader; each connection's in request
    /// order, the connections in id order (as in every run of the same inputs). A connection
    /// being closed keeps its held requests unordered: its client saw them fail.
    fn order_kept(&mut self, lost_stint: Option<u64>) {
        let mut waiting: Vec<ConnectionId> = self
            .connections
            .iter()
            .filter(|(_, c)| c.phase == Phase::Open)
            .filter(|(_, c)| {
                c.slots
                    .iter()
                    .any(|s| matches!(s, Slot::Held { .. } | Slot::AwaitingApply { .. }))
            })
            .map(|(id, _)| *id)
            .collect();
        waiting.sort_unstable();
        for connection in waiting {
            let state = self.connections.get_mut(&connection).expect("just listed");
            let slots = std::mem::take(&mut state.slots);
            let mut ordered = VecDeque::with_capacity(slots.len());
            for slot in slots {
                ordered.push_back(match slot {
                    Slot::Held {
                        xid,
                        request,
                        identities,
                        received_us,
                    } => self.order(connection, xid, request, &identities, received_us),
                    Slot::AwaitingApply {
                        xid,
                        opcode,
                        received_us,
                        entry,
                    } => {
                        assert!(
                            lost_stint.is_some_and(|lost| lost < self.role.stint()),
                            "a write lost with a stint is appended again only in a later one"
                        );
                        self.stats.leader_changes.writes_appended_again += 1;
                        self.submit(connection, xid, opcode, entry, received_us)
                    }
                    slot => slot,
                });
            }
            let state = self.connections.get_mut(&connection).expect("just listed");
            state.slots = ordered;
            self.drain(connection);
        }
    }

    /// Appends a logged request to the ordering layer; the slot that waits for it to be
    /// applied, or that holds the error it was refused with.
    fn order(
        &mut self,
        connection: ConnectionId,
        xid: i32,
        request: Request,
        identities: &Arc<[Id]>,
        received_us: u64,
    ) -> Slot {
        let state = self.connections.get(&connection).expect("caller checked");
        let opcode = request.opcode();
        let op = match request {
            Request::CloseSession => CommandOp::CloseSession,
            request => CommandOp::Write {
                request,
                identities: identities.to_vec(),
            },
        };
        let command = Command {
            session_id: state.session_id,
            cxid: xid,
            time_ms: self.now.wall_ms,
            owner: state.owner,
            op,
        };
        let entry = self.envelope(connection, command);
        self.submit(connection, xid, opcode, entry, received_us)
    }

    /// Appends a connection's logged request, encoded as `entry`, to the ordering layer (for
    /// the first time, or again after a leader change lost it); the slot that waits for it to
    /// be applied, or that holds the error it was refused with.
    fn submit(
        &mut self,
        connection: ConnectionId,
        xid: i32,
        opcode: OpCode,
        entry: bytes::Bytes,
        received_us: u64,
    ) -> Slot {
        let session_id = self.connections[&connection].session_id;
        let refused = |code| Slot::Ready {
            bytes: reply_frame(xid, -1, Err(code)),
            close: false,
        };
        if self.sessions.get(&session_id).is_none_or(|s| s.closing) {
            return refused(ErrorCode::SessionExpired);
        }
        if !accepted(self.log.append(entry.clone(), self.role.stint())) {
            // Shed load rather than queue without bound; the client may retry.
            return refused(ErrorCode::ThrottledOp);
        }
        if opcode == OpCode::CloseSession {
            self.sessions
                .get_mut(&session_id)
                .expect("checked above")
                .closing = true;
        }
        Slot::AwaitingApply {
            xid,
            opcode,
            received_us,
            entry,
        }
    }

    /// Answers everything at the head of a connection's queue that can be answered now.
    fn drain(&mut self, connection: ConnectionId) {
        loop {
            let Some(state) = self.connections.get_mut(&connection) else {
                return;
            };
            match state.slots.front() {
                None | Some(Slot::AwaitingApply { .. } | Slot::Held { .. }) => return,
                Some(Slot::Ready { .. }) => {
                    let Some(Slot::Ready { bytes, close }) = state.slots.pop_front() else {
                        unreachable!()
                    };
                    self.respond(connection, bytes, true);
                    if close {
                        self.close(connection);
                        return;
                    }
                }
                Some(Slot::Deferred { .. }) => {
                    let Some(Slot::Deferred {
                        xid,
                        request,
                        identities,
                        received_us,
                    }) = state.slots.pop_front()
                    else {
                        unreachable!()
                    };
                    self.execute_local(connection, xid, request, &identities, received_us);
                }
            }
        }
    }

    fn reply(&mut self, connection: ConnectionId, xid: i32, result: Result<&Response, ErrorCode>) {
        let zxid = self.tree.last_applied_zxid();
        self.reply_at(connection, xid, zxid, result, false);
    }

    fn reply_at(
        &mut self,
        connection: ConnectionId,
        xid: i32,
        zxid: Zxid,
        result: Result<&Response, ErrorCode>,
        close: bool,
    ) {
        let bytes = reply_frame(xid, zxid, result);
        if let Some(state) = self.connections.get_mut(&connection) {
            state.stats.on_reply(zxid, self.now.monotonic_ms);
            self.stats.latency_ms.record(state.stats.last_latency_ms);
        }
        self.respond(connection, bytes, true);
        if close {
            self.close(connection);
        }
    }

    /// Runs a request that needs no log entry, against the state as it is now; every arm
    /// answers at once, so its latency is known when it returns.
    fn execute_local(
        &mut self,
        connection: ConnectionId,
        xid: i32,
        request: Request,
        identities: &Arc<[Id]>,
        received_us: u64,
    ) {
        let opcode = request.opcode();
        self.answer_local(connection, xid, request, identities);
        let latency_us = self.now.monotonic_us.saturating_sub(received_us);
        self.record_latency(opcode, RequestPath::Read, latency_us);
    }

    fn answer_local(
        &mut self,
        connection: ConnectionId,
        xid: i32,
        request: Request,
        identities: &Arc<[Id]>,
    ) {
        let session_id = self
            .connections
            .get(&connection)
            .map_or(0, |c| c.session_id);
        match request {
            Request::Auth(auth) => {
                if crate::auth::authenticate(&auth, self.config.super_digest.as_deref()).is_some() {
                    self.reply_at(connection, xid, 0, Ok(&Response::Empty), false);
                } else {
                    self.reply_at(connection, xid, 0, Err(ErrorCode::AuthFailed), true);
                }
            }
            Request::Sasl(_) => self.reply_at(connection, xid, 0, Err(ErrorCode::AuthFailed), true),
            Request::Sync(PathRequest { path }) => {
                self.reply(connection, xid, Ok(&Response::Sync(PathRequest { path })))
            }
            Request::Reconfig(_) => {
                let code = if self.config.reconfig_enabled {
                    ErrorCode::Unimplemented
                } else {
                    ErrorCode::ReconfigDisabled
                };
                self.reply(connection, xid, Err(code));
            }
            Request::WhoAmI => {
                let client_info = identities.iter().map(client_info).collect();
                self.reply(
                    connection,
                    xid,
                    Ok(&Response::WhoAmI(WhoAmIResponse { client_info })),
                );
            }
            Request::AddWatch(add) => {
                let kind = match zoolog_proto::AddWatchMode::from_i32(add.mode) {
                    Some(zoolog_proto::AddWatchMode::Persistent) => WatchKind::Persistent,
                    Some(zoolog_proto::AddWatchMode::PersistentRecursive) => {
                        WatchKind::PersistentRecursive
                    }
                    None => return self.reply(connection, xid, Err(ErrorCode::BadArguments)),
                };
                self.watches.add(connection, &add.path, kind);
                self.reply(
                    connection,
                    xid,
                    Ok(&Response::AddWatch(zoolog_proto::ErrorResponse { err: 0 })),
                );
            }
            Request::CheckWatches(query) => self.find_watches(connection, xid, &query, false),
            Request::RemoveWatches(query) => self.find_watches(connection, xid, &query, true),
            Request::SetWatches(set) => {
                let lists = zoolog_tree::WatchLists {
                    data: set.data_watches,
                    exist: set.exist_watches,
                    child: set.child_watches,
                    persistent: Vec::new(),
                    persistent_recursive: Vec::new(),
                };
                self.set_watches(connection, xid, set.relative_zxid, lists);
            }
            Request::SetWatches2(set) => {
                let lists = zoolog_tree::WatchLists {
                    data: set.data_watches,
                    exist: set.exist_watches,
                    child: set.child_watches,
                    persistent: set.persistent_watches,
                    persistent_recursive: set.persistent_recursive_watches,
                };
                self.set_watches(connection, xid, set.relative_zxid, lists);
            }
            request => {
                let read = self.tree.read(session_id, identities, &request);
                if let Some((path, kind)) = read.watch {
                    self.watches.add(connection, &path, kind);
                }
                self.reply(connection, xid, read.result.as_ref().map_err(|code| *code));
            }
        }
    }

    /// Answers checkWatches, or removeWatches when `remove`: NOWATCHER unless the connection
    /// has a watch of the asked kind on the path.
    fn find_watches(
        &mut self,
        connection: ConnectionId,
        xid: i32,
        query: &zoolog_proto::WatchesRequest,
        remove: bool,
    ) {
        let Some(kind) = WatcherType::from_i32(query.watcher_type) else {
            return self.reply(connection, xid, Err(ErrorCode::BadArguments));
        };
        let found = if remove {
            self.watches.remove(connection, &query.path, kind)
        } else {
            self.watches.contains(connection, &query.path, kind)
        };
        let result = if found {
            Ok(&Response::Empty)
        } else {
            Err(ErrorCode::NoWatcher)
        };
        self.reply(connection, xid, result);
    }

    fn set_watches(
        &mut self,
        connection: ConnectionId,
        xid: i32,
        relative_zxid: Zxid,
        lists: zoolog_tree::WatchLists,
    ) {
        let events = self
            .watches
            .set_watches(&self.tree, connection, relative_zxid, lists);
        for event in events {
            self.respond(connection, notification_frame(-1, &event), false);
        }
        self.reply(connection, xid, Ok(&Response::Empty));
    }

    // ---- the log -------------------------------------------------------------------------

    fn committed(&mut self, position: Zxid, entry: &[u8]) {
        let envelope = match Envelope::decode(entry) {
            Ok(envelope) => envelope,
            Err(error) => panic!(
                "log entry {position} does not decode ({error}): the log and this binary disagree"
            ),
        };
        let applied = self.tree.apply(position, &envelope.command);
        self.snapshot_schedule.record(entry.len());
        self.deliver_watch_events(position, &applied.triggers);
        self.note_signs_of_life(position, &envelope.command);
        let ours = envelope.origin == self.origin;
        match applied.outcome {
            Outcome::SessionCreated {
                session_id,
                timeout_ms,
                password,
            } => {
                self.session_created(session_id, timeout_ms, password);
            }
            Outcome::SessionClosed => self.session_closed(
                envelope.command.session_id,
                ours.then_some((envelope.connection, envelope.command.cxid)),
                position,
            ),
            Outcome::Reply(result) if ours && is_session_moved(&result) => {
                self.session_moved_away(&envelope.command, envelope.connection);
            }
            Outcome::Attached { session_exists } if ours => {
                self.session_attached(envelope.connection, session_exists);
            }
            Outcome::ExpireSkipped { .. } => {
                if let Some(session) = self.sessions.get_mut(&envelope.command.session_id) {
                    session.expiring = false;
                }
            }
            Outcome::Reply(result) if ours => {
                self.answer_write(
                    envelope.connection,
                    envelope.command.cxid,
                    position,
                    result,
                    false,
                );
            }
            Outcome::Reply(_)
            | Outcome::Reaped
            | Outcome::Touched { .. }
            | Outcome::Attached { .. } => {}
        }
        self.maybe_snapshot();
    }

    /// Whatever the log counts as a session's sign of life (the entry at `position` moved
    /// its `touched_at`) keeps it alive here too, so that the server deciding expiry (which
    /// may change) knows of clients connected elsewhere. A write from a connection the client
    /// has left is no such sign: sent before the client moved, it may be ordered long after.
    /// Nor is an Attach with the wrong password, as in ZooKeeper.
    fn note_signs_of_life(&mut self, position: Zxid, command: &Command) {
        let now_ms = self.now.monotonic_ms;
        for seen in self.tree.signs_of_life(position, command) {
            if let Some(session) = self.sessions.get_mut(&seen.session_id) {
                session.heard_in_log(now_ms.saturating_sub(u64::from(seen.idle_ms)));
            }
        }
    }

    /// The Attach this server appended for a reconnecting client has been applied.
    fn session_attached(&mut self, connection: ConnectionId, session_exists: bool) {
        let Some(state) = self.connections.get(&connection) else {
            return;
        };
        let Phase::AttachingSession {
            session_id,
            password,
            timeout_ms,
        } = &state.phase
        else {
            return;
        };
        let (session_id, password, timeout_ms) = (*session_id, password.clone(), *timeout_ms);
        if !self.caught_up_with(connection) {
            return self.refuse_handshake(connection);
        }
        let closing = self.sessions.get(&session_id).is_none_or(|s| s.closing);
        if !session_exists || closing {
            let read_only = state.read_only_flag;
            return self.reply_expired(connection, read_only);
        }
        self.bind_session(connection, session_id, timeout_ms, password);
    }

    /// The ordering layer replaced the state: this server was too far behind its leader. Its
    /// clients reconnect, and their watches catch up through setWatches.
    fn install_snapshot(&mut self, tree_bytes: bytes::Bytes) {
        let tree_config = self.tree.config().clone();
        // The old tree goes before the new one is decoded, as ZooKeeper clears its database
        // before it reads a snapshot: a learner then needs memory for the new tree and its
        // snapshot, not for the old tree as well.
        self.tree = DataTree::new(tree_config.clone());
        let mut tree = match DataTree::decode_snapshot(&tree_bytes, tree_config) {
            Ok(tree) => tree,
            Err(error) => {
                let reason = format!("the leader's snapshot does not decode here: {error}");
                self.out.push(Output::Stop { reason });
                return;
            }
        };
        drop(tree_bytes);
        publish_membership(&self.config, &mut tree, self.now);
        self.close_connections(|_| true);
        let mut sessions = live_sessions(&tree, self.now.monotonic_ms);
        // What this server heard from a client before the snapshot is still news to report
        // (a session in `touched` is reported from it); the install itself is no contact.
        for (id, session) in &mut sessions {
            if let Some(before) = self.sessions.get(id) {
                session.heard_ms = before.heard_ms;
            }
        }
        self.sessions = sessions;
        self.tree = tree;
        self.snapshot_schedule.restart();
    }

    /// Leaving the quorum keeps the clients' connections, watches and reads for up to a
    /// tick: a leader change here takes milliseconds, and a ZooKeeper follower drops all its
    /// clients at each one. Their reads are answered from this member's applied state, every
    /// entry of it committed, as a follower's always are.
    ///
    /// A client's writes, syncs and close that come meanwhile are held, with the requests
    /// behind them, and ordered when this member joins a quorum again: none was handed to
    /// the ordering layer before, so none is ordered twice (and the log refuses one whose
    /// client has since moved its session to another server, as it refuses any other
    /// owner's).
    ///
    /// The writes a client was already waiting for were appended in the stint of serving
    /// this member ended, and may or may not commit. The ordering layer begins a new stint
    /// only once this member has applied the history its leader synchronized it to, and that
    /// history holds every entry of the ended stint that will ever commit (see
    /// [`zoolog_zab::Status::Serving`]; the same holds when a leader that kept leading takes
    /// the member back into its epoch). So a write applied by then was answered as it was
    /// applied, and one that was not never will be: it is appended again, in its place in the
    /// client's order. The layer drops an entry appended in a stint that has ended (one still
    /// queued to it when the member left), so the entry cannot commit in the new stint as
    /// well. All clients are dropped when the member installs a snapshot, which may hold their
    /// writes without applying them one by one here.
    ///
    /// When the tick is up without a leader, the kept clients are dropped and what they had
    /// held is never ordered (a member that found no leader by then is likely cut off, and its
    /// clients had better move). Joining the quorum drops the read-only clients, so that they
    /// come back with writable sessions. A new leader gives every session a full timeout, as
    /// ZooKeeper does.
    fn role_changed(&mut self, role: Role) {
        let was_serving = self.role.is_serving();
        assert!(
            !(was_serving && role.is_serving()) || role.stint() == self.role.stint(),
            "a stint of serving ends by leaving the quorum: {:?} -> {role:?}",
            self.role
        );
        let ended_stint = self.role.stint();
        let lost_stint = self.left_stint;
        self.role = role;
        let joining = !was_serving && role.is_serving();
        if was_serving != role.is_serving() {
            self.close_connections(|c| match c.phase {
                Phase::AwaitingHandshake => false,
                Phase::Open if joining => c.read_only,
                Phase::Open => false,
                _ => true,
            });
            self.left_stint = (!joining).then_some(ended_stint);
            self.clients_kept_until_ms =
                (!joining).then(|| self.now.monotonic_ms + self.config.tick_ms);
            // A close or a report this server appended may have been lost with the change
            // (dropped before ordering, or with a deposed leader's uncommitted entries). If a
            // close still commits, the session ends then; until it does, the session is live
            // like any other: it may be taken over here, and expired when this server decides
            // expiry. The next report waits for none that may be lost, and the sessions heard
            // from here stay due for one (`touched`), those of a report the log has not shown
            // yet among them: a client that was talking here keeps the timeout it counted on
            // while it finds another server.
            let touched = &mut self.touched;
            for (&session_id, session) in &mut self.sessions {
                session.closing = false;
                if session.reported_heard_ms > session.logged_heard_ms {
                    touched.insert(session_id);
                }
                session.reported_heard_ms = 0;
            }
        }
        if role.decides_expiry() {
            let now_ms = self.now.monotonic_ms;
            for session in self.sessions.values_mut() {
                session.refresh(now_ms);
                session.expiring = false;
            }
        }
        if joining {
            // After the sessions' reset above, which would forget a held close.
            self.order_kept(lost_stint);
        }
        tracing::info!(?role, "role changed");
    }

    /// Drops the clients kept since this member left its quorum, once their tick is up.
    fn drop_kept_clients_when_due(&mut self) {
        let Some(until_ms) = self.clients_kept_until_ms else {
            return;
        };
        if self.now.monotonic_ms < until_ms {
            return;
        }
        self.clients_kept_until_ms = None;
        self.stats.leader_changes.clients_dropped +=
            self.close_connections(|c| c.phase == Phase::Open && !c.read_only);
    }

    /// Closes every connection `doomed` picks, in id order (hash-map order would make the
    /// outputs differ from run to run); how many.
    fn close_connections(&mut self, doomed: impl Fn(&Connection) -> bool) -> u64 {
        let mut picked: Vec<ConnectionId> = self
            .connections
            .iter()
            .filter(|(_, c)| doomed(c))
            .map(|(id, _)| *id)
            .collect();
        picked.sort_unstable();
        for &connection in &picked {
            self.close(connection);
        }
        picked.len() as u64
    }

    fn deliver_watch_events(&mut self, position: Zxid, triggers: &[zoolog_tree::Trigger]) {
        if triggers.is_empty() {
            return;
        }
        let connections = &self.connections;
        let events = self.watches.fire(triggers, |connection| {
            connections.get(&connection).map(|c| &*c.identities)
        });
        for (connection, event) in events {
            self.respond(connection, notification_frame(position, &event), false);
        }
    }

    fn session_created(&mut self, session_id: i64, timeout_ms: i32, password: Vec<u8>) {
        let Some(connection) = self.pending_handshakes.remove(&password) else {
            // Created through another server, or its connection went away: it expires unless
            // someone reconnects to it.
            let session = LiveSession::new(timeout_ms, self.now.monotonic_ms);
            self.sessions.insert(session_id, session);
            return;
        };
        if !self.caught_up_with(connection) {
            let session = LiveSession::new(timeout_ms, self.now.monotonic_ms);
            self.sessions.insert(session_id, session);
            return self.refuse_handshake(connection);
        }
        self.bind_session(connection, session_id, timeout_ms, password);
    }

    /// Whether this server has applied everything the client says it has seen. Once the
    /// client's CreateSession or Attach applies here it has, unless the client saw a history
    /// this ensemble never had: then it is refused, as ZooKeeper refuses it.
    fn caught_up_with(&self, connection: ConnectionId) -> bool {
        self.connections
            .get(&connection)
            .is_some_and(|c| c.last_zxid_seen <= self.tree.last_applied_zxid())
    }

    fn session_closed(
        &mut self,
        session_id: i64,
        origin: Option<(ConnectionId, i32)>,
        position: Zxid,
    ) {
        let origin_connection = origin.map(|(connection, _)| connection);
        if let Some(session) = self.sessions.remove(&session_id) {
            if let Some(connection) = session.connection.filter(|c| Some(*c) != origin_connection) {
                self.close(connection);
            }
        }
        // Expiry is proposed by no connection (id 0), so only a client's closeSession is answered.
        if let Some((connection, cxid)) = origin {
            self.answer_write(connection, cxid, position, Ok(Response::Empty), true);
        }
    }

    /// A write or close of ours failed because another connection holds the session. As
    /// ZooKeeper does (ZOOKEEPER-710), the connection closes without answering it: the client
    /// reconnects and takes its session over again. An Attach ordered late, from a
    /// connection the client had already left, would otherwise fail every write of the
    /// client's current connection.
    fn session_moved_away(&mut self, command: &Command, connection: ConnectionId) {
        if command.op == CommandOp::CloseSession {
            // The close lost to a newer owner: the session lives on, elsewhere.
            if let Some(session) = self.sessions.get_mut(&command.session_id) {
                session.closing = false;
            }
        }
        if self.connections.contains_key(&connection) {
            tracing::info!(
                connection,
                session = format_args!("{:#018x}", command.session_id),
                "closing a connection whose session another connection holds"
            );
            self.close(connection);
        }
    }

    /// Fills the first awaiting slot of the proposing connection with the applied result.
    fn answer_write(
        &mut self,
        connection: ConnectionId,
        cxid: i32,
        position: Zxid,
        result: Result<Response, ErrorCode>,
        close: bool,
    ) {
        let Some(state) = self.connections.get_mut(&connection) else {
            return;
        };
        let Some(slot) = state
            .slots
            .iter_mut()
            .find(|slot| matches!(slot, Slot::AwaitingApply { .. }))
        else {
            return;
        };
        let Slot::AwaitingApply {
            xid,
            opcode,
            received_us,
            ..
        } = *slot
        else {
            unreachable!()
        };
        assert_eq!(
            xid, cxid,
            "writes of one connection are applied in the order they were appended"
        );
        let bytes = reply_frame(xid, position, result.as_ref().map_err(|code| *code));
        state.stats.on_reply(position, self.now.monotonic_ms);
        self.stats.latency_ms.record(state.stats.last_latency_ms);
        let latency_us = self.now.monotonic_us.saturating_sub(received_us);
        *slot = Slot::Ready { bytes, close };
        self.record_latency(opcode, RequestPath::Update, latency_us);
        self.drain(connection);
    }

    /// One answered request's time from arrival to reply, in the four-letter words'
    /// statistics (which `srst` resets) and in the metrics (which it leaves).
    fn record_latency(&mut self, opcode: OpCode, path: RequestPath, latency_us: u64) {
        self.metrics
            .record_request(opcode, path, latency_us, self.now.monotonic_ms);
        match path {
            RequestPath::Read => self.stats.read_latency_us.record(latency_us),
            RequestPath::Update => self.stats.update_latency_us.record(latency_us),
        }
    }

    fn maybe_snapshot(&mut self) {
        if self.snapshot_in_flight || !self.snapshot_schedule.is_due() {
            return;
        }
        self.snapshot_in_flight = true;
        self.snapshots_started += 1;
        self.snapshot_schedule = SnapshotSchedule::new(&self.config, self.snapshots_started);
        self.out.push(Output::SaveSnapshot {
            tree: self.tree.clone(),
        });
    }
}

/// When the next snapshot is due: after snapCount entries, or after snapSizeLimitInKb of them,
/// whichever comes first. Each limit is rolled between its half and itself, differently for
/// each server and each snapshot (as ZooKeeper's random roll), so that the members of an
/// ensemble, which apply the same entries at the same pace, do not all write a snapshot at
/// the same moment. Derived from the server id and the snapshot count rather than drawn, so
/// that a deterministic driver stays deterministic.
///
/// The byte limit matters more here than in ZooKeeper: an ensemble member holds every entry
/// since its last snapshot in memory (to sync learners), so large values under the count
/// limit alone could fill it.
#[derive(Debug)]
struct SnapshotSchedule {
    entries: u64,
    bytes: u64,
    entries_due: u64,
    bytes_due: Option<u64>,
}

impl SnapshotSchedule {
    fn new(config: &ServerConfig, snapshots_started: u64) -> SnapshotSchedule {
        let seed = (u64::from(config.server_id) << 32) ^ snapshots_started;
        SnapshotSchedule {
            entries: 0,
            bytes: 0,
            entries_due: rolled(config.entries_per_snapshot, seed),
            bytes_due: config
                .log_bytes_per_snapshot
                .map(|limit| rolled(limit, seed ^ BYTES_ROLL_STREAM)),
        }
    }

    fn record(&mut self, entry_bytes: usize) {
        self.entries += 1;
        self.bytes += entry_bytes as u64;
    }

    fn is_due(&self) -> bool {
        self.entries >= self.entries_due || self.bytes_due.is_some_and(|due| self.bytes >= due)
    }

    /// The state was replaced by a snapshot: count from it.
    fn restart(&mut self) {
        self.entries = 0;
        self.bytes = 0;
    }
}

/// Keeps the byte roll from moving in step with the entry roll.
const BYTES_ROLL_STREAM: u64 = 0x5eed_0000_b17e_5000;

/// A value in `[limit / 2, limit)` (1 for a limit of 2), scattered by `seed`.
fn rolled(limit: u64, seed: u64) -> u64 {
    let half = limit / 2;
    let spread = limit - half;
    half + mix64(seed) % spread.max(1)
}

/// SplitMix64's finaliser: a cheap bijection that scatters consecutive seeds.
fn mix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An ensemble's `/zookeeper/config` shows its members, as ZooKeeper's does.
fn publish_membership(config: &ServerConfig, tree: &mut DataTree, now: Now) {
    if let Some(ensemble) = &config.ensemble {
        tree.publish_membership(&ensemble.membership_text(), now.wall_ms);
    }
}

/// Every session the tree knows, with a fresh full timeout.
fn live_sessions(tree: &DataTree, now_ms: u64) -> HashMap<i64, LiveSession> {
    tree.sessions()
        .map(|(id, info)| (id, LiveSession::new(info.timeout_ms, now_ms)))
        .collect()
}

fn client_info(id: &Id) -> ClientInfo {
    let user = match id.scheme.as_str() {
        "digest" => id.id.split(':').next().unwrap_or_default().to_owned(),
        _ => id.id.clone(),
    };
    ClientInfo {
        auth_scheme: id.scheme.clone(),
        user,
    }
}

/// The input a request's frame (without its length prefix) makes; `None` when it is too short
/// to hold a request header, for which a connection is closed.
pub fn request_input(connection: ConnectionId, frame: &[u8]) -> Option<Input> {
    if frame.len() < 8 {
        return None;
    }
    let header =
        RequestHeader::read_from(&mut Reader::new(&frame[..8])).expect("8 bytes hold a header");
    let frame_bytes = FRAME_PREFIX_BYTES + frame.len();
    Some(match Request::decode(header.opcode, &frame[8..]) {
        Ok(request) => Input::Request {
            connection,
            xid: header.xid,
            request,
            frame_bytes,
        },
        Err(error) => Input::Undecodable {
            connection,
            xid: header.xid,
            error,
            frame_bytes,
        },
    })
}

/// Whether a write failed its session check for want of ownership: a multi does so in its
/// results (at its first op).
fn is_session_moved(result: &Result<Response, ErrorCode>) -> bool {
    match result {
        Err(code) => *code == ErrorCode::SessionMoved,
        Ok(Response::Multi(results)) => {
            results.contains(&zoolog_proto::MultiResult::Error(ErrorCode::SessionMoved))
        }
        Ok(_) => false,
    }
}

/// A reply's frame, encoded in one buffer sized for it (a read's data is most of it).
fn reply_frame(xid: i32, zxid: Zxid, result: Result<&Response, ErrorCode>) -> Vec<u8> {
    let data_bytes = result.map_or(0, Response::data_bytes);
    frame_with(REPLY_BYTES_MIN + data_bytes, |out| {
        encode_reply(xid, zxid, result, out)
    })
}

/// A watch notification's frame.
fn notification_frame(zxid: Zxid, event: &WatcherEvent) -> Vec<u8> {
    frame_with(REPLY_BYTES_MIN + event.path.len(), |out| {
        encode_notification(zxid, event, out)
    })
}

fn accepted(appended: Result<(), zoolog_log::AppendError>) -> bool {
    match appended {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, "the log refused a command");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ordering layer that queues appends in two lanes, and refuses them while the lane's
    /// switch is set (as a full lane does).
    #[derive(Default)]
    struct QueueLayer {
        queued: std::sync::Mutex<VecDeque<bytes::Bytes>>,
        /// The stint each client command was appended for, in order.
        stints: std::sync::Mutex<Vec<u64>>,
        urgent: std::sync::Mutex<VecDeque<bytes::Bytes>>,
        refusing: std::sync::atomic::AtomicBool,
        refusing_urgent: std::sync::atomic::AtomicBool,
    }

    impl QueueLayer {
        fn refuse(&self, commands: bool, urgent: bool) {
            let relaxed = std::sync::atomic::Ordering::Relaxed;
            self.refusing.store(commands, relaxed);
            self.refusing_urgent.store(urgent, relaxed);
        }
    }

    fn push(
        lane: &std::sync::Mutex<VecDeque<bytes::Bytes>>,
        refusing: &std::sync::atomic::AtomicBool,
        entry: bytes::Bytes,
    ) -> Result<(), zoolog_log::AppendError> {
        if refusing.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(zoolog_log::AppendError::Full);
        }
        lane.lock().unwrap().push_back(entry);
        Ok(())
    }

    impl OrderingLayer for QueueLayer {
        fn append(&self, entry: bytes::Bytes, stint: u64) -> Result<(), zoolog_log::AppendError> {
            push(&self.queued, &self.refusing, entry)?;
            self.stints.lock().unwrap().push(stint);
            Ok(())
        }

        fn append_urgent(
            &self,
            entry: bytes::Bytes,
            _stint: u64,
        ) -> Result<(), zoolog_log::AppendError> {
            push(&self.urgent, &self.refusing_urgent, entry)
        }

        fn committed_position(&self) -> zoolog_log::Position {
            0
        }
    }

    fn at_ms(monotonic_ms: u64) -> Now {
        Now {
            wall_ms: 1_700_000_000_000 + monotonic_ms as i64,
            monotonic_ms,
            monotonic_us: monotonic_ms * 1_000,
        }
    }

    /// The Core of member 1 of a two-member ensemble with `config`'s other settings, in
    /// `role`, over a layer the test can make refuse.
    fn member_of_two(config: ServerConfig, role: Role) -> (Core, Arc<QueueLayer>) {
        let member = crate::config::PeerConfig::local_participant();
        let config = Arc::new(ServerConfig {
            ensemble: Some(crate::config::EnsembleConfig {
                members: [(1, member.clone()), (2, member)].into(),
                init_limit: 10,
                sync_limit: 5,
                observer: false,
            }),
            ..config
        });
        let layer = Arc::new(QueueLayer::default());
        let tree = DataTree::new(crate::shell::tree_config(&config));
        let mut core = Core::new(config, layer.clone(), tree, 7, at_ms(0));
        core.handle(Input::Role(role), at_ms(0));
        (core, layer)
    }

    /// A follower's Core with one session (6 s timeout) whose client pinged at 1.9 s, over
    /// a layer the test can make refuse.
    fn follower_with_a_pinged_session() -> (Core, Arc<QueueLayer>) {
        let (mut core, layer) = follower_with_a_session(false);
        core.handle(ping(), at_ms(1_900));
        (core, layer)
    }

    /// A follower's Core whose connection 1 holds the session (6 s timeout) created by entry
    /// 1, over a layer the test can make refuse.
    fn follower_with_a_session(read_only_mode_enabled: bool) -> (Core, Arc<QueueLayer>) {
        let config = ServerConfig {
            tick_ms: 500,
            read_only_mode_enabled,
            ..ServerConfig::default()
        };
        let follower = Role::Follower {
            leader: 2,
            epoch: 1,
            stint: 1,
        };
        let (mut core, layer) = member_of_two(config, follower);
        core.handle(
            Input::Opened {
                connection: 1,
                peer: "127.0.0.1:40000".parse().unwrap(),
            },
            at_ms(0),
        );
        let connect = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 6_000,
            session_id: 0,
            password: vec![0; 16],
            read_only: None,
        };
        let handshake = Input::Handshake {
            connection: 1,
            request: connect,
            frame_bytes: 48,
        };
        core.handle(handshake, at_ms(0));
        let create_session = layer.queued.lock().unwrap().pop_front().unwrap();
        let committed = Input::Committed {
            position: 1,
            entry: create_session,
        };
        core.handle(committed, at_ms(1));
        (core, layer)
    }

    fn ping() -> Input {
        Input::Request {
            connection: 1,
            xid: zoolog_proto::codes::xid::PING,
            request: Request::Ping,
            frame_bytes: 12,
        }
    }

    /// How long ago (ms) the one session named by the liveness report at the head of the
    /// urgent lane was heard from; takes the report off the lane.
    fn idle_in_the_next_report(layer: &QueueLayer) -> u32 {
        let entry = layer.urgent.lock().unwrap().pop_front();
        let entry = entry.expect("a liveness report was appended");
        let command = Envelope::decode(&entry).unwrap().command;
        let CommandOp::Touch { sessions } = command.op else {
            panic!("expected a touch, got {command:?}");
        };
        assert_eq!(sessions.len(), 1, "{sessions:?}");
        sessions[0].idle_ms
    }

    /// Opens `connection` and asks for read-only `session_id`, as a client that has seen
    /// nothing; says whether the handshake was accepted, and what was written back.
    fn connect_read_only(
        core: &mut Core,
        connection: ConnectionId,
        session_id: i64,
        password: Vec<u8>,
    ) -> (Option<bool>, Vec<u8>) {
        let peer = "127.0.0.1:40001".parse().unwrap();
        core.handle(Input::Opened { connection, peer }, at_ms(2_000));
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 6_000,
            session_id,
            password,
            read_only: Some(true),
        };
        let handshake = Input::Handshake {
            connection,
            request,
            frame_bytes: 48,
        };
        let (mut accepted, mut written) = (None, Vec::new());
        for output in core.handle(handshake, at_ms(2_000)) {
            match output {
                Output::HandshakeDone { accepted: a, .. } => accepted = Some(a),
                Output::Write { bytes, .. } => written.extend(bytes),
                _ => {}
            }
        }
        (accepted, written)
    }

    #[test]
    fn a_cut_off_server_turns_away_a_session_it_has_not_seen_created_instead_of_expiring_it() {
        let (mut core, _layer) = follower_with_a_session(true);
        core.handle(Input::Role(Role::Looking), at_ms(2_000));
        let session_id = 1;
        let password = core.tree.session(session_id).unwrap().password.clone();
        let (accepted, written) = connect_read_only(&mut core, 2, 2, password.clone());
        assert_eq!(accepted, Some(false));
        assert!(written.is_empty(), "no expired answer: {written:?}");
        let (accepted, written) = connect_read_only(&mut core, 3, session_id, password);
        assert_eq!(accepted, Some(true));
        let response = ConnectResponse::decode(&written[FRAME_PREFIX_BYTES..]).unwrap();
        assert_eq!(
            (response.session_id, response.read_only),
            (session_id, Some(true))
        );
    }

    /// What became of connection 1 when `core` was fed an input.
    #[derive(Debug, PartialEq, Eq)]
    enum ClientSaw {
        Nothing,
        AnAnswer,
        ItsConnectionClosed,
    }

    /// Feeds `input` to `core` at `ms`: what connection 1 saw (a close wins over an answer).
    fn client_saw(core: &mut Core, input: Input, ms: u64) -> ClientSaw {
        let outputs = core.handle(input, at_ms(ms));
        if outputs
            .iter()
            .any(|o| matches!(o, Output::Close { connection: 1 }))
        {
            return ClientSaw::ItsConnectionClosed;
        }
        match outputs
            .iter()
            .any(|o| matches!(o, Output::Write { connection: 1, .. }))
        {
            true => ClientSaw::AnAnswer,
            false => ClientSaw::Nothing,
        }
    }

    fn following_a_new_leader() -> Input {
        Input::Role(Role::Follower {
            leader: 2,
            epoch: 2,
            stint: 2,
        })
    }

    /// Back with the leader it lost touch with, in the same epoch: a second stint.
    fn rejoining_its_epoch() -> Input {
        Input::Role(Role::Follower {
            leader: 2,
            epoch: 1,
            stint: 2,
        })
    }

    /// The member leaves its quorum at `looking_at_ms` and rejoins its epoch 10 ms later.
    fn leave_and_rejoin(core: &mut Core, looking_at_ms: u64) {
        core.handle(Input::Role(Role::Looking), at_ms(looking_at_ms));
        core.handle(rejoining_its_epoch(), at_ms(looking_at_ms + 10));
    }

    fn exists_on_the_root() -> Input {
        let request = zoolog_proto::PathWatchRequest {
            path: "/".into(),
            watch: true,
        };
        Input::Request {
            connection: 1,
            xid: 7,
            request: Request::Exists(request),
            frame_bytes: 20,
        }
    }

    fn delete_of_a_missing_node() -> Input {
        let request = zoolog_proto::DeleteRequest {
            path: "/missing".into(),
            version: -1,
        };
        Input::Request {
            connection: 1,
            xid: 8,
            request: Request::Delete(request),
            frame_bytes: 24,
        }
    }

    #[test]
    fn a_member_that_loses_its_leader_keeps_a_client_waiting_for_nothing_through_the_change() {
        use ClientSaw::*;
        let (mut core, layer) = follower_with_a_session(false);
        assert_eq!(
            client_saw(&mut core, Input::Role(Role::Looking), 2_000),
            Nothing
        );
        assert_eq!(client_saw(&mut core, ping(), 2_100), AnAnswer);
        assert_eq!(client_saw(&mut core, exists_on_the_root(), 2_200), AnAnswer);
        assert_eq!(client_saw(&mut core, Input::Tick, 2_300), Nothing);
        assert_eq!(
            client_saw(&mut core, following_a_new_leader(), 2_400),
            Nothing
        );
        // Serving again: the tick that would have dropped it passes, and writes are logged.
        assert_eq!(client_saw(&mut core, Input::Tick, 3_000), Nothing);
        assert_eq!(
            client_saw(&mut core, delete_of_a_missing_node(), 3_100),
            Nothing
        );
        assert_eq!(layer.queued.lock().unwrap().len(), 1, "the write is logged");
    }

    /// Feeds `input` to `core` at `ms`: the xid and error code of each reply connection 1 got.
    fn replies(core: &mut Core, input: Input, ms: u64) -> Vec<(i32, i32)> {
        let mut replies = Vec::new();
        for output in core.handle(input, at_ms(ms)) {
            let Output::Write {
                connection: 1,
                bytes,
                ..
            } = output
            else {
                continue;
            };
            let reply = &bytes[FRAME_PREFIX_BYTES..];
            let xid = i32::from_be_bytes(reply[0..4].try_into().unwrap());
            let err = i32::from_be_bytes(reply[12..16].try_into().unwrap());
            replies.push((xid, err));
        }
        replies
    }

    #[test]
    fn a_write_held_while_the_member_has_no_leader_is_ordered_when_it_joins_a_quorum() {
        let (mut core, layer) = follower_with_a_session(false);
        core.handle(Input::Role(Role::Looking), at_ms(2_000));
        assert_eq!(replies(&mut core, delete_of_a_missing_node(), 2_100), []);
        // A read behind the held write waits for it: replies come in request order.
        assert_eq!(replies(&mut core, exists_on_the_root(), 2_150), []);
        assert!(
            layer.queued.lock().unwrap().is_empty(),
            "nothing ordered yet"
        );
        assert_eq!(replies(&mut core, following_a_new_leader(), 2_200), []);
        let delete = layer.queued.lock().unwrap().pop_front();
        let delete = delete.expect("the held write is ordered on joining");
        assert!(layer.queued.lock().unwrap().is_empty());
        let committed = Input::Committed {
            position: 2,
            entry: delete,
        };
        let no_node = ErrorCode::NoNode as i32;
        assert_eq!(replies(&mut core, committed, 2_300), [(8, no_node), (7, 0)]);
    }

    #[test]
    fn a_kept_client_and_what_it_held_are_dropped_once_a_tick_passes_without_a_leader() {
        use ClientSaw::*;
        let (mut core, layer) = follower_with_a_session(false);
        core.handle(Input::Role(Role::Looking), at_ms(2_000));
        assert_eq!(
            client_saw(&mut core, delete_of_a_missing_node(), 2_100),
            Nothing
        );
        assert_eq!(client_saw(&mut core, Input::Tick, 2_499), Nothing);
        assert_eq!(
            client_saw(&mut core, Input::Tick, 2_500),
            ItsConnectionClosed
        );
        core.handle(following_a_new_leader(), at_ms(2_600));
        assert!(layer.queued.lock().unwrap().is_empty(), "nothing ordered");
        let counted = core.stats.leader_changes;
        assert_eq!((counted.requests_held, counted.clients_dropped), (1, 1));
    }

    #[test]
    fn a_close_held_while_the_member_has_no_leader_ends_the_session_for_the_writes_after_it() {
        let (mut core, layer) = follower_with_a_session(false);
        core.handle(Input::Role(Role::Looking), at_ms(2_000));
        assert_eq!(replies(&mut core, close_request(1), 2_100), []);
        core.handle(following_a_new_leader(), at_ms(2_200));
        assert_eq!(
            layer.queued.lock().unwrap().len(),
            1,
            "the close is ordered"
        );
        // Joining forgets the closes that may have been lost with the old leader, not this one.
        assert_eq!(replies(&mut core, delete_of_a_missing_node(), 2_300), []);
        assert_eq!(
            layer.queued.lock().unwrap().len(),
            1,
            "the write is refused"
        );
        let close = layer.queued.lock().unwrap().pop_front().unwrap();
        let committed = Input::Committed {
            position: 2,
            entry: close,
        };
        assert_eq!(
            client_saw(&mut core, committed, 2_400),
            ClientSaw::ItsConnectionClosed
        );
    }

    /// A follower of epoch 1 whose client (connection 1) waits for a delete it appended, which
    /// then loses its leader: the delete's entry, as appended.
    fn a_write_on_its_way_when_the_leader_goes(core: &mut Core, layer: &QueueLayer) -> Input {
        core.handle(delete_of_a_missing_node(), at_ms(1_500));
        let delete = layer.queued.lock().unwrap().pop_front();
        let delete = delete.expect("the write is on its way");
        assert_eq!(
            client_saw(core, Input::Role(Role::Looking), 2_000),
            ClientSaw::Nothing,
            "the client is kept"
        );
        Input::Committed {
            position: 2,
            entry: delete,
        }
    }

    /// The write on its way, not applied when the member serves again (as `rejoining`), is
    /// appended again, the same entry tagged with the new stint, and answered in order.
    fn a_write_lost_with_its_stint_is_appended_again(rejoining: Input) {
        let (mut core, layer) = follower_with_a_session(false);
        let first_try = a_write_on_its_way_when_the_leader_goes(&mut core, &layer);
        // A read behind the write still waits for it.
        assert_eq!(replies(&mut core, exists_on_the_root(), 2_100), []);
        assert_eq!(replies(&mut core, rejoining, 2_200), []);
        let again = layer.queued.lock().unwrap().pop_front();
        let again = again.expect("appended again once the synchronized history is applied");
        let Input::Committed { entry, .. } = &first_try else {
            unreachable!()
        };
        assert_eq!(again, entry, "the same entry");
        assert_eq!(*layer.stints.lock().unwrap(), [1, 1, 2]);
        assert_eq!(core.stats.leader_changes.writes_appended_again, 1);
        let committed = Input::Committed {
            position: 3,
            entry: again,
        };
        let no_node = ErrorCode::NoNode as i32;
        assert_eq!(replies(&mut core, committed, 2_300), [(8, no_node), (7, 0)]);
    }

    #[test]
    fn a_write_lost_with_its_stint_is_appended_again_when_the_member_serves_a_later_epoch() {
        a_write_lost_with_its_stint_is_appended_again(following_a_new_leader());
    }

    /// The leader it lost touch with led on: it dropped what it held of the member's earlier
    /// attempt, so the history it synchronized the member to tells the write's fate as well.
    #[test]
    fn a_write_lost_with_its_stint_is_appended_again_when_the_member_rejoins_its_epoch() {
        a_write_lost_with_its_stint_is_appended_again(rejoining_its_epoch());
    }

    #[test]
    fn a_write_applied_before_the_member_serves_again_is_answered_and_not_appended_again() {
        let (mut core, layer) = follower_with_a_session(false);
        let committed = a_write_on_its_way_when_the_leader_goes(&mut core, &layer);
        // The new leader's history held it: applied while this member synchronizes.
        let no_node = ErrorCode::NoNode as i32;
        assert_eq!(replies(&mut core, committed, 2_100), [(8, no_node)]);
        assert_eq!(replies(&mut core, following_a_new_leader(), 2_200), []);
        assert!(layer.queued.lock().unwrap().is_empty(), "nothing appended");
    }

    fn close_request(connection: ConnectionId) -> Input {
        Input::Request {
            connection,
            xid: 5,
            request: Request::CloseSession,
            frame_bytes: 12,
        }
    }

    /// Sends closeSession on `connection`; the reply's error code, and whether the
    /// connection was closed.
    fn close_session(core: &mut Core, connection: ConnectionId) -> (i32, bool) {
        let (mut err, mut closed) = (None, false);
        for output in core.handle(close_request(connection), at_ms(2_100)) {
            match output {
                Output::Write { bytes, .. } => {
                    let reply = &bytes[FRAME_PREFIX_BYTES..];
                    err = Some(i32::from_be_bytes(reply[12..16].try_into().unwrap()));
                }
                Output::Close { .. } => closed = true,
                _ => {}
            }
        }
        (err.expect("a reply"), closed)
    }

    #[test]
    fn a_cut_off_server_closes_its_own_sessions_but_refuses_to_close_a_logged_one() {
        let (mut core, layer) = follower_with_a_session(true);
        core.handle(Input::Role(Role::Looking), at_ms(2_000));
        let (accepted, written) = connect_read_only(&mut core, 2, 0, vec![0; 16]);
        assert_eq!(accepted, Some(true));
        let local = ConnectResponse::decode(&written[FRAME_PREFIX_BYTES..]).unwrap();
        assert_eq!(close_session(&mut core, 2), (0, true));
        assert!(!core.sessions.contains_key(&local.session_id));

        let password = core.tree.session(1).unwrap().password.clone();
        assert_eq!(connect_read_only(&mut core, 3, 1, password).0, Some(true));
        let refused = (ErrorCode::NotReadOnly.code(), false);
        assert_eq!(close_session(&mut core, 3), refused);
        assert!(core.sessions.contains_key(&1));
        assert!(layer.queued.lock().unwrap().is_empty(), "nothing logged");
    }

    /// Hands `core` the committed entry at `position`: `command` from another member.
    fn commit_from_elsewhere(core: &mut Core, position: Zxid, command: Command) {
        commit_from_elsewhere_at(core, position, command, at_ms(10));
    }

    /// Hands `core` entry 1, a session of `timeout_ms` that member 4242 created: its id.
    fn session_from_elsewhere(core: &mut Core, timeout_ms: i32) -> i64 {
        let create_session = Command {
            session_id: 0,
            cxid: 0,
            time_ms: 0,
            owner: 4242,
            op: CommandOp::CreateSession {
                timeout_ms,
                password: vec![0; 16],
            },
        };
        commit_from_elsewhere(core, 1, create_session);
        core.tree.sessions().next().unwrap().0
    }

    /// [`commit_from_elsewhere`] at `now`.
    fn commit_from_elsewhere_at(core: &mut Core, position: Zxid, command: Command, now: Now) {
        let envelope = Envelope {
            origin: 99,
            connection: 9,
            command,
        };
        let entry = bytes::Bytes::from(envelope.encode());
        core.handle(Input::Committed { position, entry }, now);
    }

    #[test]
    fn a_write_that_lost_its_session_to_another_connection_closes_its_own_unanswered() {
        let (mut core, layer) = follower_with_a_session(false);
        // Another server's Attach, ordered late: a connection elsewhere now holds the session.
        let password = core.tree.session(1).unwrap().password.clone();
        let attach = Command {
            session_id: 1,
            cxid: 0,
            time_ms: 0,
            owner: 4242,
            op: CommandOp::Attach {
                owner: 4242,
                password,
            },
        };
        commit_from_elsewhere(&mut core, 2, attach);
        let delete = Request::Delete(zoolog_proto::DeleteRequest {
            path: "/x".into(),
            version: -1,
        });
        let request = Input::Request {
            connection: 1,
            xid: 3,
            request: delete,
            frame_bytes: 20,
        };
        core.handle(request, at_ms(20));
        let entry = layer.queued.lock().unwrap().pop_front().expect("appended");
        let outputs = core.handle(Input::Committed { position: 3, entry }, at_ms(30));
        let closed = outputs
            .iter()
            .any(|output| matches!(output, Output::Close { connection: 1 }));
        let answered = outputs
            .iter()
            .any(|output| matches!(output, Output::Write { connection: 1, .. }));
        assert!(closed && !answered);
    }

    #[test]
    fn a_ttl_node_stamped_by_a_lagging_clock_waits_out_its_ttl_on_the_deciders_clock() {
        let config = ServerConfig {
            extended_types_enabled: true,
            container_check_interval_ms: 100,
            ..ServerConfig::default()
        };
        let (mut core, layer) = member_of_two(config, Role::Leader { epoch: 1, stint: 1 });
        let session_id = session_from_elsewhere(&mut core, 30_000);
        // The member that took the create has a wall clock an hour behind the leader's.
        let create = Command {
            session_id,
            cxid: 1,
            time_ms: at_ms(0).wall_ms - 3_600_000,
            owner: 4242,
            op: ttl_node_create("/ttl", 1_000),
        };
        commit_from_elsewhere(&mut core, 2, create);
        assert!(core.tree.stat("/ttl").is_some());
        // The first check (at 150 ms) sees the node; its TTL counts from there.
        for ms in [150, 250, 1_150] {
            core.handle(Input::Tick, at_ms(ms));
            assert_eq!(queued_reaps(&layer), [], "at {ms} ms");
        }
        core.handle(Input::Tick, at_ms(1_250));
        let judged = CommandOp::Reap {
            path: "/ttl".into(),
            unchanged_since: Some(2),
        };
        assert_eq!(queued_reaps(&layer), [judged]);
    }

    /// The create of a TTL node at `path`, open to all.
    fn ttl_node_create(path: &str, ttl_ms: i64) -> CommandOp {
        CommandOp::Write {
            request: Request::CreateTtl(zoolog_proto::CreateTtlRequest {
                path: path.into(),
                data: None,
                acl: Some(vec![zoolog_proto::Acl {
                    perms: zoolog_proto::codes::perms::ALL,
                    id: zoolog_proto::Id::new("world", "anyone"),
                }]),
                flags: zoolog_proto::CreateMode::PersistentWithTtl.code(),
                ttl: ttl_ms,
            }),
            identities: vec![],
        }
    }

    /// The `Reap`s `layer` has been handed since last asked.
    fn queued_reaps(layer: &QueueLayer) -> Vec<CommandOp> {
        let queued = std::mem::take(&mut *layer.queued.lock().unwrap());
        queued
            .iter()
            .map(|entry| Envelope::decode(entry).unwrap().command.op)
            .filter(|op| matches!(op, CommandOp::Reap { .. }))
            .collect()
    }

    /// Many nodes would stall this thread if one tick went over them all: a check goes over
    /// them a chunk at each tick, in path order, and begins again only once it has seen them
    /// all and the check interval has passed.
    #[test]
    fn a_check_goes_over_the_nodes_a_chunk_at_each_tick() {
        let config = ServerConfig {
            extended_types_enabled: true,
            container_check_interval_ms: 100,
            reap_scan_per_tick_min: 1,
            ..ServerConfig::default()
        };
        let (mut core, layer) = member_of_two(config, Role::Leader { epoch: 1, stint: 1 });
        let session_id = session_from_elsewhere(&mut core, 30_000);
        for (position, path) in [(2, "/c"), (3, "/a"), (4, "/b")] {
            let create = Command {
                session_id,
                cxid: 1,
                time_ms: 0,
                owner: 4242,
                op: ttl_node_create(path, 80),
            };
            commit_from_elsewhere(&mut core, position, create);
        }
        // The first check sees one node a tick from 150 ms and ends at the tick that finds no
        // more; the second begins an interval after the first did, and finds each due in turn.
        for ms in [150, 160, 170, 180, 240] {
            core.handle(Input::Tick, at_ms(ms));
            assert_eq!(queued_reaps(&layer), [], "at {ms} ms");
        }
        for (ms, path, created) in [(250, "/a", 3), (260, "/b", 4), (270, "/c", 2)] {
            core.handle(Input::Tick, at_ms(ms));
            let judged = CommandOp::Reap {
                path: path.into(),
                unchanged_since: Some(created),
            };
            assert_eq!(queued_reaps(&layer), [judged], "at {ms} ms");
        }
        core.handle(Input::Tick, at_ms(280));
        assert_eq!(queued_reaps(&layer), [], "the second check has ended");
    }

    #[test]
    fn a_touch_the_log_refused_is_appended_at_the_next_check() {
        let (mut core, layer) = follower_with_a_pinged_session();

        // A third of the 6 s timeout, less a check interval, after the session was logged.
        layer.refuse(true, true);
        core.handle(Input::Tick, at_ms(2_000));
        layer.refuse(false, false);
        assert!(layer.urgent.lock().unwrap().is_empty());

        core.handle(Input::Tick, at_ms(2_250));
        assert_eq!(
            idle_in_the_next_report(&layer),
            350,
            "heard from at the ping, 1.9 s"
        );
    }

    #[test]
    fn a_touch_goes_ahead_of_client_commands_and_past_their_full_queue() {
        let (mut core, layer) = follower_with_a_pinged_session();

        layer.refuse(true, false);
        core.handle(Input::Tick, at_ms(2_000));

        assert_eq!(
            idle_in_the_next_report(&layer),
            100,
            "heard from at the ping, 1.9 s"
        );
        assert!(layer.queued.lock().unwrap().is_empty());
    }

    /// A leader with a session created by another member at 1 (owner 4242, timeout 6 s),
    /// then `late` from its session at 5 s: the next tick past the timeout must expire it,
    /// counting from the creation, if `late` is no news of the client.
    fn expiry_after_late_command(late: CommandOp) {
        let config = ServerConfig {
            tick_ms: 500,
            ..ServerConfig::default()
        };
        let (mut core, layer) = member_of_two(config, Role::Leader { epoch: 1, stint: 1 });
        let session_id = session_from_elsewhere(&mut core, 6_000);
        let late_command = Command {
            session_id,
            cxid: 5,
            time_ms: 0,
            owner: 99,
            op: late,
        };
        commit_from_elsewhere_at(&mut core, 2, late_command, at_ms(5_000));

        core.handle(Input::Tick, at_ms(6_100));

        let entry = layer.queued.lock().unwrap().pop_front();
        let command = Envelope::decode(&entry.expect("an expiry was appended"))
            .unwrap()
            .command;
        assert_eq!(command.session_id, session_id);
        let expected = CommandOp::Expire {
            unless_touched_after: 1,
        };
        assert_eq!(command.op, expected);
    }

    #[test]
    fn a_write_from_a_connection_the_client_left_does_not_put_off_its_expiry() {
        // Sent on a connection the client has since left (owner 99), ordered late.
        expiry_after_late_command(CommandOp::Write {
            request: Request::Sync(zoolog_proto::PathRequest { path: "/".into() }),
            identities: vec![],
        });
    }

    /// As in ZooKeeper, where a reconnection with the wrong password does not touch the
    /// session: else anyone who learns a session's id could keep it alive.
    #[test]
    fn an_attach_with_the_wrong_password_does_not_put_off_its_expiry() {
        expiry_after_late_command(CommandOp::Attach {
            owner: 99,
            password: vec![1; 16],
        });
    }

    #[test]
    fn a_touch_comes_a_third_of_the_timeout_after_the_last_one_even_if_not_yet_ordered() {
        let (mut core, layer) = follower_with_a_pinged_session();
        core.handle(Input::Tick, at_ms(2_000));
        assert_eq!(idle_in_the_next_report(&layer), 100);

        core.handle(ping(), at_ms(2_100));
        core.handle(Input::Tick, at_ms(2_250));
        assert!(
            layer.urgent.lock().unwrap().is_empty(),
            "no second report while the first, of the ping at 1.9 s, is recent"
        );

        // A third of the 6 s timeout after 1.9 s, less a check interval.
        core.handle(ping(), at_ms(3_600));
        core.handle(Input::Tick, at_ms(3_750));
        assert_eq!(
            idle_in_the_next_report(&layer),
            150,
            "heard from at the ping, 3.6 s"
        );
    }

    #[test]
    fn a_snapshot_installed_after_a_ping_leaves_the_report_counting_from_the_ping() {
        let (mut core, layer) = follower_with_a_pinged_session();
        let mut tree_bytes = Vec::new();
        core.tree.encode_snapshot(&mut tree_bytes);
        let install = Input::InstallSnapshot {
            tree_bytes: tree_bytes.into(),
        };
        core.handle(install, at_ms(1_950));

        // The install counts as news of every session (a full timeout): the report comes a
        // third of the timeout, less a check interval, after it.
        core.handle(Input::Tick, at_ms(3_700));
        assert_eq!(
            idle_in_the_next_report(&layer),
            1_800,
            "heard from at the ping, 1.9 s, not at the install"
        );
    }

    #[test]
    fn a_session_heard_before_the_server_stopped_serving_is_reported_once_it_serves_again() {
        let (mut core, layer) = follower_with_a_pinged_session();
        leave_and_rejoin(&mut core, 1_950);

        core.handle(Input::Tick, at_ms(2_000));
        assert_eq!(
            idle_in_the_next_report(&layer),
            100,
            "heard from at the ping, 1.9 s"
        );
    }

    /// Simulator seed 3589260 (core mode): a report was dropped with the stint it was
    /// appended in, the member's next report left its session out, and the leader expired
    /// the session 99 ms after the client's last ping here, its timeout 104 ms.
    #[test]
    fn a_session_whose_report_was_lost_with_a_stint_is_reported_once_the_member_serves_again() {
        let (mut core, layer) = follower_with_a_pinged_session();
        core.handle(Input::Tick, at_ms(2_000));
        assert_eq!(
            idle_in_the_next_report(&layer),
            100,
            "the report the layer drops"
        );
        leave_and_rejoin(&mut core, 2_050);

        // At the next check, a check interval (250 ms) after the lost report.
        core.handle(Input::Tick, at_ms(2_250));
        assert_eq!(
            idle_in_the_next_report(&layer),
            350,
            "heard from at the ping, 1.9 s"
        );
    }

    #[test]
    fn snapshot_thresholds_stay_within_snap_count_and_differ_between_servers() {
        let config_of = |server_id| ServerConfig {
            server_id,
            entries_per_snapshot: 100_000,
            ..ServerConfig::default()
        };
        let mut first_thresholds = std::collections::BTreeSet::new();
        for server_id in 1..=5 {
            let config = config_of(server_id);
            for snapshots_started in 0..100 {
                let due = SnapshotSchedule::new(&config, snapshots_started).entries_due;
                assert!((50_000..100_000).contains(&due), "{due}");
            }
            first_thresholds.insert(SnapshotSchedule::new(&config, 0).entries_due);
        }
        assert_eq!(first_thresholds.len(), 5, "{first_thresholds:?}");
        let smallest = ServerConfig {
            entries_per_snapshot: 2,
            ..ServerConfig::default()
        };
        assert_eq!(SnapshotSchedule::new(&smallest, 7).entries_due, 1);
    }

    #[test]
    fn a_snapshot_is_due_after_snap_count_entries_or_snap_size_bytes_whichever_first() {
        let config = ServerConfig {
            entries_per_snapshot: 1_000,
            log_bytes_per_snapshot: Some(1 << 20),
            ..ServerConfig::default()
        };
        let entries_only = |bytes_per_entry: usize| {
            let mut schedule = SnapshotSchedule::new(&config, 3);
            let mut entries = 0;
            while !schedule.is_due() {
                schedule.record(bytes_per_entry);
                entries += 1;
            }
            entries
        };
        let small = entries_only(10);
        assert!(
            (500..1_000).contains(&small),
            "small entries: due after {small}"
        );
        let large = entries_only(64 << 10);
        assert!(
            (8..16).contains(&large),
            "64 KiB entries: due after {large}"
        );

        let mut schedule = SnapshotSchedule::new(&config, 3);
        for _ in 0..large {
            schedule.record(64 << 10);
        }
        assert!(schedule.is_due());
        schedule.restart();
        assert!(
            !schedule.is_due(),
            "an installed snapshot starts the count over"
        );

        let unlimited = ServerConfig {
            log_bytes_per_snapshot: None,
            ..config
        };
        let mut schedule = SnapshotSchedule::new(&unlimited, 3);
        for _ in 0..499 {
            schedule.record(64 << 20);
        }
        assert!(!schedule.is_due(), "no byte limit: only the count");
    }
}

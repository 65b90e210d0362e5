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
    encode_notification, encode_reply, framed, ClientInfo, ConnectRequest, ConnectResponse,
    DecodeError, ErrorCode, Id, Jute, OpCode, PathRequest, Request, Response, WatcherType,
    WhoAmIResponse,
};
use zoolog_tree::{
    Command, CommandOp, ConnectionId, DataTree, Outcome, WatchKind, WatchRegistry, Zxid,
};

use crate::config::ServerConfig;
use crate::four_letter::DEFAULT_TRACE_MASK;
use crate::metrics::Metrics;
use crate::stats::{ConnectionStats, ServerStats};

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
    Handshake {
        connection: ConnectionId,
        request: ConnectRequest,
    },
    Request {
        connection: ConnectionId,
        xid: i32,
        request: Request,
    },
    Undecodable {
        connection: ConnectionId,
        xid: i32,
        error: DecodeError,
    },
    Closed {
        connection: ConnectionId,
    },
    Committed {
        position: Zxid,
        entry: bytes::Bytes,
    },
    Tick,
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

/// A request's place in its connection's reply order.
enum Slot {
    /// A write in the log; answered when applied.
    AwaitingApply {
        xid: i32,
        opcode: OpCode,
        received_us: u64,
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
}

#[derive(PartialEq, Eq)]
enum Phase {
    AwaitingHandshake,
    /// A new session is being created through the log; `password` matches it on apply.
    CreatingSession {
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
    identities: Arc<[Id]>,
    slots: VecDeque<Slot>,
    stats: ConnectionStats,
}

struct LiveSession {
    timeout_ms: i32,
    deadline_ms: u64,
    connection: Option<ConnectionId>,
    /// Expiry or close has been appended; the session accepts nothing more.
    closing: bool,
}

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
    entries_since_snapshot: u64,
    snapshot_in_flight: bool,
    next_reap_ms: u64,
    now: Now,
    pub stats: ServerStats,
    /// Latency histograms and log/snapshot numbers for /metrics; the driver records the IO ones.
    pub metrics: Metrics,
    trace_mask: i64,
    out: Vec<Output>,
}

const SESSION_PASSWORD_BYTES: usize = 16;

impl Core {
    /// Builds the front end over a recovered tree; every session the tree knows gets a fresh
    /// full timeout, as ZooKeeper does after a restart.
    pub fn new(
        config: Arc<ServerConfig>,
        log: Arc<dyn OrderingLayer>,
        tree: DataTree,
        origin: u64,
        now: Now,
    ) -> Core {
        let sessions = tree
            .sessions()
            .map(|(id, info)| {
                let session = LiveSession {
                    timeout_ms: info.timeout_ms,
                    deadline_ms: now.monotonic_ms + info.timeout_ms as u64,
                    connection: None,
                    closing: false,
                };
                (id, session)
            })
            .collect();
        Core {
            next_reap_ms: now.monotonic_ms + config.container_check_interval_ms,
            config,
            log,
            origin,
            tree,
            watches: WatchRegistry::default(),
            connections: HashMap::new(),
            sessions,
            per_ip: HashMap::new(),
            pending_handshakes: HashMap::new(),
            entries_since_snapshot: 0,
            snapshot_in_flight: false,
            now,
            stats: ServerStats::default(),
            metrics: Metrics::default(),
            trace_mask: DEFAULT_TRACE_MASK,
            out: Vec::new(),
        }
    }

    /// Feeds one input; the outputs it caused are returned in the order they must happen.
    pub fn handle(&mut self, input: Input, now: Now) -> Vec<Output> {
        self.now = now;
        match input {
            Input::Opened { connection, peer } => self.opened(connection, peer),
            Input::Handshake {
                connection,
                request,
            } => self.handshake(connection, request),
            Input::Request {
                connection,
                xid,
                request,
            } => self.request(connection, xid, request),
            Input::Undecodable {
                connection,
                xid,
                error,
            } => self.undecodable(connection, xid, error),
            Input::Closed { connection } => self.closed(connection),
            Input::Committed { position, entry } => self.committed(position, &entry),
            Input::Tick => self.tick(),
        }
        std::mem::take(&mut self.out)
    }

    /// The driver reports a snapshot written (or failed), allowing the next one.
    pub fn snapshot_finished(&mut self) {
        self.snapshot_in_flight = false;
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
            self.out.push(Output::Close { connection });
            return;
        }
        *self.per_ip.entry(peer.ip()).or_default() += 1;
        let identities: Arc<[Id]> = Arc::from(vec![Id::new("ip", &peer.ip().to_string())]);
        let stats = ConnectionStats::new(self.now.monotonic_ms, self.now.wall_ms);
        let state = Connection {
            peer,
            phase: Phase::AwaitingHandshake,
            session_id: 0,
            read_only_flag: None,
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
            state.phase = Phase::Closing;
        }
        self.out.push(Output::Close { connection });
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
        self.stats.packets_received += 1;
        if request.last_zxid_seen > self.tree.last_applied_zxid() {
            // The client has seen a newer state than ours: it must try another server.
            tracing::info!(
                client_zxid = request.last_zxid_seen,
                our_zxid = self.tree.last_applied_zxid(),
                "refusing a client that is ahead of this server"
            );
            self.out.push(Output::HandshakeDone {
                connection,
                accepted: false,
            });
            self.close(connection);
            return;
        }
        let timeout_ms = self.negotiated_timeout_ms(request.timeout_ms);
        if request.session_id == 0 {
            self.begin_session(connection, timeout_ms);
        } else {
            self.resume_session(connection, request, timeout_ms);
        }
    }

    fn begin_session(&mut self, connection: ConnectionId, timeout_ms: i32) {
        let password: Vec<u8> = (0..SESSION_PASSWORD_BYTES)
            .map(|_| rand::random::<u8>())
            .collect();
        self.pending_handshakes.insert(password.clone(), connection);
        let state = self
            .connections
            .get_mut(&connection)
            .expect("caller checked");
        state.phase = Phase::CreatingSession {
            password: password.clone(),
            timeout_ms,
        };
        let command = Command {
            session_id: 0,
            cxid: 0,
            time_ms: self.now.wall_ms,
            owner: 0,
            op: CommandOp::CreateSession {
                timeout_ms,
                password,
            },
        };
        if !self.append(connection, command) {
            self.out.push(Output::HandshakeDone {
                connection,
                accepted: false,
            });
            self.close(connection);
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
            let reply = ConnectResponse::expired(request.read_only);
            self.write(connection, framed(&reply.encode()), false);
            self.out.push(Output::HandshakeDone {
                connection,
                accepted: false,
            });
            self.close(connection);
            return;
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
        let deadline_ms = self.now.monotonic_ms + timeout_ms as u64;
        let session = self.sessions.entry(session_id).or_insert(LiveSession {
            timeout_ms,
            deadline_ms,
            connection: None,
            closing: false,
        });
        session.timeout_ms = timeout_ms;
        session.deadline_ms = deadline_ms;
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
        let reply = ConnectResponse {
            protocol_version: 0,
            timeout_ms,
            session_id,
            password,
            read_only: state.read_only_flag.map(|_| false),
        };
        self.write(connection, framed(&reply.encode()), false);
        self.out.push(Output::HandshakeDone {
            connection,
            accepted: true,
        });
    }

    fn touch(&mut self, session_id: i64) {
        if let Some(session) = self.sessions.get_mut(&session_id) {
            session.deadline_ms = self.now.monotonic_ms + session.timeout_ms as u64;
        }
    }

    fn tick(&mut self) {
        self.expire_sessions();
        self.reap_nodes();
    }

    /// Appends a close for every session whose deadline passed; its connection is closed without
    /// a word, as ZooKeeper does: the client learns of expiry when it reconnects.
    fn expire_sessions(&mut self) {
        let now_ms = self.now.monotonic_ms;
        let expired: Vec<i64> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.closing && s.deadline_ms <= now_ms)
            .map(|(&id, _)| id)
            .collect();
        for session_id in expired {
            let command = Command {
                session_id,
                cxid: 0,
                time_ms: self.now.wall_ms,
                owner: 0,
                op: CommandOp::CloseSession,
            };
            if !self.append(0, command) {
                return; // tried again at the next tick
            }
            tracing::info!(
                session = format_args!("{session_id:#018x}"),
                "session expired"
            );
            let session = self.sessions.get_mut(&session_id).expect("just listed");
            session.closing = true;
            if let Some(connection) = session.connection.take() {
                self.close(connection);
            }
        }
    }

    fn reap_nodes(&mut self) {
        if self.now.monotonic_ms < self.next_reap_ms {
            return;
        }
        self.next_reap_ms = self.now.monotonic_ms + self.config.container_check_interval_ms;
        const REAPS_PER_CHECK_MAX: usize = 10_000;
        for path in self
            .tree
            .reap_candidates(self.now.wall_ms, REAPS_PER_CHECK_MAX)
        {
            let command = Command {
                session_id: 0,
                cxid: 0,
                time_ms: self.now.wall_ms,
                owner: 0,
                op: CommandOp::Reap { path },
            };
            if !self.append(0, command) {
                return; // the reaper comes back at its next check
            }
        }
    }

    /// Hands a command to the ordering layer; false when it refused (queue full, log failed).
    fn append(&mut self, connection: ConnectionId, command: Command) -> bool {
        let entry = Envelope {
            origin: self.origin,
            connection,
            command,
        }
        .encode();
        match self.log.append(bytes::Bytes::from(entry)) {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%error, "the log refused a command");
                false
            }
        }
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
        self.stats.packets_received += 1;
        let session_id = state.session_id;
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
                self.metrics.record_request(OpCode::Ping, 0);
            }
            Request::Check(_) => self.unimplemented(connection, xid),
            // Membership changes belong to the ensemble; a standalone server refuses them here.
            request if request.is_write() && !matches!(request, Request::Reconfig(_)) => {
                self.submit_write(connection, xid, request)
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
        let mut bytes = Vec::new();
        encode_reply(xid, -1, Err(code), &mut bytes);
        self.queue_ready(connection, framed(&bytes), close);
    }

    fn queue_ready(&mut self, connection: ConnectionId, bytes: Vec<u8>, close: bool) {
        let Some(state) = self.connections.get_mut(&connection) else {
            return;
        };
        state.slots.push_back(Slot::Ready { bytes, close });
        self.drain(connection);
    }

    fn submit_write(&mut self, connection: ConnectionId, xid: i32, request: Request) {
        let state = self
            .connections
            .get_mut(&connection)
            .expect("caller checked");
        let session_id = state.session_id;
        let identities = state.identities.to_vec();
        if self.sessions.get(&session_id).is_none_or(|s| s.closing) {
            self.queue_error(connection, xid, ErrorCode::SessionExpired, false);
            return;
        }
        let closes_session = request == Request::CloseSession;
        let opcode = request.opcode();
        let op = match request {
            Request::CloseSession => CommandOp::CloseSession,
            request => CommandOp::Write {
                request,
                identities,
            },
        };
        let command = Command {
            session_id,
            cxid: xid,
            time_ms: self.now.wall_ms,
            owner: 0,
            op,
        };
        if !self.append(connection, command) {
            // Shed load rather than queue without bound; the client may retry.
            self.queue_error(connection, xid, ErrorCode::ThrottledOp, false);
            return;
        }
        if closes_session {
            self.sessions
                .get_mut(&session_id)
                .expect("checked above")
                .closing = true;
        }
        let state = self
            .connections
            .get_mut(&connection)
            .expect("caller checked");
        state.slots.push_back(Slot::AwaitingApply {
            xid,
            opcode,
            received_us: self.now.monotonic_us,
        });
    }

    /// Answers everything at the head of a connection's queue that can be answered now.
    fn drain(&mut self, connection: ConnectionId) {
        loop {
            let Some(state) = self.connections.get_mut(&connection) else {
                return;
            };
            match state.slots.front() {
                None | Some(Slot::AwaitingApply { .. }) => return,
                Some(Slot::Ready { .. }) => {
                    let Some(Slot::Ready { bytes, close }) = state.slots.pop_front() else {
                        unreachable!()
                    };
                    self.write(connection, bytes, true);
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
        let mut bytes = Vec::with_capacity(64);
        encode_reply(xid, zxid, result, &mut bytes);
        if let Some(state) = self.connections.get_mut(&connection) {
            state.stats.on_reply(zxid, self.now.monotonic_ms);
            self.stats.on_latency(state.stats.last_latency_ms);
        }
        self.write(connection, framed(&bytes), true);
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
        self.metrics.record_request(opcode, latency_us);
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
            Request::CheckWatches(check) | Request::RemoveWatches(check)
                if WatcherType::from_i32(check.watcher_type).is_none() =>
            {
                self.reply(connection, xid, Err(ErrorCode::BadArguments));
            }
            Request::CheckWatches(check) => {
                let kind = WatcherType::from_i32(check.watcher_type).expect("checked above");
                let found = self.watches.contains(connection, &check.path, kind);
                self.reply(
                    connection,
                    xid,
                    if found {
                        Ok(&Response::Empty)
                    } else {
                        Err(ErrorCode::NoWatcher)
                    },
                );
            }
            Request::RemoveWatches(remove) => {
                let kind = WatcherType::from_i32(remove.watcher_type).expect("checked above");
                let removed = self.watches.remove(connection, &remove.path, kind);
                self.reply(
                    connection,
                    xid,
                    if removed {
                        Ok(&Response::Empty)
                    } else {
                        Err(ErrorCode::NoWatcher)
                    },
                );
            }
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
            let mut bytes = Vec::new();
            encode_notification(-1, &event, &mut bytes);
            self.write(connection, framed(&bytes), false);
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
        self.entries_since_snapshot += 1;
        self.deliver_watch_events(position, &applied.triggers);
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
            | Outcome::ExpireSkipped { .. }
            | Outcome::Attached { .. } => {}
        }
        self.maybe_snapshot();
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
            let mut bytes = Vec::new();
            encode_notification(position, &event, &mut bytes);
            self.write(connection, framed(&bytes), false);
        }
    }

    fn session_created(&mut self, session_id: i64, timeout_ms: i32, password: Vec<u8>) {
        let Some(connection) = self.pending_handshakes.remove(&password) else {
            // Created through another server, or its connection went away: it expires unless
            // someone reconnects to it.
            let deadline_ms = self.now.monotonic_ms + timeout_ms as u64;
            self.sessions.insert(
                session_id,
                LiveSession {
                    timeout_ms,
                    deadline_ms,
                    connection: None,
                    closing: false,
                },
            );
            return;
        };
        self.bind_session(connection, session_id, timeout_ms, password);
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
        } = *slot
        else {
            unreachable!()
        };
        assert_eq!(
            xid, cxid,
            "writes of one connection are applied in the order they were appended"
        );
        let mut bytes = Vec::with_capacity(64);
        encode_reply(
            xid,
            position,
            result.as_ref().map_err(|code| *code),
            &mut bytes,
        );
        state.stats.on_reply(position, self.now.monotonic_ms);
        self.stats.on_latency(state.stats.last_latency_ms);
        self.metrics
            .record_request(opcode, self.now.monotonic_us.saturating_sub(received_us));
        *slot = Slot::Ready {
            bytes: framed(&bytes),
            close,
        };
        self.drain(connection);
    }

    fn maybe_snapshot(&mut self) {
        if self.snapshot_in_flight || self.entries_since_snapshot < self.config.entries_per_snapshot
        {
            return;
        }
        self.snapshot_in_flight = true;
        self.entries_since_snapshot = 0;
        self.out.push(Output::SaveSnapshot {
            tree: self.tree.clone(),
        });
    }
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

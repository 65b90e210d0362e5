//! Core mode: every server runs the real front end (`zoolog_server::core::Core`) over its
//! Zab, with the real data tree, and the clients speak the ZooKeeper wire protocol to it over
//! simulated connections (in-order byte streams, one frame per write, that break when either
//! end closes or the server crashes). Clients create sessions, create/setData/getData/exists/
//! delete/sync a few znodes, list the root's children, leave watches with getData/exists/
//! getChildren, make and delete ephemerals (every other one sequential), send multis (in half
//! the seeds, see [`multi`]), keep persistent watches (in half the seeds, see
//! [`persistent`]), make containers and TTL nodes (in half the seeds, see [`reaper`]), ping,
//! close their sessions or die without closing them (in half the seeds, see [`restart`]),
//! and on a lost connection reconnect to another server with the same session and
//! their lastZxidSeen, and hand it their watches with SetWatches, as real clients do. Some
//! ask for read-only sessions, which a server cut off from its quorum grants in half the
//! seeds. The checks are in [`crate::zkcheck`].

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use zoolog_proto::codes::EventType;
use zoolog_proto::{
    ConnectRequest, ConnectResponse, CreateRequest, CreateResponse, DeleteRequest, ErrorCode,
    GetChildrenResponse, GetDataResponse, Jute, PathRequest, PathWatchRequest, Reader, ReplyHeader,
    Request, RequestHeader, SetDataRequest, SetWatches, SetWatches2, Stat, WatcherEvent,
    FRAME_PREFIX_BYTES,
};
use zoolog_server::config::{EnsembleConfig, PeerConfig};
use zoolog_server::core::{request_input, Core, Input as CoreInput, Now, Output};
use zoolog_server::ServerConfig;
use zoolog_tree::{DataTree, TreeConfig};
use zoolog_zab::{Input, Lane, Status};

use super::{fnv, Event, Phase, World};
use crate::node::{Front, SimLayer};
use crate::rng::Rng;
use crate::zkcheck::{Expiry, LogEnd, ZkChecker};

mod clock;
mod multi;
mod persistent;
mod reaper;
mod restart;
use clock::ServerClock;
use multi::{MultiOp, MULTI_STREAM};
use persistent::{PersistentWatch, PERSISTENT_STREAM};
use reaper::Reaping;
use restart::Restarts;

const PATHS: &[&str] = &["/k0", "/k1", "/k2"];
/// Where containers may be (see [`reaper`]).
const CONTAINERS: &[&str] = &["/c0", "/c1", "/c2"];
/// The random stream of the read-only choices.
const READ_ONLY_STREAM: u64 = 1;

pub(crate) struct ZkState {
    pub(crate) clients: Vec<ZkClient>,
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    pub(crate) checker: ZkChecker,
    configs: Vec<Arc<ServerConfig>>,
    tree_config: TreeConfig,
    /// Core ticks every this many microseconds (jittered).
    core_tick_us: (u64, u64),
    append_queue_max: usize,
    pub(crate) post_heal_acked: u64,
    /// For each session and server, the frames that server has been hearing from the
    /// session's client on its current connection without a long gap.
    streaks: BTreeMap<(i64, usize), Streak>,
    /// The multi stream, in the seeds whose clients send multis.
    multi_rng: Option<Rng>,
    /// The reaper's settings, in the seeds whose clients make containers and TTL nodes.
    reaping: Option<Reaping>,
    /// The clients' deaths, in the seeds that have them.
    restarts: Option<Restarts>,
    /// Each server's clocks, by index.
    clocks: Vec<ServerClock>,
    /// The server each front end's origin (drawn at its start) belongs to, so that a log
    /// entry's times can be read with the clock that stamped them.
    origins: BTreeMap<u64, usize>,
}

/// Frames one server heard from a client on one connection, each within half the session's
/// timeout of the one before.
#[derive(Debug, Clone, Copy)]
struct Streak {
    conn: u64,
    first_us: u64,
    last_us: u64,
}

struct Conn {
    client: usize,
    node: usize,
    life: u64,
    /// Arrival time of the last frame each way: a connection is an ordered stream.
    to_server_at: u64,
    to_client_at: u64,
    greeted: bool,
    accepted: bool,
    held: VecDeque<Vec<u8>>,
    server_open: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Create {
        ephemeral: bool,
        /// The server appends the parent's next sequence number to the name.
        sequential: bool,
    },
    SetData,
    GetData,
    Exists,
    /// Of the root, where the clients create and delete their znodes.
    GetChildren,
    Delete,
    Sync,
    Close,
    /// Its ops are the pending request's.
    Multi,
    /// Of the client's persistent watch.
    AddWatch,
    /// A container or a TTL node, under the root.
    CreateReapable,
}

impl Kind {
    fn is_write(self) -> bool {
        matches!(
            self,
            Kind::Create { .. }
                | Kind::CreateReapable
                | Kind::SetData
                | Kind::Delete
                | Kind::Sync
                | Kind::Close
                | Kind::Multi
        )
    }
}

#[derive(Debug, Clone)]
struct Pending {
    xid: i32,
    kind: Kind,
    path: String,
    issued_us: u64,
    /// A read right after a sync: it must answer at least at this zxid.
    watermark: Option<i64>,
    /// A read that leaves a watch.
    watch: bool,
    /// A multi's ops (none for any other request).
    ops: Vec<MultiOp>,
}

impl Pending {
    /// A request that promises no zxid, leaves no watch and is no multi.
    fn new(xid: i32, kind: Kind, path: String, issued_us: u64) -> Pending {
        Pending {
            xid,
            kind,
            path,
            issued_us,
            watermark: None,
            watch: false,
            ops: Vec::new(),
        }
    }
}

/// A one-shot watch the client holds on a path: left by a read answered at `zxid` (or
/// moved there by a SetWatches the server answered at `zxid`).
#[derive(Debug, Clone, Copy)]
struct Watch {
    zxid: i64,
    kind: WatchKind,
    /// Sent again with SetWatches after a reconnect: the server judges it by the node's
    /// state, so the event may name a later change than the first one.
    reset: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WatchKind {
    /// On the node's data: it existed.
    Data,
    /// On the node's creation: it did not exist.
    Creation,
    /// On the root's children.
    Children,
}

#[derive(Debug, Clone)]
struct Session {
    id: i64,
    password: Vec<u8>,
    timeout_ms: i32,
    /// Made by a server cut off from its quorum, never logged: the client asks for a new
    /// session when it next connects, as real clients do until they have seen a server that
    /// takes writes.
    local: bool,
    /// A closeSession was sent in it: a server that appended it may call the session expired
    /// before the close commits.
    close_sent: bool,
}

#[derive(Debug, Clone, Copy)]
struct LinkSpan {
    connected_us: u64,
    heard_us: u64,
    /// When its server last read a frame of it (a request, a ping or the handshake).
    read_by_server_us: u64,
    ended_us: u64,
    /// A closeSession was in flight: an "expired" answer may be that close, committed.
    closing: bool,
    /// Read-only: its server did not report the session to the quorum.
    read_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    None,
    Connecting(u64),
    Connected(u64),
}

pub(crate) struct ZkClient {
    id: u64,
    link: Link,
    session: Option<Session>,
    requested_timeout_ms: i32,
    last_zxid: i64,
    next_xid: i32,
    pending: VecDeque<Pending>,
    max_in_flight: usize,
    /// Only getData and exists: such a session lives on its server's reports alone, as a
    /// client that only watches or reads does.
    reads_only: bool,
    /// Connects with the readOnly flag: a server cut off from its quorum may take it in a
    /// read-only session.
    asks_read_only: bool,
    /// The connection in hand carries a read-only session: writes are refused.
    read_only_link: bool,
    step_us: (u64, u64),
    reconnect_at: u64,
    last_sent_us: u64,
    last_recv_us: u64,
    /// When the connection in hand was accepted, and when it last brought a frame.
    connected_us: u64,
    heard_us: u64,
    /// When the server of the connection in hand last read a frame of it.
    read_by_server_us: u64,
    /// The last accepted connection that ended: when it was accepted, last brought a frame,
    /// and ended.
    ended_link: Option<LinkSpan>,
    /// A closeSession was issued in this session.
    closing: bool,
    /// The connection in hand knocks, as a stranger with the wrong password, on this session
    /// a killed client left (see `restart`).
    knocking: Option<i64>,
    values: u64,
    last_write_zxid: i64,
    /// Per path, the highest modification zxid this client has read.
    seen_mzxid: BTreeMap<String, i64>,
    seen_version: BTreeMap<String, i32>,
    ephemerals: Vec<String>,
    watches: BTreeMap<String, Watch>,
    /// A SetWatches is outstanding, sent at this relative zxid.
    setting_watches: Option<i64>,
    /// The one persistent watch the client keeps, if any (then it leaves no one-shot ones).
    persistent: Option<PersistentWatch>,
}

impl ZkClient {
    fn conn(&self) -> Option<u64> {
        match self.link {
            Link::None => None,
            Link::Connecting(c) | Link::Connected(c) => Some(c),
        }
    }

    pub(crate) fn idle(&self) -> bool {
        self.session.is_none() && self.link == Link::None && self.pending.is_empty()
    }

    /// Lets go of the session and of what it held (ephemerals, watches): it ended, or the
    /// client's process died. Returns it, if there was one.
    fn forget_session(&mut self) -> Option<Session> {
        let session = self.session.take()?;
        self.ephemerals.clear();
        self.watches.clear();
        if let Some(watch) = &mut self.persistent {
            watch.session_ended();
        }
        self.closing = false;
        self.ended_link = None;
        Some(session)
    }

    /// A new process in place of this client's, which died: no session, no watches, no
    /// ephemerals, no zxid seen; it connects at `reconnect_at`.
    fn start_again(&mut self, reconnect_at: u64) {
        assert!(self.link == Link::None && self.pending.is_empty());
        self.forget_session();
        self.last_zxid = 0;
        self.last_write_zxid = 0;
        self.seen_mzxid.clear();
        self.seen_version.clear();
        self.reconnect_at = reconnect_at;
    }

    /// The session the client resumes when it connects: a local one is not resumed.
    fn logged_session(&self) -> Option<&Session> {
        self.session.as_ref().filter(|session| !session.local)
    }
}

/// Anyone may do anything: the simulated clients share every znode.
fn open_acl() -> Vec<zoolog_proto::Acl> {
    vec![zoolog_proto::Acl {
        perms: zoolog_proto::codes::perms::ALL,
        id: zoolog_proto::Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }]
}

fn tree_config(reaping: Option<&Reaping>) -> TreeConfig {
    let defaults = TreeConfig::default();
    // As the shell configures an ensemble member's tree: session ids carry no server id.
    TreeConfig {
        server_id: 0,
        extended_types_enabled: reaping.is_some(),
        container_never_used_ms: reaping
            .map_or(defaults.container_never_used_ms, |r| r.never_used_ms),
        ..defaults
    }
}

impl ZkState {
    pub(crate) fn new(rng: &mut Rng, nodes: &[(u64, bool)], tick_ms: u64) -> ZkState {
        // Drawn from a stream of their own: adding read-only mode changed no other choice.
        let mut read_only_rng = rng.fork(READ_ONLY_STREAM);
        let read_only_mode_enabled = read_only_rng.chance(0.5);
        let mut multi_rng = rng.fork(MULTI_STREAM);
        let multi_rng = multi_rng.chance(0.5).then_some(multi_rng);
        let mut persistent_rng = rng.fork(PERSISTENT_STREAM);
        let persistent_watches = persistent_rng.chance(0.5);
        let reaping = Reaping::draw(rng);
        let clocks = ServerClock::draw(rng, nodes.len());
        let restarts = Restarts::draw(rng);
        let defaults = ServerConfig::default();
        let container_check_interval_ms = reaping
            .as_ref()
            .map_or(defaults.container_check_interval_ms, |r| {
                r.check_interval_ms
            });
        let reap_scan_per_tick_min = reaping
            .as_ref()
            .map_or(defaults.reap_scan_per_tick_min, |r| r.scan_per_tick_min);
        let members: BTreeMap<u64, PeerConfig> = nodes
            .iter()
            .map(|(id, observer)| {
                (
                    *id,
                    PeerConfig {
                        host: format!("sim{id}"),
                        quorum_port: 2888,
                        election_port: 3888,
                        observer: *observer,
                        client_address: None,
                    },
                )
            })
            .collect();
        let configs = nodes
            .iter()
            .map(|(id, observer)| {
                Arc::new(ServerConfig {
                    tick_ms,
                    session_timeout_min_ms: 2 * tick_ms,
                    session_timeout_max_ms: 40 * tick_ms,
                    connections_per_ip_max: 0,
                    entries_per_snapshot: u64::MAX,
                    read_only_mode_enabled,
                    container_check_interval_ms,
                    reap_scan_per_tick_min,
                    server_id: *id as u8,
                    ensemble: Some(EnsembleConfig {
                        members: members.clone(),
                        init_limit: 10,
                        sync_limit: 5,
                        observer: *observer,
                    }),
                    ..ServerConfig::default()
                })
            })
            .collect();
        let client_count = rng.range(1, 6);
        let clients = (1..=client_count)
            .map(|id| ZkClient {
                id,
                link: Link::None,
                session: None,
                requested_timeout_ms: rng.range(6 * tick_ms, 40 * tick_ms) as i32,
                last_zxid: 0,
                next_xid: 1,
                pending: VecDeque::new(),
                max_in_flight: rng.range(1, 8) as usize,
                // The first client writes, so that the liveness phase sees acknowledgements.
                reads_only: id > 1 && rng.chance(0.25),
                asks_read_only: read_only_rng.chance(0.4),
                read_only_link: false,
                step_us: (200, rng.range(1_000, 20_000)),
                reconnect_at: 0,
                last_sent_us: 0,
                last_recv_us: 0,
                connected_us: 0,
                heard_us: 0,
                read_by_server_us: 0,
                ended_link: None,
                closing: false,
                knocking: None,
                values: 0,
                last_write_zxid: 0,
                seen_mzxid: BTreeMap::new(),
                seen_version: BTreeMap::new(),
                ephemerals: Vec::new(),
                watches: BTreeMap::new(),
                setting_watches: None,
                persistent: match persistent_watches {
                    true => PersistentWatch::draw(&mut persistent_rng),
                    false => None,
                },
            })
            .collect();
        let core_tick = (tick_ms * 1000 / 4).max(1000);
        ZkState {
            clients,
            conns: BTreeMap::new(),
            next_conn: 1,
            checker: ZkChecker::new(
                tree_config(reaping.as_ref()),
                PATHS.iter().map(|p| p.to_string()).collect(),
                CONTAINERS,
            ),
            configs,
            tree_config: tree_config(reaping.as_ref()),
            core_tick_us: (core_tick / 2, core_tick),
            append_queue_max: *rng.pick(&[4, 64, 16_384]).unwrap(),
            post_heal_acked: 0,
            streaks: BTreeMap::new(),
            multi_rng,
            reaping,
            restarts,
            clocks,
            origins: BTreeMap::new(),
        }
    }
}

impl ZkState {
    pub(crate) fn core_tick_us(&self) -> (u64, u64) {
        self.core_tick_us
    }

    pub(crate) fn longest_requested_timeout_us(&self) -> u64 {
        let longest_ms = self.clients.iter().map(|c| c.requested_timeout_ms).max();
        longest_ms.unwrap_or(0) as u64 * 1000
    }

    /// The server a client connection leads to.
    pub(crate) fn server_of(&self, conn: u64) -> Option<usize> {
        self.conns.get(&conn).map(|c| c.node)
    }
}

fn frame_of(payload: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

fn unframe(bytes: &[u8]) -> Result<&[u8], String> {
    if bytes.len() < 4
        || u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize != bytes.len() - 4
    {
        return Err(format!("a write of {} bytes is not one frame", bytes.len()));
    }
    Ok(&bytes[4..])
}

impl World {
    fn zk(&mut self) -> &mut ZkState {
        self.zk.as_mut().expect("core mode")
    }

    fn core_now(&self, idx: usize) -> Now {
        self.zk.as_ref().unwrap().clocks[idx].now(self.now)
    }

    /// Core mode: builds the front end of a (re)starting server over its recovered state.
    pub(super) fn start_front(&mut self, idx: usize) -> Result<(), String> {
        let zk = self.zk.as_ref().unwrap();
        let config = zk.configs[idx].clone();
        let tree_config = zk.tree_config.clone();
        let capacity = zk.append_queue_max;
        let tree = match &self.nodes[idx].disk.snapshot {
            Some(s) => DataTree::decode_snapshot(&s.payload[16..], tree_config)
                .map_err(|e| format!("server {}: saved snapshot: {e}", self.nodes[idx].id))?,
            None => DataTree::new(tree_config),
        };
        let layer = Arc::new(SimLayer::new(capacity, self.nodes[idx].machine.applied));
        let origin = self.rng.next_u64();
        self.zk().origins.insert(origin, idx);
        let mut passwords = Rng::new(self.rng.next_u64());
        let mut core = Core::new(config, layer.clone(), tree, origin, self.core_now(idx));
        core.set_password_source(Box::new(move || {
            (0..2)
                .flat_map(|_| passwords.next_u64().to_be_bytes())
                .collect()
        }));
        self.nodes[idx].front = Some(Front { core, layer });
        let life = self.nodes[idx].life;
        let (lo, hi) = self.zk().core_tick_us;
        let delay = self.rng.range(lo, hi);
        self.at(delay, Event::CoreTick { node: idx, life });
        Ok(())
    }

    /// The server crashed: its connections break (the clients notice a little later).
    pub(super) fn crash_front(&mut self, idx: usize) {
        self.nodes[idx].front = None;
        let ids: Vec<u64> = self
            .zk()
            .conns
            .iter()
            .filter(|(_, c)| c.node == idx && c.server_open)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.zk().conns.get_mut(&id).unwrap().server_open = false;
            let delay = self.rng.range(100, 20_000);
            self.send_to_client(id, None, delay);
        }
    }

    /// The snapshot payload of core mode: the state machine's header, then the tree.
    pub(super) fn front_snapshot(&self, idx: usize, header: Bytes) -> Bytes {
        let mut bytes = header.to_vec();
        if let Some(front) = &self.nodes[idx].front {
            front.core.view().tree.encode_snapshot(&mut bytes);
        }
        Bytes::from(bytes)
    }

    pub(super) fn core_input(&mut self, idx: usize, input: CoreInput) -> Result<(), String> {
        let now = self.core_now(idx);
        if self.nodes[idx].front.is_none() {
            return Ok(());
        }
        if !matches!(input, CoreInput::Tick | CoreInput::Committed { .. }) {
            self.log(Some(idx), || format!("core <- {input:?}"));
        }
        let front = self.nodes[idx].front.as_mut().unwrap();
        let outputs = front.core.handle(input, now);
        if self.trace {
            for output in &outputs {
                match output {
                    Output::SaveSnapshot { .. } => {}
                    Output::Write {
                        connection, bytes, ..
                    } => self.log(Some(idx), || {
                        format!("core -> write {} bytes on {connection}", bytes.len())
                    }),
                    other => self.log(Some(idx), || format!("core -> {other:?}")),
                }
            }
        }
        self.trace_hash = fnv(self.trace_hash, outputs.len() as u64);
        let mut held = Vec::new();
        for output in outputs {
            match output {
                Output::Write {
                    connection, bytes, ..
                } => {
                    let frame = unframe(&bytes)?.to_vec();
                    if self
                        .zk()
                        .conns
                        .get(&connection)
                        .is_some_and(|c| c.server_open)
                    {
                        let delay = self.conn_delay();
                        self.send_to_client(connection, Some(frame), delay);
                    }
                }
                Output::Close { connection } => {
                    let open = self
                        .zk()
                        .conns
                        .get_mut(&connection)
                        .filter(|c| c.server_open)
                        .map(|c| c.server_open = false)
                        .is_some();
                    if open {
                        let delay = self.conn_delay();
                        self.send_to_client(connection, None, delay);
                        self.core_input(idx, CoreInput::Closed { connection })?;
                    }
                }
                Output::HandshakeDone {
                    connection,
                    accepted,
                } => {
                    if let Some(conn) = self.zk().conns.get_mut(&connection) {
                        conn.accepted = accepted;
                        if accepted {
                            held.push(connection);
                        }
                    }
                }
                Output::SaveSnapshot { .. } => {
                    if let Some(front) = self.nodes[idx].front.as_mut() {
                        front.core.snapshot_finished(None);
                    }
                }
                Output::Stop { reason } => {
                    return Err(format!("server {} stops: {reason}", self.nodes[idx].id));
                }
            }
        }
        for connection in held {
            let frames: Vec<Vec<u8>> = match self.zk().conns.get_mut(&connection) {
                Some(conn) => conn.held.drain(..).collect(),
                None => continue,
            };
            for frame in frames {
                self.server_frame(idx, connection, frame)?;
            }
        }
        Ok(())
    }

    /// Hands the commands Core queued to Zab, as far as Zab takes them now. Called after
    /// each input to Zab and each input to Core from outside Zab's actions, never while a
    /// batch of Zab's actions is being carried out.
    pub(super) fn pump(&mut self, idx: usize) -> Result<(), String> {
        if self.pumping {
            return Ok(());
        }
        self.pumping = true;
        let result = self.pump_inner(idx);
        self.pumping = false;
        result
    }

    fn pump_inner(&mut self, idx: usize) -> Result<(), String> {
        loop {
            let node = &self.nodes[idx];
            let (Some(zab), Some(front)) = (&node.zab, &node.front) else {
                return Ok(());
            };
            let Status::Serving { stint, .. } = zab.status() else {
                return Ok(());
            };
            let taken = Lane::BY_PRIORITY.into_iter().find_map(|lane| {
                let payloads = zab
                    .append_capacity(lane)
                    .fill(|| front.layer.pop_front(lane, stint));
                (!payloads.is_empty()).then_some((lane, payloads))
            });
            let Some((lane, payloads)) = taken else {
                return Ok(());
            };
            self.pumping = false;
            let result = self.feed(idx, Input::Append { lane, payloads });
            self.pumping = true;
            result?;
        }
    }

    fn conn_delay(&mut self) -> u64 {
        let mut delay = self
            .rng
            .range(self.net.config.delay_min_us, self.net.config.delay_max_us);
        if self.rng.chance(self.net.config.tail_p) {
            delay += self.rng.range(0, self.net.config.tail_us);
        }
        delay
    }

    fn send_to_client(&mut self, conn: u64, frame: Option<Vec<u8>>, delay: u64) {
        let now = self.now;
        let Some(c) = self.zk().conns.get_mut(&conn) else {
            return;
        };
        let at = (now + delay).max(c.to_client_at);
        c.to_client_at = at;
        self.queue.push(at, Event::ZkToClient { conn, frame });
    }

    fn send_to_server(&mut self, conn: u64, frame: Option<Vec<u8>>) {
        let delay = self.conn_delay();
        let now = self.now;
        let Some(c) = self.zk().conns.get_mut(&conn) else {
            return;
        };
        let at = (now + delay).max(c.to_server_at);
        c.to_server_at = at;
        self.queue.push(at, Event::ZkToServer { conn, frame });
    }

    pub(super) fn zk_to_server(&mut self, conn: u64, frame: Option<Vec<u8>>) -> Result<(), String> {
        let Some(c) = self.zk().conns.get(&conn) else {
            return Ok(());
        };
        let (idx, life, open) = (c.node, c.life, c.server_open);
        if !open || self.nodes[idx].life != life || self.nodes[idx].front.is_none() {
            return Ok(());
        }
        match frame {
            None => {
                self.zk().conns.get_mut(&conn).unwrap().server_open = false;
                self.core_input(idx, CoreInput::Closed { connection: conn })?;
            }
            Some(frame) => {
                let frame = unframe(&frame)?.to_vec();
                self.server_frame(idx, conn, frame)?;
            }
        }
        self.pump(idx)
    }

    /// A frame reaches the server, which reads it as the shell does.
    fn server_frame(&mut self, idx: usize, conn: u64, frame: Vec<u8>) -> Result<(), String> {
        let c = self.zk().conns.get_mut(&conn).unwrap();
        if !c.server_open {
            return Ok(());
        }
        let client = c.client;
        if !c.greeted {
            c.greeted = true;
            self.read_by_server(client, conn);
            let request = ConnectRequest::decode(&frame)
                .map_err(|e| format!("a client's ConnectRequest does not decode: {e}"))?;
            return self.core_input(
                idx,
                CoreInput::Handshake {
                    connection: conn,
                    request,
                    frame_bytes: FRAME_PREFIX_BYTES + frame.len(),
                },
            );
        }
        if !c.accepted {
            c.held.push_back(frame);
            return Ok(());
        }
        let input = request_input(conn, &frame)
            .ok_or_else(|| format!("a request frame of {} bytes has no header", frame.len()))?;
        self.read_by_server(client, conn);
        self.heard_by_server(client, idx, conn);
        self.core_input(idx, input)
    }

    /// A server reads a frame of a client's connection in hand.
    fn read_by_server(&mut self, c: usize, conn: u64) {
        let now = self.now;
        let client = &mut self.zk().clients[c];
        if matches!(client.link, Link::Connecting(at) | Link::Connected(at) if at == conn) {
            client.read_by_server_us = now;
        }
    }

    /// A server reads a request from a client: part of a streak if the connection is the
    /// client's current one and the last frame came less than half a timeout ago.
    fn heard_by_server(&mut self, c: usize, idx: usize, conn: u64) {
        let now = self.now;
        let zk = self.zk();
        let client = &zk.clients[c];
        let Some(session) = client
            .session
            .as_ref()
            .filter(|_| client.link == Link::Connected(conn))
        else {
            return;
        };
        let gap_max_us = session.timeout_ms as u64 * 1000 / 2;
        let fresh = Streak {
            conn,
            first_us: now,
            last_us: now,
        };
        let streak = zk.streaks.entry((session.id, idx)).or_insert(fresh);
        if streak.conn != conn || now - streak.last_us > gap_max_us {
            *streak = fresh;
        }
        streak.last_us = now;
    }

    /// The entry at `position` joined the common sequence (delivered for the first time).
    pub(super) fn zk_committed(&mut self, position: u64, payload: &[u8]) -> Result<(), String> {
        let now = self.now;
        let zk = self.zk();
        let stamper = payload
            .get(..8)
            .and_then(|origin| {
                zk.origins
                    .get(&u64::from_be_bytes(origin.try_into().unwrap()))
            })
            .ok_or_else(|| format!("entry {position} comes from no server's front end"))?;
        let clock = zk.clocks[*stamper];
        let expiry = zk.checker.committed(position, payload, now, |wall_ms| {
            clock.simulated_ms_of(wall_ms)
        })?;
        match expiry {
            Some(expiry) => self.check_expiry_heard(expiry),
            None => Ok(()),
        }
    }

    /// A session whose client keeps talking to a server that reaches the quorum is never
    /// expired (`zoolog_server`'s docs): each such server reports it about every third of its
    /// timeout, so the log's news of it stays well under a timeout old. Once faults have
    /// stopped, an expiry ordered less than half a timeout after a frame of a streak that a
    /// server heard while serving one epoch (from before the streak until now) therefore
    /// means a report missing or late.
    fn check_expiry_heard(&mut self, expiry: Expiry) -> Result<(), String> {
        let (phase, faults_end) = (self.phase, self.faults_end);
        let timeout_us = expiry.timeout_us();
        let zk = self.zk();
        let heard: Vec<(usize, Streak)> = zk
            .streaks
            .range((expiry.session_id, 0)..=(expiry.session_id, usize::MAX))
            .map(|(&(_, idx), streak)| (idx, *streak))
            .collect();
        zk.streaks
            .retain(|&(session_id, _), _| session_id != expiry.session_id);
        if phase != Phase::Liveness {
            return Ok(());
        }
        for (idx, streak) in heard {
            let served = self.nodes[idx]
                .serving_since_us
                .is_some_and(|since_us| since_us <= streak.first_us);
            // The frames came at most half a timeout apart, so one came less than that
            // before the expiry was ordered.
            let talking = streak.first_us <= expiry.ordered_us
                && expiry.ordered_us < streak.last_us + timeout_us / 2;
            if streak.first_us >= faults_end && served && talking {
                return Err(format!(
                    "session {:#x} (timeout {} ms) expired, ordered at about {} us, although \
                     server {} (serving since {} us) heard its client on connection {} from {} \
                     us until {} us, after the faults ended at {faults_end} us",
                    expiry.session_id,
                    expiry.timeout_ms,
                    expiry.ordered_us,
                    self.nodes[idx].id,
                    self.nodes[idx].serving_since_us.unwrap_or_default(),
                    streak.conn,
                    streak.first_us,
                    streak.last_us,
                ));
            }
        }
        Ok(())
    }

    // ----- clients ----------------------------------------------------------------------

    fn client_send(&mut self, c: usize, frame: Vec<u8>) {
        let now = self.now;
        let client = &mut self.zk().clients[c];
        client.last_sent_us = now;
        let conn = client.conn().expect("connected");
        self.send_to_server(conn, Some(frame_of(frame)));
    }

    /// The client gives up its connection (or learns it is gone): requests in flight have
    /// unknown outcomes; it reconnects a little later.
    fn client_disconnect(&mut self, c: usize, tell_server: bool) {
        let now = self.now;
        let delay = self.rng.range(0, 50_000);
        let client = &mut self.zk().clients[c];
        let conn = client.conn();
        if let Link::Connected(_) = client.link {
            client.ended_link = Some(LinkSpan {
                connected_us: client.connected_us,
                heard_us: client.heard_us,
                read_by_server_us: client.read_by_server_us,
                ended_us: now,
                closing: client.closing,
                read_only: client.read_only_link,
            });
        }
        client.link = Link::None;
        client.knocking = None;
        client.pending.clear();
        client.setting_watches = None;
        if let Some(watch) = &mut client.persistent {
            watch.disconnected();
        }
        // A close in flight has an unknown outcome: it is issued again after reconnecting.
        client.closing = false;
        client.reconnect_at = now + delay;
        if let (Some(conn), true) = (conn, tell_server) {
            self.send_to_server(conn, None);
        }
    }

    fn session_ended(&mut self, c: usize, expired: bool) {
        if let Some(session) = self.zk().clients[c].forget_session() {
            let zk = self.zk();
            zk.checker.ended_sessions.insert(session.id);
            if expired {
                zk.checker.sessions_expired += 1;
            }
        }
    }

    pub(super) fn zk_client_step(&mut self, c: usize) -> Result<(), String> {
        let (lo, hi) = self.zk().clients[c].step_us;
        let delay = self.rng.range(lo, hi);
        self.at(delay, Event::ClientStep { client: c });
        let now = self.now;
        let quiesce = self.quiesce;
        let client = &self.zk().clients[c];
        let timeout_us = client
            .session
            .as_ref()
            .map_or(client.requested_timeout_ms, |s| s.timeout_ms) as u64
            * 1000;
        match client.link {
            Link::None => {
                if now < client.reconnect_at {
                    return Ok(());
                }
                let sessionless = client.session.is_none();
                if sessionless && self.maybe_knock(c)? {
                    return Ok(());
                }
                if quiesce && sessionless {
                    return Ok(());
                }
                return self.client_connect(c, None);
            }
            Link::Connecting(_) | Link::Connected(_) => {
                // No sign of the server for 2/3 of the session timeout: the connection is
                // presumed dead, as real clients do.
                if now.saturating_sub(client.last_recv_us) > timeout_us * 2 / 3 {
                    self.client_disconnect(c, true);
                    return Ok(());
                }
            }
        }
        // A process may die at any point of its session: while it connects, while its close
        // is on the way, or in between.
        if !quiesce && self.maybe_kill_client(c) {
            return Ok(());
        }
        let client = &self.zk().clients[c];
        if let Link::Connecting(_) = client.link {
            return Ok(());
        }
        if client.closing {
            return Ok(());
        }
        if !quiesce && self.rng.chance(0.005) {
            // Moves to another server (as after a load-balancing hint or a flaky link), with
            // whatever it has in flight: those requests' outcomes become unknown.
            self.client_disconnect(c, true);
            return Ok(());
        }
        // Real clients ping whatever they wait for, quiescing too: a request that takes long
        // to answer does not keep the session alive at the server.
        if now.saturating_sub(self.zk().clients[c].last_sent_us) > timeout_us / 3 {
            let mut frame = Vec::new();
            RequestHeader {
                xid: zoolog_proto::codes::xid::PING,
                opcode: zoolog_proto::OpCode::Ping.code(),
            }
            .write_to(&mut frame);
            self.client_send(c, frame);
        }
        let client = &self.zk().clients[c];
        if quiesce {
            if client.pending.is_empty() {
                self.issue(c, Kind::Close, String::new(), None, None);
            }
            return Ok(());
        }
        let room = client.max_in_flight.saturating_sub(client.pending.len());
        if room == 0 || self.rng.chance(0.3) {
            return Ok(());
        }
        let path = PATHS[self.rng.below(PATHS.len() as u64) as usize].to_string();
        if self.wants_persistent_watch(c) {
            self.issue_add_watch(c);
            return Ok(());
        }
        if self.zk().clients[c].reads_only {
            match self.rng.below(5) {
                0 | 1 => self.issue(c, Kind::GetData, path, None, None),
                2 | 3 => self.issue(c, Kind::Exists, path, None, None),
                _ => self.issue(c, Kind::GetChildren, "/".into(), None, None),
            }
            return Ok(());
        }
        if self.maybe_issue_reapable_create(c) {
            return Ok(());
        }
        if let Some(rng) = &mut self.zk().multi_rng {
            if rng.chance(0.1) {
                self.issue_multi(c);
                return Ok(());
            }
        }
        let roll = self.rng.below(100);
        let seen = self.zk().clients[c].seen_version.get(&path).copied();
        let version = if self.rng.chance(0.5) {
            -1
        } else {
            seen.unwrap_or(0)
        };
        match roll {
            0..=19 => self.issue(c, Kind::SetData, path, Some(version), None),
            20..=34 => {
                let kind = Kind::Create {
                    ephemeral: false,
                    sequential: false,
                };
                self.issue(c, kind, path, None, None)
            }
            35..=49 => self.issue(c, Kind::GetData, path, None, None),
            50..=59 => self.issue(c, Kind::Exists, path, None, None),
            60..=66 => self.issue(c, Kind::Delete, path, Some(version), None),
            67..=79 if room >= 2 => {
                let watermark = self.zk().checker.max_write_ack;
                self.issue(c, Kind::Sync, path.clone(), None, None);
                self.issue(c, Kind::GetData, path, None, Some(watermark));
            }
            80..=88 => {
                let client = &mut self.zk().clients[c];
                client.values += 1;
                // Every other one sequential, decided without a draw: the random choices of a
                // seed stay those of the simulator before sequential nodes.
                let sequential = client.values.is_multiple_of(2);
                let path = match sequential {
                    true => format!("/q{}-", client.id),
                    false => format!("/e{}-{}", client.id, client.values),
                };
                let kind = Kind::Create {
                    ephemeral: true,
                    sequential,
                };
                self.issue(c, kind, path, None, None);
            }
            89..=94 => {
                let ephemerals = self.zk().clients[c].ephemerals.clone();
                if let Some(path) = self.rng.pick(&ephemerals).cloned() {
                    self.issue(c, Kind::Delete, path, Some(-1), None);
                }
            }
            95 if self.rng.chance(0.3) => self.issue(c, Kind::Close, String::new(), None, None),
            96..=99 => self.issue(c, Kind::GetChildren, "/".into(), None, None),
            _ => {}
        }
        Ok(())
    }

    /// Connects client `c` to a server it draws: to resume its session or make a new one, or,
    /// as a `stranger`, to take over the given session with the given password.
    fn client_connect(&mut self, c: usize, stranger: Option<(i64, Vec<u8>)>) -> Result<(), String> {
        let node = self.rng.below(self.nodes.len() as u64) as usize;
        // A stopped process answers no handshake either.
        if !self.nodes[node].is_up() || self.is_paused(node) {
            let delay = self.rng.range(1_000, 30_000);
            self.zk().clients[c].reconnect_at = self.now + delay;
            return Ok(());
        }
        let now = self.now;
        let life = self.nodes[node].life;
        let zk = self.zk();
        let conn = zk.next_conn;
        zk.next_conn += 1;
        zk.conns.insert(
            conn,
            Conn {
                client: c,
                node,
                life,
                to_server_at: now,
                to_client_at: now,
                greeted: false,
                accepted: false,
                held: VecDeque::new(),
                server_open: true,
            },
        );
        let client = &mut zk.clients[c];
        client.link = Link::Connecting(conn);
        client.last_recv_us = now;
        client.knocking = stranger.as_ref().map(|(session_id, _)| *session_id);
        let (session_id, password) = stranger.unwrap_or_else(|| {
            client
                .logged_session()
                .map_or((0, vec![0; 16]), |s| (s.id, s.password.clone()))
        });
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: client.last_zxid,
            timeout_ms: client
                .logged_session()
                .map_or(client.requested_timeout_ms, |s| s.timeout_ms),
            session_id,
            password,
            read_only: Some(client.asks_read_only),
        };
        let client_id = client.id;
        self.log(Some(node), || {
            format!("client {client_id} connects (connection {conn}): {request:?}")
        });
        self.trace_hash = fnv(self.trace_hash, conn);
        let port = 10_000 + conn as u16;
        let peer = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, c as u8, 1)), port);
        self.core_input(
            node,
            CoreInput::Opened {
                connection: conn,
                peer,
            },
        )?;
        self.client_send(c, request.encode());
        self.pump(node)
    }

    fn issue(
        &mut self,
        c: usize,
        kind: Kind,
        path: String,
        version: Option<i32>,
        watermark: Option<i64>,
    ) {
        let now = self.now;
        let watcher = self.zk().clients[c].persistent.is_some();
        let watch = matches!(kind, Kind::GetData | Kind::Exists | Kind::GetChildren)
            && !watcher
            && self.rng.chance(0.3);
        let xid = self.next_xid(c);
        let client = &mut self.zk().clients[c];
        client.values += 1;
        let value = format!("c{}v{}", client.id, client.values).into_bytes();
        let request = match kind {
            Kind::Create {
                ephemeral,
                sequential,
            } => Request::Create(CreateRequest {
                path: path.clone(),
                data: Some(value),
                acl: Some(open_acl()),
                flags: i32::from(ephemeral) | i32::from(sequential) << 1,
            }),
            Kind::SetData => Request::SetData(SetDataRequest {
                path: path.clone(),
                data: Some(value),
                version: version.unwrap_or(-1),
            }),
            Kind::GetData => Request::GetData(PathWatchRequest {
                path: path.clone(),
                watch,
            }),
            Kind::Exists => Request::Exists(PathWatchRequest {
                path: path.clone(),
                watch,
            }),
            Kind::GetChildren => Request::GetChildren(PathWatchRequest {
                path: path.clone(),
                watch,
            }),
            Kind::Delete => Request::Delete(DeleteRequest {
                path: path.clone(),
                version: version.unwrap_or(-1),
            }),
            Kind::Sync => Request::Sync(PathRequest { path: path.clone() }),
            Kind::Close => {
                client.closing = true;
                if let Some(session) = &mut client.session {
                    session.close_sent = true;
                }
                Request::CloseSession
            }
            Kind::Multi => unreachable!("a multi's ops come from issue_multi"),
            Kind::AddWatch => unreachable!("an addWatch comes from issue_add_watch"),
            Kind::CreateReapable => unreachable!("from maybe_issue_reapable_create"),
        };
        let pending = Pending {
            watermark,
            watch,
            ..Pending::new(xid, kind, path, now)
        };
        self.send_request(c, pending, &request);
    }

    fn next_xid(&mut self, c: usize) -> i32 {
        let client = &mut self.zk().clients[c];
        client.next_xid += 1;
        client.next_xid - 1
    }

    /// Sends `request` and waits for its reply in order.
    fn send_request(&mut self, c: usize, pending: Pending, request: &Request) {
        let frame = request.encode(pending.xid);
        self.zk().clients[c].pending.push_back(pending);
        self.client_send(c, frame);
    }

    pub(super) fn zk_to_client(&mut self, conn: u64, frame: Option<Vec<u8>>) -> Result<(), String> {
        let Some(c) = self.zk().conns.get(&conn).map(|c| c.client) else {
            return Ok(());
        };
        if self.zk().clients[c].conn() != Some(conn) {
            return Ok(());
        }
        let Some(frame) = frame else {
            // The server closed the connection (or crashed).
            self.zk().conns.remove(&conn);
            self.client_disconnect(c, false);
            return Ok(());
        };
        self.zk().clients[c].last_recv_us = self.now;
        if let Link::Connecting(_) = self.zk().clients[c].link {
            return self.client_connected(c, conn, &frame);
        }
        self.zk().clients[c].heard_us = self.now;
        self.client_reply(c, &frame)
    }

    fn client_connected(&mut self, c: usize, conn: u64, frame: &[u8]) -> Result<(), String> {
        let response = ConnectResponse::decode(frame)
            .map_err(|e| format!("client {}: ConnectResponse does not decode: {e}", c + 1))?;
        if let Some(session_id) = self.zk().clients[c].knocking {
            return self.knock_answered(c, session_id, &response);
        }
        let client = &mut self.zk().clients[c];
        let read_only = response.read_only == Some(true);
        if read_only && !client.asks_read_only {
            return Err(format!(
                "read-only: client {} got a read-only session without asking for one",
                client.id
            ));
        }
        if response.timeout_ms <= 0 || response.session_id == 0 {
            // Expired: its ephemerals must be gone; it starts over with a new session.
            let client_id = client.id;
            self.log(None, || format!("client {client_id}: {response:?}"));
            let client = &mut self.zk().clients[c];
            if client.logged_session().is_none() {
                return Err(format!(
                    "client {}: a new session was answered as expired",
                    client.id
                ));
            }
            let session = self.zk().clients[c].session.as_ref();
            let (id, close_sent) = session
                .map(|s| (s.id, s.close_sent))
                .expect("checked above");
            self.log(None, || {
                format!("client {client_id}: session {id:#x} expired")
            });
            if !close_sent && !self.zk().checker.ended_in_log.contains_key(&id) {
                return Err(format!(
                    "expiry: client {client_id} was told its session {id:#x} expired, which the \
                     log has not ended"
                ));
            }
            self.check_expiry_was_due(c)?;
            self.session_ended(c, true);
            return Ok(());
        }
        if let Some(session) = client.logged_session() {
            if session.id != response.session_id {
                return Err(format!(
                    "client {}: reconnecting session {:#x} got session {:#x}",
                    client.id, session.id, response.session_id
                ));
            }
        } else {
            // A local session is left behind, as its server forgets it.
            client.session = Some(Session {
                id: response.session_id,
                password: response.password.clone(),
                timeout_ms: response.timeout_ms,
                local: read_only,
                close_sent: false,
            });
            client.last_write_zxid = 0;
            client.ended_link = None;
            if !read_only {
                self.zk().checker.sessions_created += 1;
            }
        }
        if read_only {
            self.zk().checker.read_only_sessions += 1;
        }
        let now = self.now;
        let client = &mut self.zk().clients[c];
        client.read_only_link = read_only;
        client.link = Link::Connected(conn);
        (client.connected_us, client.heard_us) = (now, now);
        self.set_watches_again(c);
        Ok(())
    }

    /// After a reconnect, the client hands the new server the watches it holds, as real
    /// clients do: from then on the server judges each by the node's state against the last
    /// zxid the client saw.
    fn set_watches_again(&mut self, c: usize) {
        let client = &mut self.zk().clients[c];
        let carried = client.persistent.as_ref().is_some_and(|w| w.carried());
        if client.watches.is_empty() && !carried {
            return;
        }
        let mut request = SetWatches2 {
            relative_zxid: client.last_zxid,
            data_watches: Vec::new(),
            exist_watches: Vec::new(),
            child_watches: Vec::new(),
            persistent_watches: Vec::new(),
            persistent_recursive_watches: Vec::new(),
        };
        for (path, watch) in client.watches.iter_mut() {
            watch.reset = true;
            let list = match watch.kind {
                WatchKind::Data => &mut request.data_watches,
                WatchKind::Creation => &mut request.exist_watches,
                WatchKind::Children => &mut request.child_watches,
            };
            list.push(path.clone());
        }
        if let Some(watch) = &mut client.persistent {
            watch.set_again(&mut request);
        }
        client.setting_watches = Some(client.last_zxid);
        // As the Java client: SetWatches2 only when there are persistent watches to carry.
        let request = match carried {
            true => Request::SetWatches2(request),
            false => Request::SetWatches(SetWatches {
                relative_zxid: request.relative_zxid,
                data_watches: request.data_watches,
                exist_watches: request.exist_watches,
                child_watches: request.child_watches,
            }),
        };
        let frame = request.encode(zoolog_proto::codes::xid::SET_WATCHES);
        self.client_send(c, frame);
    }

    /// A session may expire only if its client went a whole timeout without a server that
    /// hears it and reaches the quorum. Once faults have stopped, a connection the client held
    /// for a whole timeout, hearing from its server until it ended, is such a server (unless
    /// the connection was read-only: its server reported nothing): the server heard every
    /// ping, and reported the session to the log in time (or the design in `zoolog_server`'s
    /// docs is wrong), so the expiry cannot be ordered within a timeout of the last frame it
    /// read. Later it may be: the client may find no other server to take it in time after
    /// that connection ended.
    fn check_expiry_was_due(&mut self, c: usize) -> Result<(), String> {
        let (phase, faults_end) = (self.phase, self.faults_end);
        let zk = self.zk();
        let client = &zk.clients[c];
        let (Some(link), Some(session)) = (client.ended_link, client.session.as_ref()) else {
            return Ok(());
        };
        // A close may have been issued on an earlier connection and ordered late. A session
        // the log never ended is judged as if it expired at once.
        let expired_us = match zk.checker.ended_in_log.get(&session.id) {
            Some(LogEnd::Closed) => return Ok(()),
            Some(LogEnd::Expired { at_us }) => *at_us,
            None => 0,
        };
        let timeout_us = session.timeout_ms as u64 * 1000;
        let calm = phase == Phase::Liveness
            && link.connected_us >= faults_end
            && !link.closing
            && !link.read_only;
        let talked_a_timeout = link.heard_us >= link.connected_us + timeout_us;
        let heard_to_the_end = link.ended_us <= link.heard_us + timeout_us / 2;
        // From the frames the server read, not those the client heard: a watch event may
        // reach a client that has sent nothing since its last ping.
        let too_soon = expired_us < link.read_by_server_us + timeout_us;
        if calm && talked_a_timeout && heard_to_the_end && too_soon {
            return Err(format!(
                "client {}: session {:#x} (timeout {} ms) expired at {expired_us} us although \
                 its connection, accepted after the faults ended at {} us, brought frames from \
                 {} us until {} us, its last read by the server at {} us, and ended at {} us",
                client.id,
                session.id,
                session.timeout_ms,
                faults_end,
                link.connected_us,
                link.heard_us,
                link.read_by_server_us,
                link.ended_us
            ));
        }
        Ok(())
    }

    fn client_reply(&mut self, c: usize, frame: &[u8]) -> Result<(), String> {
        let mut reader = Reader::new(frame);
        let header = ReplyHeader::read_from(&mut reader)
            .map_err(|e| format!("reply header does not decode: {e}"))?;
        let body = &frame[16.min(frame.len())..];
        let phase = self.phase;
        let faults_end = self.faults_end;
        let client = &mut self.zk().clients[c];
        let client_id = client.id;
        let session_id = client.session.as_ref().map_or(0, |s| s.id);
        if header.xid == zoolog_proto::codes::xid::NOTIFICATION {
            return self.client_notification(c, body);
        }
        if header.xid == zoolog_proto::codes::xid::SET_WATCHES {
            if header.err != 0 {
                return Err(format!(
                    "client {client_id}: SetWatches failed with error {}",
                    header.err
                ));
            }
            return self.watches_set_again(c, header.zxid);
        }
        if header.zxid > 0 && client.setting_watches.is_none() {
            self.check_no_watch_missed(c, header.xid, header.zxid)?;
        }
        let client = &mut self.zk().clients[c];
        if header.zxid > 0 {
            if header.zxid < client.last_zxid {
                return Err(format!(
                    "FIFO: client {client_id} (session {session_id:#x}) got a reply (xid {}) at zxid {} after having seen zxid {}",
                    header.xid, header.zxid, client.last_zxid
                ));
            }
            client.last_zxid = header.zxid;
        }
        if header.xid == zoolog_proto::codes::xid::PING {
            return Ok(());
        }
        let Some(pending) = client.pending.pop_front() else {
            return Err(format!(
                "FIFO: client {client_id} got a reply to xid {} with nothing outstanding",
                header.xid
            ));
        };
        if pending.xid != header.xid {
            return Err(format!(
                "FIFO: client {client_id} (session {session_id:#x}) got the reply to xid {} while xid {} ({:?}) was the oldest outstanding",
                header.xid, pending.xid, pending.kind
            ));
        }
        let err = header.err;
        // A multi fails its session check inside its results, a close in its own way.
        let single = pending.kind.is_write() && !matches!(pending.kind, Kind::Multi | Kind::Close);
        if single && header.zxid > 0 {
            let checker = &self.zk().checker;
            checker.check_session_answer(header.xid, header.zxid, err)?;
        }
        let client = &mut self.zk().clients[c];
        if err == ErrorCode::SessionExpired.code() {
            // The session is gone here: reconnecting tells the client for sure.
            self.client_disconnect(c, true);
            return Ok(());
        }
        if err == ErrorCode::NotReadOnly.code()
            || (client.read_only_link && pending.kind.is_write())
        {
            return self.read_only_write_answered(c, &pending, header.zxid, err);
        }
        if pending.kind.is_write() && header.zxid > 0 {
            if header.zxid <= client.last_write_zxid {
                return Err(format!(
                    "FIFO: client {client_id} (session {session_id:#x}): write xid {} acknowledged at zxid {}, not after its previous write at {}",
                    header.xid, header.zxid, client.last_write_zxid
                ));
            }
            client.last_write_zxid = header.zxid;
            if phase == Phase::Liveness && pending.issued_us >= faults_end {
                self.zk().post_heal_acked += 1;
            }
            self.zk()
                .checker
                .write_acknowledged(session_id, header.xid, header.zxid)?;
        }
        let client = &mut self.zk().clients[c];
        match pending.kind {
            Kind::Close if err == 0 => self.session_closed(c, header.zxid),
            Kind::Close => {
                // SessionMoved or throttled: try again later, from a fresh connection.
                client.closing = false;
                self.client_disconnect(c, true);
            }
            Kind::Sync if err != 0 => {
                // A failed sync (throttled) orders nothing: the read after it promises nothing.
                if let Some(next) = client.pending.front_mut() {
                    next.watermark = None;
                }
            }
            Kind::Create {
                ephemeral,
                sequential,
            } if err == 0 => {
                let path = self.check_created_path(c, &pending, sequential, header.zxid, body)?;
                if ephemeral {
                    self.zk().clients[c].ephemerals.push(path);
                }
            }
            Kind::Delete if err == 0 => client.ephemerals.retain(|p| *p != pending.path),
            Kind::Multi if err == 0 => self.check_multi(c, &pending, header.zxid, body)?,
            Kind::AddWatch => self.persistent_watch_added(c, header.zxid, err),
            Kind::CreateReapable if err == 0 => {
                self.check_created_path(c, &pending, false, header.zxid, body)?;
            }
            Kind::SetData if err == 0 => {
                let stat = Stat::read_from(&mut Reader::new(body))
                    .map_err(|e| format!("setData reply: {e}"))?;
                client.seen_version.insert(pending.path, stat.version);
            }
            Kind::GetData | Kind::Exists => {
                // Zxid 0 is a read-only server's that has applied nothing yet.
                if header.zxid < 0 {
                    if err == ErrorCode::ThrottledOp.code() {
                        return Ok(());
                    }
                    return Err(format!(
                        "client {client_id}: read xid {} answered at zxid {} with error {err}",
                        header.xid, header.zxid
                    ));
                }
                let found = if err == 0 {
                    let stat = if pending.kind == Kind::GetData {
                        let r = GetDataResponse::read_from(&mut Reader::new(body))
                            .map_err(|e| format!("getData reply: {e}"))?;
                        Some((r.data.map(Vec::from), r.stat))
                    } else {
                        let stat = Stat::read_from(&mut Reader::new(body))
                            .map_err(|e| format!("exists reply: {e}"))?;
                        Some((None, stat))
                    };
                    stat
                } else if err == ErrorCode::NoNode.code() {
                    None
                } else {
                    return Err(format!(
                        "client {client_id}: read of {} failed with {err}",
                        pending.path
                    ));
                };
                if let Some(watermark) = pending.watermark {
                    if header.zxid < watermark {
                        return Err(format!(
                            "linearizability: client {client_id} (session {session_id:#x}) read {} after a sync at zxid {}, but zxid {watermark} had been acknowledged before the sync was issued",
                            pending.path, header.zxid
                        ));
                    }
                }
                if let Some((_, stat)) = &found {
                    let seen = client.seen_mzxid.get(&pending.path).copied().unwrap_or(0);
                    if stat.mzxid < seen {
                        return Err(format!(
                            "stale read: client {client_id} read {} modified at zxid {} after having read it modified at {seen}",
                            pending.path, stat.mzxid
                        ));
                    }
                    client.seen_mzxid.insert(pending.path.clone(), stat.mzxid);
                    client
                        .seen_version
                        .insert(pending.path.clone(), stat.version);
                }
                let zk = self.zk();
                let expected = zk.checker.state_at(&pending.path, header.zxid)?;
                let ok = match (&found, expected) {
                    (None, None) => true,
                    (Some((data, stat)), Some(state)) => {
                        stat.version == state.version
                            && stat.mzxid == state.mzxid
                            && stat.czxid == state.czxid
                            && (pending.kind == Kind::Exists || *data == state.data)
                    }
                    _ => false,
                };
                if !ok {
                    return Err(format!(
                        "read: client {client_id} read {} at zxid {} as {:?}, but the common state there is {:?}",
                        pending.path,
                        header.zxid,
                        found.as_ref().map(|(d, s)| (d.as_ref().map(|d| String::from_utf8_lossy(d).into_owned()), s.version, s.czxid, s.mzxid)),
                        expected
                    ));
                }
                zk.checker.reads_checked += 1;
                if pending.watermark.is_some() {
                    zk.checker.synced_reads += 1;
                }
                // A getData of a missing node leaves no watch; an exists leaves one either way.
                if pending.watch && (found.is_some() || pending.kind == Kind::Exists) {
                    let kind = match found {
                        Some(_) => WatchKind::Data,
                        None => WatchKind::Creation,
                    };
                    self.leave_watch(c, pending.path, kind, header.zxid);
                }
            }
            Kind::GetChildren => self.check_children_read(c, &pending, header.zxid, err, body)?,
            _ => {}
        }
        Ok(())
    }

    /// A create answers with the path it made: the one asked for, or for a sequential node
    /// that path and ten digits, a child (of the root or a container) that entry `zxid` added.
    fn check_created_path(
        &mut self,
        c: usize,
        pending: &Pending,
        sequential: bool,
        zxid: i64,
        body: &[u8],
    ) -> Result<String, String> {
        let client_id = self.zk().clients[c].id;
        if zxid <= 0 {
            return Err(format!(
                "create: client {client_id}'s create of {} succeeded at zxid {zxid}",
                pending.path
            ));
        }
        let path = CreateResponse::read_from(&mut Reader::new(body))
            .map_err(|e| format!("create reply: {e}"))?
            .path;
        let suffix = path.strip_prefix(pending.path.as_str()).unwrap_or("-");
        let well_named = match sequential {
            false => suffix.is_empty(),
            true => suffix.len() == 10 && suffix.bytes().all(|b| b.is_ascii_digit()),
        };
        let (parent, name) = match path.rsplit_once('/') {
            Some(("", name)) => ("/", name),
            Some((parent, name)) => (parent, name),
            None => ("", ""),
        };
        let checker = &self.zk().checker;
        let tracked = checker.parents().any(|p| p == parent);
        let has = |zxid: i64| {
            checker
                .children_at(parent, zxid)
                .1
                .iter()
                .any(|n| n == name)
        };
        let added_here = tracked && !has(zxid - 1) && has(zxid);
        if !well_named || !added_here {
            return Err(format!(
                "create: client {client_id} asked for {} (sequential: {sequential}) and was \
                 answered {path} at zxid {zxid}, which the common sequence's entry there did \
                 not create",
                pending.path
            ));
        }
        Ok(path)
    }

    /// The client's session ended with the reply to its close, and the connection with it.
    fn session_closed(&mut self, c: usize, zxid: i64) {
        let client = &self.zk().clients[c];
        let (client_id, conn) = (client.id, client.conn());
        let session_id = client.session.as_ref().map_or(0, |s| s.id);
        self.log(None, || {
            format!("client {client_id}: session {session_id:#x} closed at {zxid}")
        });
        self.session_ended(c, false);
        self.zk().clients[c].link = Link::None;
        if let Some(conn) = conn {
            self.send_to_server(conn, None);
        }
    }

    /// A write on a read-only session's connection is refused with NOTREADONLY, and never
    /// ordered (checked at the end); nothing else is refused so. Only the close of a local
    /// session succeeds there: it lives in that server's memory alone.
    fn read_only_write_answered(
        &mut self,
        c: usize,
        pending: &Pending,
        zxid: i64,
        err: i32,
    ) -> Result<(), String> {
        let client = &mut self.zk().clients[c];
        let local = client.session.as_ref().is_some_and(|s| s.local);
        let local_close = pending.kind == Kind::Close && local && client.read_only_link;
        let expected = if local_close {
            0
        } else {
            ErrorCode::NotReadOnly.code()
        };
        if !(err == expected && client.read_only_link && pending.kind.is_write()) {
            return Err(format!(
                "read-only: client {} got error {err} for {:?} xid {} on a{} connection",
                client.id,
                pending.kind,
                pending.xid,
                if client.read_only_link {
                    " read-only"
                } else {
                    " read-write"
                }
            ));
        }
        if local_close {
            self.session_closed(c, zxid);
            return Ok(());
        }
        let session_id = client.session.as_ref().map(|s| s.id).expect("connected");
        match pending.kind {
            Kind::Sync => {
                if let Some(next) = client.pending.front_mut() {
                    next.watermark = None;
                }
            }
            // A logged session can only be closed through the log, from another server.
            Kind::Close => self.client_disconnect(c, true),
            _ => {}
        }
        self.zk().checker.refused.insert((session_id, pending.xid));
        Ok(())
    }

    /// A getChildren of the root answers with its children at the reply's zxid.
    fn check_children_read(
        &mut self,
        c: usize,
        pending: &Pending,
        zxid: i64,
        err: i32,
        body: &[u8],
    ) -> Result<(), String> {
        if err == ErrorCode::ThrottledOp.code() {
            return Ok(());
        }
        let client_id = self.zk().clients[c].id;
        if err != 0 || zxid < 0 {
            return Err(format!(
                "client {client_id}: getChildren xid {} answered at zxid {zxid} with error {err}",
                pending.xid
            ));
        }
        let mut children = GetChildrenResponse::read_from(&mut Reader::new(body))
            .map_err(|e| format!("getChildren reply: {e}"))?
            .children;
        children.sort();
        let zk = self.zk();
        let (_, expected) = zk.checker.children_at("/", zxid);
        if children != expected {
            return Err(format!(
                "read: client {client_id} listed the root's children at zxid {zxid} as \
                 {children:?}, but the common state there has {expected:?}"
            ));
        }
        zk.checker.reads_checked += 1;
        if pending.watch {
            self.leave_watch(c, pending.path.clone(), WatchKind::Children, zxid);
        }
        Ok(())
    }

    /// A read answered at `zxid` left a watch (the first one on the path stays: a later one
    /// is the same watch on the server, as nothing changed in between or it would have fired).
    fn leave_watch(&mut self, c: usize, path: String, kind: WatchKind, zxid: i64) {
        let zk = self.zk();
        let watch = Watch {
            zxid,
            kind,
            reset: false,
        };
        zk.clients[c].watches.entry(path).or_insert(watch);
        zk.checker.watches_set += 1;
    }

    /// The first change a watch left at `zxid` fires on, with the event it names (children
    /// watches only on the root).
    fn first_change(&self, path: &str, kind: WatchKind, zxid: i64) -> Option<(i64, EventType)> {
        let checker = &self.zk.as_ref().unwrap().checker;
        if kind == WatchKind::Children {
            let position = checker.first_children_change_after(zxid)?;
            return Some((position, EventType::NodeChildrenChanged));
        }
        let (position, before, after) = checker.first_change_after(path, zxid)?;
        let event = match (before, after) {
            (None, Some(_)) => EventType::NodeCreated,
            (Some(_), None) => EventType::NodeDeleted,
            _ => EventType::NodeDataChanged,
        };
        Some((position, event))
    }

    /// A watch fired: the client held one on the path, the path changed after the watch was
    /// left, and the event names that first change (a watch set again after a reconnect may
    /// name a later one, as the server judges it by the node's state).
    fn client_notification(&mut self, c: usize, body: &[u8]) -> Result<(), String> {
        let event = WatcherEvent::read_from(&mut Reader::new(body))
            .map_err(|e| format!("a notification does not decode: {e}"))?;
        if self.persistent_event(c, &event)? {
            return Ok(());
        }
        let client = &mut self.zk().clients[c];
        let client_id = client.id;
        let Some(watch) = client.watches.remove(&event.path) else {
            return Err(format!(
                "watches: client {client_id} got {event:?} without a watch on the path"
            ));
        };
        let Some((position, expected)) = self.first_change(&event.path, watch.kind, watch.zxid)
        else {
            return Err(format!(
                "watches: client {client_id} got {event:?} for a watch left at zxid {}, but the \
                 node has not changed since",
                watch.zxid
            ));
        };
        let sync_connected = event.state == zoolog_proto::codes::KeeperState::SyncConnected.code();
        if !sync_connected || (!watch.reset && event.event_type != expected.code()) {
            return Err(format!(
                "watches: client {client_id} got {event:?} for a watch left at zxid {}, whose \
                 first change is {expected:?} at zxid {position}",
                watch.zxid
            ));
        }
        self.zk().checker.watches_fired += 1;
        Ok(())
    }

    /// A watch fires before any reply that shows a state after the change it watches: such a
    /// reply with the watch still held means the event was lost.
    fn check_no_watch_missed(&mut self, c: usize, xid: i32, zxid: i64) -> Result<(), String> {
        let client = &self.zk.as_ref().unwrap().clients[c];
        for (path, watch) in &client.watches {
            let Some((position, event)) = self.first_change(path, watch.kind, watch.zxid) else {
                continue;
            };
            if zxid >= position {
                return Err(format!(
                    "watches: client {} got the reply to xid {xid} at zxid {zxid}, but no \
                     {event:?} for its watch on {path} left at zxid {} (reset: {}), which the \
                     change at zxid {position} fired",
                    client.id, watch.zxid, watch.reset
                ));
            }
        }
        self.check_no_persistent_event_missed(c, xid, zxid)
    }

    /// The server answered SetWatches at `zxid`, after sending the events it owed: by the
    /// node's state there, a data watch fires if the node is gone or was modified after the
    /// relative zxid, a creation watch if the node exists, a children watch if the children
    /// changed after the relative zxid. The others stay, as left at `zxid`.
    fn watches_set_again(&mut self, c: usize, zxid: i64) -> Result<(), String> {
        let zk = self.zk();
        let client = &mut zk.clients[c];
        let Some(relative_zxid) = client.setting_watches.take() else {
            return Err(format!(
                "client {}: a SetWatches reply without a SetWatches",
                client.id
            ));
        };
        if zxid < client.last_zxid {
            return Err(format!(
                "FIFO: client {} got the SetWatches reply at zxid {zxid} after having seen zxid {}",
                client.id, client.last_zxid
            ));
        }
        client.last_zxid = zxid;
        if let Some(watch) = &mut client.persistent {
            watch.set_again_at(zxid);
        }
        for (path, watch) in client.watches.iter_mut() {
            let owed = match watch.kind {
                WatchKind::Children => zk.checker.children_at("/", zxid).0 > relative_zxid,
                kind => match zk.checker.state_at(path, zxid)? {
                    None => kind == WatchKind::Data,
                    Some(state) => kind == WatchKind::Creation || state.mzxid > relative_zxid,
                },
            };
            if owed {
                let there = match watch.kind {
                    WatchKind::Children => format!("{:?}", zk.checker.children_at("/", zxid)),
                    _ => format!("{:?}", zk.checker.state_at(path, zxid)),
                };
                return Err(format!(
                    "watches: client {}: SetWatches (relative zxid {relative_zxid}) answered at \
                     zxid {zxid} without the event owed to its {:?} watch on {path}, the node \
                     there being {there}",
                    client.id, watch.kind,
                ));
            }
            watch.zxid = zxid;
        }
        Ok(())
    }

    /// Core mode: everyone idle, nothing queued anywhere.
    pub(super) fn zk_quiet(&self) -> bool {
        let zk = self.zk.as_ref().unwrap();
        zk.clients.iter().all(|c| c.idle())
            && self.due_for_reaping().next().is_none()
            && self.abandoned_sessions_ended()
            && self
                .nodes
                .iter()
                .all(|n| n.front.as_ref().is_some_and(|f| f.layer.queued() == 0))
    }

    pub(super) fn zk_finish(&self) -> Result<(), String> {
        let zk = self.zk.as_ref().unwrap();
        let views: Vec<(u64, zoolog_server::four_letter::View<'_>)> = self
            .nodes
            .iter()
            .filter_map(|n| Some((n.id, n.front.as_ref()?.core.view())))
            .collect();
        let trees: Vec<(u64, &DataTree)> = views.iter().map(|(id, v)| (*id, v.tree)).collect();
        zk.checker.finish(&trees)
    }

    pub(super) fn zk_describe(&self, out: &mut String) {
        use std::fmt::Write as _;
        let Some(zk) = &self.zk else { return };
        let due: Vec<_> = self.due_for_reaping().collect();
        if !due.is_empty() {
            writeln!(out, "  due for the reaper: {due:?}").unwrap();
        }
        let unended = self.abandoned_sessions_unended();
        if !unended.is_empty() {
            let ids: Vec<String> = unended.iter().map(|id| format!("{id:#x}")).collect();
            writeln!(
                out,
                "  left by killed clients, not ended: {}",
                ids.join(", ")
            )
            .unwrap();
        }
        for client in &zk.clients {
            writeln!(
                out,
                "  zk client {}: {:?}, session {:?}, last zxid {}, pending {:?}",
                client.id,
                client.link,
                client.session.as_ref().map(|s| format!("{:#x}", s.id)),
                client.last_zxid,
                client
                    .pending
                    .iter()
                    .map(|p| (p.xid, p.kind, p.path.as_str()))
                    .collect::<Vec<_>>()
            )
            .unwrap();
        }
        for node in &self.nodes {
            if let Some(front) = &node.front {
                writeln!(
                    out,
                    "  server {} front: applied {}, queued {}",
                    node.id,
                    front.core.view().tree.last_applied_zxid(),
                    front.layer.queued()
                )
                .unwrap();
            }
        }
    }
}

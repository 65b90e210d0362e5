//! The ensemble ordering layer: drives the Zab state machine (`zoolog-zab`) with real TCP
//! connections between servers and a [`ReplicaLog`] on disk.
//!
//! One task owns the state machine and carries out its actions in order: messages go to
//! per-peer writer tasks, log appends to the replica's writer thread (their completions come
//! back as `Logged` inputs), and committed entries, installed snapshots and role changes go to
//! the front end through one bounded channel of [`Delivery`], in the order they happened.
//! A leader whose followers are a quorum by themselves delays its own log's fdatasyncs (see
//! [`OwnSync`]): the followers' copies make the commits.
//!
//! Peers talk over the quorum port of their `server.N` line only: every server dials every
//! other one and sends on that connection, and receives on the connections others dialled.
//! The election port is accepted in the configuration but not used, since votes are just
//! more messages of the same protocol. A message travels as pieces, each behind its length
//! and the length's checksum, and ends with its own checksum (see `write_message`); its large
//! payloads are written from their own buffers, shared by every peer's copy. A connection
//! opens with a hello naming the sender. Messages a full queue or a broken connection loses
//! are fine: the protocol retransmits. So a message that arrives corrupted is one more loss:
//! its connection is dropped, and the message is never acted on (an entry the log holds must
//! be the one proposed, since every member applies it). A forwarded command that this server
//! could not apply is refused the same way, before it can enter the log through this server
//! as leader (see `check_entry`). A connection the network lost without a word is given up
//! too, rather than left to TCP's ever slower retransmissions: a dialled one once what was
//! written on it goes unacknowledged too long (see `DialSettings`), a received one once its
//! peer dials again. One the network gives back sooner passes again within a second, since
//! TCP resends on a dialled connection at least that often (see `bound_resend_gap`).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Sleep;
use zoolog_log::{
    AppendError, Durable, LogError, LogStats, OrderingLayer, Position, QueuedEntry, ReplicaEntry,
    ReplicaEpochs, ReplicaLog, ReplicaLogConfig, ReplicaRecovered, SnapshotSink, Summary,
};
use zoolog_zab::{
    Action, AppendCapacity, Config as ZabConfig, Entry, Epochs, Input, Lane, LearnerStatus,
    LearnerSyncs, MemberRole, Message, OwnSync, PerLane, ServerId, ServingRole, Status, Zab,
    COMMIT_STALL_US,
};

use crate::config::{EnsembleConfig, ServerConfig};
use crate::core::Role;
use crate::shell::{decode_snapshot, tree_config, DecodedSnapshot};
use crate::stats::{elapsed_us, BufferSizes, LogOpened};

/// What the ordering layer tells the front end, in order.
pub enum Delivery {
    Committed(Vec<(Position, Bytes)>),
    /// Replace the state with this snapshot (the tree's bytes, without the epoch header).
    InstallSnapshot {
        position: Position,
        payload: Bytes,
    },
    Role(Role),
}

/// A message goes to a peer in pieces of at most this many bytes, each behind a header (see
/// [`write_message`]). Only a snapshot can need more than one piece.
const PEER_PIECE_BYTES_MAX: usize = 1 << 30;
/// Set in a length word whose piece the next one continues.
const PIECE_CONTINUES: u32 = 1 << 31;
/// A piece's length word and its checksum (see [`piece_header`]).
const PIECE_HEADER_BYTES: usize = 8;
/// One message from a peer, all its pieces together. A snapshot travels in one `NewLeader`, so
/// this bounds the snapshot an ensemble can move to a learner; the tree it encodes must fit
/// in each member's memory anyway.
const PEER_MESSAGE_BYTES_MAX: usize = 32 << 30;
/// Messages queued to one peer; beyond it messages are dropped (and later retransmitted).
const PEER_QUEUE_MESSAGES_MAX: usize = 8192;
/// Messages from all peers waiting for the protocol task; readers wait when it is full.
const INBOX_MESSAGES_MAX: usize = 8192;
/// Commands from the front end waiting to be ordered.
const APPEND_QUEUE_ENTRIES_MAX: usize = 16_384;
/// Urgent commands (sessions' liveness reports, one per half tick at most) waiting to be
/// ordered ahead of the others.
const URGENT_QUEUE_ENTRIES_MAX: usize = 64;
/// Deliveries the front end has not taken yet; the protocol task waits when it is full.
const DELIVERIES_MAX: usize = 1024;
const TICK_MS: u64 = 5;
/// A stall no input notices waits for tokio's timer, which counts whole milliseconds: on this
/// project's host stalls ([`COMMIT_STALL_US`]) were acted on 1.64 ms (median) after the commit
/// began to wait, and with a timer precise to microseconds (a timerfd) 1.04 ms, which moved no
/// create percentile (bench/README, thirtieth session).
const COMMIT_STALL: Duration = Duration::from_micros(COMMIT_STALL_US);
/// The most entries the protocol's in-memory log makes room for at start
/// ([`ZabConfig::history_entries_reserved`], snapCount up to this): 56 MiB of address space;
/// a larger snapCount grows it beyond.
const HISTORY_ENTRIES_RESERVED_MAX: usize = 1 << 20;
const HELLO_MAGIC: &[u8; 4] = b"ZLZB";
/// 2: `Propose` says which forwards the leader has received. 3: log entries may report
/// sessions with their idle times (the tree's Touch entries of tag 8), which a member of
/// version 2 cannot apply. 4: a `Forward` names its lane, and a `Propose` says how far the
/// leader has each lane's forwards. 5: log entries may reap a node only if unchanged since a
/// given zxid (the tree's Reap entries of tag 9), which a member of version 4 cannot apply. A
/// peer of another version is refused at its hello rather than misread, or stopped by the
/// first entry it cannot apply. 6: hellos, the pieces' lengths and messages carry CRC-32Cs
/// (see [`write_message`]). 7: a `NewLeader` carries the leader's last position.
const HELLO_VERSION: u8 = 7;
const SNAPSHOT_EPOCH_BYTES: usize = 8;

/// The front end's handle: appends commands, and reports snapshots it saved.
pub struct Ensemble {
    appends: mpsc::Sender<QueuedEntry>,
    urgent_appends: mpsc::Sender<QueuedEntry>,
    control: mpsc::Sender<Control>,
    committed: Arc<AtomicU64>,
    replica: Arc<ReplicaLog>,
    entry_bytes_max: usize,
    tasks: Vec<JoinHandle<()>>,
    board: Arc<Mutex<OperatorBoard>>,
    traffic: Arc<PeerTraffics>,
}

/// What the protocol task publishes for the operator views, which read it synchronously.
#[derive(Default)]
struct OperatorBoard {
    /// Refreshed on every tick and status change; empty unless leading.
    learners: Vec<LearnerStatus>,
    /// The size in bytes of each of this leadership's proposals (a serialized command, as
    /// ZooKeeper measures its serialized transaction).
    proposal_sizes: BufferSizes,
    counters: QuorumCounters,
    /// When this member last went looking; None while it serves.
    looking_since: Option<Instant>,
    /// When this member's leadership began; None unless it leads.
    leading_since: Option<Instant>,
}

impl OperatorBoard {
    fn status_changed(&mut self, status: Status, now: Instant) {
        match status {
            Status::Looking => {
                self.counters.lookings += 1;
                self.looking_since = Some(now);
                self.leading_since = None;
            }
            Status::Serving { role, .. } => {
                let looking_since = self.looking_since.take();
                // An observer takes no part in elections, and ZooKeeper's times none for it.
                if let (Some(since), false) = (looking_since, role == ServingRole::Observer) {
                    let looked_us = now.duration_since(since).as_micros();
                    self.counters
                        .election_time_us
                        .record(u64::try_from(looked_us).unwrap_or(u64::MAX));
                }
                self.leading_since = (role == ServingRole::Leader).then_some(now);
            }
        }
    }
}

/// ZooKeeper's counters of a member's elections, of the entries it proposed and committed as
/// leader, of the learner syncs it started and of the entries it received and committed as
/// learner (its ServerMetrics' looking_count, election_time, proposal_count, commit_count,
/// diff_count, snap_count, learner_proposal_received_count and
/// learner_commit_received_count), for `mntr`; `srst` starts them over, as ZooKeeper's does.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuorumCounters {
    /// Times this member went looking for a leader, its start included.
    pub lookings: u64,
    /// From going looking to serving, per election of a voting member. ZooKeeper stops its
    /// clock when the vote ends; this one also covers the new leader's discovery and the
    /// synchronization, after which the member serves.
    pub election_time_us: Summary,
    pub proposed_entries: u64,
    pub committed_entries: u64,
    pub learner_syncs: LearnerSyncs,
    /// Entries this member logged as learner: ZooKeeper counts the proposals a follower
    /// receives, zoolog the entries, whether they came in a proposal or a sync.
    pub learned_entries: u64,
    pub learned_commits: u64,
    /// Hellos and messages from peers refused because they did not match their checksums or
    /// did not decode: corruption on the way (zoolog's own; ZooKeeper's peers have no
    /// checksums). A hello refused for its magic or version is not counted.
    pub peer_messages_refused: u64,
}

/// What the tasks that carry one peer's traffic share: its counts (ZooKeeper's per-learner
/// connection statistics), and word that the peer has dialled in.
#[derive(Default)]
struct PeerTraffic {
    frames_sent: AtomicU64,
    frames_received: AtomicU64,
    queued_frames: AtomicU64,
    queued_bytes: AtomicU64,
    /// The connection the peer last dialled to this server (the one its messages arrive
    /// on), while it lasts.
    inbound: Mutex<Option<Inbound>>,
    /// Connections the peer has dialled to this server, to tell them apart.
    inbound_accepted: AtomicU64,
    /// The serial of the connection the peer dialled last. The reader of an earlier one
    /// stops: the peer dialled again because it gave that connection up, which a network
    /// that lost the connection may never tell this end.
    newest_inbound: watch::Sender<u64>,
    /// Woken when the peer dials this server: it is up, so a dial loop backing off from it
    /// tries again at once. Without this a restarted member waited up to the longest
    /// back-off for the others' messages to reach it.
    dialled_in: tokio::sync::Notify,
    /// The protocol version of the peer's latest hello (0 before the first): a refusal is
    /// logged as a warning only when the version changed.
    hello_version: std::sync::atomic::AtomicU8,
}

impl PeerTraffic {
    fn queued(&self, frame_bytes: usize) {
        self.queued_frames.fetch_add(1, Ordering::Relaxed);
        self.queued_bytes
            .fetch_add(frame_bytes as u64, Ordering::Relaxed);
    }

    fn dequeued(&self, frame_bytes: usize) {
        self.queued_frames.fetch_sub(1, Ordering::Relaxed);
        self.queued_bytes
            .fetch_sub(frame_bytes as u64, Ordering::Relaxed);
    }

    fn inbound(&self) -> MutexGuard<'_, Option<Inbound>> {
        self.inbound
            .lock()
            .expect("the inbound connection's holders never panic")
    }

    /// Takes the connection from `address` as the one the peer now sends on; returns its
    /// serial for [`PeerTraffic::end_inbound`].
    fn accept_inbound(&self, address: SocketAddr) -> u64 {
        let serial = self.inbound_accepted.fetch_add(1, Ordering::Relaxed);
        *self.inbound() = Some(Inbound {
            address,
            accepted_wall_ms: wall_clock_ms(),
            serial,
        });
        self.newest_inbound.send_replace(serial);
        serial
    }

    /// The inbound connection `serial` ended: forgets it if it is still the peer's latest,
    /// and says whether it was. One the peer has since replaced (a re-dial after a write
    /// failed, whose old connection's end arrives late) says nothing about the peer, which
    /// still talks on the newer one.
    fn end_inbound(&self, serial: u64) -> bool {
        let mut inbound = self.inbound();
        let latest = inbound.is_some_and(|current| current.serial == serial);
        if latest {
            *inbound = None;
        }
        latest
    }
}

/// A connection a peer dialled to this server.
#[derive(Clone, Copy, Debug)]
struct Inbound {
    address: SocketAddr,
    accepted_wall_ms: i64,
    serial: u64,
}

/// Every other member's traffic, by id.
type PeerTraffics = BTreeMap<ServerId, Arc<PeerTraffic>>;

/// A leader's learners and proposals, for `mntr`, `srvr` and the AdminServer's `observers`.
#[derive(Debug, Clone, Default)]
pub struct LeaderReport {
    pub learners: Vec<LearnerReport>,
    pub proposal_sizes: BufferSizes,
    /// Since this leadership began (ZooKeeper's `leader_uptime`); 0 unless leading.
    pub leading_for_ms: u64,
}

#[derive(Debug, Clone)]
pub struct LearnerReport {
    pub status: LearnerStatus,
    /// The learner's end of the connection it dialled to this server (None before one).
    pub remote_address: Option<SocketAddr>,
    pub established_wall_ms: Option<i64>,
    pub frames_sent: u64,
    pub frames_received: u64,
    pub queued_frames: u64,
    pub queued_bytes: u64,
}

enum Control {
    /// The epoch of the entry at `position`, for a snapshot taken there.
    EpochAt {
        position: Position,
        reply: oneshot::Sender<Option<u64>>,
    },
    SnapshotSaved {
        position: Position,
    },
    /// The newest snapshot, or none when it could not be read.
    SnapshotLoaded(Option<(Position, Bytes)>),
}

enum PeerEvent {
    Message { from: ServerId, message: Message },
    Disconnected { peer: ServerId },
}

/// What the front end starts from.
pub struct Started {
    pub ensemble: Arc<Ensemble>,
    /// The newest snapshot (its position and tree), if any.
    pub snapshot: Option<(Position, DecodedSnapshot)>,
    pub deliveries: mpsc::Receiver<Delivery>,
    pub opened: LogOpened,
}

impl Ensemble {
    /// Recovers the replica from disk, binds the quorum port and starts the protocol.
    pub async fn start(config: &ServerConfig) -> Result<Started, EnsembleError> {
        let ensemble = config
            .ensemble
            .as_ref()
            .expect("started only for an ensemble");
        let me = u64::from(config.server_id);
        let mut log_config = ReplicaLogConfig::new(
            config.data_log_dir.join("ensemble"),
            config.data_dir.join("ensemble"),
        );
        log_config.limits = config.wal_limits();
        let entry_bytes_max = log_config.limits.entry_bytes_max;
        let opening = Instant::now();
        let tree_config = tree_config(config);
        let (replica, recovered, durable) = ReplicaLog::open_decoding(log_config, |payload| {
            let payload_bytes = payload.left_bytes();
            let mut epoch = [0u8; SNAPSHOT_EPOCH_BYTES];
            std::io::Read::read_exact(payload, &mut epoch)
                .map_err(|_| format!("{payload_bytes} bytes are too few to hold its epoch"))?;
            let snapshot = decode_snapshot(payload, tree_config.clone())?;
            Ok((u64::from_be_bytes(epoch), snapshot))
        })?;
        let opened = LogOpened {
            took_us: elapsed_us(opening),
            read_times: recovered.read_times,
            entries: recovered.entries.len() as u64,
        };
        let replica = Arc::new(replica);
        let (recovered, snapshot) = split_recovered(recovered);

        let own = &ensemble.members[&me];
        let bind: SocketAddr = resolve(&own.host, own.quorum_port).await?;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|source| EnsembleError::Listen {
                address: bind,
                source,
            })?;
        tracing::info!(address = %bind, id = me, "listening for peers");

        let zab_config = zab_config(config, ensemble, me);
        let dial_settings = DialSettings::for_protocol(&zab_config);
        let (zab, first_actions) = Zab::new(zab_config, recovered, 0);
        let (appends_tx, appends_rx) = mpsc::channel(APPEND_QUEUE_ENTRIES_MAX);
        let (urgent_tx, urgent_rx) = mpsc::channel(URGENT_QUEUE_ENTRIES_MAX);
        let (control_tx, control_rx) = mpsc::channel(64);
        let (inbox_tx, inbox_rx) = mpsc::channel(INBOX_MESSAGES_MAX);
        let (deliveries_tx, deliveries_rx) = mpsc::channel(DELIVERIES_MAX);
        let committed = Arc::new(AtomicU64::new(zab.delivered_position()));

        let mut tasks = Vec::new();
        let mut outboxes = BTreeMap::new();
        let mut traffic = PeerTraffics::new();
        for (id, peer) in &ensemble.members {
            if *id == me {
                continue;
            }
            let (tx, rx) = mpsc::channel(PEER_QUEUE_MESSAGES_MAX);
            let peer_traffic = Arc::new(PeerTraffic::default());
            outboxes.insert(*id, (tx, peer_traffic.clone()));
            traffic.insert(*id, peer_traffic.clone());
            let host = peer.host.clone();
            let port = peer.quorum_port;
            tasks.push(tokio::spawn(dial_loop(
                me,
                *id,
                host,
                port,
                rx,
                peer_traffic,
                dial_settings,
            )));
        }
        let traffic = Arc::new(traffic);
        let members: Vec<ServerId> = ensemble.members.keys().copied().collect();
        let board = Arc::new(Mutex::new(OperatorBoard::default()));
        board
            .lock()
            .expect("the board's holders never panic")
            .status_changed(zab.status(), Instant::now());
        tasks.push(tokio::spawn(accept_loop(
            listener,
            members,
            traffic.clone(),
            inbox_tx,
            board.clone(),
        )));

        let driver = Driver {
            zab,
            replica: replica.clone(),
            outboxes,
            deliveries: deliveries_tx,
            control: control_tx.clone(),
            committed: committed.clone(),
            clock: Instant::now(),
            board: board.clone(),
            learner_syncs_published: LearnerSyncs::default(),
            held_appends: VecDeque::new(),
            epoch_queries: Vec::new(),
        };
        let appends = AppendLanes {
            urgent: urgent_rx,
            commands: appends_rx,
        };
        tasks.push(tokio::spawn(driver.run(
            first_actions,
            appends,
            inbox_rx,
            control_rx,
            durable,
        )));
        let ensemble = Arc::new(Ensemble {
            appends: appends_tx,
            urgent_appends: urgent_tx,
            control: control_tx,
            committed,
            replica,
            entry_bytes_max,
            tasks,
            board,
            traffic,
        });
        Ok(Started {
            ensemble,
            snapshot,
            deliveries: deliveries_rx,
            opened,
        })
    }

    /// What `srst` starts over: the log's sync times and the quorum counters.
    pub fn reset_statistics(&self) {
        self.replica.reset_fsync_window();
        self.board
            .lock()
            .expect("the board's holders never panic")
            .counters = QuorumCounters::default();
    }

    pub fn stats(&self) -> LogStats {
        self.replica.stats()
    }

    pub fn snapshot_dir(&self) -> &std::path::Path {
        self.replica.snapshot_store().dir()
    }

    /// Stores the state exact at `position` (a delivered position), which `write_state`
    /// writes, behind its epoch, then lets the protocol forget the entries it covers; returns
    /// the stored length. Blocking: call it from a blocking thread.
    pub fn save_snapshot(
        &self,
        position: Position,
        write_state: impl FnOnce(&mut SnapshotSink<'_>) -> std::io::Result<()>,
    ) -> Result<u64, LogError> {
        let (reply, answer) = oneshot::channel();
        let known = self
            .control
            .blocking_send(Control::EpochAt { position, reply })
            .ok()
            .and_then(|()| answer.blocking_recv().ok())
            .ok_or_else(|| {
                LogError::WriterFailed("the ensemble's protocol task has stopped".into())
            })?;
        let epoch = known.ok_or_else(|| {
            LogError::WriterFailed(format!(
                "the protocol no longer knows the epoch of position {position}"
            ))
        })?;
        let stored_bytes = self.replica.save_snapshot_streamed(position, |sink| {
            sink.write(&epoch.to_be_bytes())?;
            write_state(sink)
        })?;
        let _ = self
            .control
            .blocking_send(Control::SnapshotSaved { position });
        Ok(stored_bytes)
    }

    pub fn purge(&self) -> Result<(), LogError> {
        self.replica.purge()
    }

    /// What this server knows as a leader: its learners (none unless leading) and the sizes
    /// of its proposals.
    pub fn leader_report(&self) -> LeaderReport {
        let board = self.board.lock().expect("the board's holders never panic");
        let learners = board
            .learners
            .iter()
            .map(|status| self.learner_report(*status))
            .collect();
        let leading_for = board.leading_since.map(|since| since.elapsed());
        LeaderReport {
            learners,
            proposal_sizes: board.proposal_sizes,
            leading_for_ms: leading_for.map_or(0, |elapsed| elapsed.as_millis() as u64),
        }
    }

    pub fn quorum_counters(&self) -> QuorumCounters {
        self.board
            .lock()
            .expect("the board's holders never panic")
            .counters
    }

    fn learner_report(&self, status: LearnerStatus) -> LearnerReport {
        let traffic = &self.traffic[&status.id];
        let inbound = *traffic.inbound();
        LearnerReport {
            status,
            remote_address: inbound.map(|inbound| inbound.address),
            established_wall_ms: inbound.map(|inbound| inbound.accepted_wall_ms),
            frames_sent: traffic.frames_sent.load(Ordering::Relaxed),
            frames_received: traffic.frames_received.load(Ordering::Relaxed),
            queued_frames: traffic.queued_frames.load(Ordering::Relaxed),
            queued_bytes: traffic.queued_bytes.load(Ordering::Relaxed),
        }
    }

    pub fn close(&self) -> Result<(), LogError> {
        for task in &self.tasks {
            task.abort();
        }
        self.replica.close()
    }
}

impl Ensemble {
    fn send_append(
        &self,
        lane: &mpsc::Sender<QueuedEntry>,
        entry: Bytes,
        stint: u64,
    ) -> Result<(), AppendError> {
        if entry.len() > self.entry_bytes_max {
            return Err(AppendError::TooLarge {
                entry_bytes: entry.len(),
                entry_bytes_max: self.entry_bytes_max,
            });
        }
        lane.try_send(QueuedEntry { stint, entry })
            .map_err(|error| match error {
                mpsc::error::TrySendError::Full(_) => AppendError::Full,
                mpsc::error::TrySendError::Closed(_) => AppendError::Closed,
            })
    }
}

impl OrderingLayer for Ensemble {
    fn append(&self, entry: Bytes, stint: u64) -> Result<(), AppendError> {
        self.send_append(&self.appends, entry, stint)
    }

    fn append_urgent(&self, entry: Bytes, stint: u64) -> Result<(), AppendError> {
        self.send_append(&self.urgent_appends, entry, stint)
    }

    fn committed_position(&self) -> Position {
        self.committed.load(Ordering::Acquire)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EnsembleError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("cannot listen for peers on {address}: {source}")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
}

fn zab_config(config: &ServerConfig, ensemble: &EnsembleConfig, me: u64) -> ZabConfig {
    let members = ensemble
        .members
        .iter()
        .map(|(id, peer)| {
            let role = if peer.observer {
                MemberRole::Observer
            } else {
                MemberRole::Participant
            };
            (*id, role)
        })
        .collect();
    let tick_ms = config.tick_ms.max(1);
    let mut zab = ZabConfig::new(me, members, tick_ms);
    zab.leader_timeout_ms = u64::from(ensemble.sync_limit) * tick_ms;
    zab.sync_timeout_ms = u64::from(ensemble.init_limit) * tick_ms;
    zab.heartbeat_ms = (tick_ms / 2).clamp(1, 500);
    zab.election_retry_ms = 50;
    zab.election_finalize_ms = 20;
    // What is in flight waits in a log writer's queue (see `Driver::held_appends`).
    zab.in_flight_bytes_max = config.wal_limits().queue_bytes_max as u64;
    zab.history_entries_reserved = usize::try_from(config.entries_per_snapshot)
        .map_or(HISTORY_ENTRIES_RESERVED_MAX, |entries| {
            entries.min(HISTORY_ENTRIES_RESERVED_MAX)
        });
    zab.incarnation = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64);
    zab
}

fn split_recovered(
    recovered: ReplicaRecovered<(u64, DecodedSnapshot)>,
) -> (zoolog_zab::Recovered, Option<(Position, DecodedSnapshot)>) {
    let (snapshot_position, snapshot_epoch, snapshot) = match recovered.snapshot {
        None => (0, 0, None),
        Some((position, (epoch, snapshot))) => (position, epoch, Some((position, snapshot))),
    };
    let zab = zoolog_zab::Recovered {
        epochs: Epochs {
            accepted: recovered.epochs.accepted,
            current: recovered.epochs.current,
        },
        snapshot_position,
        snapshot_epoch,
        entries: recovered
            .entries
            .into_iter()
            .map(|entry| Entry {
                position: entry.position,
                epoch: entry.epoch,
                payload: entry.payload,
            })
            .collect(),
    };
    (zab, snapshot)
}

async fn resolve(host: &str, port: u16) -> Result<SocketAddr, EnsembleError> {
    let mut addresses = tokio::net::lookup_host((host, port))
        .await
        .map_err(|error| EnsembleError::Resolve {
            host: host.to_owned(),
            reason: error.to_string(),
        })?;
    addresses.next().ok_or_else(|| EnsembleError::Resolve {
        host: host.to_owned(),
        reason: "no address".to_owned(),
    })
}

/// The front end's commands on their way to the protocol: urgent ones (liveness reports)
/// go ahead of every client command still waiting.
struct AppendLanes {
    urgent: mpsc::Receiver<QueuedEntry>,
    commands: mpsc::Receiver<QueuedEntry>,
}

impl AppendLanes {
    /// The next command of the `open` lanes, urgent ones first, and its lane; waits for one
    /// (none when no lane is open).
    async fn recv(&mut self, open: PerLane<bool>) -> Option<(Lane, QueuedEntry)> {
        tokio::select! {
            biased;
            Some(entry) = self.urgent.recv(), if open.urgent => Some((Lane::Urgent, entry)),
            Some(entry) = self.commands.recv(), if open.commands => Some((Lane::Commands, entry)),
            else => None,
        }
    }

    /// `first` (just received from `lane`) and what else waits in that lane, as far as the
    /// protocol has room, leaving out (dropping) the commands appended for another stint
    /// than `stint`, this server's (see [`QueuedEntry::next_of_stint`]).
    fn take(
        &mut self,
        lane: Lane,
        first: QueuedEntry,
        capacity: AppendCapacity,
        stint: u64,
    ) -> Vec<Bytes> {
        let waiting = match lane {
            Lane::Urgent => &mut self.urgent,
            Lane::Commands => &mut self.commands,
        };
        let mut first = Some(first);
        capacity.fill(|| {
            let queue = std::iter::from_fn(|| first.take().or_else(|| waiting.try_recv().ok()));
            QueuedEntry::next_of_stint(queue, stint)
        })
    }
}

/// Owns the state machine and carries out its actions.
struct Driver {
    zab: Zab,
    replica: Arc<ReplicaLog>,
    outboxes: BTreeMap<ServerId, (mpsc::Sender<Frame>, Arc<PeerTraffic>)>,
    deliveries: mpsc::Sender<Delivery>,
    control: mpsc::Sender<Control>,
    committed: Arc<AtomicU64>,
    clock: Instant,
    board: Arc<Mutex<OperatorBoard>>,
    /// The protocol's learner syncs as last added to the board's counters.
    learner_syncs_published: LearnerSyncs,
    /// Appends the replica's queue had no room for, in order, handed to it as its writer
    /// drains and before any other replica operation. Only a learner's sync brings more than
    /// the queue holds: the protocol keeps everything else in flight within it
    /// (`in_flight_bytes_max`). Waiting for room instead would stall this server's only
    /// thread, its heartbeats and its clients with it.
    held_appends: VecDeque<Vec<ReplicaEntry>>,
    /// Snapshots' questions for the epoch at a position the replica's queue has not reached
    /// yet: a learner delivers what its leader committed as soon as it holds it, which after
    /// a long sync may still be in `held_appends`, and a snapshot may only cover queued
    /// entries. Answered once the queue reaches them; at most one per snapshot under way.
    epoch_queries: Vec<(Position, oneshot::Sender<Option<u64>>)>,
}

impl Driver {
    async fn run(
        mut self,
        first_actions: Vec<Action>,
        mut appends: AppendLanes,
        mut inbox: mpsc::Receiver<PeerEvent>,
        mut control: mpsc::Receiver<Control>,
        durable: mpsc::Receiver<Durable>,
    ) {
        let mut durable = forward_completions(durable);
        if let Err(error) = self.carry_out(first_actions).await {
            tracing::error!(%error, "the replica log failed; this server stops ordering");
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_millis(TICK_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut own_sync = OwnSync::new(self.zab.committed_position(), self.clock_us());
        let stall = tokio::time::sleep(COMMIT_STALL);
        tokio::pin!(stall);
        loop {
            let serving = self.zab.status().is_serving();
            // While not serving, commands are taken only to be dropped.
            let open = PerLane {
                commands: !serving || !self.zab.append_capacity(Lane::Commands).is_none(),
                urgent: !serving || !self.zab.append_capacity(Lane::Urgent).is_none(),
            };
            let input = tokio::select! {
                Some(event) = inbox.recv() => match event {
                    PeerEvent::Message { from, message } => Input::Message { from, message },
                    PeerEvent::Disconnected { peer } => Input::PeerDisconnected { peer },
                },
                Ok(()) = durable.changed() => {
                    let Some(done) = *durable.borrow_and_update() else { continue };
                    Input::Logged { position: done.position, epoch: done.epoch }
                }
                Some((lane, first)) = appends.recv(open) => {
                    let Status::Serving { stint, .. } = self.zab.status() else {
                        // Its front end counts it as lost with the stint it was appended in.
                        continue;
                    };
                    let capacity = self.zab.append_capacity(lane);
                    let payloads = appends.take(lane, first, capacity, stint);
                    if payloads.is_empty() {
                        continue;
                    }
                    Input::Append { lane, payloads }
                }
                Some(command) = control.recv() => match command {
                    Control::EpochAt { position, reply } => {
                        self.epoch_queries.push((position, reply));
                        self.answer_epoch_queries();
                        continue;
                    }
                    Control::SnapshotSaved { position } => Input::SnapshotSaved { position },
                    Control::SnapshotLoaded(Some((position, payload))) => {
                        Input::SnapshotLoaded { position, payload }
                    }
                    Control::SnapshotLoaded(None) => Input::SnapshotUnavailable,
                },
                _ = tick.tick() => Input::Tick,
                // Inputs check for a stall as they come; this is for a leader without any.
                () = &mut stall, if own_sync.stall_deadline_us().is_some() => {
                    self.follow_own_sync(&mut own_sync, stall.as_mut());
                    continue;
                }
            };
            let ticked = matches!(input, Input::Tick);
            if ticked || matches!(input, Input::Logged { .. }) {
                // The writer has taken appends off its queue since.
                if let Err(error) = self.release_held_appends() {
                    tracing::error!(%error, "the replica log failed; this server stops ordering");
                    return;
                }
            }
            let now_ms = self.clock.elapsed().as_millis() as u64;
            let establishing = !self.zab.status().is_serving();
            if establishing {
                trace_establishing_input(&input);
            }
            let actions = self.zab.handle(input, now_ms);
            if establishing || !self.zab.status().is_serving() {
                trace_establishing_sends(&actions);
            }
            if let Err(error) = self.carry_out(actions).await {
                tracing::error!(%error, "the replica log failed; this server stops ordering");
                return;
            }
            if ticked {
                self.publish_learners();
            }
            self.answer_epoch_queries();
            self.follow_own_sync(&mut own_sync, stall.as_mut());
        }
    }

    /// Carries out what [`OwnSync`] makes of the protocol's state now, and keeps the stall
    /// timer on its deadline.
    fn follow_own_sync(&self, own_sync: &mut OwnSync, stall: Pin<&mut Sleep>) {
        let armed = own_sync.stall_deadline_us();
        let steps = own_sync.follow_zab(&self.zab, self.clock_us());
        if let Some(delay_us) = steps.delay_us {
            self.replica.set_sync_delay(Duration::from_micros(delay_us));
        }
        if steps.sync_now {
            self.replica.sync_now();
        }
        // Moved only when a stall can begin anew, not at every commit: an expired timer
        // that finds the commit moved re-arms itself here.
        match own_sync.stall_deadline_us() {
            Some(deadline_us) if armed.is_none() || stall.is_elapsed() => {
                let deadline = self.clock + Duration::from_micros(deadline_us);
                stall.reset(deadline.into());
            }
            _ => {}
        }
    }

    /// Microseconds since this driver started: the clock of [`OwnSync`].
    fn clock_us(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Answers the epoch queries whose position the replica's queue has reached.
    fn answer_epoch_queries(&mut self) {
        if self.epoch_queries.is_empty() {
            return;
        }
        let queued = self.replica.last_position();
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.epoch_queries)
            .into_iter()
            .partition(|(position, _)| *position <= queued);
        self.epoch_queries = waiting;
        for (position, reply) in due {
            let _ = reply.send(self.zab.epoch_at(position));
        }
    }

    fn board(&self) -> std::sync::MutexGuard<'_, OperatorBoard> {
        self.board.lock().expect("the board's holders never panic")
    }

    /// Copies the learners into the board, reusing its vector (no allocation per tick), and
    /// adds the learner syncs started since the last time to its counters.
    fn publish_learners(&mut self) {
        let syncs = self.zab.learner_syncs();
        let published = std::mem::replace(&mut self.learner_syncs_published, syncs);
        let mut board = self.board();
        board.learners.clear();
        board.learners.extend(self.zab.learners());
        let counted = &mut board.counters.learner_syncs;
        counted.diffs += syncs.diffs - published.diffs;
        counted.snapshots += syncs.snapshots - published.snapshots;
    }

    fn is_leading(&self) -> bool {
        matches!(
            self.zab.status(),
            Status::Serving {
                role: ServingRole::Leader,
                ..
            }
        )
    }

    async fn carry_out(&mut self, actions: Vec<Action>) -> Result<(), LogError> {
        for action in actions {
            match action {
                Action::Send { to, message } => self.send(to, &message),
                Action::PersistEpochs(epochs) => {
                    self.drain_held_appends().await?;
                    let epochs = ReplicaEpochs {
                        accepted: epochs.accepted,
                        current: epochs.current,
                    };
                    run_blocking(|| self.replica.persist_epochs(epochs))?;
                }
                Action::Truncate { after } => {
                    self.drain_held_appends().await?;
                    run_blocking(|| self.replica.truncate_after(after))?;
                }
                Action::Append { entries } => {
                    if self.is_leading() {
                        // A leader appends only what it proposes.
                        self.record_proposals(&entries);
                    } else {
                        self.board().counters.learned_entries += entries.len() as u64;
                    }
                    self.append(entries)?
                }
                Action::InstallSnapshot {
                    position,
                    epoch,
                    payload,
                } => {
                    self.drain_held_appends().await?;
                    run_blocking(|| {
                        self.replica.install_snapshot_streamed(position, |sink| {
                            sink.write(&epoch.to_be_bytes())?;
                            sink.write(&payload)
                        })
                    })?;
                    self.committed.store(position, Ordering::Release);
                    self.deliver(Delivery::InstallSnapshot { position, payload })
                        .await;
                }
                Action::LoadSnapshot { peer } => self.load_snapshot(peer),
                Action::Deliver { entries } => {
                    if let Some((last, _)) = entries.last() {
                        self.committed.store(*last, Ordering::Release);
                    }
                    self.count_committed(entries.len() as u64);
                    self.deliver(Delivery::Committed(entries)).await;
                }
                Action::StatusChanged(status) => {
                    tracing::info!(?status, "ensemble status");
                    {
                        let mut board = self.board();
                        board.status_changed(status, Instant::now());
                        if self.is_leading() {
                            // A new leadership: ZooKeeper's new Leader starts its statistics
                            // over.
                            board.proposal_sizes = BufferSizes::default();
                        }
                    }
                    self.publish_learners();
                    self.deliver(Delivery::Role(Role::from(status))).await;
                }
            }
        }
        Ok(())
    }

    /// Queues `entries` in the replica log, in parts that fit its queue: a learner's sync
    /// (the entries after a snapshot, or a long diff) can bring more than the queue holds.
    /// What does not fit now is held until the writer makes room.
    fn append(&mut self, entries: Vec<Entry>) -> Result<(), LogError> {
        let entries: Vec<ReplicaEntry> = entries
            .into_iter()
            .map(|entry| ReplicaEntry {
                position: entry.position,
                epoch: entry.epoch,
                payload: entry.payload,
            })
            .collect();
        self.held_appends.extend(self.replica.split_to_fit(entries));
        self.release_held_appends()
    }

    /// Hands the held appends to the replica, in order, while its queue has room.
    fn release_held_appends(&mut self) -> Result<(), LogError> {
        while let Some(part) = self.held_appends.front() {
            match self.replica.append(part.clone()) {
                Ok(()) => {
                    self.held_appends.pop_front();
                }
                Err(AppendError::Full) => return Ok(()),
                Err(error) => return Err(LogError::WriterFailed(error.to_string())),
            }
        }
        Ok(())
    }

    /// Waits (without holding up the thread) until every held append is in the replica's
    /// queue, so that an operation after them reaches the writer after them.
    async fn drain_held_appends(&mut self) -> Result<(), LogError> {
        loop {
            self.release_held_appends()?;
            if self.held_appends.is_empty() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    fn count_committed(&self, entries: u64) {
        let leading = self.is_leading();
        let counters = &mut self.board().counters;
        if leading {
            counters.committed_entries += entries;
        } else {
            counters.learned_commits += entries;
        }
    }

    fn record_proposals(&self, entries: &[Entry]) {
        let mut board = self.board();
        board.counters.proposed_entries += entries.len() as u64;
        for entry in entries {
            board.proposal_sizes.record(entry.payload.len() as i64);
        }
    }

    async fn deliver(&self, delivery: Delivery) {
        // The front end stops only when the server does.
        let _ = self.deliveries.send(delivery).await;
    }

    fn send(&self, to: ServerId, message: &Message) {
        let Some((outbox, traffic)) = self.outboxes.get(&to) else {
            return;
        };
        let frame = Frame::of(message);
        let frame_bytes = frame.bytes;
        // Counted in before the writer can take it out, so the counts never go below zero.
        traffic.queued(frame_bytes);
        // A full queue drops the message; the protocol retransmits what matters.
        if outbox.try_send(frame).is_err() {
            traffic.dequeued(frame_bytes);
        }
    }

    fn load_snapshot(&self, peer: ServerId) {
        let replica = self.replica.clone();
        let control = self.control.clone();
        tokio::task::spawn_blocking(move || {
            let loaded = match replica.snapshot_store().load_newest_valid() {
                Ok(Some((position, bytes))) if bytes.len() >= SNAPSHOT_EPOCH_BYTES => {
                    Some((position, bytes.slice(SNAPSHOT_EPOCH_BYTES..)))
                }
                Ok(_) => {
                    tracing::error!(peer, "a learner needs a snapshot and there is none");
                    None
                }
                Err(error) => {
                    tracing::error!(%error, peer, "cannot read the snapshot a learner needs");
                    None
                }
            };
            let _ = control.blocking_send(Control::SnapshotLoaded(loaded));
        });
    }
}

/// Receives the replica's completions on a task of its own, so that the writer never waits
/// for the protocol task while that task waits for the writer (a truncation, say). Only the
/// newest completion matters: it covers every append before it.
fn forward_completions(mut durable: mpsc::Receiver<Durable>) -> watch::Receiver<Option<Durable>> {
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(async move {
        while let Some(done) = durable.recv().await {
            if sender.send(Some(done)).is_err() {
                return;
            }
        }
    });
    receiver
}

/// What the front end makes of the protocol's status: one mapping for the server and the
/// simulator, which drive the same front end.
impl From<Status> for Role {
    fn from(status: Status) -> Role {
        match status {
            Status::Looking => Role::Looking,
            Status::Serving {
                role,
                leader,
                epoch,
                stint,
            } => match role {
                ServingRole::Leader => Role::Leader { epoch, stint },
                ServingRole::Follower => Role::Follower {
                    leader,
                    epoch,
                    stint,
                },
                ServingRole::Observer => Role::Observer {
                    leader,
                    epoch,
                    stint,
                },
            },
        }
    }
}

// What a server hears and says until its epoch is established (election, discovery,
// synchronization), at debug level: the few messages that tell why a leader change took as
// long as it did. Once serving, a line per message would drown everything else.
fn trace_establishing_input(input: &Input) {
    match input {
        Input::Message { from, message } => tracing::debug!(from, %message, "protocol message in"),
        Input::PeerDisconnected { peer } => {
            tracing::debug!(peer, "protocol told peer disconnected")
        }
        _ => {}
    }
}

fn trace_establishing_sends(actions: &[Action]) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    for action in actions {
        if let Action::Send { to, message } = action {
            tracing::debug!(to, %message, "protocol message out");
        }
    }
}

/// How a dial loop keeps its connection to a peer.
#[derive(Debug, Clone, Copy)]
struct DialSettings {
    /// The waits between attempts to dial a peer that refuses: from the first, doubling up
    /// to the longest, until the peer dials in.
    backoff_first_ms: u64,
    backoff_max_ms: u64,
    /// How long what this server wrote may go unacknowledged by the peer's host before the
    /// connection is dropped and dialled anew (TCP_USER_TIMEOUT). A network that silently
    /// drops packets (a cut cable, a partition) leaves a connection open, and TCP spaces its
    /// retransmissions ever further apart, up to two minutes: after such a partition heals,
    /// the peer would hear nothing from this server until the next one. A fresh connection
    /// passes at the next dial instead. A peer that reads nothing for that long (paused, its
    /// receive window closed) loses its connection too, and is dialled again: what was
    /// dropped with it the protocol sends again, as it does after any lost connection.
    unacknowledged_max_ms: u32,
}

const DIAL_BACKOFF_FIRST_MS: u64 = 10;
const DIAL_BACKOFF_MAX_MS: u64 = 500;
/// TCP resends a lost packet 200 ms after it at the soonest: a bound of less than a few such
/// resends would give up a whole connection for one lost packet.
const UNACKNOWLEDGED_MIN_MS: u64 = 1000;

impl DialSettings {
    /// The protocol's longest wait for a peer bounds the connection's too: by then the
    /// protocol has given up on the peer anyway. That is the synchronization's (initLimit
    /// ticks), not the broadcast's (syncLimit): a learner installing a large snapshot may read
    /// nothing for a while, and its connection must last as long as the protocol waits.
    fn for_protocol(zab: &ZabConfig) -> DialSettings {
        let unacknowledged_max_ms = zab
            .leader_timeout_ms
            .max(zab.sync_timeout_ms)
            .max(UNACKNOWLEDGED_MIN_MS);
        DialSettings {
            backoff_first_ms: DIAL_BACKOFF_FIRST_MS,
            backoff_max_ms: DIAL_BACKOFF_MAX_MS,
            unacknowledged_max_ms: u32::try_from(unacknowledged_max_ms).unwrap_or(u32::MAX),
        }
    }
}

/// Bounds how long `stream`'s written bytes may go unacknowledged (TCP_USER_TIMEOUT).
fn bound_unacknowledged(stream: &TcpStream, timeout_ms: u32) -> std::io::Result<()> {
    let timeout = Duration::from_millis(u64::from(timeout_ms));
    socket2::SockRef::from(stream).set_tcp_user_timeout(Some(timeout))
}

/// Linux's TCP_RTO_MAX_MS (`include/uapi/linux/tcp.h`, Linux 6.14 and later), which the libc
/// crate does not name yet.
const TCP_RTO_MAX_MS: libc::c_int = 44;
/// The longest TCP may wait between resends of what a peer has not acknowledged: the least
/// Linux allows. Left to itself, TCP doubles the wait up to two minutes, so after a partition
/// shorter than the unacknowledged bound (which then never drops the connection) the peer
/// would hear nothing until the next resend, seconds after the network came back.
const RESEND_GAP_MAX_MS: libc::c_int = 1000;

/// Caps the wait between `stream`'s resends at [`RESEND_GAP_MAX_MS`]; an error on a kernel
/// without the option (ENOPROTOOPT), where the wait keeps TCP's own cap.
fn bound_resend_gap(stream: &TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let gap_ms = RESEND_GAP_MAX_MS;
    // SAFETY: the descriptor is `stream`'s own, open for the duration of the call, and the
    // option value is read from a local c_int of the length given.
    let done = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_RTO_MAX_MS,
            (&gap_ms as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Keeps a connection to one peer and writes what the protocol sends it.
async fn dial_loop(
    me: ServerId,
    peer: ServerId,
    host: String,
    port: u16,
    mut outbox: mpsc::Receiver<Frame>,
    traffic: Arc<PeerTraffic>,
    settings: DialSettings,
) {
    let mut backoff_ms = settings.backoff_first_ms;
    loop {
        let stream = match tokio::time::timeout(
            Duration::from_millis(1000),
            TcpStream::connect((host.as_str(), port)),
        )
        .await
        {
            Ok(Ok(stream)) => stream,
            _ => {
                // Unreachable: what was queued meanwhile is stale; the protocol resends.
                while let Ok(frame) = outbox.try_recv() {
                    traffic.dequeued(frame.bytes);
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(backoff_ms)) => {}
                    () = traffic.dialled_in.notified() => {}
                }
                backoff_ms = (backoff_ms * 2).min(settings.backoff_max_ms);
                continue;
            }
        };
        backoff_ms = settings.backoff_first_ms;
        let _ = stream.set_nodelay(true);
        if let Err(error) = bound_unacknowledged(&stream, settings.unacknowledged_max_ms) {
            tracing::warn!(peer, %error, "cannot bound how long a peer may leave writes unacknowledged");
        }
        if let Err(error) = bound_resend_gap(&stream) {
            tracing::debug!(peer, %error, "cannot bound TCP's wait between resends to a peer");
        }
        let mut writer = BufWriter::with_capacity(256 * 1024, stream);
        // Flushed at once: a peer drops a connection that has not said hello within 5 s,
        // and this one may have nothing to say for longer (followers talk to each other
        // only while there are writes).
        let hello_sent = async {
            writer.write_all(&hello(me)).await?;
            writer.flush().await
        };
        if hello_sent.await.is_err() {
            continue;
        }
        loop {
            let Some(frame) = outbox.recv().await else {
                return;
            };
            if write_frame(&mut writer, &frame, &traffic).await.is_err() {
                break;
            }
            // Write what else is queued before flushing: one syscall for a burst.
            let mut failed = false;
            while let Ok(frame) = outbox.try_recv() {
                if write_frame(&mut writer, &frame, &traffic).await.is_err() {
                    failed = true;
                    break;
                }
            }
            if failed || writer.flush().await.is_err() {
                break;
            }
        }
        tracing::debug!(peer, "connection to peer lost");
    }
}

/// Runs a disk operation the protocol must wait for (a truncation, an epoch write) right here:
/// on a multi-threaded runtime the worker first hands its other tasks away; on a single thread
/// everything else waits, as the protocol does anyway.
fn run_blocking<T>(operation: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(operation),
        _ => operation(),
    }
}

/// One encoded message on its way to a peer: its parts, of which a large payload shares its
/// buffer with the message (see [`Message::encode_parts`]), and their length.
struct Frame {
    parts: Vec<Bytes>,
    bytes: usize,
}

impl Frame {
    fn of(message: &Message) -> Frame {
        let parts = message.encode_parts();
        let bytes = parts.iter().map(Bytes::len).sum();
        Frame { parts, bytes }
    }
}

/// Writes one message taken from the peer's queue (and counts it out of the queue whether or
/// not the write succeeds).
async fn write_frame(
    writer: &mut BufWriter<TcpStream>,
    frame: &Frame,
    traffic: &PeerTraffic,
) -> std::io::Result<()> {
    traffic.dequeued(frame.bytes);
    write_message(writer, &frame.parts, PEER_PIECE_BYTES_MAX).await?;
    traffic.frames_sent.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// A hello's fields: magic, protocol version and the dialling server's id. Its CRC-32C follows
/// them (since version 6; read only once the version is known to be ours), so that a bit
/// flipped on the way cannot pass one member's messages off as another's.
const HELLO_FIELDS_BYTES: usize = 13;
const HELLO_BYTES: usize = HELLO_FIELDS_BYTES + 4;

/// What a connection between peers opens with.
fn hello(me: ServerId) -> [u8; HELLO_BYTES] {
    let mut hello = [0u8; HELLO_BYTES];
    hello[..4].copy_from_slice(HELLO_MAGIC);
    hello[4] = HELLO_VERSION;
    hello[5..HELLO_FIELDS_BYTES].copy_from_slice(&me.to_be_bytes());
    let checksum = crc32c::crc32c(&hello[..HELLO_FIELDS_BYTES]);
    hello[HELLO_FIELDS_BYTES..].copy_from_slice(&checksum.to_be_bytes());
    hello
}

/// The dialling server's id and protocol version, from a hello's fields (its checksum is not
/// looked at).
fn hello_parts(hello: &[u8; HELLO_BYTES]) -> std::io::Result<(ServerId, u8)> {
    if &hello[..4] != HELLO_MAGIC {
        return Err(std::io::Error::other("not a zoolog peer (bad hello)"));
    }
    let id = &hello[5..HELLO_FIELDS_BYTES];
    Ok((u64::from_be_bytes(id.try_into().unwrap()), hello[4]))
}

fn check_hello_checksum(hello: &[u8; HELLO_BYTES]) -> std::io::Result<()> {
    let (fields, sent) = hello.split_at(HELLO_FIELDS_BYTES);
    check_sum(fields, sent, || "a hello".to_owned())
}

fn check_version(from: ServerId, version: u8) -> std::io::Result<()> {
    if version == HELLO_VERSION {
        return Ok(());
    }
    Err(std::io::Error::other(format!(
        "server {from} speaks peer protocol version {version}, this server {HELLO_VERSION}: \
         every member must run a zoolog of the same protocol version"
    )))
}

/// Writes the message made of `parts` (one after the other) as pieces of at most
/// `piece_bytes_max` bytes, each behind a header (see [`piece_header`]), then the message's
/// CRC-32C (Castagnoli), big-endian. Pieces and parts need not line up.
///
/// TCP's own checksum misses some corruption that hardware between hosts causes, and an entry
/// corrupted on its way would be applied by every member: a payload is opaque to the
/// protocol, and the log's own checksums only cover what it was given. A length has its own
/// checksum so that a corrupted one is caught before it is acted on: trusted, it could make
/// the reader wait for a gigabyte that never comes, swallowing every later message.
async fn write_message<W: AsyncWrite + Unpin>(
    writer: &mut W,
    parts: &[Bytes],
    piece_bytes_max: usize,
) -> std::io::Result<()> {
    assert!(
        piece_bytes_max > 0 && piece_bytes_max < PIECE_CONTINUES as usize,
        "a piece's length leaves the continuation bit free"
    );
    let message_bytes: usize = parts.iter().map(Bytes::len).sum();
    let piece_count = message_bytes.div_ceil(piece_bytes_max).max(1);
    let mut unsent_parts = parts.iter();
    let mut part: &[u8] = &[];
    let mut checksum = 0;
    for index in 0..piece_count {
        let piece_bytes = (message_bytes - index * piece_bytes_max).min(piece_bytes_max);
        let continues = index + 1 < piece_count;
        writer
            .write_all(&piece_header(piece_bytes, continues))
            .await?;
        let mut piece_left = piece_bytes;
        while piece_left > 0 {
            if part.is_empty() {
                part = unsent_parts
                    .next()
                    .expect("the parts hold the message's bytes");
                continue;
            }
            let (now, later) = part.split_at(piece_left.min(part.len()));
            writer.write_all(now).await?;
            checksum = crc32c::crc32c_append(checksum, now);
            piece_left -= now.len();
            part = later;
        }
    }
    writer.write_all(&checksum.to_be_bytes()).await
}

/// A piece's header: a big-endian length word, with 31 bits for the length and
/// [`PIECE_CONTINUES`] set on every piece but a message's last, then the word's CRC-32C.
fn piece_header(piece_bytes: usize, continues: bool) -> [u8; PIECE_HEADER_BYTES] {
    let continues = if continues { PIECE_CONTINUES } else { 0 };
    let word = (piece_bytes as u32 | continues).to_be_bytes();
    let mut header = [0u8; PIECE_HEADER_BYTES];
    header[..4].copy_from_slice(&word);
    header[4..].copy_from_slice(&crc32c::crc32c(&word).to_be_bytes());
    header
}

/// A piece's length and whether another piece continues the message, from its header.
fn piece_header_parts(header: &[u8; PIECE_HEADER_BYTES]) -> std::io::Result<(usize, bool)> {
    let (word, sent) = header.split_at(4);
    check_sum(word, sent, || "a piece's length".to_owned())?;
    let word = u32::from_be_bytes(word.try_into().expect("4 bytes"));
    Ok((
        (word & !PIECE_CONTINUES) as usize,
        word & PIECE_CONTINUES != 0,
    ))
}

/// Whether `bytes` match the big-endian CRC-32C `sent` with them; if not, an invalid-data
/// error about `what`.
fn check_sum(bytes: &[u8], sent: &[u8], what: impl FnOnce() -> String) -> std::io::Result<()> {
    let computed = crc32c::crc32c(bytes);
    if computed.to_be_bytes() == sent {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "{} does not match its checksum (sent {sent:02x?}, computed {computed:#010x}): \
             corrupted on the way",
            what()
        ),
    ))
}

/// Limits on what a peer may send, checked before anything is allocated for it.
#[derive(Debug, Clone, Copy)]
struct MessageLimits {
    piece_bytes_max: usize,
    message_bytes_max: usize,
}

const PEER_MESSAGE_LIMITS: MessageLimits = MessageLimits {
    piece_bytes_max: PEER_PIECE_BYTES_MAX,
    message_bytes_max: PEER_MESSAGE_BYTES_MAX,
};

/// Reads one message that [`write_message`] wrote, joining its pieces and checking their
/// lengths' checksums and the message's: what does not match is refused as invalid data.
async fn read_message<R: AsyncRead + Unpin>(
    reader: &mut R,
    limits: MessageLimits,
) -> std::io::Result<Vec<u8>> {
    let mut message = Vec::new();
    loop {
        let mut header = [0u8; PIECE_HEADER_BYTES];
        reader.read_exact(&mut header).await?;
        let (piece_bytes, continues) = piece_header_parts(&header)?;
        if piece_bytes > limits.piece_bytes_max {
            return Err(std::io::Error::other(format!(
                "a piece of {piece_bytes} bytes (limit {})",
                limits.piece_bytes_max
            )));
        }
        let start = message.len();
        if start + piece_bytes > limits.message_bytes_max {
            return Err(std::io::Error::other(format!(
                "a message of over {} bytes (limit {})",
                start + piece_bytes,
                limits.message_bytes_max
            )));
        }
        // Exactly what the piece needs: growing by doubling could hold twice a large snapshot.
        message.reserve_exact(piece_bytes);
        message.resize(start + piece_bytes, 0);
        reader.read_exact(&mut message[start..]).await?;
        if !continues {
            break;
        }
    }
    let mut sent = [0u8; 4];
    reader.read_exact(&mut sent).await?;
    check_sum(&message, &sent, || {
        format!("a message of {} bytes", message.len())
    })?;
    Ok(message)
}

async fn accept_loop(
    listener: TcpListener,
    members: Vec<ServerId>,
    traffic: Arc<PeerTraffics>,
    inbox: mpsc::Sender<PeerEvent>,
    board: Arc<Mutex<OperatorBoard>>,
) {
    loop {
        let Ok((stream, address)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let members = members.clone();
        let traffic = traffic.clone();
        let inbox = inbox.clone();
        let board = board.clone();
        tokio::spawn(async move {
            match read_peer(stream, address, &members, &traffic, &inbox).await {
                Ok(()) => {}
                // A peer of the same version sent what it could not have: say so where it
                // is seen by default (the connection is dropped all the same).
                Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
                    tracing::warn!(%address, %error, "a peer's message is refused");
                    board
                        .lock()
                        .expect("the board's holders never panic")
                        .counters
                        .peer_messages_refused += 1;
                }
                Err(error) => tracing::debug!(%address, %error, "peer connection ended"),
            }
        });
    }
}

async fn read_peer(
    mut stream: TcpStream,
    address: SocketAddr,
    members: &[ServerId],
    traffic: &PeerTraffics,
    inbox: &mpsc::Sender<PeerEvent>,
) -> std::io::Result<()> {
    let mut hello = [0u8; HELLO_BYTES];
    read_hello_bytes(&mut stream, &mut hello[..HELLO_FIELDS_BYTES]).await?;
    let (from, version) = hello_parts(&hello)?;
    if !members.contains(&from) {
        return Err(std::io::Error::other(format!(
            "server {from} is not a member of this ensemble"
        )));
    }
    // Only this server itself is a member without traffic of its own.
    let Some(traffic) = traffic.get(&from) else {
        return Err(std::io::Error::other(
            "a connection from this server itself",
        ));
    };
    if let Err(error) = check_version(from, version) {
        // An operator's mistake, not network noise: said where it is seen by default, once
        // for each version the peer dials with (it dials again and again).
        if traffic.hello_version.swap(version, Ordering::Relaxed) != version {
            tracing::warn!(%address, %error, "a peer of another version is refused");
        }
        return Err(error);
    }
    read_hello_bytes(&mut stream, &mut hello[HELLO_FIELDS_BYTES..]).await?;
    check_hello_checksum(&hello)?;
    traffic
        .hello_version
        .store(HELLO_VERSION, Ordering::Relaxed);
    let serial = traffic.accept_inbound(address);
    traffic.dialled_in.notify_one();
    let result = read_frames(&mut stream, from, serial, traffic, inbox).await;
    if traffic.end_inbound(serial) {
        let _ = inbox.send(PeerEvent::Disconnected { peer: from }).await;
    }
    result
}

async fn read_hello_bytes(stream: &mut TcpStream, bytes: &mut [u8]) -> std::io::Result<()> {
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(bytes))
        .await
        .map_err(|_| std::io::Error::other("no hello within 5 s"))?
        .map(|_| ())
}

/// Reads the messages of the peer's inbound connection `serial` into `inbox`, until the
/// connection ends or the peer dials a newer one.
async fn read_frames(
    stream: &mut TcpStream,
    from: ServerId,
    serial: u64,
    traffic: &PeerTraffic,
    inbox: &mpsc::Sender<PeerEvent>,
) -> std::io::Result<()> {
    let mut newest_inbound = traffic.newest_inbound.subscribe();
    let mut reader = tokio::io::BufReader::with_capacity(256 * 1024, stream);
    loop {
        let frame = tokio::select! {
            read = read_message(&mut reader, PEER_MESSAGE_LIMITS) => read,
            _ = newest_inbound.wait_for(|&newest| newest != serial) => {
                tracing::debug!(peer = from, "the peer dialled again; its earlier connection is closed");
                return Ok(());
            }
        };
        let frame = frame
            .map_err(|error| std::io::Error::new(error.kind(), format!("peer {from}: {error}")))?;
        let invalid = |error: &dyn std::fmt::Display| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("peer {from}: {error}"),
            )
        };
        let message = Message::decode(Bytes::from(frame)).map_err(|error| invalid(&error))?;
        if let Message::Forward { payloads, .. } = &message {
            for payload in payloads {
                crate::core::check_entry(payload).map_err(|error| {
                    invalid(&format_args!(
                        "a forwarded command does not decode ({error})"
                    ))
                })?;
            }
        }
        traffic.frames_received.fetch_add(1, Ordering::Relaxed);
        if inbox
            .send(PeerEvent::Message { from, message })
            .await
            .is_err()
        {
            return Ok(());
        }
    }
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(stint: u64, entry: &'static str) -> QueuedEntry {
        QueuedEntry {
            stint,
            entry: Bytes::from(entry),
        }
    }

    #[tokio::test]
    async fn urgent_appends_go_ahead_of_the_client_commands_waiting() {
        let (commands_tx, commands) = mpsc::channel(8);
        let (urgent_tx, urgent) = mpsc::channel(8);
        let mut lanes = AppendLanes { urgent, commands };
        for command in ["c1", "c2", "c3"] {
            commands_tx.try_send(tagged(3, command)).unwrap();
        }
        urgent_tx.try_send(tagged(3, "u1")).unwrap();
        urgent_tx.try_send(tagged(3, "u2")).unwrap();

        let both = PerLane {
            commands: true,
            urgent: true,
        };
        let (lane, first) = lanes.recv(both).await.unwrap();
        assert_eq!((lane, &first.entry[..]), (Lane::Urgent, &b"u1"[..]));
        let room = AppendCapacity {
            commands: 3,
            bytes: 1 << 20,
        };
        assert_eq!(lanes.take(lane, first, room, 3), ["u1", "u2"]);

        urgent_tx.try_send(tagged(3, "u3")).unwrap();
        let (lane, first) = lanes.recv(both).await.unwrap();
        assert_eq!(
            (lane, &first.entry[..]),
            (Lane::Urgent, &b"u3"[..]),
            "an urgent command overtakes those still waiting"
        );
        assert_eq!(lanes.take(lane, first, room, 3), ["u3"]);
        urgent_tx.try_send(tagged(3, "u4")).unwrap();
        let only_commands = PerLane {
            commands: true,
            urgent: false,
        };
        let (lane, first) = lanes.recv(only_commands).await.unwrap();
        assert_eq!(lane, Lane::Commands, "a full urgent lane holds none back");
        assert_eq!(lanes.take(lane, first, room, 3), ["c1", "c2", "c3"]);
    }

    #[tokio::test]
    async fn commands_appended_for_a_stint_that_has_ended_are_dropped() {
        let (commands_tx, commands) = mpsc::channel(8);
        let (_urgent_tx, urgent) = mpsc::channel(8);
        let mut lanes = AppendLanes { urgent, commands };
        for (stint, command) in [
            (2, "lost"),
            (3, "c1"),
            (2, "late"),
            (0, "looking"),
            (3, "c2"),
        ] {
            commands_tx.try_send(tagged(stint, command)).unwrap();
        }
        let open = PerLane {
            commands: true,
            urgent: true,
        };
        let (lane, first) = lanes.recv(open).await.unwrap();
        let room = AppendCapacity {
            commands: 8,
            bytes: 1 << 20,
        };
        assert_eq!(lanes.take(lane, first, room, 3), ["c1", "c2"]);
    }

    #[test]
    fn the_protocols_log_makes_room_for_a_snapshot_interval_up_to_a_bound() {
        let member = crate::config::PeerConfig::local_participant();
        let ensemble = EnsembleConfig {
            members: [(1, member)].into_iter().collect(),
            init_limit: 10,
            sync_limit: 5,
            observer: false,
        };
        let mut config = ServerConfig {
            entries_per_snapshot: 100_000,
            ..ServerConfig::default()
        };
        assert_eq!(
            zab_config(&config, &ensemble, 1).history_entries_reserved,
            100_000
        );
        config.entries_per_snapshot = u64::MAX;
        assert_eq!(
            zab_config(&config, &ensemble, 1).history_entries_reserved,
            HISTORY_ENTRIES_RESERVED_MAX
        );
    }

    fn serving(role: ServingRole) -> Status {
        Status::Serving {
            role,
            leader: 1,
            epoch: 1,
            stint: 1,
        }
    }

    #[test]
    fn the_board_counts_lookings_and_times_a_voters_elections_only() {
        let start = Instant::now();
        let mut board = OperatorBoard::default();
        board.status_changed(Status::Looking, start);
        board.status_changed(
            serving(ServingRole::Leader),
            start + Duration::from_millis(30),
        );
        assert_eq!(board.counters.lookings, 1);
        assert_eq!(board.counters.election_time_us.count, 1);
        assert_eq!(board.counters.election_time_us.max, 30_000);
        assert_eq!(board.leading_since, Some(start + Duration::from_millis(30)));

        board.status_changed(Status::Looking, start + Duration::from_millis(50));
        assert_eq!(board.leading_since, None);
        board.status_changed(
            serving(ServingRole::Observer),
            start + Duration::from_millis(60),
        );
        assert_eq!(board.counters.lookings, 2);
        assert_eq!(board.counters.election_time_us.count, 1);
        assert_eq!(board.looking_since, None);
    }

    const SMALL: MessageLimits = MessageLimits {
        piece_bytes_max: 8,
        message_bytes_max: 20,
    };

    async fn wire(messages: &[&[u8]], piece_bytes_max: usize) -> Vec<u8> {
        let mut wire = Vec::new();
        for message in messages {
            let parts = [Bytes::copy_from_slice(message)];
            write_message(&mut wire, &parts, piece_bytes_max)
                .await
                .unwrap();
        }
        wire
    }

    #[tokio::test]
    async fn a_message_longer_than_a_piece_goes_in_pieces_and_comes_back_whole() {
        let message: Vec<u8> = (0..20).collect();
        let wire = wire(&[&message], 8).await;
        let expected = [
            &piece_header(8, true)[..],
            &message[..8],
            &piece_header(8, true),
            &message[8..16],
            &piece_header(4, false),
            &message[16..],
            &crc32c::crc32c(&message).to_be_bytes(),
        ]
        .concat();
        assert_eq!(wire, expected);
        let mut reader = &wire[..];
        assert_eq!(read_message(&mut reader, SMALL).await.unwrap(), message);
        assert!(reader.is_empty(), "the reader stops at the message's end");
    }

    #[tokio::test]
    async fn a_message_in_parts_goes_on_the_wire_as_the_same_message_in_one() {
        let message: Vec<u8> = (0..20).collect();
        let parts: Vec<Bytes> = [0..3, 3..3, 3..13, 13..14, 14..20]
            .into_iter()
            .map(|range| Bytes::copy_from_slice(&message[range]))
            .collect();
        let mut from_parts = Vec::new();
        write_message(&mut from_parts, &parts, 8).await.unwrap();
        assert_eq!(from_parts, wire(&[&message], 8).await);
        let mut no_parts = Vec::new();
        write_message(&mut no_parts, &[], 8).await.unwrap();
        assert_eq!(no_parts, wire(&[b""], 8).await);
    }

    /// Each bit's number, with a copy of `bytes` in which that bit alone is flipped.
    fn each_bit_flipped(bytes: &[u8]) -> impl Iterator<Item = (usize, Vec<u8>)> + '_ {
        (0..bytes.len() * 8).map(|bit| {
            let mut flipped = bytes.to_vec();
            flipped[bit / 8] ^= 1 << (bit % 8);
            (bit, flipped)
        })
    }

    #[tokio::test]
    async fn a_message_of_one_piece_is_its_length_its_bytes_and_their_checksums() {
        // CRC-32C's check value (RFC 3720, B.4) is that of "123456789".
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        let length = 9u32.to_be_bytes();
        let expected = [
            &length[..],
            &crc32c::crc32c(&length).to_be_bytes(),
            b"123456789",
            &0xe306_9283u32.to_be_bytes(),
        ]
        .concat();
        assert_eq!(wire(&[b"123456789"], 16).await, expected);
        let empty = wire(&[b""], 8).await;
        assert_eq!(empty[..4], [0u8; 4]);
        assert_eq!(empty[8..], [0u8; 4], "an empty message's checksum is zero");
        assert_eq!(read_message(&mut &empty[..], SMALL).await.unwrap(), b"");
    }

    /// Whatever single bit of a message flips on the way, in a piece's header, in its bytes or
    /// in the checksum, the message is refused as soon as the damaged part has arrived: never
    /// is another message read in its place, nor does the reader wait for bytes a corrupted
    /// length promised.
    #[tokio::test]
    async fn a_message_corrupted_on_the_way_is_refused() {
        let message: Vec<u8> = (0..12).collect();
        let wire = wire(&[&message], 8).await;
        for (bit, corrupted) in each_bit_flipped(&wire) {
            let error = read_message(&mut &corrupted[..], SMALL)
                .await
                .expect_err(&format!("bit {bit} flipped, and a message was read"));
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "bit {bit}");
            assert!(error.to_string().contains("checksum"), "{error}");
        }
    }

    #[tokio::test]
    async fn messages_follow_each_other_on_one_stream() {
        let first: Vec<u8> = (0..17).collect();
        let wire = wire(&[&first, b"x", b"second!"], 8).await;
        let mut reader = &wire[..];
        assert_eq!(read_message(&mut reader, SMALL).await.unwrap(), first);
        assert_eq!(read_message(&mut reader, SMALL).await.unwrap(), b"x");
        assert_eq!(read_message(&mut reader, SMALL).await.unwrap(), b"second!");
        assert!(reader.is_empty());
    }

    #[tokio::test]
    async fn a_piece_or_a_message_over_its_limit_is_refused_before_it_is_read() {
        // The declared length alone condemns the piece: its bytes never arrive.
        let mut reader = &piece_header(9, false)[..];
        let error = read_message(&mut reader, SMALL).await.unwrap_err();
        assert!(error.to_string().contains("a piece of 9 bytes"), "{error}");
        let too_long: Vec<u8> = (0..21).collect();
        let wire = wire(&[&too_long], 8).await;
        let error = read_message(&mut &wire[..], SMALL).await.unwrap_err();
        assert!(error.to_string().contains("limit 20"), "{error}");
    }

    const GUARD: Duration = Duration::from_secs(30);

    /// This server's peer listener, as server 1 of an ensemble with server 2.
    struct Accepting {
        address: SocketAddr,
        traffic: Arc<PeerTraffic>,
        events: mpsc::Receiver<PeerEvent>,
        board: Arc<Mutex<OperatorBoard>>,
        task: JoinHandle<()>,
    }

    async fn accepting_from_server_2() -> Accepting {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let traffic = Arc::new(PeerTraffic::default());
        let traffics = Arc::new(PeerTraffics::from([(2, traffic.clone())]));
        let (inbox, events) = mpsc::channel(16);
        let board = Arc::new(Mutex::new(OperatorBoard::default()));
        let task = tokio::spawn(accept_loop(
            listener,
            vec![1, 2],
            traffics,
            inbox,
            board.clone(),
        ));
        Accepting {
            address,
            traffic,
            events,
            board,
            task,
        }
    }

    /// A connection on loopback, with the listener that holds its other end.
    async fn a_connection() -> (TcpListener, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        (listener, stream)
    }

    /// A connection to `address` that has said hello as server `me`.
    async fn dialled_in_as(me: ServerId, address: SocketAddr) -> TcpStream {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(&hello(me)).await.unwrap();
        stream
    }

    async fn accepted_connections(traffic: &PeerTraffic, count: u64) {
        while traffic.inbound_accepted.load(Ordering::Relaxed) < count {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Half-closes `stream` and waits until this server has closed its end: by then its
    /// reader of that connection has said all it will.
    async fn end_and_wait_for_close(mut stream: TcpStream) {
        stream.shutdown().await.unwrap();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.unwrap();
    }

    /// A peer dials again when it gave its connection up (a write of its failed, or went
    /// unacknowledged too long), which a lost network may never tell this end: the earlier
    /// connection is closed then, not left to a reader that waits for ever, and its end says
    /// nothing about the peer. Only the end of its latest connection tells the protocol it is
    /// gone.
    #[tokio::test]
    async fn only_the_end_of_a_peers_latest_connection_disconnects_it() {
        let Accepting {
            address,
            traffic,
            mut events,
            task,
            ..
        } = accepting_from_server_2().await;
        let mut old = dialled_in_as(2, address).await;
        tokio::time::timeout(GUARD, accepted_connections(&traffic, 1))
            .await
            .expect("the first connection is accepted");
        let mut new = dialled_in_as(2, address).await;
        let mut rest = Vec::new();
        tokio::time::timeout(GUARD, old.read_to_end(&mut rest))
            .await
            .expect("the old connection is closed by this end")
            .unwrap();
        let ack = Message::Ack {
            link: zoolog_zab::Link {
                epoch: 1,
                attempt: zoolog_zab::Attempt::default(),
            },
            position: 1,
        };
        write_message(&mut new, &Frame::of(&ack).parts, PEER_PIECE_BYTES_MAX)
            .await
            .unwrap();
        let first = tokio::time::timeout(GUARD, events.recv()).await.unwrap();
        assert!(
            matches!(first, Some(PeerEvent::Message { from: 2, .. })),
            "the old connection's end is not a disconnection"
        );
        assert!(
            traffic.inbound().is_some(),
            "the new connection is the peer's"
        );
        tokio::time::timeout(GUARD, end_and_wait_for_close(new))
            .await
            .expect("the new connection is closed");
        let second = tokio::time::timeout(GUARD, events.recv()).await.unwrap();
        assert!(matches!(second, Some(PeerEvent::Disconnected { peer: 2 })));
        assert!(
            traffic.inbound().is_none(),
            "no connection from the peer is left"
        );
        task.abort();
    }

    /// A forwarded command is checked where it arrives: one that does not decode would, once
    /// proposed, stop every member at its apply. Its connection is dropped and counted, and
    /// nothing of it reaches the protocol.
    #[tokio::test]
    async fn a_forwarded_command_that_does_not_decode_is_refused_with_its_connection() {
        let Accepting {
            address,
            mut events,
            board,
            task,
            ..
        } = accepting_from_server_2().await;
        let command = zoolog_tree::Command {
            session_id: 5,
            cxid: 1,
            time_ms: 0,
            owner: 0,
            op: zoolog_tree::CommandOp::CloseSession,
        };
        // An entry is its proposer's origin and connection (eight bytes each), then the command.
        let entry = [&[0u8; 16][..], &command.encode()].concat();
        let forward = |sequence: u64, payload: Vec<u8>| Message::Forward {
            link: zoolog_zab::Link {
                epoch: 1,
                attempt: zoolog_zab::Attempt::default(),
            },
            lane: Lane::Commands,
            first_sequence: sequence,
            payloads: vec![Bytes::from(payload)],
        };
        let mut peer = dialled_in_as(2, address).await;
        for message in [
            forward(1, entry.clone()),
            forward(2, entry[..entry.len() - 1].to_vec()),
        ] {
            write_message(&mut peer, &Frame::of(&message).parts, PEER_PIECE_BYTES_MAX)
                .await
                .unwrap();
        }
        let mut rest = Vec::new();
        tokio::time::timeout(GUARD, peer.read_to_end(&mut rest))
            .await
            .expect("the connection is closed by this end")
            .unwrap();
        let first = tokio::time::timeout(GUARD, events.recv()).await.unwrap();
        assert!(
            matches!(
                first,
                Some(PeerEvent::Message {
                    from: 2,
                    message: Message::Forward {
                        first_sequence: 1,
                        ..
                    }
                })
            ),
            "the command that decodes is passed on"
        );
        let second = tokio::time::timeout(GUARD, events.recv()).await.unwrap();
        assert!(matches!(second, Some(PeerEvent::Disconnected { peer: 2 })));
        let refused = || board.lock().unwrap().counters.peer_messages_refused;
        tokio::time::timeout(GUARD, async {
            while refused() == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("the refusal is counted");
        task.abort();
    }

    #[tokio::test]
    async fn a_dialled_connection_bounds_how_long_its_writes_may_go_unacknowledged() {
        let (_listener, stream) = a_connection().await;
        bound_unacknowledged(&stream, 2500).unwrap();
        let set = socket2::SockRef::from(&stream).tcp_user_timeout().unwrap();
        assert_eq!(set, Some(Duration::from_millis(2500)));
    }

    #[tokio::test]
    async fn a_dialled_connection_bounds_the_wait_between_resends_where_the_kernel_can() {
        use std::os::fd::AsRawFd;
        let (_listener, stream) = a_connection().await;
        if let Err(error) = bound_resend_gap(&stream) {
            assert_eq!(error.raw_os_error(), Some(libc::ENOPROTOOPT), "{error}");
            return;
        }
        let mut gap_ms: libc::c_int = 0;
        let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `stream`'s own descriptor; the kernel writes at most `length` bytes into
        // the local c_int and the new length into `length`.
        let done = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                TCP_RTO_MAX_MS,
                (&mut gap_ms as *mut libc::c_int).cast(),
                &mut length,
            )
        };
        assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
        assert_eq!(gap_ms, RESEND_GAP_MAX_MS);
    }

    #[test]
    fn a_hello_of_another_protocol_version_is_refused_and_names_both_versions() {
        let ours = hello(7);
        assert_eq!(hello_parts(&ours).unwrap(), (7, HELLO_VERSION));
        check_hello_checksum(&ours).unwrap();
        check_version(7, HELLO_VERSION).unwrap();
        let error = check_version(7, HELLO_VERSION - 1).unwrap_err().to_string();
        let expected = format!(
            "server 7 speaks peer protocol version {}, this server {HELLO_VERSION}",
            HELLO_VERSION - 1
        );
        assert!(error.starts_with(&expected), "{error}");
        let mut stranger = ours;
        stranger[..4].copy_from_slice(b"HTTP");
        let error = hello_parts(&stranger).unwrap_err().to_string();
        assert_eq!(error, "not a zoolog peer (bad hello)");
    }

    #[test]
    fn a_hello_with_a_bit_flipped_is_refused() {
        let ours = hello(7);
        for (bit, corrupted) in each_bit_flipped(&ours) {
            let corrupted: [u8; HELLO_BYTES] = corrupted.try_into().unwrap();
            let refused = hello_parts(&corrupted)
                .and_then(|(from, version)| check_version(from, version))
                .and_then(|()| check_hello_checksum(&corrupted));
            assert!(refused.is_err(), "bit {bit} flipped, and the hello passed");
        }
    }

    /// A dial loop that waits an hour after a refusal, so only the peer's dialling in can
    /// bring it back within the test.
    #[tokio::test]
    async fn a_peer_that_dials_in_is_dialled_again_at_once() {
        const GUARD: Duration = Duration::from_secs(30);
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let traffic = Arc::new(PeerTraffic::default());
        let (outbox, queue) = mpsc::channel(4);
        let ack = Message::Ack {
            link: zoolog_zab::Link {
                epoch: 1,
                attempt: zoolog_zab::Attempt::default(),
            },
            position: 1,
        };
        let frame = Frame::of(&ack);
        traffic.queued(frame.bytes);
        outbox.try_send(frame).unwrap();
        let hour_ms = 3_600_000;
        let settings = DialSettings {
            backoff_first_ms: hour_ms,
            backoff_max_ms: hour_ms,
            unacknowledged_max_ms: 1000,
        };
        let dialling = tokio::spawn(dial_loop(
            1,
            2,
            "127.0.0.1".into(),
            port,
            queue,
            traffic.clone(),
            settings,
        ));
        // The refused attempt drops what was queued: from then on the loop backs off.
        tokio::time::timeout(GUARD, async {
            while traffic.queued_frames.load(Ordering::Relaxed) > 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("the first attempt is refused");
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .unwrap();
        let listener = socket.listen(1).unwrap();
        traffic.dialled_in.notify_one();
        let (mut stream, _) = tokio::time::timeout(GUARD, listener.accept())
            .await
            .expect("dialled again without waiting out the back-off")
            .unwrap();
        // The hello goes out at once, before any message.
        let mut hello = [0u8; HELLO_BYTES];
        tokio::time::timeout(GUARD, stream.read_exact(&mut hello))
            .await
            .expect("the hello arrives")
            .unwrap();
        assert_eq!(&hello[..4], HELLO_MAGIC);
        dialling.abort();
    }
}

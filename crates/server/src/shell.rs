//! The tokio shell around [`Core`]: accepts connections, reads frames, writes replies, feeds the
//! core its inputs on one task and carries out its outputs. All protocol decisions live in the
//! core; this file only moves bytes and keeps the limits on them.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use zoolog_log::{
    CommittedBatch, LogError, LogStats, OrderingLayer, SingleLog, SingleLogConfig, SnapshotPayload,
    SnapshotSink,
};
use zoolog_proto::{frame_length, ConnectRequest, FRAME_PREFIX_BYTES};
use zoolog_tree::{ConnectionId, DataTree};

use crate::admin;
use crate::config::ServerConfig;
use crate::core::{request_input, Core, Input, Now, OperatorAction, Output};
use crate::ensemble::{Delivery, Ensemble, EnsembleError, LeaderReport, QuorumCounters, Started};
use crate::four_letter::{self, DirSizes};
use crate::http;
use crate::metrics::{self, SnapshotRecord};
use crate::stats::{elapsed_us, LogLoad, LogOpened, Startup};

/// Inputs to the core task, from connection tasks and background jobs.
enum Message {
    Opened {
        connection: ConnectionId,
        peer: SocketAddr,
        handle: ConnectionHandle,
    },
    FourLetterWord {
        connection: ConnectionId,
        word: String,
        /// `stmk`'s trace mask.
        argument: Option<i64>,
    },
    Core(Input),
    /// Requests one connection had already sent, in its order: one message for what a
    /// pipelining client's single socket read brought in.
    Requests(Vec<Input>),
    /// A snapshot finished: what was written and how long it took, or None when it failed.
    SnapshotDone(Option<(SnapshotRecord, Duration)>),
    /// An HTTP request for the AdminServer or /metrics, answered from the core's state.
    Operator {
        query: OperatorQuery,
        reply: oneshot::Sender<http::Response>,
    },
}

enum OperatorQuery {
    Metrics,
    Command {
        name: String,
        args: Vec<(String, String)>,
    },
}

/// What the core task holds of one connection.
struct ConnectionHandle {
    outbox: mpsc::UnboundedSender<Outgoing>,
    shared: Arc<Shared>,
    reader: JoinHandle<()>,
    handshake: Option<oneshot::Sender<bool>>,
}

/// Counters shared between a connection's tasks and the core task.
struct Shared {
    /// One permit per request the connection may have outstanding; the writer returns it with
    /// the reply, so a client that floods us stops being read.
    outstanding: Semaphore,
    /// The server's request budget held by the requests read and not yet answered, one
    /// holding per request in the order of their replies. Each reply, once queued, gives its
    /// request's bytes back; whatever is left goes back when the connection is gone. Given
    /// back at the queueing rather than the writing of the reply, so that a client that does
    /// not read its replies holds no one else up (its queued replies have their own limit).
    request_bytes: Mutex<VecDeque<OwnedSemaphorePermit>>,
    /// Bytes queued for the writer; past the limit the client is too slow and is dropped.
    outbound_bytes: AtomicUsize,
}

/// Bounds on the frames one write of a connection takes: below the system's 1024 slices of
/// a vectored write, and about what the socket's send buffer takes at once.
const WRITE_BATCH_FRAMES_MAX: usize = 256;
const WRITE_BATCH_BYTES_MAX: usize = 256 * 1024;

enum Outgoing {
    Bytes { bytes: Vec<u8>, reply: bool },
    Close,
}

/// Why the server could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Log(#[from] zoolog_log::LogError),
    #[error(transparent)]
    Ensemble(#[from] EnsembleError),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Runs the server until SIGTERM or SIGINT: recovers the tree from the newest snapshot and the
/// log, then serves. An ensemble member orders through Zab; otherwise a local log does.
pub async fn run(config: ServerConfig) -> Result<(), ServeError> {
    if config.ensemble.is_some() {
        return run_ensemble(config).await;
    }
    let mut log_config = SingleLogConfig::new(&config.data_log_dir, &config.data_dir);
    log_config.limits = config.wal_limits();
    let opening = Instant::now();
    let tree_config = tree_config(&config);
    let (log, recovered, committed) = SingleLog::open_decoding(log_config, |payload| {
        decode_snapshot(payload, tree_config.clone())
    })?;
    let opened = LogOpened {
        took_us: elapsed_us(opening),
        read_times: recovered.read_times,
        entries: recovered.tail.len() as u64,
    };
    let log = Arc::new(log);
    let state = recovered_state(
        recovered.snapshot,
        log.snapshot_store().dir(),
        opened,
        tree_config,
    );
    tracing::info!(
        snapshot = state.snapshot.as_ref().map_or(0, |record| record.zxid),
        tail_entries = recovered.tail.len(),
        "recovered"
    );
    let result = serve(
        config,
        OrderingLog::Single(log.clone()),
        state,
        Feed::Single(committed),
        recovered.tail,
    )
    .await;
    log.close()?;
    result
}

/// An ensemble member: the tree starts from the newest snapshot; the protocol delivers what
/// follows once this server has found its leader.
async fn run_ensemble(config: ServerConfig) -> Result<(), ServeError> {
    let Started {
        ensemble,
        snapshot,
        deliveries,
        opened,
    } = Ensemble::start(&config).await?;
    let state = recovered_state(
        snapshot,
        ensemble.snapshot_dir(),
        opened,
        tree_config(&config),
    );
    tracing::info!(
        snapshot = state.snapshot.as_ref().map_or(0, |record| record.zxid),
        "recovered; looking for the ensemble's leader"
    );
    let result = serve(
        config,
        OrderingLog::Ensemble(ensemble.clone()),
        state,
        Feed::Ensemble(deliveries),
        Vec::new(),
    )
    .await;
    ensemble.close()?;
    result
}

/// The tree start-up recovered, and what the metrics report of how.
struct RecoveredState {
    tree: DataTree,
    snapshot: Option<SnapshotRecord>,
    startup: Startup,
}

/// The newest snapshot as start-up decodes it, straight from its file.
pub struct DecodedSnapshot {
    tree: DataTree,
    tree_bytes: u64,
}

/// Decodes the tree whose snapshot is the rest of `payload`. It streams from the file, so a
/// restart needs the tree's memory, not the tree's and its snapshot's.
pub(crate) fn decode_snapshot(
    payload: &mut SnapshotPayload,
    tree_config: zoolog_tree::TreeConfig,
) -> Result<DecodedSnapshot, String> {
    let tree_bytes = payload.left_bytes();
    let tree = DataTree::decode_snapshot_from(&mut *payload, tree_bytes, tree_config)
        .map_err(|error| error.to_string())?;
    Ok(DecodedSnapshot { tree, tree_bytes })
}

/// The tree start-up recovered from its snapshot (an empty one without), with what the
/// metrics report of how.
fn recovered_state(
    snapshot: Option<(u64, DecodedSnapshot)>,
    snapshot_dir: &Path,
    opened: LogOpened,
    tree_config: zoolog_tree::TreeConfig,
) -> RecoveredState {
    let startup = Startup {
        total_us: opened.took_us,
        snapshot_load_us: snapshot.as_ref().map(|_| opened.read_times.snapshot_us),
        log_load: (opened.entries > 0).then_some(LogLoad {
            entries: opened.entries,
            took_us: opened.read_times.wal_us,
        }),
    };
    let Some((position, decoded)) = snapshot else {
        return RecoveredState {
            tree: DataTree::new(tree_config),
            snapshot: None,
            startup,
        };
    };
    let record = SnapshotRecord {
        zxid: position as i64,
        size_bytes: decoded.tree_bytes,
        written_s: newest_file_mtime_s(snapshot_dir),
    };
    RecoveredState {
        tree: decoded.tree,
        snapshot: Some(record),
        startup,
    }
}

/// Whichever ordering layer this server runs, for the parts of the shell that touch it.
#[derive(Clone)]
enum OrderingLog {
    Single(Arc<SingleLog>),
    Ensemble(Arc<Ensemble>),
}

impl OrderingLog {
    fn layer(&self) -> Arc<dyn OrderingLayer> {
        match self {
            OrderingLog::Single(log) => log.clone(),
            OrderingLog::Ensemble(ensemble) => ensemble.clone(),
        }
    }

    fn stats(&self) -> LogStats {
        match self {
            OrderingLog::Single(log) => log.stats(),
            OrderingLog::Ensemble(ensemble) => ensemble.stats(),
        }
    }

    /// What `srst` starts over here: the log's sync times, and an ensemble's quorum counters.
    fn reset_statistics(&self) {
        match self {
            OrderingLog::Single(log) => log.reset_fsync_window(),
            OrderingLog::Ensemble(ensemble) => ensemble.reset_statistics(),
        }
    }

    fn quorum_counters(&self) -> QuorumCounters {
        match self {
            OrderingLog::Single(_) => QuorumCounters::default(),
            OrderingLog::Ensemble(ensemble) => ensemble.quorum_counters(),
        }
    }

    /// Stores the tree's snapshot, encoded straight into the file; returns its length.
    /// Blocking IO: call it from a blocking thread.
    fn save_snapshot(&self, position: u64, tree: &DataTree) -> Result<u64, LogError> {
        let write_tree = |sink: &mut SnapshotSink<'_>| {
            tree.encode_snapshot_in_pieces(SNAPSHOT_PIECE_BYTES, |piece| sink.write(piece))
        };
        match self {
            OrderingLog::Single(log) => log.save_snapshot_streamed(position, write_tree),
            OrderingLog::Ensemble(ensemble) => ensemble.save_snapshot(position, write_tree),
        }
    }

    fn leader_report(&self) -> LeaderReport {
        match self {
            OrderingLog::Single(_) => LeaderReport::default(),
            OrderingLog::Ensemble(ensemble) => ensemble.leader_report(),
        }
    }

    fn purge(&self) -> Result<(), LogError> {
        match self {
            OrderingLog::Single(log) => log.purge(),
            OrderingLog::Ensemble(ensemble) => ensemble.purge(),
        }
    }
}

/// Where committed entries (and, in an ensemble, snapshots and role changes) come from.
enum Feed {
    Single(mpsc::Receiver<CommittedBatch>),
    Ensemble(mpsc::Receiver<Delivery>),
}

/// One step of the feed, ready for the core; None when the ordering layer stopped.
enum Fed {
    Entries(Vec<(u64, bytes::Bytes)>),
    Delivery(Delivery),
}

impl Feed {
    async fn next(&mut self) -> Option<Fed> {
        match self {
            Feed::Single(batches) => batches
                .recv()
                .await
                .map(|batch| Fed::Entries(batch.into_entries())),
            Feed::Ensemble(deliveries) => deliveries.recv().await.map(Fed::Delivery),
        }
    }
}

/// Every replica of one log must apply it alike, so an ensemble's session ids cannot carry the
/// id of the server applying them (zxids alone make them unique).
pub(crate) fn tree_config(config: &ServerConfig) -> zoolog_tree::TreeConfig {
    let server_id = if config.ensemble.is_some() {
        ENSEMBLE_SESSION_ID_HIGH_BYTE
    } else {
        config.server_id
    };
    zoolog_tree::TreeConfig {
        server_id,
        extended_types_enabled: config.extended_types_enabled,
        enforce_quota: config.enforce_quota,
        skip_acl: config.skip_acl,
        container_never_used_ms: config.container_never_used_ms,
    }
}

/// The modification time of the newest file in `dir`, in seconds since the epoch; -1 if none.
fn newest_file_mtime_s(dir: &Path) -> i64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return -1;
    };
    entries
        .flatten()
        .filter_map(|entry| entry.metadata().ok()?.modified().ok())
        .filter_map(|time| time.duration_since(UNIX_EPOCH).ok())
        .map(|since| since.as_secs() as i64)
        .max()
        .unwrap_or(-1)
}

async fn serve(
    config: ServerConfig,
    ordering: OrderingLog,
    recovered: RecoveredState,
    feed: Feed,
    replay: Vec<(u64, bytes::Bytes)>,
) -> Result<(), ServeError> {
    let config = Arc::new(config);
    let listener = TcpListener::bind(config.client_addr)
        .await
        .map_err(|source| ServeError::Listen {
            address: config.client_addr,
            source,
        })?;
    tracing::info!(address = %config.client_addr, "serving clients");
    let clock = Clock::new();
    let origin: u64 = rand::random();
    let RecoveredState {
        tree,
        snapshot,
        mut startup,
    } = recovered;
    let mut core = Core::new(config.clone(), ordering.layer(), tree, origin, clock.now());
    if let Some(snapshot) = snapshot {
        core.metrics.recovered_snapshot(snapshot);
    }
    let (messages, inbox) = mpsc::channel(INBOX_MESSAGES_MAX);
    let request_budget = Arc::new(Semaphore::new(config.request_budget_bytes()));
    let accept = tokio::spawn(accept_loop(
        listener,
        config.clone(),
        messages.clone(),
        request_budget,
    ));
    let purge = (config.purge_interval_hours > 0)
        .then(|| tokio::spawn(purge_loop(ordering.clone(), config.purge_interval_hours)));
    let operator_servers = start_operator_servers(&config, &messages).await;
    let mut task = CoreTask {
        core,
        config,
        ordering,
        clock,
        messages,
        connections: HashMap::new(),
    };
    // Through the same output path as live entries: a snapshot that falls due during replay
    // (a crash while the previous one was being written) must be saved, not dropped.
    let replaying = Instant::now();
    task.replay(replay);
    startup.add_replay(elapsed_us(replaying));
    task.core.record_startup(startup);
    let result = task.run(inbox, feed).await;
    accept.abort();
    if let Some(purge) = purge {
        purge.abort();
    }
    for server in operator_servers {
        server.abort();
    }
    result.map_err(ServeError::from)
}

/// autopurge.purgeInterval: snapshots beyond the retained count, and the log segments only they
/// needed, are also deleted after every snapshot; the timer catches what a crash left behind.
async fn purge_loop(ordering: OrderingLog, interval_hours: u64) {
    let mut timer = tokio::time::interval(Duration::from_secs(interval_hours * 3600));
    timer.tick().await;
    loop {
        timer.tick().await;
        let ordering = ordering.clone();
        match tokio::task::spawn_blocking(move || ordering.purge()).await {
            Ok(Ok(())) => tracing::info!("purged old snapshots and log segments"),
            Ok(Err(error)) => tracing::error!(%error, "purge failed"),
            Err(error) => tracing::error!(%error, "purge task failed"),
        }
    }
}

/// Starts the AdminServer (commands and /metrics) and the Prometheus listener as configured. As
/// in ZooKeeper, a port that cannot be bound is logged and the server serves clients anyway.
async fn start_operator_servers(
    config: &ServerConfig,
    messages: &mpsc::Sender<Message>,
) -> Vec<JoinHandle<()>> {
    let timeout = Duration::from_millis(config.admin.idle_timeout_ms);
    let mut listeners = Vec::new();
    if config.admin.enabled {
        let routes = OperatorRoutes {
            messages: messages.clone(),
            command_url: Some(Arc::from(config.admin.command_url.as_str())),
        };
        listeners.push(("AdminServer", config.admin.addr, routes));
    }
    if let Some(addr) = config.prometheus_addr {
        let routes = OperatorRoutes {
            messages: messages.clone(),
            command_url: None,
        };
        listeners.push(("Prometheus metrics", addr, routes));
    }
    let mut servers = Vec::new();
    for (name, addr, routes) in listeners {
        match TcpListener::bind(addr).await {
            Ok(listener) => {
                let address = listener.local_addr().unwrap_or(addr);
                tracing::info!(%address, "{name} listening");
                servers.push(tokio::spawn(http::serve(listener, timeout, routes)));
            }
            Err(error) => {
                tracing::error!(address = %addr, %error, "{name} cannot listen; continuing without it")
            }
        }
    }
    servers
}

/// Routes HTTP requests: /metrics everywhere, commands under the command URL on the
/// AdminServer. Answers come from the core task through the bounded inbox.
#[derive(Clone)]
struct OperatorRoutes {
    messages: mpsc::Sender<Message>,
    /// None on the Prometheus listener, which serves /metrics only.
    command_url: Option<Arc<str>>,
}

const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl http::Handler for OperatorRoutes {
    async fn handle(&self, request: http::Request) -> http::Response {
        if request.path == "/metrics" {
            return self.ask(OperatorQuery::Metrics).await;
        }
        let Some(command_url) = self.command_url.as_deref() else {
            return http::Response::error(404, "not found");
        };
        let Some(rest) = request.path.strip_prefix(command_url) else {
            return http::Response::error(404, "not found");
        };
        match rest.strip_prefix('/') {
            None if !rest.is_empty() => http::Response::error(404, "not found"),
            None | Some("") => {
                http::Response::ok("text/html; charset=utf-8", admin::index_html(command_url))
            }
            Some(name) => {
                let query = OperatorQuery::Command {
                    name: name.to_owned(),
                    args: request.query,
                };
                self.ask(query).await
            }
        }
    }
}

impl OperatorRoutes {
    async fn ask(&self, query: OperatorQuery) -> http::Response {
        let (reply, answer) = oneshot::channel();
        let message = Message::Operator { query, reply };
        if self.messages.send(message).await.is_err() {
            return http::Response::error(503, "the server is shutting down");
        }
        answer
            .await
            .unwrap_or_else(|_| http::Response::error(503, "the server is shutting down"))
    }
}

/// The high byte of the session ids an ensemble's log assigns (a standalone server uses its id,
/// 1 by default, as ZooKeeper does).
const ENSEMBLE_SESSION_ID_HIGH_BYTE: u8 = 0;

/// Inputs waiting for the core task; connection readers wait when it is full.
const INBOX_MESSAGES_MAX: usize = 16_384;

struct Clock {
    start: Instant,
}

impl Clock {
    fn new() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    fn now(&self) -> Now {
        let wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let monotonic = self.start.elapsed();
        Now {
            wall_ms,
            monotonic_ms: monotonic.as_millis() as u64,
            monotonic_us: monotonic.as_micros() as u64,
        }
    }
}

struct CoreTask {
    core: Core,
    config: Arc<ServerConfig>,
    ordering: OrderingLog,
    clock: Clock,
    messages: mpsc::Sender<Message>,
    connections: HashMap<ConnectionId, ConnectionHandle>,
}

impl CoreTask {
    async fn run(
        mut self,
        mut inbox: mpsc::Receiver<Message>,
        mut feed: Feed,
    ) -> std::io::Result<()> {
        let tick_ms = (self.config.tick_ms / 4).clamp(50, 500);
        let mut tick = tokio::time::interval(Duration::from_millis(tick_ms));
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            tokio::select! {
                Some(message) = inbox.recv() => self.message(message),
                fed = feed.next() => match fed {
                    Some(fed) => self.fed(fed),
                    None => {
                        tracing::error!("the log stopped delivering committed entries; shutting down");
                        return Err(std::io::Error::other("log failed"));
                    }
                },
                _ = tick.tick() => self.input(Input::Tick),
                _ = terminate.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        tracing::info!("shutting down");
        Ok(())
    }

    fn fed(&mut self, fed: Fed) {
        match fed {
            Fed::Entries(entries) | Fed::Delivery(Delivery::Committed(entries)) => {
                for (position, entry) in entries {
                    self.input(Input::Committed {
                        position: position as i64,
                        entry,
                    });
                }
            }
            Fed::Delivery(Delivery::InstallSnapshot { position, payload }) => {
                self.input(Input::InstallSnapshot {
                    tree_bytes: payload,
                });
                let nodes = self.core.view().tree.node_count();
                tracing::info!(position, nodes, "installed the leader's snapshot");
            }
            Fed::Delivery(Delivery::Role(role)) => self.input(Input::Role(role)),
        }
    }

    /// Applies the recovered log tail before any client is accepted, so nobody is answered.
    fn replay(&mut self, entries: Vec<(u64, bytes::Bytes)>) {
        for (position, entry) in entries {
            self.input(Input::Committed {
                position: position as i64,
                entry,
            });
        }
        assert!(
            self.connections.is_empty(),
            "replay runs before the first connection"
        );
    }

    fn message(&mut self, message: Message) {
        match message {
            Message::Opened {
                connection,
                peer,
                handle,
            } => {
                self.connections.insert(connection, handle);
                self.input(Input::Opened { connection, peer });
            }
            Message::FourLetterWord {
                connection,
                word,
                argument,
            } => self.four_letter_word(connection, &word, argument),
            Message::Core(Input::Closed { connection }) => {
                self.connections.remove(&connection);
                self.input(Input::Closed { connection });
            }
            Message::Core(input) => self.input(input),
            Message::Requests(inputs) => {
                for input in inputs {
                    self.input(input);
                }
            }
            Message::SnapshotDone(written) => {
                let written = written.map(|(snapshot, elapsed)| {
                    (
                        snapshot,
                        u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
                    )
                });
                self.core.snapshot_finished(written);
            }
            Message::Operator { query, reply } => {
                let _ = reply.send(self.operator_query(query));
            }
        }
    }

    fn operator_query(&mut self, query: OperatorQuery) -> http::Response {
        match query {
            OperatorQuery::Metrics => {
                let text = metrics::render(&self.view());
                http::Response::ok(PROMETHEUS_CONTENT_TYPE, text)
            }
            OperatorQuery::Command { name, args } => {
                let answer = match admin::primary_name(&name) {
                    None => admin::unknown(&name),
                    Some(primary) => {
                        if let Some(action) = admin::action(primary, &args) {
                            self.operate(action);
                        }
                        admin::run(primary, &args, &self.view(), &self.dir_sizes())
                    }
                };
                http::Response::ok("application/json", answer.to_json_string())
            }
        }
    }

    /// The core's view with what only the ordering layer knows.
    fn view(&self) -> four_letter::View<'_> {
        let mut view = self.core.view();
        view.leader_report = self.ordering.leader_report();
        view.quorum = self.ordering.quorum_counters();
        view.log = self.ordering.stats();
        view
    }

    /// `srst` also starts the log's sync-time window over, as ZooKeeper resets its
    /// `fsynctime` with the server statistics.
    fn operate(&mut self, action: OperatorAction) {
        if matches!(action, OperatorAction::ResetServerStats) {
            self.ordering.reset_statistics();
        }
        self.core.operate(action);
    }

    fn dir_sizes(&self) -> DirSizes {
        DirSizes {
            data_bytes: directory_bytes(&self.config.data_dir),
            log_bytes: directory_bytes(&self.config.data_log_dir),
        }
    }

    fn input(&mut self, input: Input) {
        let outputs = self.core.handle(input, self.clock.now());
        for output in outputs {
            self.output(output);
        }
    }

    fn output(&mut self, output: Output) {
        match output {
            Output::Write {
                connection,
                bytes,
                reply,
            } => self.send(connection, bytes, reply),
            Output::Close { connection } => self.close(connection),
            Output::HandshakeDone {
                connection,
                accepted,
            } => {
                if let Some(sender) = self
                    .connections
                    .get_mut(&connection)
                    .and_then(|c| c.handshake.take())
                {
                    let _ = sender.send(accepted);
                }
            }
            Output::SaveSnapshot { tree } => self.save_snapshot(tree),
            Output::Stop { reason } => {
                // Carrying on would serve a state that is not the ensemble's.
                tracing::error!(%reason, "stopping");
                std::process::exit(1);
            }
        }
    }

    fn send(&mut self, connection: ConnectionId, bytes: Vec<u8>, reply: bool) {
        let Some(handle) = self.connections.get(&connection) else {
            return;
        };
        let queued = handle
            .shared
            .outbound_bytes
            .fetch_add(bytes.len(), Ordering::Relaxed)
            + bytes.len();
        if reply {
            lock(&handle.shared.request_bytes).pop_front();
        }
        if queued > self.config.outbound_bytes_per_connection_max {
            tracing::warn!(
                connection,
                queued,
                "dropping a client that does not read its replies"
            );
            self.close(connection);
            return;
        }
        let _ = handle.outbox.send(Outgoing::Bytes { bytes, reply });
    }

    /// Flushes and closes; the core forgets the connection at once.
    fn close(&mut self, connection: ConnectionId) {
        if let Some(handle) = self.connections.remove(&connection) {
            handle.reader.abort();
            let _ = handle.outbox.send(Outgoing::Close);
            let outputs = self
                .core
                .handle(Input::Closed { connection }, self.clock.now());
            for output in outputs {
                self.output(output);
            }
        }
    }

    fn four_letter_word(&mut self, connection: ConnectionId, word: &str, argument: Option<i64>) {
        let text = if self.config.four_letter_word_enabled(word) {
            if let Some(action) = four_letter::action(word, argument) {
                self.operate(action);
            }
            four_letter::answer(word, &self.view(), &self.dir_sizes())
        } else {
            format!("{word} is not executed because it is not in the whitelist.\n")
        };
        if let Some(handle) = self.connections.get(&connection) {
            let _ = handle.outbox.send(Outgoing::Bytes {
                bytes: text.into_bytes(),
                reply: false,
            });
        }
        self.close(connection);
    }

    fn save_snapshot(&mut self, tree: DataTree) {
        let ordering = self.ordering.clone();
        let messages = self.messages.clone();
        tokio::task::spawn_blocking(move || {
            let _background = BackgroundPriority::enter();
            let started = Instant::now();
            let position = tree.last_applied_zxid() as u64;
            let written = match ordering.save_snapshot(position, &tree) {
                Ok(size_bytes) => {
                    let elapsed = started.elapsed();
                    tracing::info!(
                        position,
                        elapsed_ms = elapsed.as_millis() as u64,
                        "snapshot saved"
                    );
                    let snapshot = SnapshotRecord {
                        zxid: position as i64,
                        size_bytes,
                        written_s: wall_seconds(),
                    };
                    Some((snapshot, elapsed))
                }
                Err(error) => {
                    tracing::error!(%error, position, "snapshot failed");
                    None
                }
            };
            let _ = messages.blocking_send(Message::SnapshotDone(written));
        });
    }
}

/// Lowers the calling thread's CPU priority until dropped. A snapshot encodes the whole tree on
/// the cores that also serve requests; at normal priority it steals their time slices and shows
/// up as request tail latency (measured on the ensemble create benchmark). Best effort: a
/// failure leaves the priority as it was.
struct BackgroundPriority {
    lowered: bool,
}

/// Nice value of snapshot work (0 is normal, 19 the lowest).
const BACKGROUND_NICE: libc::c_int = 10;
/// A snapshot goes to its file in pieces of about this size, never whole in memory.
const SNAPSHOT_PIECE_BYTES: usize = 256 << 10;

impl BackgroundPriority {
    fn enter() -> BackgroundPriority {
        BackgroundPriority {
            lowered: set_thread_nice(BACKGROUND_NICE),
        }
    }
}

impl Drop for BackgroundPriority {
    fn drop(&mut self) {
        // The pool thread goes on to run other blocking work; raising a nice value back needs
        // privilege, so an unprivileged server leaves this pool thread at the lower priority.
        if self.lowered {
            set_thread_nice(0);
        }
    }
}

fn set_thread_nice(nice: libc::c_int) -> bool {
    // SAFETY: gettid has no preconditions; setpriority on our own thread id only changes this
    // thread's scheduling weight (Linux applies PRIO_PROCESS with a tid to that thread).
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice) == 0
    }
}

fn wall_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn directory_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => directory_bytes(&entry.path()),
            _ => entry.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// `request_budget` holds a permit per request byte the server may hold, shared by all
/// connections (see `Shared::request_bytes`).
async fn accept_loop(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    messages: mpsc::Sender<Message>,
    request_budget: Arc<Semaphore>,
) {
    let mut next_connection: ConnectionId = 1;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let connection = next_connection;
        next_connection += 1;
        let (read_half, write_half) = stream.into_split();
        let shared = Arc::new(Shared {
            outstanding: Semaphore::new(config.outstanding_requests_per_connection_max),
            request_bytes: Mutex::new(VecDeque::new()),
            outbound_bytes: AtomicUsize::new(0),
        });
        let (outbox, outbox_receiver) = mpsc::unbounded_channel();
        let (handshake_sender, handshake_receiver) = oneshot::channel();
        let (registered_sender, registered) = oneshot::channel();
        tokio::spawn(write_loop(write_half, outbox_receiver, shared.clone()));
        let reader = tokio::spawn(read_loop(
            read_half,
            connection,
            config.clone(),
            messages.clone(),
            Budgets {
                connection: shared.clone(),
                server: request_budget.clone(),
            },
            Gates {
                registered,
                handshake: handshake_receiver,
            },
        ));
        let handle = ConnectionHandle {
            outbox,
            shared,
            reader,
            handshake: Some(handshake_sender),
        };
        if messages
            .send(Message::Opened {
                connection,
                peer,
                handle,
            })
            .await
            .is_err()
        {
            return;
        }
        let _ = registered_sender.send(());
    }
}

/// What a connection's reader waits for: the core knowing the connection before anything it
/// reads arrives there, and later the session decision.
struct Gates {
    registered: oneshot::Receiver<()>,
    handshake: oneshot::Receiver<bool>,
}

async fn write_loop(
    mut socket: OwnedWriteHalf,
    mut outbox: mpsc::UnboundedReceiver<Outgoing>,
    shared: Arc<Shared>,
) {
    let mut batch: Vec<Vec<u8>> = Vec::new();
    while let Some(first) = outbox.recv().await {
        let mut next = Some(first);
        let (mut batch_bytes, mut replies, mut close) = (0, 0, false);
        // Everything already queued goes out in one system call, up to the batch's bounds.
        while let Some(message) = next {
            match message {
                Outgoing::Bytes { bytes, reply } => {
                    batch_bytes += bytes.len();
                    replies += usize::from(reply);
                    batch.push(bytes);
                }
                Outgoing::Close => {
                    close = true;
                    break;
                }
            }
            if batch.len() >= WRITE_BATCH_FRAMES_MAX || batch_bytes >= WRITE_BATCH_BYTES_MAX {
                break;
            }
            next = outbox.try_recv().ok();
        }
        if write_all_vectored(&mut socket, &batch).await.is_err() {
            return;
        }
        batch.clear();
        shared
            .outbound_bytes
            .fetch_sub(batch_bytes, Ordering::Relaxed);
        shared.outstanding.add_permits(replies);
        if close {
            let _ = socket.shutdown().await;
            return;
        }
    }
}

/// Writes `frames` whole and in order, as many at once as the socket takes, straight from
/// their own buffers: a reply is not copied again on its way out.
async fn write_all_vectored(
    socket: &mut OwnedWriteHalf,
    frames: &[Vec<u8>],
) -> std::io::Result<()> {
    // The first frame not yet written whole, and how much of it is.
    let (mut index, mut offset) = (0, 0);
    while index < frames.len() {
        let slices: Vec<std::io::IoSlice<'_>> = std::iter::once(&frames[index][offset..])
            .chain(frames[index + 1..].iter().map(Vec::as_slice))
            .map(std::io::IoSlice::new)
            .collect();
        let mut written = socket.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while index < frames.len() && written >= frames[index].len() - offset {
            written -= frames[index].len() - offset;
            (index, offset) = (index + 1, 0);
        }
        offset += written;
    }
    Ok(())
}

/// Why a connection stopped being read.
enum ReadEnd {
    /// Closed by the peer or broken: the core must forget the connection.
    Gone,
    /// Handed to the core, which closes it (four-letter word, refused handshake).
    HandedOver,
}

async fn read_loop(
    socket: OwnedReadHalf,
    connection: ConnectionId,
    config: Arc<ServerConfig>,
    messages: mpsc::Sender<Message>,
    budgets: Budgets,
    gates: Gates,
) {
    if gates.registered.await.is_err() {
        return;
    }
    let handshake = gates.handshake;
    let mut reader = FrameReader {
        socket: BufReader::with_capacity(READ_BUFFER_BYTES, socket),
        buffer: Vec::new(),
        next_length: None,
        bytes_max: config.packet_bytes_max,
    };
    let end = read_connection(
        &mut reader,
        connection,
        &config,
        &messages,
        &budgets,
        handshake,
    )
    .await;
    if let ReadEnd::Gone = end {
        let _ = messages
            .send(Message::Core(Input::Closed { connection }))
            .await;
    }
}

async fn read_connection(
    reader: &mut FrameReader,
    connection: ConnectionId,
    config: &ServerConfig,
    messages: &mpsc::Sender<Message>,
    budgets: &Budgets,
    handshake: oneshot::Receiver<bool>,
) -> ReadEnd {
    let deadline = Duration::from_millis(config.handshake_timeout_ms);
    let first = match tokio::time::timeout(deadline, reader.first_frame()).await {
        Ok(Ok(first)) => first,
        Ok(Err(_)) | Err(_) => return ReadEnd::Gone,
    };
    let frame = match first {
        First::FourLetterWord(word) => {
            let mut argument = None;
            // ZooKeeper reads stmk's mask only when the word is allowed; a refused one is
            // answered at once.
            if word == four_letter::SET_TRACE_MASK && config.four_letter_word_enabled(&word) {
                let mask = tokio::time::timeout(deadline, reader.socket.read_i64()).await;
                match mask {
                    Ok(Ok(mask)) => argument = Some(mask),
                    Ok(Err(_)) | Err(_) => return ReadEnd::Gone,
                }
            }
            let message = Message::FourLetterWord {
                connection,
                word,
                argument,
            };
            let _ = messages.send(message).await;
            return ReadEnd::HandedOver;
        }
        First::Frame(frame) => frame,
    };
    let Ok(request) = ConnectRequest::decode(&frame) else {
        return ReadEnd::Gone;
    };
    if messages
        .send(Message::Core(Input::Handshake {
            connection,
            request,
            frame_bytes: FRAME_PREFIX_BYTES + frame.len(),
        }))
        .await
        .is_err()
    {
        return ReadEnd::Gone;
    }
    // Nothing more is read until the session is decided (clients pipeline behind the handshake).
    if handshake.await != Ok(true) {
        return ReadEnd::HandedOver;
    }
    loop {
        let (requests, broken) = read_requests(reader, connection, budgets).await;
        if !requests.is_empty() && messages.send(Message::Requests(requests)).await.is_err() {
            return ReadEnd::Gone;
        }
        if broken {
            return ReadEnd::Gone;
        }
    }
}

/// A connection's read buffer: a few dozen pipelined requests of a few hundred bytes.
const READ_BUFFER_BYTES: usize = 32 * 1024;
/// Requests handed to the core in one message, at most.
const REQUESTS_PER_MESSAGE_MAX: usize = 64;

/// What a connection's reader must hold before it reads a request: one of the connection's
/// outstanding slots, and the request's bytes of the server's budget.
struct Budgets {
    connection: Arc<Shared>,
    server: Arc<Semaphore>,
}

#[derive(Clone, Copy)]
enum Admission {
    Admitted,
    /// Only when not waiting: a slot or the bytes are not free now.
    NoRoom,
    /// A bad frame length or a closed socket.
    Broken,
}

impl Budgets {
    /// Takes a slot and the next frame's bytes for it, waiting for them or not. The bytes are
    /// given back with the request's reply (`CoreTask::send`).
    async fn admit(&self, reader: &mut FrameReader, wait: bool) -> Admission {
        // A wait ends without room only if the semaphore is closed, which they never are.
        let no_room = if wait {
            Admission::Broken
        } else {
            Admission::NoRoom
        };
        let slot = if wait {
            self.connection.outstanding.acquire().await.ok()
        } else {
            self.connection.outstanding.try_acquire().ok()
        };
        let Some(slot) = slot else {
            return no_room;
        };
        let Ok(length) = reader.next_length().await else {
            return Admission::Broken;
        };
        let length = u32::try_from(length).expect("frames are shorter than i32::MAX bytes");
        let bytes = if wait {
            self.server.clone().acquire_many_owned(length).await.ok()
        } else {
            self.server.clone().try_acquire_many_owned(length).ok()
        };
        let Some(bytes) = bytes else {
            return no_room;
        };
        slot.forget();
        lock(&self.connection.request_bytes).push_back(bytes);
        Admission::Admitted
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .expect("a request budget's holders never panic")
}

/// The next request, waiting for it and for room for it, followed by those already in the
/// read buffer that also have room. The flag says the connection broke (a bad frame or a
/// closed socket) after the requests returned.
async fn read_requests(
    reader: &mut FrameReader,
    connection: ConnectionId,
    budgets: &Budgets,
) -> (Vec<Input>, bool) {
    let mut requests = Vec::new();
    loop {
        let wait = requests.is_empty();
        if !wait && (requests.len() == REQUESTS_PER_MESSAGE_MAX || !reader.frame_buffered()) {
            return (requests, false);
        }
        match budgets.admit(reader, wait).await {
            Admission::Admitted => {}
            Admission::NoRoom => return (requests, false),
            Admission::Broken => return (requests, true),
        }
        let Ok(frame) = reader.frame().await else {
            return (requests, true);
        };
        match request_input(connection, &frame) {
            Some(input) => requests.push(input),
            None => return (requests, true),
        }
    }
}

enum First {
    FourLetterWord(String),
    Frame(Vec<u8>),
}

struct FrameReader {
    /// Buffered: a pipelining client's frames arrive many to a socket read.
    socket: BufReader<OwnedReadHalf>,
    buffer: Vec<u8>,
    /// The length of the next frame, once its prefix is read and before its payload is.
    next_length: Option<usize>,
    bytes_max: usize,
}

impl FrameReader {
    async fn first_frame(&mut self) -> std::io::Result<First> {
        let mut prefix = [0u8; 4];
        self.socket.read_exact(&mut prefix).await?;
        if let Ok(word) = std::str::from_utf8(&prefix) {
            if four_letter::WORDS.contains(&word) {
                return Ok(First::FourLetterWord(word.to_owned()));
            }
        }
        self.next_length = Some(self.checked_length(prefix)?);
        self.frame().await.map(First::Frame)
    }

    /// Whether a whole frame (or a length that will be refused) is already in the buffer,
    /// so that reading it will not wait for the socket.
    fn frame_buffered(&self) -> bool {
        let buffered = self.socket.buffer();
        if let Some(length) = self.next_length {
            return buffered.len() >= length;
        }
        let Some(prefix) = buffered.first_chunk::<4>() else {
            return false;
        };
        match frame_length(*prefix, self.bytes_max) {
            Ok(length) => buffered.len() - 4 >= length,
            Err(_) => true,
        }
    }

    /// The next frame's length, reading its prefix unless that is read already.
    async fn next_length(&mut self) -> std::io::Result<usize> {
        if let Some(length) = self.next_length {
            return Ok(length);
        }
        let mut prefix = [0u8; 4];
        self.socket.read_exact(&mut prefix).await?;
        let length = self.checked_length(prefix)?;
        self.next_length = Some(length);
        Ok(length)
    }

    async fn frame(&mut self) -> std::io::Result<Vec<u8>> {
        let length = self.next_length().await?;
        self.next_length = None;
        self.buffer.resize(length, 0);
        self.socket.read_exact(&mut self.buffer).await?;
        Ok(std::mem::take(&mut self.buffer))
    }

    fn checked_length(&self, prefix: [u8; 4]) -> std::io::Result<usize> {
        frame_length(prefix, self.bytes_max).map_err(|error| {
            tracing::info!(%error, "closing a connection with a bad frame length");
            std::io::Error::new(std::io::ErrorKind::InvalidData, error)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More than a socket's buffers hold, in frames of many sizes, so that the writes stop
    /// part way through frames and must carry on from there.
    #[tokio::test]
    async fn vectored_writes_deliver_every_frame_whole_and_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let client = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        let (mut server, _) = listener.accept().await.expect("accept");
        let frames: Vec<Vec<u8>> = (0..3000u32)
            .map(|index| vec![(index % 251) as u8; (index as usize * 7919) % 9000])
            .collect();
        let expected: Vec<u8> = frames.concat();
        let reader = tokio::spawn(async move {
            let mut received = Vec::new();
            server.read_to_end(&mut received).await.expect("read");
            received
        });
        let (_read_half, mut write_half) = client.into_split();
        for batch in frames.chunks(WRITE_BATCH_FRAMES_MAX) {
            write_all_vectored(&mut write_half, batch)
                .await
                .expect("write");
        }
        write_half.shutdown().await.expect("shutdown");
        drop(write_half);
        let received = reader.await.expect("reader");
        assert_eq!(received.len(), expected.len());
        assert!(received == expected, "the bytes arrive as written");
    }
}

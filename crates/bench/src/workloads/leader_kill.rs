//! Leader failover in an ensemble the benchmark started: clients write continuously (sessions
//! spread over every server, each with one synchronous setData of a `--value-bytes` value at
//! a time), the leader is killed with SIGKILL, and the time from the kill to the first
//! successful write *sent after the kill*, by any client, is one trial's unavailability. The
//! killed server is then restarted and the ensemble given time to settle before the next trial.
//!
//! A ZooKeeper server that leaves the quorum drops all its clients (every writer here waits for
//! a reply) and refuses handshakes until it serves again. A zoolog member keeps its clients for
//! up to a tick: it answers the write a writer was waiting for once its new leader's history
//! shows whether the write was ordered (appending it again if not), and holds a write sent to
//! it meanwhile until it has a leader, so a survivor's writer may make the first write sent
//! after the kill. A dropped client (like ZooKeeper's Java client)
//! waits a random 0–1 s between rounds of reconnection attempts. So that this pause does not
//! hide the servers' own recovery, besides the open sessions a prober opens a fresh session to
//! every surviving server every [`PROBE_PERIOD`] from the kill on, and writes through it once
//! connected; a fresh session's first round has no pause. The first success of either kind
//! ends the trial.
//!
//! Beside the writers, [`IDLE_PER_SURVIVOR`] sessions on each server but the leader wait for
//! nothing through the kill, as a lock holder or a watcher does; each trial counts those whose
//! connection dropped (at a leader change a ZooKeeper follower drops all its clients, a zoolog
//! member keeps them for up to a tick).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::broadcast::error::TryRecvError;
use tokio::sync::broadcast::Receiver;
use tokio::task::JoinSet;
use tokio::time::Instant;
use zoolog_client::{Client, ClientOptions, SessionState};

use super::{create_if_absent, Context, SESSION_TIMEOUT_MS};
use crate::control::Window;
use crate::servers::{Ensemble, QUORUM_TIMEOUT};
use crate::stats::{LatencyHistogram, LatencySummary, Measurement, Workload};
use crate::utc_time_of_day;

/// Writer sessions per server.
const WRITERS_PER_SERVER: usize = 2;
/// Writes flow this long before the kill.
const STEADY_BEFORE_KILL: Duration = Duration::from_secs(1);
/// A new probe session per surviving server this often after the kill.
const PROBE_PERIOD: Duration = Duration::from_millis(5);
/// A trial in which no write succeeds within this long has failed.
const RECOVERY_MAX: Duration = Duration::from_secs(30);
/// After the restarted server rejoins, the ensemble settles this long before the next kill.
const SETTLE: Duration = Duration::from_secs(2);
const PROBE_SESSION_TIMEOUT_MS: u32 = 4_000;
/// Pause of a writer after a failed write, so that a disconnected client does not spin.
const RETRY_PAUSE: Duration = Duration::from_millis(1);
/// Sessions per surviving server that wait for nothing through the kill: a lock holder's or a
/// watcher's. Each trial counts those that saw their connection drop.
const IDLE_PER_SURVIVOR: usize = 2;

/// What the trial's clients share.
struct Trial {
    /// Set just before the SIGKILL.
    killed_at: Mutex<Option<Instant>>,
    /// The completion of the first successful write sent after the kill, and whether a probe
    /// (a fresh session) made it.
    first_write: Mutex<Option<(Instant, bool)>>,
    /// When the first probe session opened: a survivor served again.
    first_session: Mutex<Option<Instant>>,
    stop: AtomicBool,
    writes_ok: AtomicU64,
}

impl Trial {
    fn succeeded(&self, started: Instant, by_probe: bool) {
        let killed_at = *self.killed_at.lock().expect("no panics");
        if killed_at.is_some_and(|killed_at| started >= killed_at) {
            let now = Instant::now();
            let mut first = self.first_write.lock().expect("no panics");
            if first.is_none_or(|(at, _)| now < at) {
                *first = Some((now, by_probe));
            }
        }
    }

    fn session_opened(&self) {
        let now = Instant::now();
        let mut first = self.first_session.lock().expect("no panics");
        if first.is_none_or(|at| now < at) {
            *first = Some(now);
        }
    }
}

/// What one trial saw.
struct TrialOutcome {
    killed_leader: u32,
    /// The kill by the wall clock, to find the trial in the servers' logs.
    killed_wall: SystemTime,
    to_first_write: Duration,
    /// Whether a probe's fresh session made the first write, rather than an open session.
    by_probe: bool,
    to_first_session: Option<Duration>,
    idle: IdleCount,
}

/// The idle sessions on the surviving servers, and how many of them lost their connection.
#[derive(Debug, Default, Clone, Copy)]
struct IdleCount {
    disconnected: usize,
    sessions: usize,
}

impl std::ops::AddAssign for IdleCount {
    fn add_assign(&mut self, other: IdleCount) {
        self.disconnected += other.disconnected;
        self.sessions += other.sessions;
    }
}

impl TrialOutcome {
    fn describe(&self) -> String {
        let session = self.to_first_session.map_or(String::new(), |elapsed| {
            format!(
                "; a new session after {:.1} ms",
                elapsed.as_secs_f64() * 1000.0
            )
        });
        format!(
            "killed leader server.{} at {}{session}; first write after {:.1} ms ({}); idle \
             sessions on the survivors disconnected: {} of {}",
            self.killed_leader,
            utc_time_of_day(self.killed_wall),
            self.to_first_write.as_secs_f64() * 1000.0,
            if self.by_probe {
                "a new session"
            } else {
                "an open session"
            },
            self.idle.disconnected,
            self.idle.sessions,
        )
    }
}

pub async fn run(
    context: &Context<'_>,
    admin: &Client,
    workload_root: &str,
    results: &mut Vec<Measurement>,
) -> Result<(), String> {
    let Some(ensemble) = context.ensemble else {
        return Err("leader-kill needs an ensemble the benchmark starts (--ensemble N)".into());
    };
    let value = Arc::new(vec![b'v'; context.options.value_bytes]);
    let writers = ensemble.members().len() * WRITERS_PER_SERVER;
    let nodes: Vec<String> = (0..writers)
        .map(|index| format!("{workload_root}/writer-{index}"))
        .collect();
    for node in &nodes {
        create_if_absent(admin, node)
            .await
            .map_err(|error| error.to_string())?;
    }
    let probe_node = format!("{workload_root}/probe");
    create_if_absent(admin, &probe_node)
        .await
        .map_err(|error| error.to_string())?;
    let mut unavailability = LatencyHistogram::default();
    let mut idle = IdleCount::default();
    let mut failed_trials = 0;
    let mut complete = true;
    for trial_index in 0..context.options.leader_kills {
        if context.interrupt.is_set() {
            complete = false;
            break;
        }
        let point = format!("trial {}", trial_index + 1);
        let window = Window::start(Duration::ZERO, context.point_time(), context.interrupt);
        let label = format!("{} {} {point}", context.server, Workload::LeaderKill.name());
        let progress = context.progress.point(label, context.point_time(), &window);
        let outcome = one_trial(context, ensemble, &nodes, &probe_node, &value).await;
        progress.finish();
        match outcome {
            Ok(outcome) => {
                unavailability.record(outcome.to_first_write);
                idle += outcome.idle;
                context.progress.println(format!(
                    "{} leader-kill {point}: {}",
                    context.server,
                    outcome.describe()
                ));
            }
            Err(error) => {
                failed_trials += 1;
                context
                    .progress
                    .println(format!("{} leader-kill {point}: {error}", context.server));
            }
        }
        // The next trial needs every server back, under one leader.
        if let Err(error) = restore(ensemble).await {
            results.push(summary_row(context, &unavailability, failed_trials, false));
            return Err(error);
        }
    }
    context.progress.println(format!(
        "{} leader-kill: idle sessions on the survivors disconnected by the kills: {} of {}",
        context.server, idle.disconnected, idle.sessions
    ));
    results.push(summary_row(
        context,
        &unavailability,
        failed_trials,
        complete,
    ));
    Ok(())
}

fn summary_row(
    context: &Context<'_>,
    unavailability: &LatencyHistogram,
    failed_trials: u64,
    complete: bool,
) -> Measurement {
    let latency: LatencySummary = unavailability.summary();
    Measurement {
        server: context.server.to_string(),
        round: context.round,
        workload: Workload::LeaderKill,
        point: "kill -9 leader".into(),
        x: unavailability.count() as f64,
        operations: unavailability.count(),
        errors: failed_trials,
        // No rate: the trials' count is what matters.
        elapsed_s: 0.0,
        latency,
        complete,
    }
}

/// Restarts every server that does not run and waits until all serve under one leader.
async fn restore(ensemble: &Ensemble) -> Result<(), String> {
    for member in ensemble.members() {
        if !ensemble.is_running(member.id) {
            ensemble.start(member.id)?;
        }
    }
    ensemble.wait_quorum(QUORUM_TIMEOUT).await?;
    tokio::time::sleep(SETTLE).await;
    ensemble.wait_quorum(QUORUM_TIMEOUT).await.map(drop)
}

/// One kill, and what followed until the first successful write.
async fn one_trial(
    context: &Context<'_>,
    ensemble: &Ensemble,
    nodes: &[String],
    probe_node: &str,
    value: &Arc<Vec<u8>>,
) -> Result<TrialOutcome, String> {
    let leader = ensemble.wait_quorum(QUORUM_TIMEOUT).await?;
    let trial = Arc::new(Trial {
        killed_at: Mutex::new(None),
        first_write: Mutex::new(None),
        first_session: Mutex::new(None),
        stop: AtomicBool::new(false),
        writes_ok: AtomicU64::new(0),
    });
    let members = ensemble.members();
    let mut writers = JoinSet::new();
    for (index, node) in nodes.iter().enumerate() {
        let hosts = members[index % members.len()].hosts();
        let client = Client::connect(&hosts, client_options())
            .await
            .map_err(|error| format!("writer {index} cannot connect to {hosts}: {error}"))?;
        writers.spawn(write_continuously(
            client,
            node.clone(),
            value.clone(),
            trial.clone(),
        ));
    }
    let mut idle = Vec::new();
    for member in members.iter().filter(|member| member.id != leader) {
        for _ in 0..IDLE_PER_SURVIVOR {
            let hosts = member.hosts();
            let client = Client::connect(&hosts, client_options())
                .await
                .map_err(|error| format!("an idle session cannot connect to {hosts}: {error}"))?;
            let events = client.session_events();
            idle.push((client, events));
        }
    }
    tokio::time::sleep(STEADY_BEFORE_KILL).await;
    if trial.writes_ok.load(Ordering::Relaxed) == 0 {
        trial.stop.store(true, Ordering::Relaxed);
        return Err("no write succeeded before the kill".into());
    }
    let killed_wall = SystemTime::now();
    *trial.killed_at.lock().expect("no panics") = Some(Instant::now());
    let killed_at = trial
        .killed_at
        .lock()
        .expect("no panics")
        .expect("just set");
    ensemble.kill(leader)?;
    let survivors: Vec<String> = members
        .iter()
        .filter(|member| member.id != leader)
        .map(|member| member.hosts())
        .collect();
    let mut probes = JoinSet::new();
    let deadline = killed_at + RECOVERY_MAX;
    let mut next_probe = Instant::now();
    let outcome = loop {
        if let Some((at, by_probe)) = *trial.first_write.lock().expect("no panics") {
            let first_session = *trial.first_session.lock().expect("no panics");
            break Ok(TrialOutcome {
                killed_leader: leader,
                killed_wall,
                to_first_write: at - killed_at,
                by_probe,
                to_first_session: first_session.map(|opened| opened - killed_at),
                idle: IdleCount::default(),
            });
        }
        if Instant::now() > deadline || context.interrupt.is_set() {
            break Err(format!(
                "no write succeeded within {RECOVERY_MAX:?} of killing server.{leader}"
            ));
        }
        if Instant::now() >= next_probe {
            for hosts in &survivors {
                probes.spawn(probe(
                    hosts.clone(),
                    probe_node.to_string(),
                    value.clone(),
                    trial.clone(),
                ));
            }
            next_probe += PROBE_PERIOD;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    trial.stop.store(true, Ordering::Relaxed);
    // Dropping a probe's client ends its session task; the server forgets the session later.
    probes.abort_all();
    while probes.join_next().await.is_some() {}
    // Writers on the killed server may wait for a reconnection; give them a moment, then stop.
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while writers.join_next().await.is_some() {}
    })
    .await;
    writers.abort_all();
    // Counted after the writers' wait: a server that drops its clients at the change has long
    // done so by then.
    let idle = count_disconnected(idle).await;
    outcome.map(|outcome| TrialOutcome { idle, ..outcome })
}

/// How many of the idle sessions saw their connection drop; closes them.
async fn count_disconnected(idle: Vec<(Client, Receiver<SessionState>)>) -> IdleCount {
    let mut count = IdleCount {
        disconnected: 0,
        sessions: idle.len(),
    };
    for (client, mut events) in idle {
        count.disconnected += usize::from(lost_its_connection(&mut events));
        let _ = tokio::time::timeout(Duration::from_millis(500), client.close()).await;
    }
    count
}

/// Whether a session connected when `events` subscribed has been disconnected since.
fn lost_its_connection(events: &mut Receiver<SessionState>) -> bool {
    loop {
        match events.try_recv() {
            Ok(SessionState::Connected | SessionState::ConnectedReadOnly) => {}
            Ok(_) => return true,
            // Events were lost for want of room: the session changed more often than that.
            Err(TryRecvError::Lagged(_)) => return true,
            Err(TryRecvError::Empty | TryRecvError::Closed) => return false,
        }
    }
}

fn client_options() -> ClientOptions {
    ClientOptions {
        session_timeout_ms: SESSION_TIMEOUT_MS,
        connect_timeout_ms: 10_000,
        ..ClientOptions::default()
    }
}

/// Probe sessions are dropped unclosed: a short timeout lets the servers forget them soon.
fn probe_options() -> ClientOptions {
    ClientOptions {
        session_timeout_ms: PROBE_SESSION_TIMEOUT_MS,
        connect_timeout_ms: 10_000,
        ..ClientOptions::default()
    }
}

async fn write_continuously(client: Client, node: String, value: Arc<Vec<u8>>, trial: Arc<Trial>) {
    while !trial.stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        match client.set_data(&node, Some(&value), None).await {
            Ok(_) => {
                trial.writes_ok.fetch_add(1, Ordering::Relaxed);
                trial.succeeded(started, false);
            }
            Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
        }
    }
    let _ = tokio::time::timeout(Duration::from_millis(500), client.close()).await;
}

/// A fresh session to one server, and one write through it.
async fn probe(hosts: String, node: String, value: Arc<Vec<u8>>, trial: Arc<Trial>) {
    let started = Instant::now();
    let Ok(client) = Client::connect(&hosts, probe_options()).await else {
        return;
    };
    trial.session_opened();
    if client.set_data(&node, Some(&value), None).await.is_ok() {
        trial.succeeded(started, true);
    }
    drop(client);
}

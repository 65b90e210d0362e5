//! The workloads and what they share: the run context, sessions, a point's recorder, and the
//! nodes under [`ROOT`] that each workload creates and removes again.

mod barrier;
mod creates;
mod leader_kill;
mod recipes;
mod throughput;

use std::fmt::Display;
use std::sync::Mutex;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use zoolog_client::{open_acl_unsafe, Client, ClientOptions, CreateMode, Error, ErrorCode};

use crate::control::{Signal, Window};
use crate::options::Options;
use crate::progress::Progress;
use crate::servers::Ensemble;
use crate::stats::{LatencyHistogram, Measurement, Workload};

/// Every node the benchmark creates lives under this one.
pub const ROOT: &str = "/zoolog-bench";
/// Bound on the nodes a clean-up removes.
const CLEANUP_NODES_MAX: usize = 1_000_000;
/// Requests one clean-up or setup step keeps outstanding.
const SETUP_OUTSTANDING: usize = 256;
/// Longest a session may be unreachable before the server forgets it.
const SESSION_TIMEOUT_MS: u32 = 30_000;

/// What every workload needs to know about the run.
pub struct Context<'a> {
    /// The name of the server list in the results.
    pub server: &'a str,
    /// Which of the `--rounds` this is, from 1.
    pub round: usize,
    pub hosts: &'a str,
    /// What each session connects to, round-robin: one server each in an ensemble (so that
    /// the sessions spread over all of them), else the whole list.
    pub spread: &'a [String],
    /// The ensemble the benchmark started, if it did.
    pub ensemble: Option<&'a Ensemble>,
    pub options: &'a Options,
    pub interrupt: &'a Signal,
    pub progress: &'a Progress,
}

impl Context<'_> {
    /// Starts a point's window and its part of the progress bar.
    fn begin_point(
        &self,
        workload: Workload,
        point: &str,
    ) -> (Window, crate::progress::PointProgress) {
        let window = Window::start(self.options.warmup, self.options.duration, self.interrupt);
        let label = format!("{} {} {point}", self.server, workload.name());
        let progress = self.progress.point(label, self.point_time(), &window);
        (window, progress)
    }

    fn point_time(&self) -> Duration {
        self.options.warmup + self.options.duration
    }

    async fn connect(&self, requests_outstanding_max: usize) -> Result<Client, Error> {
        Client::connect(self.hosts, client_options(requests_outstanding_max)).await
    }

    /// `count` sessions, connected concurrently.
    async fn connect_sessions(
        &self,
        count: usize,
        requests_outstanding_max: usize,
    ) -> Result<Vec<Client>, Error> {
        let mut connecting = JoinSet::new();
        for index in 0..count {
            let hosts = match self.spread.len() {
                0 => self.hosts.to_string(),
                servers => self.spread[index % servers].clone(),
            };
            let options = client_options(requests_outstanding_max);
            connecting.spawn(async move { Client::connect(&hosts, options).await });
        }
        let mut clients = Vec::with_capacity(count);
        while let Some(connected) = connecting.join_next().await {
            clients.push(connected.expect("connect does not panic")?);
        }
        Ok(clients)
    }
}

fn client_options(requests_outstanding_max: usize) -> ClientOptions {
    ClientOptions {
        session_timeout_ms: SESSION_TIMEOUT_MS,
        requests_outstanding_max,
        ..ClientOptions::default()
    }
}

/// How many points a workload measures with these options, for the progress bar.
pub fn planned_points(workload: Workload, options: &Options) -> usize {
    match workload {
        Workload::Throughput => options.read_ratios.len(),
        Workload::Creates => options.create_workers.len(),
        Workload::Barrier => options.barrier_clients.len(),
        Workload::Recipes => recipes::RECIPES.len(),
        Workload::LeaderKill => options.leader_kills,
    }
}

/// Runs one workload against the context's servers, appending a measurement per point (also
/// when a later point fails or Ctrl-C stops the run), and removes its nodes afterwards.
pub async fn run(
    workload: Workload,
    context: &Context<'_>,
    results: &mut Vec<Measurement>,
) -> Result<(), String> {
    let text = |error: Error| error.to_string();
    let admin = context.connect(SETUP_OUTSTANDING).await.map_err(text)?;
    let workload_root = format!("{ROOT}/{}", workload.name());
    delete_tree(&admin, &workload_root).await.map_err(text)?;
    create_if_absent(&admin, ROOT).await.map_err(text)?;
    create_if_absent(&admin, &workload_root)
        .await
        .map_err(text)?;
    let outcome = match workload {
        Workload::Throughput => throughput::run(context, &admin, &workload_root, results)
            .await
            .map_err(text),
        Workload::Creates => creates::run(context, &workload_root, results)
            .await
            .map_err(text),
        Workload::Barrier => barrier::run(context, &workload_root, results)
            .await
            .map_err(text),
        Workload::Recipes => recipes::run(context, &admin, &workload_root, results)
            .await
            .map_err(text),
        Workload::LeaderKill => leader_kill::run(context, &admin, &workload_root, results).await,
    };
    let cleaned = delete_tree(&admin, &workload_root).await.map_err(text);
    // ROOT is shared by the workloads; the last one out removes it.
    let _ = delete_if_present(&admin, ROOT).await;
    let _ = admin.close().await;
    outcome.and(cleaned)
}

/// Latencies and failures of one point, shared by the point's tasks.
#[derive(Default)]
struct Recorder {
    recorded: Mutex<Recorded>,
}

#[derive(Default)]
struct Recorded {
    latencies: LatencyHistogram,
    errors: u64,
    /// Shown once per point: enough to tell a dead server from a bug in a recipe.
    first_error: Option<String>,
}

impl Recorder {
    /// Records an operation that started at `started` and just ended, if it was measured, and
    /// counts it on the progress bar if it succeeded.
    fn record<T, E: Display>(&self, window: &Window, started: Instant, outcome: &Result<T, E>) {
        if outcome.is_ok() && window.is_measured(started) {
            window.count_one();
        }
        self.record_uncounted(window, started, outcome);
    }

    /// Like [`Recorder::record`], without the progress bar.
    fn record_uncounted<T, E: Display>(
        &self,
        window: &Window,
        started: Instant,
        outcome: &Result<T, E>,
    ) {
        if !window.is_measured(started) {
            return;
        }
        let mut recorded = self.recorded.lock().expect("no recorder panics");
        match outcome {
            Ok(_) => recorded.latencies.record(started.elapsed()),
            Err(error) => {
                recorded.errors += 1;
                recorded
                    .first_error
                    .get_or_insert_with(|| error.to_string());
            }
        }
    }

    /// The point's row; `operations` defaults to the number of latencies recorded.
    fn measurement(
        self,
        context: &Context<'_>,
        workload: Workload,
        point: &str,
        x: f64,
        window: &Window,
    ) -> Measurement {
        let recorded = self.recorded.into_inner().expect("no recorder panics");
        if let Some(first_error) = &recorded.first_error {
            context.progress.println(format!(
                "{} {} {point}: {} failed calls, the first: {first_error}",
                context.server,
                workload.name(),
                recorded.errors
            ));
        }
        Measurement {
            server: context.server.to_string(),
            round: context.round,
            workload,
            point: point.to_string(),
            x,
            operations: recorded.latencies.count(),
            errors: recorded.errors,
            elapsed_s: window.measured_s(),
            latency: recorded.latencies.summary(),
            complete: window.ran_to_end(),
        }
    }
}

/// Creates a persistent node; one that exists already is fine.
async fn create_if_absent(client: &Client, path: &str) -> Result<(), Error> {
    let created = client
        .create(path, Some(b""), &open_acl_unsafe(), CreateMode::Persistent)
        .await;
    match created {
        Err(error) if error.code() == ErrorCode::NodeExists => Ok(()),
        created => created.map(drop),
    }
}

/// Deletes a node; one that is gone already is fine.
async fn delete_if_present(client: &Client, path: &str) -> Result<(), Error> {
    match client.delete(path, None).await {
        Err(error) if error.code() == ErrorCode::NoNode => Ok(()),
        deleted => deleted,
    }
}

/// Removes `path` and everything under it, deepest level first, each level pipelined.
async fn delete_tree(client: &Client, path: &str) -> Result<(), Error> {
    let mut levels: Vec<Vec<String>> = Vec::new();
    let mut level = vec![path.to_string()];
    let mut found = 0;
    while !level.is_empty() && found < CLEANUP_NODES_MAX {
        let mut next = Vec::new();
        for parent in &level {
            match client.get_children(parent).await {
                Ok(children) => {
                    next.extend(children.iter().map(|child| format!("{parent}/{child}")))
                }
                Err(error) if error.code() == ErrorCode::NoNode => {}
                Err(error) => return Err(error),
            }
        }
        found += next.len();
        levels.push(level);
        level = next;
    }
    for level in levels.into_iter().rev() {
        for_each_pipelined(client, level, |client, path| async move {
            delete_if_present(&client, &path).await
        })
        .await?;
    }
    Ok(())
}

/// Runs `operation` on every path with up to [`SETUP_OUTSTANDING`] in flight.
async fn for_each_pipelined<F, Fut>(
    client: &Client,
    paths: Vec<String>,
    operation: F,
) -> Result<(), Error>
where
    F: Fn(Client, String) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let mut in_flight = JoinSet::new();
    for path in paths {
        if in_flight.len() >= SETUP_OUTSTANDING {
            join_one(&mut in_flight).await?;
        }
        in_flight.spawn(operation(client.clone(), path));
    }
    while !in_flight.is_empty() {
        join_one(&mut in_flight).await?;
    }
    Ok(())
}

async fn join_one(in_flight: &mut JoinSet<Result<(), Error>>) -> Result<(), Error> {
    match in_flight.join_next().await {
        Some(joined) => joined.expect("pipelined operations do not panic"),
        None => Ok(()),
    }
}

/// Closes sessions at the end of a point, so their ephemeral nodes go at once.
async fn close_all(clients: Vec<Client>) {
    for client in clients {
        let _ = client.close().await;
    }
}

//! Table 3 of the ZooKeeper paper: N clients pass double barriers in lock-step, each entering
//! and leaving barrier r before entering barrier r+1. Reported as barriers per second (the
//! paper reports seconds for b barriers: b divided by this rate) and the latency of one
//! barrier (enter plus leave) as each client sees it. The barrier is the client's
//! [`DoubleBarrier`] recipe, one fresh directory per round as it asks.

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio::time::Instant;
use zoolog_client::recipes::DoubleBarrier;
use zoolog_client::{Client, Error};

use super::{close_all, Context, Recorder};
use crate::bounded::{within, WaitError};
use crate::control::{Signal, Window};
use crate::stats::{Measurement, Workload};

/// Bound on the barriers of one point.
const ROUNDS_MAX: u64 = 10_000_000;

pub async fn run(
    context: &Context<'_>,
    workload_root: &str,
    results: &mut Vec<Measurement>,
) -> Result<(), Error> {
    for &clients in &context.options.barrier_clients {
        if context.interrupt.is_set() {
            break;
        }
        let point = format!("clients={clients}");
        let parent = format!("{workload_root}/clients-{clients}");
        results.push(measure_rounds(context, Workload::Barrier, &point, clients, &parent).await?);
    }
    Ok(())
}

/// Runs barrier rounds among `clients` fresh sessions for one point. The barrier count is the
/// rounds every client completed in the measured window; the latencies are every client's.
pub async fn measure_rounds(
    context: &Context<'_>,
    workload: Workload,
    point: &str,
    clients: usize,
    parent: &str,
) -> Result<Measurement, Error> {
    let sessions = context.connect_sessions(clients, 16).await?;
    let (window, progress) = context.begin_point(workload, point);
    let recorder = Arc::new(Recorder::default());
    // Set by the first participant to stop, so nobody waits for a round that will not fill.
    let give_up = Signal::new();
    let forward_interrupt = forward(context.interrupt.clone(), give_up.clone());
    let mut participants = JoinSet::new();
    for (index, session) in sessions.iter().enumerate() {
        let participant = Participant {
            client: session.clone(),
            parent: parent.to_string(),
            size: clients,
            is_counting: index == 0,
        };
        participants.spawn(participant.run(window.clone(), recorder.clone(), give_up.clone()));
    }
    let mut rounds_completed_by_all = u64::MAX;
    while let Some(rounds) = participants.join_next().await {
        rounds_completed_by_all =
            rounds_completed_by_all.min(rounds.expect("no participant panics"));
    }
    forward_interrupt.abort();
    progress.finish();
    close_all(sessions).await;
    let recorder = Arc::into_inner(recorder).expect("every participant has ended");
    let mut measurement = recorder.measurement(context, workload, point, clients as f64, &window);
    measurement.operations = rounds_completed_by_all;
    Ok(measurement)
}

/// Sets `to` when `from` is set.
fn forward(from: Signal, to: Signal) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        from.wait().await;
        to.set();
    })
}

struct Participant {
    client: Client,
    parent: String,
    size: usize,
    /// One participant feeds the progress bar, so it shows barriers, not client-barriers.
    is_counting: bool,
}

impl Participant {
    /// Passes barriers until the window closes or someone gives up; returns the measured
    /// barriers it completed.
    async fn run(self, window: Window, recorder: Arc<Recorder>, give_up: Signal) -> u64 {
        let mut measured_rounds = 0;
        for round in 0..ROUNDS_MAX {
            if !window.is_open() || give_up.is_set() {
                break;
            }
            let path = format!("{}/round-{round}", self.parent);
            let mut barrier = DoubleBarrier::new(&self.client, &path, self.size);
            let started = Instant::now();
            let passed = within(&give_up, async {
                barrier.enter().await?;
                barrier.leave().await
            })
            .await;
            if matches!(passed, Err(WaitError::GaveUp)) {
                break;
            }
            if passed.is_ok() && window.is_measured(started) {
                measured_rounds += 1;
            }
            self.record(&window, started, &passed, &recorder);
            if passed.is_err() {
                break;
            }
        }
        give_up.set();
        measured_rounds
    }

    fn record(
        &self,
        window: &Window,
        started: Instant,
        passed: &Result<(), WaitError>,
        recorder: &Recorder,
    ) {
        if self.is_counting {
            recorder.record(window, started, passed);
        } else {
            recorder.record_uncounted(window, started, passed);
        }
    }
}

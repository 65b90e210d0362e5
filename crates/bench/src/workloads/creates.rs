//! Table 2 of the ZooKeeper paper (after the Chubby benchmark): each worker, on its own session,
//! sends a create of a `--value-bytes` node, waits for it, sends an asynchronous delete of the
//! new node and starts the next create. Measured once per worker count.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::task::JoinSet;
use tokio::time::Instant;
use zoolog_client::{open_acl_unsafe, Client, CreateMode, Error};

use super::{close_all, Context, Recorder};
use crate::control::Window;
use crate::stats::{Measurement, Workload};

/// Bound on the creates of one worker in one point.
const CREATES_PER_WORKER_MAX: u64 = 100_000_000;
/// Deletes a worker leaves unanswered before it waits for one: the session's own outstanding
/// limit would hold them back anyway, this also bounds the futures the worker polls.
const DELETES_IN_FLIGHT_MAX: usize = 1000;

pub async fn run(
    context: &Context<'_>,
    workload_root: &str,
    results: &mut Vec<Measurement>,
) -> Result<(), Error> {
    let value = Arc::new(vec![b'v'; context.options.value_bytes]);
    for &workers in &context.options.create_workers {
        if context.interrupt.is_set() {
            break;
        }
        let sessions = context
            .connect_sessions(workers, DELETES_IN_FLIGHT_MAX + 1)
            .await?;
        let point = format!("workers={workers}");
        let (window, progress) = context.begin_point(Workload::Creates, &point);
        let recorder = Arc::new(Recorder::default());
        let mut running = JoinSet::new();
        for (index, session) in sessions.iter().enumerate() {
            let worker = Worker {
                client: session.clone(),
                path_prefix: format!("{workload_root}/w{workers}-{index}-"),
                value: value.clone(),
            };
            running.spawn(worker.run(window.clone(), recorder.clone()));
        }
        while running.join_next().await.is_some() {}
        progress.finish();
        close_all(sessions).await;
        let recorder = Arc::into_inner(recorder).expect("every worker has ended");
        results.push(recorder.measurement(
            context,
            Workload::Creates,
            &point,
            workers as f64,
            &window,
        ));
    }
    Ok(())
}

struct Worker {
    client: Client,
    path_prefix: String,
    value: Arc<Vec<u8>>,
}

impl Worker {
    /// The deletes are polled by the worker itself, not spawned: the benchmark client shares
    /// the cores with the servers it measures, and a task per delete cost it a spawn, a join
    /// and their wake-ups.
    async fn run(self, window: Window, recorder: Arc<Recorder>) {
        let acl = open_acl_unsafe();
        let mut deletes = FuturesUnordered::new();
        for sequence in 0..CREATES_PER_WORKER_MAX {
            if !window.is_open() {
                break;
            }
            let path = format!("{}{sequence}", self.path_prefix);
            let started = Instant::now();
            let create = self
                .client
                .create(&path, Some(&self.value), &acl, CreateMode::Persistent);
            let created = while_draining(&mut deletes, create).await;
            recorder.record(&window, started, &created);
            if created.is_err() {
                continue;
            }
            if deletes.len() >= DELETES_IN_FLIGHT_MAX {
                deletes.next().await;
            }
            let client = &self.client;
            deletes.push(async move { client.delete(&path, None).await });
        }
        // Leftover nodes of failed deletes go with the workload's clean-up.
        while deletes.next().await.is_some() {}
    }
}

/// Awaits `future` while finishing whatever `deletes` it can. The deletes are polled first, so
/// a new delete is handed to the session before the create that follows it, in the paper's order.
async fn while_draining<D: Future, F: Future>(
    deletes: &mut FuturesUnordered<D>,
    future: F,
) -> F::Output {
    let mut future = pin!(future);
    poll_fn(|context| {
        while let Poll::Ready(Some(_)) = deletes.poll_next_unpin(context) {}
        future.as_mut().poll(context)
    })
    .await
}

//! Table 2 of the ZooKeeper paper (after the Chubby benchmark): each worker, on its own session,
//! sends a create of a `--value-bytes` node, waits for it, sends an asynchronous delete of the
//! new node and starts the next create. Measured once per worker count.

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio::time::Instant;
use zoolog_client::{open_acl_unsafe, Client, CreateMode, Error};

use super::{close_all, Context, Recorder};
use crate::control::Window;
use crate::stats::{Measurement, Workload};

/// Bound on the creates of one worker in one point.
const CREATES_PER_WORKER_MAX: u64 = 100_000_000;
/// Deletes a worker leaves unanswered before it waits for the oldest: the session's own
/// outstanding limit would hold them back anyway, this also bounds the tasks.
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
    async fn run(self, window: Window, recorder: Arc<Recorder>) {
        let acl = open_acl_unsafe();
        let mut deletes = JoinSet::new();
        for sequence in 0..CREATES_PER_WORKER_MAX {
            if !window.is_open() {
                break;
            }
            let path = format!("{}{sequence}", self.path_prefix);
            let started = Instant::now();
            let created = self
                .client
                .create(&path, Some(&self.value), &acl, CreateMode::Persistent)
                .await;
            recorder.record(&window, started, &created);
            if created.is_err() {
                continue;
            }
            if deletes.len() >= DELETES_IN_FLIGHT_MAX {
                deletes.join_next().await;
            }
            let client = self.client.clone();
            deletes.spawn(async move { client.delete(&path, None).await });
        }
        // Leftover nodes of failed deletes go with the workload's clean-up.
        while deletes.join_next().await.is_some() {}
    }
}

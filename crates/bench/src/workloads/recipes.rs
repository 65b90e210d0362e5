//! Table 1 of the shared-log paper: the latency of one barrier, one lock acquire-and-release,
//! one queue hand-off and one query. The paper does not say how many clients took part, so
//! this is an approximation: barrier and lock are contended by `--recipe-clients` sessions,
//! the queue has one producer and one consumer (latency: put until the consumer holds the
//! item), and the query is one session reading one node synchronously. Barrier, lock and
//! queue are the client's recipes ([`zoolog_client::recipes`]).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use zoolog_client::recipes::{DistributedQueue, Lock};
use zoolog_client::{open_acl_unsafe, Client, CreateMode, Error};

use super::barrier::measure_rounds;
use super::{close_all, create_if_absent, Context, Recorder};
use crate::bounded::{within, WaitError, WAIT_MAX};
use crate::control::{Signal, Window};
use crate::stats::{Measurement, Workload};

pub const RECIPES: [&str; 4] = ["barrier", "lock", "queue", "query"];
/// Bound on the operations of one session in one point.
const OPERATIONS_MAX: u64 = 100_000_000;

pub async fn run(
    context: &Context<'_>,
    admin: &Client,
    workload_root: &str,
    results: &mut Vec<Measurement>,
) -> Result<(), Error> {
    let clients = context.options.recipe_clients;
    for (index, recipe) in RECIPES.into_iter().enumerate() {
        if context.interrupt.is_set() {
            break;
        }
        let parent = format!("{workload_root}/{recipe}");
        create_if_absent(admin, &parent).await?;
        let mut measurement = match recipe {
            "barrier" => {
                measure_rounds(context, Workload::Recipes, recipe, clients, &parent).await?
            }
            "lock" => measure_lock(context, clients, &parent).await?,
            "queue" => measure_queue(context, &parent).await?,
            _ => measure_query(context, admin, &parent).await?,
        };
        measurement.x = index as f64;
        results.push(measurement);
    }
    Ok(())
}

async fn measure_lock(
    context: &Context<'_>,
    clients: usize,
    path: &str,
) -> Result<Measurement, Error> {
    let sessions = context.connect_sessions(clients, 16).await?;
    let (window, progress) = context.begin_point(Workload::Recipes, "lock");
    let recorder = Arc::new(Recorder::default());
    let mut contenders = JoinSet::new();
    for session in &sessions {
        let (client, path) = (session.clone(), path.to_string());
        let (window, recorder) = (window.clone(), recorder.clone());
        contenders.spawn(async move {
            let lock = Lock::new(&client, &path);
            for _ in 0..OPERATIONS_MAX {
                if !window.is_open() {
                    break;
                }
                let started = Instant::now();
                let cycled = within(window.interrupt(), async {
                    lock.acquire().await?.release().await
                })
                .await;
                recorder.record(&window, started, &cycled);
            }
        });
    }
    while contenders.join_next().await.is_some() {}
    Ok(finish(context, "lock", sessions, window, progress, recorder).await)
}

async fn measure_queue(context: &Context<'_>, path: &str) -> Result<Measurement, Error> {
    let sessions = context.connect_sessions(2, 16).await?;
    let (window, progress) = context.begin_point(Workload::Recipes, "queue");
    let recorder = Arc::new(Recorder::default());
    let give_up = Signal::new();
    let (taken_sender, mut taken) = mpsc::channel(1);
    let consumer = tokio::spawn(consume(
        sessions[1].clone(),
        path.to_string(),
        give_up.clone(),
        taken_sender,
    ));
    let queue = DistributedQueue::new(&sessions[0], path);
    for _ in 0..OPERATIONS_MAX {
        if !window.is_open() {
            break;
        }
        let started = Instant::now();
        let handed_over = match queue.put(b"item").await {
            Ok(_) => wait_for_consumer(&mut taken, &window).await,
            Err(error) => Err(WaitError::Client(error)),
        };
        recorder.record(&window, started, &handed_over);
        if handed_over.is_err() {
            break;
        }
    }
    give_up.set();
    let _ = consumer.await;
    Ok(finish(context, "queue", sessions, window, progress, recorder).await)
}

/// Takes items until `give_up`, telling the producer about each.
async fn consume(client: Client, path: String, give_up: Signal, taken: mpsc::Sender<()>) {
    let queue = DistributedQueue::new(&client, &path);
    for _ in 0..OPERATIONS_MAX {
        if within(&give_up, queue.take()).await.is_err() || taken.send(()).await.is_err() {
            break;
        }
    }
}

async fn wait_for_consumer(
    taken: &mut mpsc::Receiver<()>,
    window: &Window,
) -> Result<(), WaitError> {
    tokio::select! {
        received = taken.recv() => received.ok_or(WaitError::GaveUp),
        _ = window.interrupt().wait() => Err(WaitError::GaveUp),
        _ = tokio::time::sleep(WAIT_MAX) => Err(WaitError::Stalled),
    }
}

async fn measure_query(
    context: &Context<'_>,
    admin: &Client,
    parent: &str,
) -> Result<Measurement, Error> {
    let node = format!("{parent}/node");
    let value = vec![b'v'; context.options.value_bytes];
    admin
        .create(
            &node,
            Some(&value),
            &open_acl_unsafe(),
            CreateMode::Persistent,
        )
        .await?;
    let sessions = context.connect_sessions(1, 16).await?;
    let (window, progress) = context.begin_point(Workload::Recipes, "query");
    let recorder = Arc::new(Recorder::default());
    for _ in 0..OPERATIONS_MAX {
        if !window.is_open() {
            break;
        }
        let started = Instant::now();
        let read = sessions[0].get_data(&node).await;
        recorder.record(&window, started, &read);
    }
    Ok(finish(context, "query", sessions, window, progress, recorder).await)
}

async fn finish(
    context: &Context<'_>,
    recipe: &str,
    sessions: Vec<Client>,
    window: Window,
    progress: crate::progress::PointProgress,
    recorder: Arc<Recorder>,
) -> Measurement {
    progress.finish();
    close_all(sessions).await;
    let recorder = Arc::into_inner(recorder).expect("every task of the point has ended");
    recorder.measurement(context, Workload::Recipes, recipe, 0.0, &window)
}

//! Figure 5 of the ZooKeeper paper: a saturated server, many sessions each keeping
//! `--outstanding` requests in flight, every request a getData or a setData of a
//! `--value-bytes` value on one of a fixed set of nodes; measured once per read ratio.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;
use tokio::time::Instant;
use zoolog_client::{open_acl_unsafe, Client, CreateMode, Error};

use super::{close_all, for_each_pipelined, Context, Recorder};
use crate::control::Window;
use crate::stats::{Measurement, Workload};

/// The nodes read and written; enough that writes rarely queue behind one another on one node.
const NODES: usize = 256;
/// Bound on the requests one in-flight slot sends in one point.
const REQUESTS_PER_SLOT_MAX: u64 = 100_000_000;

pub async fn run(
    context: &Context<'_>,
    admin: &Client,
    workload_root: &str,
    results: &mut Vec<Measurement>,
) -> Result<(), Error> {
    let value = vec![b'v'; context.options.value_bytes];
    let nodes: Arc<Vec<String>> = Arc::new(
        (0..NODES)
            .map(|index| format!("{workload_root}/node-{index:04}"))
            .collect(),
    );
    let created_value = value.clone();
    for_each_pipelined(admin, nodes.to_vec(), move |client, path| {
        let value = created_value.clone();
        async move {
            let acl = open_acl_unsafe();
            client
                .create(&path, Some(&value), &acl, CreateMode::Persistent)
                .await
                .map(drop)
        }
    })
    .await?;
    let sessions = context
        .connect_sessions(context.options.sessions, context.options.outstanding)
        .await?;
    let value = Arc::new(value);
    for &read_ratio in &context.options.read_ratios {
        if context.interrupt.is_set() {
            break;
        }
        let point = format!("read_ratio={read_ratio}");
        let (window, progress) = context.begin_point(Workload::Throughput, &point);
        let recorder = Arc::new(Recorder::default());
        let mut slots = JoinSet::new();
        for (session_index, session) in sessions.iter().enumerate() {
            for slot_index in 0..context.options.outstanding {
                let slot = Slot {
                    client: session.clone(),
                    nodes: nodes.clone(),
                    value: value.clone(),
                    read_ratio,
                    seed: (session_index * context.options.outstanding + slot_index) as u64,
                };
                slots.spawn(slot.run(window.clone(), recorder.clone()));
            }
        }
        while slots.join_next().await.is_some() {}
        progress.finish();
        let recorder = Arc::into_inner(recorder).expect("every slot has ended");
        results.push(recorder.measurement(
            context,
            Workload::Throughput,
            &point,
            read_ratio,
            &window,
        ));
    }
    close_all(sessions).await;
    Ok(())
}

/// One of a session's outstanding requests: sends the next as soon as the last is answered.
struct Slot {
    client: Client,
    nodes: Arc<Vec<String>>,
    value: Arc<Vec<u8>>,
    read_ratio: f64,
    seed: u64,
}

impl Slot {
    async fn run(self, window: Window, recorder: Arc<Recorder>) {
        let mut random = StdRng::seed_from_u64(self.seed);
        for _ in 0..REQUESTS_PER_SLOT_MAX {
            if !window.is_open() {
                break;
            }
            let node = &self.nodes[random.gen_range(0..self.nodes.len())];
            let is_read = random.gen_bool(self.read_ratio);
            let started = Instant::now();
            let outcome = if is_read {
                self.client.get_data(node).await.map(drop)
            } else {
                self.client
                    .set_data(node, Some(&self.value), None)
                    .await
                    .map(drop)
            };
            recorder.record(&window, started, &outcome);
        }
    }
}

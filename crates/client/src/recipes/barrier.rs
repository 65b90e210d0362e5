//! The double barrier (§2.4 "Double Barrier").
//!
//! Each process registers with an ephemeral sequential `process-` child of the barrier's
//! directory. **Enter**: a process first watches for a `ready` child, then registers and counts
//! the registered processes; the one whose registration brings the count to the threshold creates
//! `ready`, and the watch releases everyone else. Nobody passes before `threshold` processes have
//! registered, since `ready` appears only after a process counted that many, and the watch set
//! before registering cannot miss it. **Leave**: a process deregisters and may go only once no
//! process node is left. To wait without a herd, the lowest process keeps its node and waits for
//! the highest to go; every other process deletes its own node and waits for the lowest to go;
//! the lowest deletes its node last, when it is alone, so its deletion means everyone has left.
//!
//! A barrier directory serves one round: `ready` stays behind, so use a fresh directory per round.

use crate::recipes::owned::OwnedNode;
use crate::recipes::sequential::{create_protected, in_line_order};
use crate::recipes::support::{child_path, ensure_path, retrying, wait_for_change_or_absence};
use crate::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode};

const READY_NAME: &str = "ready";

/// One process's side of a double barrier over `dir` for `threshold` processes.
///
/// ```no_run
/// use zoolog_client::recipes::DoubleBarrier;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let mut barrier = DoubleBarrier::new(&client, "/app/barriers/round-1", 3);
/// barrier.enter().await?; // returns once 3 processes have entered
/// // … the computation …
/// barrier.leave().await // returns once all of them have left
/// # }
/// ```
pub struct DoubleBarrier {
    client: Client,
    dir: String,
    threshold: usize,
    registration: Option<OwnedNode>,
}

impl DoubleBarrier {
    pub fn new(client: &Client, dir: &str, threshold: usize) -> DoubleBarrier {
        DoubleBarrier {
            client: client.clone(),
            dir: dir.to_owned(),
            threshold,
            registration: None,
        }
    }

    /// Registers this process and waits until `threshold` processes have.
    pub async fn enter(&mut self) -> Result<(), Error> {
        ensure_path(&self.client, &self.dir).await?;
        let ready_path = child_path(&self.dir, READY_NAME);
        let (ready, ready_created) = retrying(|| self.client.exists_w(&ready_path)).await?;
        let node = create_protected(
            &self.client,
            &self.dir,
            "process",
            b"",
            CreateMode::EphemeralSequential,
        )
        .await?;
        self.registration = Some(OwnedNode::new(&self.client, node));
        if ready.is_some() {
            return Ok(());
        }
        if self.registered_processes().await?.len() < self.threshold {
            return ready_created.await.map(drop);
        }
        let acl = open_acl_unsafe();
        let created = retrying(|| {
            self.client
                .create(&ready_path, Some(b""), &acl, CreateMode::Persistent)
        })
        .await;
        match created {
            Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Deregisters this process and waits until every registered process has.
    pub async fn leave(&mut self) -> Result<(), Error> {
        let ours = self
            .registration
            .as_ref()
            .map(|node| node.name().to_owned())
            .ok_or_else(|| Error::InvalidArgument("leave before enter".into()))?;
        loop {
            let processes = self.registered_processes().await?;
            let (Some(lowest), Some(highest)) = (processes.first(), processes.last()) else {
                return Ok(());
            };
            if processes.len() == 1 && *lowest == ours {
                return self.deregister().await;
            }
            let awaited = if *lowest == ours {
                highest
            } else {
                self.deregister().await?;
                lowest
            };
            wait_for_change_or_absence(&self.client, &child_path(&self.dir, awaited)).await?;
        }
    }

    async fn deregister(&mut self) -> Result<(), Error> {
        match self.registration.take() {
            Some(node) => node.release().await,
            None => Ok(()),
        }
    }

    /// The process nodes, lowest first (`ready` is not one).
    async fn registered_processes(&self) -> Result<Vec<String>, Error> {
        let children = retrying(|| self.client.get_children(&self.dir)).await?;
        Ok(in_line_order(children))
    }
}

//! Exclusive locks, the paper's two ways (§2.4 "Simple Locks" and "Simple Locks without Herd
//! Effect").
//!
//! **Mutual exclusion.** [`SimpleLock`] is held by whoever created its ephemeral node: the server
//! lets exactly one create of a path succeed. [`Lock`] is held by the lowest node of a line of
//! ephemeral sequential nodes: the server's single counter gives every request a distinct place,
//! and a client goes ahead only once its own node is first. Either way the node is ephemeral, so
//! a holder that crashes or loses its session releases the lock, and the next waiter proceeds.
//!
//! **No herd.** When a [`SimpleLock`] is released, every waiter is told and all race to create
//! the node; only one wins. A [`Lock`] waiter watches only the node just ahead of its own, so a
//! release (or an abandoned request) wakes exactly one client, which then re-reads the line
//! because the node that went may not have been the holder. Waiters are served in arrival order.

use crate::recipes::owned::{create_owned_ephemeral, OwnedNode};
use crate::recipes::sequential::join_line;
use crate::recipes::support::{ensure_path, wait_for_change_or_absence};
use crate::{Client, Error, ErrorCode};

/// The "lock file": whoever creates the ephemeral node `path` holds the lock. Simple, but every
/// waiter wakes at each release (the herd effect) and nothing is fair; prefer [`Lock`].
///
/// ```no_run
/// use zoolog_client::recipes::SimpleLock;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let lock = SimpleLock::new(&client, "/app/locks/report");
/// let held = lock.acquire().await?;
/// // … the critical section …
/// held.release().await
/// # }
/// ```
#[derive(Clone)]
pub struct SimpleLock {
    client: Client,
    path: String,
}

impl SimpleLock {
    pub fn new(client: &Client, path: &str) -> SimpleLock {
        SimpleLock {
            client: client.clone(),
            path: path.to_owned(),
        }
    }

    /// Waits until this client holds the lock.
    pub async fn acquire(&self) -> Result<OwnedNode, Error> {
        if let Some((parent, _)) = self.path.rsplit_once('/') {
            ensure_path(&self.client, parent).await?;
        }
        loop {
            match create_owned_ephemeral(&self.client, &self.path, b"").await {
                Err(Error::Server(ErrorCode::NodeExists)) => {
                    wait_for_change_or_absence(&self.client, &self.path).await?
                }
                outcome => return outcome,
            }
        }
    }
}

/// The lock without herd effect: waiters line up as ephemeral sequential `lock-` children of
/// `dir` and each watches only the one ahead of it.
///
/// ```no_run
/// use zoolog_client::recipes::Lock;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let lock = Lock::new(&client, "/app/locks/ledger");
/// let held = lock.acquire().await?;
/// tokio::select! {
///     lost = held.lost() => eprintln!("lock lost: {lost}"),
///     _ = critical_section() => {}
/// }
/// held.release().await
/// # }
/// # async fn critical_section() {}
/// ```
#[derive(Clone)]
pub struct Lock {
    client: Client,
    dir: String,
}

impl Lock {
    pub fn new(client: &Client, dir: &str) -> Lock {
        Lock {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Waits until this client's request is first in line. Dropping the future gives up the
    /// place in line.
    pub async fn acquire(&self) -> Result<OwnedNode, Error> {
        join_line(&self.client, &self.dir, "lock", b"", |_| true).await
    }
}

//! Rendezvous (§2.4 "Rendezvous").
//!
//! A client that starts a master and its workers creates an empty rendezvous znode and passes its
//! path to all of them. The master fills it with what the workers need (addresses, ports); a
//! worker reads it with a watch and, while it is still empty (or not yet created), waits for the
//! watch. Filling it is a change to the node, which fires every worker's watch, so no worker
//! waits past the fill; the read after the watch sees the filled data.

use crate::recipes::config::ConfigWatcher;
use crate::recipes::support::{ensure_path, retrying};
use crate::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode};

/// The rendezvous znode at `path`.
///
/// ```no_run
/// use zoolog_client::recipes::Rendezvous;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let rendezvous = Rendezvous::new(&client, "/app/rendezvous/job-42");
/// rendezvous.create().await?; // by whoever starts the processes
/// // in the master:
/// rendezvous.fill(b"10.0.0.7:7000").await?;
/// // in each worker:
/// let master_address = rendezvous.wait_filled().await?;
/// # Ok(())
/// # }
/// ```
pub struct Rendezvous {
    client: Client,
    path: String,
}

impl Rendezvous {
    pub fn new(client: &Client, path: &str) -> Rendezvous {
        Rendezvous {
            client: client.clone(),
            path: path.to_owned(),
        }
    }

    /// Creates the empty node (and its parents); an existing node is left as it is.
    pub async fn create(&self) -> Result<(), Error> {
        if let Some((parent, _)) = self.path.rsplit_once('/') {
            ensure_path(&self.client, parent).await?;
        }
        let acl = open_acl_unsafe();
        let created = retrying(|| {
            self.client
                .create(&self.path, Some(b""), &acl, CreateMode::Persistent)
        })
        .await;
        match created {
            Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Fills the node in (non-empty data, or waiting workers would keep waiting).
    pub async fn fill(&self, data: &[u8]) -> Result<(), Error> {
        if data.is_empty() {
            return Err(Error::InvalidArgument(
                "a rendezvous is filled with data".into(),
            ));
        }
        retrying(|| self.client.set_data(&self.path, Some(data), None))
            .await
            .map(drop)
    }

    /// Waits until the node exists and is filled in, and returns what it holds.
    pub async fn wait_filled(&self) -> Result<Vec<u8>, Error> {
        let mut watcher = ConfigWatcher::new(&self.client, &self.path);
        loop {
            let held = watcher.next().await?.and_then(|node| node.data);
            if let Some(filled) = held.filter(|data| !data.is_empty()) {
                return Ok(filled);
            }
        }
    }
}

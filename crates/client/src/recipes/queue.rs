//! A distributed FIFO queue of persistent sequential `item-` children of the queue's directory.
//!
//! **Order**: the server numbers the items from one counter in the order their creates were
//! applied, so an item put after another completed is numbered after it, and consumers always
//! take the lowest number left. **Exactly one consumer per item**: a consumer claims an item by
//! deleting it, and the server lets exactly one delete of a node succeed; a consumer whose delete
//! finds the node gone moves on to the next. The one gap: if the connection drops during the
//! claiming delete, the consumer cannot tell whether it won, so `take` fails with
//! `ConnectionLoss` and that item may be lost (delivered at most once). Producers use the
//! protected create, so a put retried after a lost connection adds its item once.
//!
//! Idle consumers all watch the directory and all wake for a new item (a herd, but a small one:
//! the losers of the race find the node gone and wait again).

use crate::recipes::sequential::{create_protected, in_line_order};
use crate::recipes::support::{child_path, ensure_path, retrying};
use crate::{Client, CreateMode, Error, ErrorCode};

/// A FIFO queue over the directory `dir`.
///
/// ```no_run
/// use zoolog_client::recipes::DistributedQueue;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let queue = DistributedQueue::new(&client, "/app/jobs");
/// queue.put(b"resize image 17").await?;
/// let job = queue.take().await?; // the oldest item, or wait for one
/// assert_eq!(job, b"resize image 17");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct DistributedQueue {
    client: Client,
    dir: String,
}

impl DistributedQueue {
    pub fn new(client: &Client, dir: &str) -> DistributedQueue {
        DistributedQueue {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Appends an item; returns its node's path.
    pub async fn put(&self, item: &[u8]) -> Result<String, Error> {
        ensure_path(&self.client, &self.dir).await?;
        create_protected(
            &self.client,
            &self.dir,
            "item",
            item,
            CreateMode::PersistentSequential,
        )
        .await
    }

    /// Removes and returns the oldest item, waiting for one if the queue is empty.
    pub async fn take(&self) -> Result<Vec<u8>, Error> {
        ensure_path(&self.client, &self.dir).await?;
        loop {
            let (children, item_added) = retrying(|| self.client.get_children_w(&self.dir)).await?;
            for name in in_line_order(children) {
                if let Some(item) = self.claim(&child_path(&self.dir, &name)).await? {
                    return Ok(item);
                }
            }
            item_added.await?;
        }
    }

    /// Reads and deletes one item; `None` if another consumer claimed it first.
    async fn claim(&self, path: &str) -> Result<Option<Vec<u8>>, Error> {
        let item = match retrying(|| self.client.get_data(path)).await {
            // put never stores null; an item another client created without data is empty.
            Ok((item, _)) => item.unwrap_or_default(),
            Err(Error::Server(ErrorCode::NoNode)) => return Ok(None),
            Err(error) => return Err(error),
        };
        match self.client.delete(path, None).await {
            Ok(()) => Ok(Some(item)),
            Err(Error::Server(ErrorCode::NoNode)) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

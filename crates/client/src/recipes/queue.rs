//! A distributed FIFO queue of persistent sequential `item-` children of the queue's directory.
//!
//! **Order**: the server numbers the items from one counter in the order their creates were
//! applied, so an item put after another completed is numbered after it, and consumers always
//! take the lowest number left. Producers use the protected create, so a put retried after a
//! lost connection adds its item once.
//!
//! **Exactly one consumer per item, even across a lost connection.** A consumer takes an item
//! with one multi that deletes it and creates the ephemeral claim `claims/{item name}` holding a
//! token fresh for this `take`. The server lets exactly one delete of a node succeed, and the
//! multi is atomic, so the item's claim names the one consumer that took it. If the connection
//! drops before the multi's answer, the consumer cannot tell whether it applied, so it sends the
//! same multi again: if the first did not apply (or has not yet), the second takes the item; if it
//! did, the second fails on the missing item and the claim carries this take's token. A multi that
//! finds the item gone therefore always reads the claim, and the item is this consumer's exactly
//! when the token is its own. Once the consumer knows, it deletes the claim; a claim left behind
//! goes with its session (it is ephemeral). This holds while the session lives: if it ends while
//! the answer is unknown, `take` fails with the session's error and the item may be gone with it.
//!
//! Idle consumers all watch the directory and all wake for a new item (a herd, but a small one:
//! the losers of the race find the item claimed and wait again).

use crate::recipes::sequential::{create_protected, in_line_order};
use crate::recipes::support::{child_path, delete_if_present, ensure_path, retrying};
use crate::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode, Op};

/// The child of the queue's directory that holds the claims of items being taken.
const CLAIMS: &str = "claims";

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

    /// Removes and returns the oldest item, waiting for one if the queue is empty. A connection
    /// lost on the way is handled inside: the item is returned once, to one consumer.
    pub async fn take(&self) -> Result<Vec<u8>, Error> {
        ensure_path(&self.client, &child_path(&self.dir, CLAIMS)).await?;
        let token = format!("{:032x}", rand::random::<u128>());
        loop {
            let (children, item_added) = retrying(|| self.client.get_children_w(&self.dir)).await?;
            for name in in_line_order(children) {
                if let Some(item) = self.claim(&name, &token).await? {
                    return Ok(item);
                }
            }
            item_added.await?;
        }
    }

    /// Reads the item `name` and takes it under `token`; `None` if another consumer took it.
    async fn claim(&self, name: &str, token: &str) -> Result<Option<Vec<u8>>, Error> {
        let item_path = child_path(&self.dir, name);
        let claim_path = child_path(&child_path(&self.dir, CLAIMS), name);
        let item = match retrying(|| self.client.get_data(&item_path)).await {
            // put never stores null; an item another client created without data is empty.
            Ok((item, _)) => item.unwrap_or_default(),
            Err(Error::Server(ErrorCode::NoNode)) => return Ok(None),
            Err(error) => return Err(error),
        };
        let take = [
            Op::Delete {
                path: item_path,
                version: None,
            },
            Op::Create {
                path: claim_path.clone(),
                data: Some(token.as_bytes().to_vec()),
                acl: open_acl_unsafe(),
                mode: CreateMode::Ephemeral,
            },
        ];
        // Sending the same multi again after a lost connection is what makes the claim decide.
        let taken = match retrying(|| self.client.multi(&take)).await {
            Ok(_) => true,
            Err(Error::MultiFailed(failure))
                if failure.failed_op_index == 0 && failure.code == ErrorCode::NoNode =>
            {
                self.claimed_with(&claim_path, token).await?
            }
            Err(error) => return Err(error),
        };
        if !taken {
            return Ok(None);
        }
        // The item is ours whatever happens to the claim: the only error left after retrying is
        // the session ending, and the ephemeral claim goes with it.
        let _ = delete_if_present(&self.client, &claim_path).await;
        Ok(Some(item))
    }

    /// Whether the claim at `claim_path` carries `token`.
    async fn claimed_with(&self, claim_path: &str, token: &str) -> Result<bool, Error> {
        match retrying(|| self.client.get_data(claim_path)).await {
            Ok((claimant, _)) => Ok(claimant.as_deref() == Some(token.as_bytes())),
            // Taken by a consumer that has already removed its claim, or by a plain delete.
            Err(Error::Server(ErrorCode::NoNode)) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

//! Read/write locks (§2.4 "Read/Write Locks").
//!
//! Readers and writers line up in one line of ephemeral sequential nodes, `read-` and `write-`
//! children of the lock's directory. A writer waits for every node ahead of it, so it holds the
//! lock alone. A reader waits only for the `write-` nodes ahead of it, so readers share the lock
//! and a writer excludes them. Because the line is ordered by arrival, a reader that comes after
//! a waiting writer queues behind it: a stream of readers cannot starve writers. When a writer
//! releases, all the readers just behind it wake at once; that is no herd, since all of them may
//! now hold the lock.

use crate::recipes::owned::OwnedNode;
use crate::recipes::sequential::join_line;
use crate::{Client, Error};

const READ_LABEL: &str = "read";
const WRITE_LABEL: &str = "write";

/// A read/write lock over the directory `dir`.
///
/// ```no_run
/// use zoolog_client::recipes::ReadWriteLock;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let lock = ReadWriteLock::new(&client, "/app/locks/catalog");
/// let reading = lock.read().await?;
/// // … read alongside other readers …
/// reading.release().await?;
/// let writing = lock.write().await?;
/// // … write alone …
/// writing.release().await
/// # }
/// ```
#[derive(Clone)]
pub struct ReadWriteLock {
    client: Client,
    dir: String,
}

impl ReadWriteLock {
    pub fn new(client: &Client, dir: &str) -> ReadWriteLock {
        ReadWriteLock {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Waits until no writer that asked earlier holds or waits for the lock.
    pub async fn read(&self) -> Result<OwnedNode, Error> {
        join_line(&self.client, &self.dir, READ_LABEL, b"", |ahead| {
            ahead == WRITE_LABEL
        })
        .await
    }

    /// Waits until everyone who asked earlier, reader or writer, has released.
    pub async fn write(&self) -> Result<OwnedNode, Error> {
        join_line(&self.client, &self.dir, WRITE_LABEL, b"", |_| true).await
    }
}

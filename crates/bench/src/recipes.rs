//! Minimal coordination recipes of the ZooKeeper paper (§2.4), written only to be measured:
//! a double barrier, a lock without herd effect and a queue. They are here because the client's
//! own recipes module did not exist yet when the benchmark was written; they follow the paper's
//! pseudo-code step for step, so each costs the same requests a textbook recipe does.
//!
//! Every wait is bounded: it ends when the watch fires, when `give_up` is set (another
//! participant stopped, or Ctrl-C), or after [`WAIT_MAX`].

use std::time::Duration;

use zoolog_client::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode, Watch};

use crate::control::Signal;

/// Longest a participant waits for the others before it reports a stall.
pub const WAIT_MAX: Duration = Duration::from_secs(30);
/// Bound on retries of one step (a lock's predecessor vanishing, a queue head taken by another).
const ATTEMPTS_MAX: usize = 10_000;
/// The child of a barrier node created once enough participants are in.
const READY: &str = "ready";

#[derive(Debug)]
pub enum RecipeError {
    Client(Error),
    /// `give_up` was set while waiting.
    GaveUp,
    /// A wait or a retry loop hit its bound.
    Stalled,
}

impl std::fmt::Display for RecipeError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecipeError::Client(error) => error.fmt(formatter),
            RecipeError::GaveUp => formatter.write_str("gave up waiting"),
            RecipeError::Stalled => write!(formatter, "no progress within {WAIT_MAX:?}"),
        }
    }
}

impl From<Error> for RecipeError {
    fn from(error: Error) -> Self {
        RecipeError::Client(error)
    }
}

/// Waits for `watch` to fire, within the bounds of the module doc.
async fn wait_for(watch: Watch, give_up: &Signal) -> Result<(), RecipeError> {
    tokio::select! {
        fired = watch => fired.map(drop).map_err(RecipeError::from),
        _ = give_up.wait() => Err(RecipeError::GaveUp),
        _ = tokio::time::sleep(WAIT_MAX) => Err(RecipeError::Stalled),
    }
}

fn is_code(result: &Result<impl Sized, Error>, code: ErrorCode) -> bool {
    matches!(result, Err(error) if error.code() == code)
}

/// Creates a persistent node; one that exists already is fine.
pub async fn create_if_absent(client: &Client, path: &str) -> Result<(), Error> {
    let created = client
        .create(path, b"", &open_acl_unsafe(), CreateMode::Persistent)
        .await;
    if is_code(&created, ErrorCode::NodeExists) {
        return Ok(());
    }
    created.map(drop)
}

/// Deletes a node; one that is gone already is fine.
pub async fn delete_if_present(client: &Client, path: &str) -> Result<(), Error> {
    let deleted = client.delete(path, None).await;
    if is_code(&deleted, ErrorCode::NoNode) {
        return Ok(());
    }
    deleted
}

/// The paper's double barrier on node `path` for `size` participants. The node is created by
/// the first participant to need it and removed by the last to leave, so a fresh path per round
/// leaves nothing behind.
pub struct DoubleBarrier<'a> {
    client: &'a Client,
    path: &'a str,
    name: &'a str,
    size: usize,
}

impl<'a> DoubleBarrier<'a> {
    pub fn new(client: &'a Client, path: &'a str, name: &'a str, size: usize) -> Self {
        DoubleBarrier {
            client,
            path,
            name,
            size,
        }
    }

    fn child(&self, name: &str) -> String {
        format!("{}/{name}", self.path)
    }

    /// Registers, then waits until `size` participants have.
    pub async fn enter(&self, give_up: &Signal) -> Result<(), RecipeError> {
        let mine = self.child(self.name);
        let acl = open_acl_unsafe();
        let created = self
            .client
            .create(&mine, b"", &acl, CreateMode::Ephemeral)
            .await;
        if is_code(&created, ErrorCode::NoNode) {
            create_if_absent(self.client, self.path).await?;
            self.client
                .create(&mine, b"", &acl, CreateMode::Ephemeral)
                .await?;
        } else {
            created?;
        }
        // Watch `ready` before counting, so a participant that arrives in between still wakes us.
        let (ready, ready_created) = self.client.exists_w(&self.child(READY)).await?;
        if ready.is_some() {
            return Ok(());
        }
        let participants = self.participants().await?;
        if participants.len() >= self.size {
            create_if_absent(self.client, &self.child(READY)).await?;
            return Ok(());
        }
        wait_for(ready_created, give_up).await
    }

    /// Unregisters, then waits until every participant has (the herd-free leave: the lowest
    /// participant waits for the highest, everyone else for the lowest).
    pub async fn leave(&self, give_up: &Signal) -> Result<(), RecipeError> {
        for _ in 0..ATTEMPTS_MAX {
            let mut participants = match self.participants().await {
                Err(error) if error.code() == ErrorCode::NoNode => return Ok(()),
                participants => participants?,
            };
            participants.sort();
            let (Some(lowest), Some(highest)) = (participants.first(), participants.last()) else {
                return Ok(());
            };
            let is_registered = participants.iter().any(|name| name == self.name);
            if participants.len() == 1 && is_registered {
                delete_if_present(self.client, &self.child(self.name)).await?;
                return self.remove_barrier_node().await;
            }
            let awaited = if lowest == self.name {
                highest
            } else {
                if is_registered {
                    delete_if_present(self.client, &self.child(self.name)).await?;
                }
                lowest
            };
            if let (Some(_), gone) = self.client.exists_w(&self.child(awaited)).await? {
                wait_for(gone, give_up).await?;
            }
        }
        Err(RecipeError::Stalled)
    }

    async fn participants(&self) -> Result<Vec<String>, Error> {
        let mut children = self.client.get_children(self.path).await?;
        children.retain(|name| name != READY);
        Ok(children)
    }

    /// The last one out removes `ready` and the barrier node. Failures are harmless (someone
    /// slower may still be reading the node), so they are not reported.
    async fn remove_barrier_node(&self) -> Result<(), RecipeError> {
        let _ = delete_if_present(self.client, &self.child(READY)).await;
        let _ = delete_if_present(self.client, self.path).await;
        Ok(())
    }
}

/// The paper's lock without herd effect, under an existing node `path`.
pub struct Lock<'a> {
    client: &'a Client,
    path: &'a str,
}

/// A held lock; [`HeldLock::release`] deletes its node.
pub struct HeldLock<'a> {
    client: &'a Client,
    node: String,
}

impl<'a> Lock<'a> {
    pub fn new(client: &'a Client, path: &'a str) -> Self {
        Lock { client, path }
    }

    pub async fn acquire(&self, give_up: &Signal) -> Result<HeldLock<'a>, RecipeError> {
        let node = self
            .client
            .create(
                &format!("{}/lock-", self.path),
                b"",
                &open_acl_unsafe(),
                CreateMode::EphemeralSequential,
            )
            .await?;
        let name = node.rsplit('/').next().unwrap_or_default().to_string();
        for _ in 0..ATTEMPTS_MAX {
            let mut contenders = self.client.get_children(self.path).await?;
            // Same prefix and ten zero-padded digits: text order is sequence order.
            contenders.sort();
            let position = contenders.iter().position(|contender| *contender == name);
            let predecessor = match position {
                Some(0) => {
                    return Ok(HeldLock {
                        client: self.client,
                        node,
                    })
                }
                Some(index) => &contenders[index - 1],
                None => return Err(RecipeError::Client(Error::Server(ErrorCode::NoNode))),
            };
            let predecessor = format!("{}/{predecessor}", self.path);
            if let (Some(_), gone) = self.client.exists_w(&predecessor).await? {
                wait_for(gone, give_up).await?;
            }
        }
        Err(RecipeError::Stalled)
    }
}

impl HeldLock<'_> {
    pub async fn release(self) -> Result<(), Error> {
        self.client.delete(&self.node, None).await
    }
}

/// A FIFO queue of sequential children under an existing node `path`.
pub struct Queue<'a> {
    client: &'a Client,
    path: &'a str,
}

impl<'a> Queue<'a> {
    pub fn new(client: &'a Client, path: &'a str) -> Self {
        Queue { client, path }
    }

    pub async fn put(&self, item: &[u8]) -> Result<(), Error> {
        self.client
            .create(
                &format!("{}/item-", self.path),
                item,
                &open_acl_unsafe(),
                CreateMode::PersistentSequential,
            )
            .await
            .map(drop)
    }

    /// Removes and returns the oldest item, waiting for one if the queue is empty.
    pub async fn take(&self, give_up: &Signal) -> Result<Vec<u8>, RecipeError> {
        for _ in 0..ATTEMPTS_MAX {
            let (mut items, changed) = self.client.get_children_w(self.path).await?;
            items.sort();
            for item in &items {
                let path = format!("{}/{item}", self.path);
                // Read, then delete: whoever deletes the item owns it.
                let taken = match self.client.get_data(&path).await {
                    Ok((data, _)) => self.client.delete(&path, None).await.map(|()| data),
                    Err(error) => Err(error),
                };
                match taken {
                    Ok(data) => return Ok(data),
                    Err(error) if error.code() == ErrorCode::NoNode => continue,
                    Err(error) => return Err(error.into()),
                }
            }
            if items.is_empty() {
                wait_for(changed, give_up).await?;
            }
        }
        Err(RecipeError::Stalled)
    }
}

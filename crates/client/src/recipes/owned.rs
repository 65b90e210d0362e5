//! The ephemeral node that embodies a hold: on a lock, a leadership, a group membership.

use crate::recipes::support::{delete_if_present, retrying};
use crate::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode, EventType};

/// An ephemeral node this session created to hold something (a lock, a leadership, a place in a
/// group). The hold lasts until [`OwnedNode::release`], until the handle is dropped (which
/// deletes the node in the background), or until the session ends, when the server deletes the
/// node itself: [`OwnedNode::lost`] tells you when that happened.
#[must_use = "dropping the handle releases what it holds"]
pub struct OwnedNode {
    client: Client,
    path: String,
    released: bool,
}

impl OwnedNode {
    pub(crate) fn new(client: &Client, path: String) -> OwnedNode {
        OwnedNode {
            client: client.clone(),
            path,
            released: false,
        }
    }

    /// The node's full path (its last component is what others see in the listing).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The node's name, the last component of its path.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Deletes the node. A node already gone (deleted by someone, or with its session) is fine.
    pub async fn release(mut self) -> Result<(), Error> {
        self.released = true;
        delete_if_present(&self.client, &self.path).await
    }

    /// Resolves when the hold is gone without a release: `SessionExpired` or `SessionClosed` when
    /// the session ended (the server then deleted the node), `Server(NoNode)` when someone else
    /// deleted it. While the client is disconnected nobody can tell; a holder that must never
    /// overlap with the next one should also stop at [`SessionState::Disconnected`](crate::SessionState).
    pub async fn lost(&self) -> Error {
        loop {
            let watched = retrying(|| self.client.get_data_w(&self.path)).await;
            let change = match watched {
                Ok((_, _, watch)) => watch.await,
                Err(error) => return error,
            };
            match change {
                Ok(event) if event.event_type == EventType::NodeDeleted => {
                    return self.why_deleted().await
                }
                Ok(_) => continue,
                Err(error) => return error,
            }
        }
    }

    /// The deletion of a session's ephemerals may reach it before the news that the session
    /// ended; one more call tells the two causes apart.
    async fn why_deleted(&self) -> Error {
        match retrying(|| self.client.exists("/")).await {
            Ok(_) => Error::Server(ErrorCode::NoNode),
            Err(session_ended) => session_ended,
        }
    }
}

impl std::fmt::Debug for OwnedNode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("OwnedNode")
            .field("path", &self.path)
            .finish()
    }
}

impl Drop for OwnedNode {
    /// A handle dropped without release (a cancelled acquire, a guard going out of scope) must
    /// not hold others up until the session ends, so the node is deleted in the background.
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (client, path) = (self.client.clone(), std::mem::take(&mut self.path));
            runtime.spawn(async move { delete_if_present(&client, &path).await });
        }
    }
}

/// Creates the ephemeral node `path` for this session. After a lost connection the create may
/// have happened; the node's owner tells: this session's node is adopted, another session's
/// answers `NodeExists` like a plain create would.
pub(crate) async fn create_owned_ephemeral(
    client: &Client,
    path: &str,
    data: &[u8],
) -> Result<OwnedNode, Error> {
    let acl = open_acl_unsafe();
    loop {
        match client
            .create(path, Some(data), &acl, CreateMode::Ephemeral)
            .await
        {
            Ok(created) => return Ok(OwnedNode::new(client, created)),
            Err(Error::ConnectionLoss) => {}
            Err(error) => return Err(error),
        }
        match retrying(|| client.get_data(path)).await {
            Ok((_, stat)) if stat.ephemeral_owner == client.session_id() => {
                return Ok(OwnedNode::new(client, path.to_owned()))
            }
            Ok(_) => return Err(Error::Server(ErrorCode::NodeExists)),
            Err(Error::Server(ErrorCode::NoNode)) => continue,
            Err(error) => return Err(error),
        }
    }
}

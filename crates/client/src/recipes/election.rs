//! Leader election: the lock without herd effect, read as "who leads".
//!
//! Candidates line up as ephemeral sequential `candidate-` children of the election's directory,
//! each carrying its identity. The lowest leads; every other candidate watches only the one just
//! ahead of it. **At most one leader**: the server's counter gives every candidate a distinct
//! place, and a candidate only calls itself leader after seeing its own node first in the line.
//! **Failover**: the leader's node is ephemeral, so when its session ends (closed, crashed,
//! expired) the server deletes it and the next in line, which watched it, takes over. A leader
//! whose session expired learns it from [`OwnedNode::lost`].

use crate::recipes::owned::OwnedNode;
use crate::recipes::sequential::{in_line_order, join_line};
use crate::recipes::support::{child_path, retrying};
use crate::{Client, Error, ErrorCode};

/// An election among the candidates lined up under `dir`.
///
/// ```no_run
/// use zoolog_client::recipes::LeaderElection;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let election = LeaderElection::new(&client, "/app/election");
/// let leadership = election.campaign(b"worker-7:9000").await?;
/// assert_eq!(election.leader().await?.as_deref(), Some(&b"worker-7:9000"[..]));
/// let why = leadership.lost().await; // lead until the session ends
/// eprintln!("no longer leader: {why}");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct LeaderElection {
    client: Client,
    dir: String,
}

impl LeaderElection {
    pub fn new(client: &Client, dir: &str) -> LeaderElection {
        LeaderElection {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Stands as a candidate with `identity` and waits until this client leads. Dropping the
    /// leadership (or the future, while waiting) steps down.
    pub async fn campaign(&self, identity: &[u8]) -> Result<OwnedNode, Error> {
        join_line(&self.client, &self.dir, "candidate", identity, |_| true).await
    }

    /// The identity of the current leader, or `None` when nobody stands.
    pub async fn leader(&self) -> Result<Option<Vec<u8>>, Error> {
        loop {
            let children = match retrying(|| self.client.get_children(&self.dir)).await {
                Err(Error::Server(ErrorCode::NoNode)) => return Ok(None),
                listed => listed?,
            };
            let Some(first) = in_line_order(children).into_iter().next() else {
                return Ok(None);
            };
            let path = child_path(&self.dir, &first);
            match retrying(|| self.client.get_data(&path)).await {
                // campaign never stores null; a candidate node created without data names nobody.
                Ok((identity, _)) => return Ok(Some(identity.unwrap_or_default())),
                // The leader stepped down between the two reads: look again.
                Err(Error::Server(ErrorCode::NoNode)) => continue,
                Err(error) => return Err(error),
            }
        }
    }
}

//! Group membership (§2.4 "Group Membership").
//!
//! Each member creates an ephemeral child of the group's directory, named after itself and
//! carrying whatever it wants others to know. The ephemeral makes membership follow the member's
//! session: when the process fails or its session ends, the server removes it, with nothing else
//! to do. Listing the children lists the members; a watch on the listing, set again at each read,
//! reports every change, and the read after each notification shows the current group.

use crate::recipes::owned::{create_owned_ephemeral, OwnedNode};
use crate::recipes::support::{child_path, ensure_path, retrying, Rewatch};
use crate::{Client, Error};

/// The group whose members are the children of `dir`.
///
/// ```no_run
/// use zoolog_client::recipes::Group;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let group = Group::new(&client, "/app/workers");
/// let _membership = group.join("worker-7", b"10.0.0.7:9000").await?;
/// let mut changes = group.watch_members().await?;
/// loop {
///     println!("members: {:?}", changes.next().await?);
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct Group {
    client: Client,
    dir: String,
}

impl Group {
    pub fn new(client: &Client, dir: &str) -> Group {
        Group {
            client: client.clone(),
            dir: dir.to_owned(),
        }
    }

    /// Joins as `member` (a name unique in the group; `NodeExists` if another session has it).
    /// Membership lasts until the handle is released or dropped, or the session ends.
    pub async fn join(&self, member: &str, data: &[u8]) -> Result<OwnedNode, Error> {
        ensure_path(&self.client, &self.dir).await?;
        create_owned_ephemeral(&self.client, &child_path(&self.dir, member), data).await
    }

    /// The members' names, sorted.
    pub async fn members(&self) -> Result<Vec<String>, Error> {
        let mut members = retrying(|| self.client.get_children(&self.dir)).await?;
        members.sort_unstable();
        Ok(members)
    }

    /// The members now, then after each change (creating the group's directory if needed).
    pub async fn watch_members(&self) -> Result<MembershipWatcher, Error> {
        ensure_path(&self.client, &self.dir).await?;
        Ok(MembershipWatcher {
            group: self.clone(),
            rewatch: Rewatch::default(),
        })
    }
}

/// Yields the sorted member list, first as it is, then after each change.
pub struct MembershipWatcher {
    group: Group,
    rewatch: Rewatch,
}

impl MembershipWatcher {
    /// The first call returns at once; each later call waits for a change in membership.
    pub async fn next(&mut self) -> Result<Vec<String>, Error> {
        let group = &self.group;
        self.rewatch
            .next(|| async {
                let (mut members, watch) = group.client.get_children_w(&group.dir).await?;
                members.sort_unstable();
                Ok((members, watch))
            })
            .await
    }
}

//! Lines of sequential nodes, shared by the lock, the read/write lock, the election, the barrier
//! and the queue: creating one's node safely across a lost connection, ordering the line, and
//! waiting for one's turn by watching only the node just ahead.
//!
//! Names are `{label}-{guid}-{sequence}`: the label says what the node asks for (`lock`, `read`,
//! `write`…), the GUID (fresh for each create) lets a client recognise its own node after a
//! connection loss, and the server's ten-digit sequence orders the line whatever the labels.

use crate::recipes::owned::OwnedNode;
use crate::recipes::support::{child_path, ensure_path, retrying, wait_for_change_or_absence};
use crate::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode};

/// The server's sequence suffix is ten decimal digits.
const SEQUENCE_DIGITS: usize = 10;

/// The server's sequence number at the end of a line node's name; `None` for other children
/// (a barrier's `ready` node, anything a user put there).
pub(crate) fn sequence_of(name: &str) -> Option<u64> {
    let digits = name.get(name.len().checked_sub(SEQUENCE_DIGITS)?..)?;
    digits.parse().ok()
}

/// What a line node asks for: the part of its name before the first `-`.
pub(crate) fn label_of(name: &str) -> &str {
    name.split('-').next().unwrap_or(name)
}

/// The line nodes among `children`, in the order the server created them.
pub(crate) fn in_line_order(children: Vec<String>) -> Vec<String> {
    let mut line: Vec<(u64, String)> = children
        .into_iter()
        .filter_map(|name| Some((sequence_of(&name)?, name)))
        .collect();
    line.sort_unstable();
    line.into_iter().map(|(_, name)| name).collect()
}

/// Creates `dir/{label}-{guid}-{sequence}` and returns its path. If the connection drops before
/// the reply, the create may or may not have happened; creating again could leave an orphan that
/// blocks the line for the rest of the session, so the client first looks for a child carrying
/// its GUID and adopts it (the "protected" create).
pub(crate) async fn create_protected(
    client: &Client,
    dir: &str,
    label: &str,
    data: &[u8],
    mode: CreateMode,
) -> Result<String, Error> {
    let prefix = format!("{label}-{:032x}-", rand::random::<u128>());
    let acl = open_acl_unsafe();
    let path_prefix = child_path(dir, &prefix);
    loop {
        match client.create(&path_prefix, Some(data), &acl, mode).await {
            Err(Error::ConnectionLoss) => {}
            outcome => return outcome,
        }
        let children = retrying(|| client.get_children(dir)).await?;
        if let Some(ours) = children.iter().find(|name| name.starts_with(&prefix)) {
            return Ok(child_path(dir, ours));
        }
    }
}

/// Joins the line in `dir` with an ephemeral node and waits for its turn: until no node ahead of
/// it is one that `blocks` (given the label of the node ahead) says it must wait for.
pub(crate) async fn join_line(
    client: &Client,
    dir: &str,
    label: &str,
    data: &[u8],
    blocks: impl Fn(&str) -> bool,
) -> Result<OwnedNode, Error> {
    ensure_path(client, dir).await?;
    let path = create_protected(client, dir, label, data, CreateMode::EphemeralSequential).await?;
    // Owned from here on, so a failed or cancelled wait gives the place in line back.
    let node = OwnedNode::new(client, path);
    wait_for_turn(client, dir, node.name(), blocks).await?;
    Ok(node)
}

/// The paper's lock loop (lines 2 to 6): list the line, find the nearest blocking node ahead of
/// ours, wait for it to go, and look again, since the node that went may have been an abandoned
/// request with an earlier one still ahead. Each node is watched by the one waiter just behind it,
/// so a release wakes one client, not the whole line.
async fn wait_for_turn(
    client: &Client,
    dir: &str,
    ours: &str,
    blocks: impl Fn(&str) -> bool,
) -> Result<(), Error> {
    loop {
        let line = in_line_order(retrying(|| client.get_children(dir)).await?);
        let position = line
            .iter()
            .position(|name| name == ours)
            // Our ephemeral is gone: someone deleted it, or the session ended with it.
            .ok_or(Error::Server(ErrorCode::NoNode))?;
        let ahead = line[..position]
            .iter()
            .rev()
            .find(|name| blocks(label_of(name)));
        match ahead {
            None => return Ok(()),
            Some(name) => wait_for_change_or_absence(client, &child_path(dir, name)).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_ordered_by_sequence_whatever_the_label() {
        let children = vec![
            "write-b-0000000012".to_owned(),
            "ready".to_owned(),
            "read-a-0000000003".to_owned(),
            "read-c-0000000100".to_owned(),
        ];
        assert_eq!(
            in_line_order(children),
            [
                "read-a-0000000003",
                "write-b-0000000012",
                "read-c-0000000100"
            ]
        );
        assert_eq!(label_of("write-b-0000000012"), "write");
        assert_eq!(sequence_of("ready"), None);
    }
}

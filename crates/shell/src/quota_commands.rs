//! The quota commands: setquota, listquota, delquota. As in zkCli they are done by the client:
//! it writes the limits under `/zookeeper/quota<path>`, the server keeps the usage beside them
//! (and, with `zookeeper.enforceQuota`, refuses writes past a hard limit).
//!
//! Like zkCli, a refused option value or a missing quota is told on stderr but is not a failed
//! command (exit status 0); a path that does not exist, or a quota above or below another, is.

use zoolog_client::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode};
use zoolog_proto::quota::{
    StatsTrack, BYTES, BYTE_HARD_LIMIT, COUNT, COUNT_HARD_LIMIT, LIMITS_NODE, QUOTA_ROOT,
    STATS_NODE,
};

use crate::invocation::Invocation;
use crate::node_commands::{child_path, path_argument, subtree};
use crate::shell::{CommandResult, Failure, Shell};

/// One quota a command names: its option letter, its key in the quota node, and what it counts.
struct QuotaKind {
    letter: char,
    key: &'static str,
    is_count: bool,
    description: &'static str,
}

/// In zkCli's option order.
const QUOTA_KINDS: [QuotaKind; 4] = [
    QuotaKind {
        letter: 'n',
        key: COUNT,
        is_count: true,
        description: "num soft quota",
    },
    QuotaKind {
        letter: 'b',
        key: BYTES,
        is_count: false,
        description: "bytes soft quota",
    },
    QuotaKind {
        letter: 'N',
        key: COUNT_HARD_LIMIT,
        is_count: true,
        description: "num hard quota",
    },
    QuotaKind {
        letter: 'B',
        key: BYTE_HARD_LIMIT,
        is_count: false,
        description: "bytes hard quota",
    },
];

fn limits_path(path: &str) -> String {
    format!("{QUOTA_ROOT}{path}/{LIMITS_NODE}")
}

fn stats_path(path: &str) -> String {
    format!("{QUOTA_ROOT}{path}/{STATS_NODE}")
}

impl Shell {
    /// `setquota -n|-b|-N|-B val path`: one limit per call, added to any limits already set.
    pub(crate) async fn set_quota(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let kind = chosen_kind(invocation, true)?.expect("a kind is required");
        if path.starts_with(QUOTA_ROOT) {
            eprintln!("cannot set a quota under the path: {QUOTA_ROOT}");
            return Ok(());
        }
        let text = invocation.value(kind.letter).expect("a valued option");
        let limit = match quota_value(kind, text) {
            Ok(limit) => limit,
            Err(complaint) => {
                eprintln!("{complaint}");
                return Ok(());
            }
        };
        let client = self.client()?;
        if client
            .exists(path)
            .await
            .map_err(Failure::on(path))?
            .is_none()
        {
            return Err(Failure::Message(format!("{path} does not exist.")));
        }
        refuse_nested_quota(&client, path).await?;
        create_quota_parents(&client, path).await?;
        let limits_path = limits_path(path);
        let mut limits = match read_track(&client, &limits_path).await {
            Ok(existing) => existing,
            Err(Error::Server(ErrorCode::NoNode)) => new_limits(&client, path).await?,
            Err(error) => return Err(Failure::on(&limits_path)(error)),
        };
        limits.set(kind.key, limit);
        let stats_path = stats_path(path);
        let usage = read_track(&client, &stats_path)
            .await
            .map_err(Failure::on(&stats_path))?;
        warn_if_already_over(&limits, &usage);
        client
            .set_data(&limits_path, Some(&limits.render()), None)
            .await
            .map_err(Failure::on(&limits_path))?;
        Ok(())
    }

    /// `listquota path`: the limits, then the usage, in ZooKeeper's text.
    pub(crate) async fn list_quota(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let client = self.client()?;
        let limits_path = limits_path(path);
        eprintln!("absolute path is {limits_path}");
        let tracks = async {
            let limits = read_track(&client, &limits_path).await?;
            let usage = read_track(&client, &stats_path(path)).await?;
            Ok::<_, Error>((limits, usage))
        };
        match tracks.await {
            Ok((limits, usage)) => {
                println!("Output quota for {path} {}", track_text(&limits));
                println!("Output stat for {path} {}", track_text(&usage));
                Ok(())
            }
            Err(Error::Server(ErrorCode::NoNode)) => {
                eprintln!("quota for {path} does not exist.");
                Ok(())
            }
            Err(error) => Err(Failure::Client(error, Some(path.to_owned()))),
        }
    }

    /// `delquota [-n|-b|-N|-B] path`: one limit, or (without an option) the whole quota and
    /// the quota nodes above it that nothing else needs.
    pub(crate) async fn delete_quota(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let kind = chosen_kind(invocation, false)?;
        let client = self.client()?;
        let limits_path = limits_path(path);
        let limits = match read_track(&client, &limits_path).await {
            Ok(limits) => limits,
            Err(Error::Server(ErrorCode::NoNode)) => {
                // zkCli says this on stdout.
                println!("Quota does not exist for {path}");
                return Ok(());
            }
            Err(error) => return Err(Failure::on(&limits_path)(error)),
        };
        match kind {
            Some(kind) => {
                let mut limits = limits;
                limits.set(kind.key, -1);
                client
                    .set_data(&limits_path, Some(&limits.render()), None)
                    .await
                    .map_err(Failure::on(&limits_path))?;
            }
            None => remove_quota_nodes(&client, path).await?,
        }
        Ok(())
    }
}

/// The one quota option given; `required` when the command needs one. More than one is
/// refused, with commons-cli's sentences as zkCli prints them.
fn chosen_kind(
    invocation: &Invocation,
    required: bool,
) -> Result<Option<&'static QuotaKind>, Failure> {
    let given =
        |kind: &&QuotaKind| invocation.flag(kind.letter) || invocation.value(kind.letter).is_some();
    let mut chosen = QUOTA_KINDS.iter().filter(given);
    let first = chosen.next();
    if let (Some(first), Some(second)) = (first, chosen.next()) {
        return Err(Failure::Message(format!(
            "The option '{}' was specified but an option from this group has already been \
             selected: '{}'",
            second.letter, first.letter
        )));
    }
    if first.is_none() && required {
        let options: Vec<String> = QUOTA_KINDS
            .iter()
            .map(|kind| format!("-{} {}", kind.letter, kind.description))
            .collect();
        return Err(Failure::Message(format!(
            "Missing required option: [{}]",
            options.join(", ")
        )));
    }
    Ok(first)
}

/// A limit's value: a positive count, or a byte count of zero or more.
fn quota_value(kind: &QuotaKind, text: &str) -> Result<i64, &'static str> {
    let value = match kind.is_count {
        true => text.parse::<i32>().map(i64::from),
        false => text.parse::<i64>(),
    }
    .map_err(|_| "NumberFormatException happens when parsing the option value")?;
    match kind.is_count {
        true if value <= 0 => Err("the num quota must be greater than zero"),
        false if value < 0 => Err("the bytes quota must be greater than or equal to zero"),
        _ => Ok(value),
    }
}

/// Quotas do not nest: none may be set below `path`, nor above it.
async fn refuse_nested_quota(client: &Client, path: &str) -> CommandResult {
    let own = format!("{QUOTA_ROOT}{path}");
    let below = match subtree(client, &own).await {
        Ok(nodes) => nodes,
        Err(Failure::Client(Error::Server(ErrorCode::NoNode), _)) => Vec::new(),
        Err(failure) => return Err(failure),
    };
    for node in below.iter().filter(|node| **node != own) {
        if has_limits(client, node).await? {
            return Err(Failure::Message(format!(
                "{path} has a child {} which has a quota",
                &node[QUOTA_ROOT.len()..]
            )));
        }
    }
    for ancestor in proper_ancestors(path) {
        let node = format!("{QUOTA_ROOT}{ancestor}");
        if has_limits(client, &node).await? {
            return Err(Failure::Message(format!(
                "{path} has a parent {ancestor} which has a quota"
            )));
        }
    }
    Ok(())
}

/// `/a`, `/a/b` for `/a/b/c`: every ancestor but the root, shallowest first.
fn proper_ancestors(path: &str) -> Vec<&str> {
    path.match_indices('/')
        .map(|(at, _)| &path[..at])
        .filter(|ancestor| !ancestor.is_empty())
        .collect()
}

async fn has_limits(client: &Client, quota_node: &str) -> Result<bool, Failure> {
    match client.get_children(quota_node).await {
        Ok(children) => Ok(children.iter().any(|child| child == LIMITS_NODE)),
        Err(Error::Server(ErrorCode::NoNode)) => Ok(false),
        Err(error) => Err(Failure::on(quota_node)(error)),
    }
}

/// `/zookeeper/quota/a`, `/zookeeper/quota/a/b` for `/a/b`, each made if missing.
async fn create_quota_parents(client: &Client, path: &str) -> CommandResult {
    let mut node = QUOTA_ROOT.to_owned();
    for name in path.split('/').filter(|name| !name.is_empty()) {
        node = child_path(&node, name);
        create_if_missing(client, &node, None).await?;
    }
    Ok(())
}

async fn create_if_missing(client: &Client, node: &str, data: Option<&[u8]>) -> CommandResult {
    match client
        .create(node, data, &open_acl_unsafe(), CreateMode::Persistent)
        .await
    {
        Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => Ok(()),
        Err(error) => Err(Failure::on(node)(error)),
    }
}

/// Creates the limits node (every limit unset) and the usage node beside it; returns the
/// limits as created.
async fn new_limits(client: &Client, path: &str) -> Result<StatsTrack, Failure> {
    let mut limits = StatsTrack::default();
    for kind in &QUOTA_KINDS {
        limits.set(kind.key, -1);
    }
    create_if_missing(client, &limits_path(path), Some(&limits.render())).await?;
    let mut usage = StatsTrack::default();
    usage.set(COUNT, 0);
    usage.set(BYTES, 0);
    create_if_missing(client, &stats_path(path), Some(&usage.render())).await?;
    Ok(limits)
}

async fn read_track(client: &Client, node: &str) -> Result<StatsTrack, Error> {
    let (data, _) = client.get_data(node).await?;
    Ok(StatsTrack::parse(data.as_deref()))
}

/// zkCli's warning (on stdout) when the new limits are already exceeded.
fn warn_if_already_over(limits: &StatsTrack, usage: &StatsTrack) {
    let below = |limit: i64, used: i64| limit > -1 && limit < used;
    let count = usage.get(COUNT);
    if below(limits.get(COUNT), count) || below(limits.get(COUNT_HARD_LIMIT), count) {
        println!("[Warning]: the count quota you create is less than the existing count:{count}");
    }
    let bytes = usage.get(BYTES);
    if below(limits.get(BYTES), bytes) || below(limits.get(BYTE_HARD_LIMIT), bytes) {
        println!("[Warning]: the bytes quota you create is less than the existing bytes:{bytes}");
    }
}

fn track_text(track: &StatsTrack) -> String {
    String::from_utf8_lossy(&track.render()).into_owned()
}

/// Deletes the quota's own nodes, then each quota node above it left with no children.
async fn remove_quota_nodes(client: &Client, path: &str) -> CommandResult {
    let own = format!("{QUOTA_ROOT}{path}");
    for child in client.get_children(&own).await.map_err(Failure::on(&own))? {
        let node = child_path(&own, &child);
        client
            .delete(&node, None)
            .await
            .map_err(Failure::on(&node))?;
    }
    let mut node = own;
    while node != QUOTA_ROOT {
        let children = client
            .get_children(&node)
            .await
            .map_err(Failure::on(&node))?;
        if !children.is_empty() {
            break;
        }
        client
            .delete(&node, None)
            .await
            .map_err(Failure::on(&node))?;
        let parent_end = node.rfind('/').expect("a quota node has a parent");
        node.truncate(parent_end);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_exclude_the_root_and_the_path() {
        assert_eq!(proper_ancestors("/a/b/c"), ["/a", "/a/b"]);
        assert!(proper_ancestors("/a").is_empty());
    }

    #[test]
    fn quota_values_are_checked_like_zkclis() {
        let [count, bytes, ..] = &QUOTA_KINDS;
        assert_eq!(quota_value(count, "5"), Ok(5));
        assert!(quota_value(count, "0").is_err());
        assert!(quota_value(count, "99999999999").is_err());
        assert_eq!(quota_value(bytes, "0"), Ok(0));
        assert!(quota_value(bytes, "-1").is_err());
        assert!(quota_value(bytes, "x").is_err());
    }
}

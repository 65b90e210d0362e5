//! Quota bookkeeping (§12.3): `/zookeeper/quota<path>/zookeeper_limits` turns tracking of `<path>`
//! on, and `…/zookeeper_stats` holds `count=N,bytes=M`, rewritten in place on every change
//! inside the tracked subtree (longest tracked prefix wins).

use crate::path;
use crate::tree::{DataTree, QUOTA_PATH};
use zoolog_proto::quota::{
    StatsTrack, BYTES, BYTE_HARD_LIMIT, COUNT, COUNT_HARD_LIMIT, LIMITS_NODE, STATS_NODE,
};
use zoolog_proto::ErrorCode;

/// The real path a node directly under `/zookeeper/quota<real>` is about, if any.
fn tracked_path_of_quota_child(quota_node_path: &str) -> Option<&str> {
    let parent = path::parent_of(quota_node_path)?;
    let real = parent.strip_prefix(QUOTA_PATH)?;
    real.starts_with('/').then_some(real)
}

fn quota_node_path(real: &str, node: &str) -> String {
    format!("{QUOTA_PATH}{real}/{node}")
}

impl DataTree {
    /// The longest tracked path that `path` lies within ("/" never counts, as in ZooKeeper).
    fn quota_root_of(&self, path: &str) -> Option<String> {
        if self.quota_roots.is_empty() {
            return None;
        }
        std::iter::once(path)
            .chain(path::ancestors(path))
            .find(|p| *p != "/" && self.quota_roots.contains(*p))
            .map(str::to_owned)
    }

    pub(crate) fn note_quota_node_created(&mut self, path: &str) {
        if path::name_of(path) == LIMITS_NODE {
            if let Some(real) = tracked_path_of_quota_child(path) {
                self.quota_roots.insert(real.to_owned());
            }
        }
    }

    pub(crate) fn note_quota_node_removed(&mut self, path: &str) {
        if path::name_of(path) == LIMITS_NODE {
            if let Some(real) = tracked_path_of_quota_child(path) {
                self.quota_roots.remove(real);
            }
        }
    }

    /// A new `zookeeper_stats` node starts from a full count of its subtree, root included.
    pub(crate) fn recompute_quota_stats_if_stats_node(&mut self, path: &str) {
        if path::name_of(path) != STATS_NODE {
            return;
        }
        let Some(real) = tracked_path_of_quota_child(path) else {
            return;
        };
        let (count, bytes) = self.subtree_totals(real);
        let mut values = StatsTrack::default();
        values.set(COUNT, count as i64);
        values.set(BYTES, bytes as i64);
        self.overwrite_data_in_place(path, values.render());
    }

    /// Node count and data bytes of the subtree at `root` (zero when it does not exist).
    pub(crate) fn subtree_totals(&self, root: &str) -> (u64, u64) {
        let mut pending = vec![root.to_owned()];
        let (mut count, mut bytes) = (0u64, 0u64);
        while let Some(current) = pending.pop() {
            let Some(node) = self.nodes.get(&current) else {
                continue;
            };
            count += 1;
            bytes += node.data_length() as u64;
            pending.extend(
                node.children
                    .iter()
                    .map(|name| path::child_path(&current, name)),
            );
        }
        (count, bytes)
    }

    /// Rewrites the stats node of the subtree holding `path` after a change of its totals.
    pub(crate) fn note_quota_change(&mut self, path: &str, count_diff: i64, bytes_diff: i64) {
        let Some(root) = self.quota_root_of(path) else {
            return;
        };
        let stats_path = quota_node_path(&root, STATS_NODE);
        let Some(stats_node) = self.nodes.get(&stats_path) else {
            return;
        };
        let mut values = StatsTrack::parse(stats_node.data.as_deref());
        values.set(COUNT, values.get(COUNT).saturating_add(count_diff));
        values.set(BYTES, values.get(BYTES).saturating_add(bytes_diff));
        self.overwrite_data_in_place(&stats_path, values.render());
    }

    /// QUOTAEXCEEDED if the change would pass a hard limit (only when quotas are enforced).
    /// Soft limits only log in ZooKeeper; this crate does no IO, so they pass silently.
    pub(crate) fn check_quota(
        &self,
        path: &str,
        count_diff: i64,
        bytes_diff: i64,
    ) -> Result<(), ErrorCode> {
        if !self.config.enforce_quota {
            return Ok(());
        }
        let Some(root) = self.quota_root_of(path) else {
            return Ok(());
        };
        let Some(limits_node) = self.nodes.get(&quota_node_path(&root, LIMITS_NODE)) else {
            return Ok(());
        };
        let limits = StatsTrack::parse(limits_node.data.as_deref());
        let Some(stats_node) = self.nodes.get(&quota_node_path(&root, STATS_NODE)) else {
            return Ok(());
        };
        let current = StatsTrack::parse(stats_node.data.as_deref());
        let exceeds = |diff: i64, used_key: &str, hard_key: &str| {
            let hard = limits.get(hard_key);
            diff != 0 && hard > -1 && current.get(used_key).saturating_add(diff) > hard
        };
        if exceeds(count_diff, COUNT, COUNT_HARD_LIMIT)
            || exceeds(bytes_diff, BYTES, BYTE_HARD_LIMIT)
        {
            return Err(ErrorCode::QuotaExceeded);
        }
        Ok(())
    }
}

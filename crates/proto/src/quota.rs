//! The text of ZooKeeper's quota nodes: `/zookeeper/quota<path>/zookeeper_limits` holds the
//! limits set on `<path>`, `…/zookeeper_stats` what the subtree uses, both in ZooKeeper's
//! StatsTrack format (`count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=-1`). The server keeps
//! the stats, clients (zkCli's setquota, listquota, delquota) write the limits.

use std::collections::BTreeMap;

/// Under which the quota nodes of every path live.
pub const QUOTA_ROOT: &str = "/zookeeper/quota";
/// The node that holds a path's limits.
pub const LIMITS_NODE: &str = "zookeeper_limits";
/// The node that holds a path's usage.
pub const STATS_NODE: &str = "zookeeper_stats";

/// The soft limit (or usage) on the number of nodes.
pub const COUNT: &str = "count";
/// The soft limit (or usage) on the bytes of data.
pub const BYTES: &str = "bytes";
/// The hard limit on the number of nodes (QUOTAEXCEEDED when enforced).
pub const COUNT_HARD_LIMIT: &str = "countHardLimit";
/// The hard limit on the bytes of data.
pub const BYTE_HARD_LIMIT: &str = "byteHardLimit";

/// A parsed `key=value` list separated by ',' or ';'. Keys absent read as −1 ("unset").
#[derive(Debug, Default, PartialEq, Eq)]
pub struct StatsTrack(BTreeMap<String, i64>);

impl StatsTrack {
    /// Lenient: pairs that do not parse are skipped, as a half-written node must not break writes.
    pub fn parse(data: Option<&[u8]>) -> StatsTrack {
        let text = data.map(String::from_utf8_lossy).unwrap_or_default();
        let pairs = text.split([',', ';']).filter_map(|pair| {
            let mut parts = pair.split('=');
            let key = parts.next()?;
            let value = parts.next()?.trim().parse::<i64>().ok()?;
            (!key.is_empty()).then(|| (key.to_owned(), value))
        });
        StatsTrack(pairs.collect())
    }

    pub fn get(&self, key: &str) -> i64 {
        self.0.get(key).copied().unwrap_or(-1)
    }

    pub fn set(&mut self, key: &str, value: i64) {
        self.0.insert(key.to_owned(), value);
    }

    /// ZooKeeper's StatsTrack text: count and bytes first, then a deliberate extra '=' and the
    /// remaining keys sorted, each after ';'.
    pub fn render(&self) -> Vec<u8> {
        let mut text = format!("{COUNT}={},{BYTES}={}", self.get(COUNT), self.get(BYTES));
        let mut extra = self
            .0
            .iter()
            .filter(|(key, _)| *key != COUNT && *key != BYTES)
            .peekable();
        if extra.peek().is_some() {
            text.push('=');
            for (key, value) in extra {
                text.push_str(&format!(";{key}={value}"));
            }
        }
        text.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_text_round_trips_in_zookeeper_format() {
        let mut values =
            StatsTrack::parse(Some(b"count=1,bytes=-1=;byteHardLimit=10;countHardLimit=5"));
        assert_eq!(values.get("count"), 1);
        assert_eq!(values.get("countHardLimit"), 5);
        values.set("count", 2);
        assert_eq!(
            values.render(),
            b"count=2,bytes=-1=;byteHardLimit=10;countHardLimit=5"
        );
        assert_eq!(StatsTrack::parse(None).get("count"), -1);
        assert_eq!(
            StatsTrack::parse(Some(b"garbage,,=;x=y")).render(),
            b"count=-1,bytes=-1"
        );
    }
}

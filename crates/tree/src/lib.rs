//! # zoolog-tree
//!
//! Owns the replicated state of a zoolog server: the data tree (nodes, Stat rules, sequential
//! counters, ephemerals, containers and TTL nodes, quotas), the sessions, and how one committed
//! log [`Command`] changes them ([`DataTree::apply`]); reads evaluated against that state
//! ([`DataTree::read`]); ACL checks ([`acl`]); the per-server [`WatchRegistry`] that turns an
//! applied entry's [`Trigger`]s into notifications; and exact snapshots.
//!
//! It must never do IO, read a clock, draw a random number, or let hash-map iteration order reach
//! a result: every server applies the same log and must reach byte-identical state. Time enters
//! only as the timestamp stamped on a command. Bad client input yields the ZooKeeper error code a
//! real server would send, never a panic; panics are reserved for broken invariants (which would
//! mean replicas have diverged).
//!
//! The tree is built from persistent maps (`imbl`), so [`DataTree::clone`] is O(1): a snapshot
//! is a frozen clone serialized on another thread while apply continues, and a multi is tried on
//! a clone that is kept only if every op succeeds.

pub mod acl;
mod command;
mod node;
pub mod path;
mod quota;
mod read;
mod snapshot;
mod tree;
mod watch;
mod write;

pub use command::{Command, CommandOp};
pub use snapshot::SnapshotError;
pub use tree::{Applied, DataTree, Outcome, Read, SessionInfo, Table, Trigger, WatchKind};
pub use watch::{WatchLists, WatchRegistry, WatchSummary};

/// A log position: the zxid clients see.
pub type Zxid = i64;

/// A client connection, numbered by the server; watches belong to connections.
pub type ConnectionId = u64;

/// How the tree behaves. Must be identical on every replica of one log: it shapes apply's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeConfig {
    /// High byte of every session id this log assigns (1 for standalone, as ZooKeeper does).
    pub server_id: u8,
    /// `zookeeper.extendedTypesEnabled`: TTL nodes allowed.
    pub extended_types_enabled: bool,
    /// `zookeeper.enforceQuota`: hard quota limits fail creates and setData with QUOTAEXCEEDED.
    pub enforce_quota: bool,
    /// `zookeeper.skipACL`: every ACL check passes.
    pub skip_acl: bool,
    /// Containers that never had a child are reaped once unmodified for longer than this; 0 disables.
    pub container_never_used_ms: i64,
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            server_id: 1,
            extended_types_enabled: false,
            enforce_quota: false,
            skip_acl: false,
            container_never_used_ms: 5 * 60 * 1000,
        }
    }
}

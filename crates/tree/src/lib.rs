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
//!
//! ## Sessions in a replicated log
//!
//! Session creation, closing and expiry are log entries, so every replica agrees on which
//! sessions (and so which ephemerals) exist. Each [`SessionInfo`] records `touched_at`, the zxid
//! of its latest sign of life: its `CreateSession`, any `Write` from its owner, a batched
//! [`CommandOp::Touch`] listing it (appended by whichever server the client talks to), or an
//! [`CommandOp::Attach`].
//!
//! Expiry is the conditional [`CommandOp::Expire`]`{ unless_touched_after: P }`: it closes the
//! session only if `touched_at <= P` when it is applied, and is a no-op otherwise. It is safe
//! whoever appends it, with no leader and no agreement between servers on clocks or sessions:
//! an appender appends it only after it has applied the log up to position P and then watched
//! for a whole session timeout without seeing any entry after P touch the session. Whether the
//! session is then expired depends only on the log, never on the appender: if any touch for it
//! (from any server, appended at any time) is ordered before the expiry but after P, the expiry
//! is a no-op on every replica; if none is, every replica expires it, and a touch ordered after
//! the expiry finds no session and is ignored. So two servers racing to expire, or one server
//! expiring while the client talks to another, can only cancel an expiry, never apply a wrong
//! one: a client whose server keeps appending touches more often than the timeout is never
//! expired, and the decision is the same on every replica because it is made at apply time.
//!
//! Each session also has an `owner`, the token of the connection that holds it
//! ([`Command::owner`] of its `CreateSession`, or of its latest `Attach` when the client
//! reconnects elsewhere). Writes and closes carrying another owner fail with SESSIONMOVED
//! (-118), as ZooKeeper's `checkSession(sessionId, owner)` does, so requests still in flight
//! from a connection the client left cannot act on its session after the move.

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

pub use command::{Command, CommandOp, SessionSeen};
pub use snapshot::SnapshotError;
pub use tree::{
    Applied, DataTree, Outcome, Read, ReapAfter, ReapCandidate, SessionInfo, Table, Trigger,
    WatchKind,
};
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

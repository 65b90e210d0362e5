//! The coordination recipes of the ZooKeeper paper (§2.4, "Examples of primitives"), built on
//! the client's API alone: the server knows nothing of them.
//!
//! | recipe | guarantee |
//! |---|---|
//! | [`ConfigWatcher`] | yields the configuration, then each newer version in order, ending on the latest |
//! | [`Rendezvous`] | a worker waits until the master has filled the node in |
//! | [`Group`] | members are the group's ephemeral children; a member's session ending removes it |
//! | [`SimpleLock`] | one holder at a time; every waiter wakes at a release (the herd effect) |
//! | [`Lock`] | one holder at a time, served in arrival order, a release wakes one waiter |
//! | [`ReadWriteLock`] | readers share, a writer is alone, a waiting writer is not overtaken by later readers |
//! | [`DoubleBarrier`] | nobody starts before `threshold` have entered, nobody finishes before all have left |
//! | [`LeaderElection`] | at most one leader; when its session ends the next candidate in line leads |
//! | [`DistributedQueue`] | items are taken in the order they were put, each by exactly one consumer, even across a lost connection |
//!
//! Why they hold, in short (each module says more): the server applies writes in one total order,
//! lets exactly one create of a path and one delete of a node succeed, numbers sequential nodes
//! from one counter in that order, deletes a session's ephemeral nodes when the session ends, and
//! notifies a watcher of a change before that client can read anything after the change.
//!
//! Two hazards are handled for every recipe. A create cut off by a lost connection may or may not
//! have happened: sequential nodes carry a fresh GUID in their name so the client finds its own
//! node instead of creating a second one, and plain ephemerals are recognised by their owner
//! session. A session that ends takes its ephemerals with it: a held lock, leadership or
//! membership is then gone, which [`OwnedNode::lost`] reports; while disconnected, a holder
//! cannot know, and should pause on [`SessionState::Disconnected`](crate::SessionState).
//!
//! Every hold is an [`OwnedNode`]: release it, or drop it to release in the background.

mod barrier;
mod config;
mod election;
mod group;
mod lock;
mod owned;
mod queue;
mod rendezvous;
mod rwlock;
mod sequential;
mod support;

pub use barrier::DoubleBarrier;
pub use config::{ConfigVersion, ConfigWatcher};
pub use election::LeaderElection;
pub use group::{Group, MembershipWatcher};
pub use lock::{Lock, SimpleLock};
pub use owned::OwnedNode;
pub use queue::DistributedQueue;
pub use rendezvous::Rendezvous;
pub use rwlock::ReadWriteLock;

//! # zoolog-server
//!
//! Owns the client-facing side of a zoolog server: the client port, the handshake, sessions and
//! their expiry, the per-session FIFO pipeline, watch delivery, the four-letter words, the
//! AdminServer's HTTP commands and Prometheus /metrics, and the configuration a ZooKeeper user
//! already has. State changes go to an ordering layer
//! (`zoolog-log`) as commands and come back applied to the data tree (`zoolog-tree`).
//!
//! It must never decide the outcome of a write itself (that is the deterministic apply's job,
//! identical on every server), never block its core task on IO, and never let one client's bad
//! input or slowness affect another client.
//!
//! ## Sessions across an ensemble, and why they are safe
//!
//! Every server of an ensemble applies the same log, so every server knows every session; what
//! differs is where its client is connected. The rules (entries defined in `zoolog-tree`, whose
//! docs give the apply-side argument):
//! - **Creation and takeover are log entries.** A new session is a `CreateSession` entry; a
//!   client reconnecting anywhere takes its session over with an `Attach` entry carrying its
//!   password (checked at apply) and its new connection's owner token. The server answers the
//!   handshake only when that entry has been applied *here*: it is ordered after everything
//!   committed when it was appended, which includes every zxid the client has seen, so the
//!   server has caught up to the client's lastZxidSeen by construction. Writes still in flight
//!   from the connection the client left carry the old owner and, ordered after the `Attach`,
//!   fail with SESSIONMOVED: they cannot overtake the client's new requests (FIFO holds).
//!   Such a write is not answered: its connection closes, as in ZooKeeper (ZOOKEEPER-710).
//!   An Attach ordered late, from a connection the client had already left, would otherwise
//!   fail every write of its current connection; closed, the client attaches again.
//! - **Liveness is reported, expiry is decided once.** Each server appends, at most every half
//!   tick, one `Touch` entry naming sessions heard from on it and how long ago, once the log's
//!   latest news of one of them is about a third of its timeout old; the deciding server counts
//!   a session's timeout from the reported contact. Reports go to the ordering layer ahead of
//!   the client commands waiting there (`append_urgent`), and through Zab in a lane of their
//!   own that the leader proposes before any client command waiting (a learner's forwards
//!   included), so that a backlog of writes cannot hold them back past the timeout they guard
//!   (only what is already proposed commits before them). A server's next report of a session
//!   waits a third of the timeout from its last one, whether ordered yet or not (reports slower
//!   to order than to make would otherwise queue behind each other, the freshest last), and a
//!   server reports what it heard before it left the quorum once it is back. Only the leader (or
//!   a standalone server) appends expiries, and each is conditional:
//!   `Expire { unless_touched_after: P }` where P is the session's last sign of life the leader
//!   has applied. Any sign of life ordered between P and the expiry cancels it on every replica
//!   alike, so a session whose client keeps talking to *any* server that reaches the quorum is
//!   never expired, two leaders racing (an old one not yet deposed) can only cancel expiries, and
//!   an expiry that does apply removes the session's ephemerals on every server at the same log
//!   position. A sign of life is a report of the session, a write from the connection that
//!   holds it, or an Attach with its password: one with the wrong password touches nothing, as
//!   in ZooKeeper, so a session's id (which any reader sees as an ephemeral's owner) is not
//!   enough to keep it alive. A new leader gives every session a full timeout, as ZooKeeper
//!   does.
//! - **Leaving the quorum keeps the clients, and settles their writes.** A server whose
//!   ordering layer stops serving keeps its writable clients' connections for up to a tick, so
//!   that a leader change of a few milliseconds passes them by: pings and reads are answered
//!   from the applied state, every entry of which is committed (what a follower's client may
//!   read anyway). Writes, syncs and closes sent meanwhile are held, with the requests behind
//!   them, and handed to the ordering layer when the server joins a quorum again; none had been
//!   handed over before, so none is ordered twice. A write that was already handed over, in the
//!   stint of serving the server ended, is settled rather than failed. Zab begins a new stint
//!   only once the server has applied the history its leader synchronized it to, and that
//!   history holds every entry of the ended stint that will ever commit: a new epoch's history
//!   holds every earlier entry that will ever commit, and a leader that led on, taking the
//!   server back into its epoch, drops the forwards it held from the server's earlier attempt
//!   and ordered those it took before that history's end. So by then the write was applied
//!   (and answered then), or it never will be, and is handed over again in its place in the
//!   client's order. No copy from the ended stint can commit later: the old leader's queues
//!   die with its leadership, the leader refuses a forward of an older epoch or attempt, and
//!   the driver drops a command the front end queued for a stint that has ended. The
//!   simulator checks that no client request is applied twice. Where the fate stays unknown
//!   the client is dropped, as a ZooKeeper client is (a connection loss: its writes may or may
//!   not commit): when the server installs a snapshot (which may hold the write without
//!   applying it here). Any
//!   request ordered after its client moved to another server fails there (SessionMoved), as
//!   any write of a connection that no longer holds its session. The end of the tick without a
//!   leader drops the clients, and what they held is never ordered. With read-only mode on,
//!   the server keeps accepting read-only sessions, which live only in its memory and end when
//!   it rejoins or their client closes them (the one write it answers without the log). A
//!   client resuming a session there keeps it if this server holds it; one it does not hold
//!   is called expired only if this server applied its creation (a session id carries the
//!   zxid that created it), otherwise the client is turned away to try another server: behind
//!   the log, this server cannot tell an ended session from a newer one.
//! - **`sync` is a log entry** in an ensemble: its reply leaves only after it is applied here,
//!   so everything committed before the sync was ordered is visible to the reads after it, on
//!   any server and across leader changes (a deposed leader cannot order it at all).
//! - **Reaping is judged on one clock, applied by a condition.** A TTL node or a container that
//!   never had a child is due once unchanged for long enough; a node's mtime is stamped by the
//!   wall clock of whichever server took the write, so comparing it with another server's clock
//!   would let their skew (or a clock step) delete a node early. Instead every server's reaper
//!   notes, on its monotonic clock, when a check first saw each node's last change (its mzxid):
//!   the change happened no later, so the time since is never more than the node's true idle
//!   time. Only the deciding server appends `Reap { path, unchanged_since: mzxid }`, and every
//!   replica deletes the node only if it is still childless with that mzxid: a change ordered
//!   after the judgment cancels it everywhere, whoever judged and however late it is ordered.

pub mod admin;
pub mod auth;
pub mod config;
pub mod core;
pub mod ensemble;
pub mod four_letter;
mod http;
pub mod json;
pub mod metrics;
pub mod shell;
pub mod stats;

pub use config::ServerConfig;

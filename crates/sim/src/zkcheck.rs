//! The checkers of core mode, where every server runs the real front end (`Core`) and the
//! clients speak the ZooKeeper protocol to it. On top of the Zab-level agreement checker:
//!
//! - A reference [`DataTree`] applies the common sequence; it tells what each log entry is
//!   (which session and cxid wrote it) and what the watched znodes held at every position.
//! - No lost acknowledgement: a write reply carrying zxid z is the entry at z of the common
//!   sequence, written by that session with that xid.
//! - A write answered at zxid z fails with SESSIONEXPIRED exactly when its session had ended
//!   there; one whose session another connection held there is not answered at all (its
//!   connection closes, as in ZooKeeper, so the client takes the session over again).
//! - FIFO per session: replies come in request order, the zxids of a session's acknowledged
//!   writes increase in issue order, and no reply's zxid goes back.
//! - Reads: a getData or exists answered at zxid z returns exactly the znode of the common
//!   state at z; a read after a sync answers at a zxid at least the highest write zxid
//!   acknowledged to anyone before the sync was issued; a session never sees a znode's
//!   modification zxid go back.
//! - Watches on data, creation and the root's children (in `world::zk`): an event comes only
//!   for a watch the client holds, names the first change of the node after the watch was
//!   left (a watch set again after a reconnect may name a later one), and arrives before any
//!   reply that shows a state after that change; a SetWatches is answered only after the
//!   events the node's state owes (a data watch on a node gone or modified after the relative
//!   zxid, a creation watch on a node that exists, a children watch on a node whose children
//!   changed after it).
//! - Persistent watches (in `world::zk::persistent`): while a connection holds one, its
//!   client gets one event for each change the watch covers (a watched znode's, the root's
//!   children, or every znode's for a recursive watch on the root), in order, before any
//!   reply showing a state after the change, and no other event; after a reconnect, from the
//!   zxid at which the server answered SetWatches2.
//! - getChildren of the root answers exactly the common state's children at its zxid.
//! - A create answers the path that the common sequence's entry at its zxid added: the one
//!   asked for, or for a sequential node that path and ten digits.
//! - A multi (in `world::zk::multi`) took effect whole at its zxid, each op's result matching
//!   the common state after it, or it changed nothing there and its results name the first
//!   op that fails on the state before (0 for the ops before it, −2 after).
//! - The reaper (in half the seeds, `world::zk::reaper`) deletes a container or TTL node only
//!   once it is due by the simulation's time (whatever the servers' clocks say, skewed in
//!   half the seeds: `world::zk::clock`), and after the faults it deletes whatever is due (the
//!   run does not settle before).
//! - At the end: every server's tree encodes exactly as the reference tree, and no session a
//!   client saw closed or expired remains, nor any ephemeral owned by it (or by nobody).
//! - Read-only mode (in `world::zk`, half the seeds enable it): a read-only session only for a
//!   client that asked for one; its reads are checked as any; its writes, and only they, are
//!   refused with NOTREADONLY, and none of them is ever ordered (checked at the end).
//! - A client is told its session expired only once the log has ended it (unless the client
//!   sent a close, which a server may count as done before it commits).
//! - An expiry is decided a whole timeout after the log's latest news of the session's
//!   client (the first delivery of its last sign of life, less the idle time that reports),
//!   whatever the faults: whichever server decides counts from its own delivery of that news.
//! - Sessions live while their clients talk (in `world::zk`): once faults have stopped, no
//!   expiry is ordered less than half a timeout after a frame that a serving server heard in a
//!   steady stream from the client, and no client learns that its session expired after it
//!   held a connection for a whole timeout, hearing from its server until the connection
//!   ended. A quarter of the seeds keep their clients going for two of the longest timeouts
//!   after the faults, so that sessions kept alive by reports alone are put to the test.

use std::collections::{BTreeMap, BTreeSet};

use zoolog_proto::{ErrorCode, Request};
use zoolog_tree::{Command, CommandOp, DataTree, Outcome, TreeConfig};

/// What a watched znode holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    pub data: Option<Vec<u8>>,
    pub version: i32,
    pub czxid: i64,
    pub mzxid: i64,
}

/// What one log entry is, as far as the clients' checks care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A client's write or close: (session, cxid).
    Client {
        session_id: i64,
        cxid: i32,
    },
    Other(&'static str),
}

/// How the log ended a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEnd {
    Closed,
    Expired { at_us: u64 },
}

/// A container or TTL node of the common state: the reaper may delete it, childless, once
/// unmodified for longer than `due_after_ms` since `created_us` (the simulated time its
/// creation joined the common sequence), or at once if it is a container that has had a
/// child. Simulated time, not the times stamped in the log: those come from the servers'
/// clocks, which may be skewed (`world::zk::clock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reapable {
    pub created_us: u64,
    pub due_after_ms: i64,
    pub used: bool,
}

impl Reapable {
    /// Whether the reaper may delete it at simulated time `now_us`, if it has no children.
    /// Exact: the deciding server saw the creation applied no sooner than `created_us`, and
    /// judged it due (more than `due_after_ms` whole milliseconds of its monotonic clock
    /// later) no later than its Reap joined the common sequence.
    pub fn due(&self, now_us: u64) -> bool {
        let idle_us = now_us.saturating_sub(self.created_us);
        self.used || idle_us > u64::try_from(self.due_after_ms).unwrap_or(0) * 1000
    }
}

/// An expiry that ended a live session: who, the session's timeout, when the deciding
/// server appended it (its command's time, to the millisecond), and the log's latest news of
/// the client before it (as the checker's `news_us` keeps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    pub session_id: i64,
    pub timeout_ms: i32,
    pub ordered_us: u64,
    pub news_us: u64,
}

impl Expiry {
    pub fn timeout_us(&self) -> u64 {
        u64::try_from(self.timeout_ms).unwrap_or(0) * 1000
    }
}

pub struct ZkChecker {
    pub tree: DataTree,
    pub paths: Vec<String>,
    /// For each watched path, its states by the position that made them.
    pub history: BTreeMap<String, Vec<(i64, Option<NodeState>)>>,
    /// The children (sorted) of the root and of the containers, by the position that
    /// changed them.
    children: BTreeMap<String, Vec<(i64, Vec<String>)>>,
    /// The kind of the entry at each position (index position − 1).
    pub entries: Vec<EntryKind>,
    /// Where each client request entered the common sequence, by the proposing front end's
    /// origin, its connection and the request's xid: a request applied twice is a bug (a
    /// write appended again after a leader change although it had been ordered).
    request_positions: BTreeMap<(u64, u64, i32), u64>,
    /// The highest zxid of a write reply any client has received.
    pub max_write_ack: i64,
    /// Sessions whose clients were told they are closed or expired.
    pub ended_sessions: BTreeSet<i64>,
    /// How the log ended the sessions it ended: closed, or expired, with when that expiry was
    /// first delivered (µs), no earlier than it was ordered.
    pub ended_in_log: BTreeMap<i64, LogEnd>,
    /// For each session of the common state, the latest time (µs) its client was heard from
    /// by the log's account, never later than any server's: a sign of life's first delivery,
    /// less the idle time it reports.
    news_us: BTreeMap<i64, u64>,
    pub write_acks: u64,
    pub reads_checked: u64,
    pub synced_reads: u64,
    pub sessions_created: u64,
    pub sessions_expired: u64,
    pub watches_set: u64,
    pub watches_fired: u64,
    pub read_only_sessions: u64,
    /// Writes refused with NOTREADONLY, as (session, cxid): never ordered.
    pub refused: BTreeSet<(i64, i32)>,
    /// Positions of the client writes that fail the session check: their session had ended
    /// (SESSIONEXPIRED) or was held by another connection (SESSIONMOVED).
    pub session_check_failures: BTreeMap<i64, ErrorCode>,
    /// The containers and TTL nodes of the common state, by path.
    pub reapable: BTreeMap<String, Reapable>,
    /// How long a container that never had a child lives unmodified (the trees' setting).
    container_never_used_ms: i64,
    /// Nodes the reaper deleted, each checked due.
    pub reaped: u64,
    /// Events of persistent watches (also counted in `watches_fired`).
    pub persistent_events: u64,
    /// Multis answered: done whole, or failed whole.
    pub multis_applied: u64,
    pub multis_failed: u64,
}

impl ZkChecker {
    /// Checks the state of `paths` and the children of the root and of `containers`.
    pub fn new(config: TreeConfig, paths: Vec<String>, containers: &[&str]) -> ZkChecker {
        let container_never_used_ms = config.container_never_used_ms;
        let history = paths.iter().map(|p| (p.clone(), vec![(0, None)])).collect();
        let tree = DataTree::new(config);
        let parents = std::iter::once("/").chain(containers.iter().copied());
        let children = parents
            .map(|parent| {
                (
                    parent.to_string(),
                    vec![(0, sorted_children(&tree, parent))],
                )
            })
            .collect();
        ZkChecker {
            tree,
            paths,
            history,
            children,
            entries: Vec::new(),
            request_positions: BTreeMap::new(),
            max_write_ack: 0,
            ended_sessions: BTreeSet::new(),
            ended_in_log: BTreeMap::new(),
            news_us: BTreeMap::new(),
            write_acks: 0,
            reads_checked: 0,
            synced_reads: 0,
            sessions_created: 0,
            sessions_expired: 0,
            watches_set: 0,
            watches_fired: 0,
            read_only_sessions: 0,
            refused: BTreeSet::new(),
            session_check_failures: BTreeMap::new(),
            reapable: BTreeMap::new(),
            container_never_used_ms,
            reaped: 0,
            persistent_events: 0,
            multis_applied: 0,
            multis_failed: 0,
        }
    }

    /// The entry at `position` joined the common sequence: some server delivered it first at
    /// `now_us`. Says which session it expired, if it was an expiry that ended one; its
    /// order time is the simulated time (ms) at which the clock of the server that stamped it
    /// read its command's wall time, as `simulated_ms_of` tells.
    pub fn committed(
        &mut self,
        position: u64,
        payload: &[u8],
        now_us: u64,
        simulated_ms_of: impl Fn(i64) -> i64,
    ) -> Result<Option<Expiry>, String> {
        if payload.len() < 16 {
            return Err(format!("entry {position} is not a Core envelope"));
        }
        let command = Command::decode(&payload[16..])
            .map_err(|e| format!("entry {position} does not decode: {e}"))?;
        if let CommandOp::Write { .. } | CommandOp::CloseSession = &command.op {
            let origin = u64::from_be_bytes(payload[..8].try_into().unwrap());
            let connection = u64::from_be_bytes(payload[8..16].try_into().unwrap());
            let request = (origin, connection, command.cxid);
            if let Some(first) = self.request_positions.insert(request, position) {
                return Err(format!(
                    "entry {position} applies the client request of entry {first} again \
                     (session {:#x}, xid {})",
                    command.session_id, command.cxid
                ));
            }
        }
        let kind = match &command.op {
            CommandOp::Write { .. } | CommandOp::CloseSession => EntryKind::Client {
                session_id: command.session_id,
                cxid: command.cxid,
            },
            CommandOp::CreateSession { .. } => EntryKind::Other("createSession"),
            CommandOp::Reap { .. } => EntryKind::Other("reap"),
            CommandOp::Touch { .. } => EntryKind::Other("touch"),
            CommandOp::Expire { .. } => EntryKind::Other("expire"),
            CommandOp::Attach { .. } => EntryKind::Other("attach"),
        };
        self.entries.push(kind);
        let end = match command.op {
            CommandOp::Expire { .. } => Some(LogEnd::Expired { at_us: now_us }),
            CommandOp::CloseSession => Some(LogEnd::Closed),
            _ => None,
        };
        let timeout_ms = self.tree.session(command.session_id).map(|s| s.timeout_ms);
        if let CommandOp::Write { .. } = command.op {
            let failure = match self.tree.session(command.session_id) {
                None => Some(ErrorCode::SessionExpired),
                Some(session) if session.owner != command.owner => Some(ErrorCode::SessionMoved),
                Some(_) => None,
            };
            if let Some(code) = failure {
                self.session_check_failures.insert(position as i64, code);
            }
        }
        let reaping = match &command.op {
            CommandOp::Reap { path, .. } => self.tree.stat(path).map(|_| path.clone()),
            _ => None,
        };
        let applied = self.tree.apply(position as i64, &command);
        if let Outcome::SessionCreated { session_id, .. } = applied.outcome {
            self.news_us.insert(session_id, now_us);
        }
        self.note_signs_of_life(position as i64, &command, now_us);
        let mut expiry = None;
        if let (Some(end), Some(timeout_ms)) = (end, timeout_ms) {
            if self.tree.session(command.session_id).is_none() {
                self.ended_in_log.insert(command.session_id, end);
                let news_us = self.news_us.remove(&command.session_id);
                if let LogEnd::Expired { .. } = end {
                    let ordered_ms = u64::try_from(simulated_ms_of(command.time_ms))
                        .map_err(|_| format!("entry {position}: an expiry dated before time 0"))?;
                    let news_us = news_us.ok_or_else(|| {
                        format!(
                            "entry {position}: session {:#x} expired with no sign of life in \
                             the log",
                            command.session_id
                        )
                    })?;
                    let ended = Expiry {
                        session_id: command.session_id,
                        timeout_ms,
                        ordered_us: ordered_ms * 1000,
                        news_us,
                    };
                    check_expiry_due(position, ended)?;
                    expiry = Some(ended);
                }
            }
        }
        for path in &self.paths {
            let now = self.tree.node(path).map(|(data, stat, _)| NodeState {
                data,
                version: stat.version,
                czxid: stat.czxid,
                mzxid: stat.mzxid,
            });
            let history = self.history.get_mut(path).unwrap();
            if history.last().unwrap().1 != now {
                history.push((position as i64, now));
            }
        }
        for (parent, history) in self.children.iter_mut() {
            let (last_change, last_children) = history.last().unwrap();
            // Every create and delete moves its parent's pzxid: list a parent only then.
            let moved = match self.tree.stat(parent) {
                Some(stat) => stat.pzxid > *last_change,
                None => !last_children.is_empty(),
            };
            if moved {
                let children = sorted_children(&self.tree, parent);
                if *last_children != children {
                    history.push((position as i64, children));
                }
            }
        }
        self.track_reapable(position as i64, &command, reaping, now_us)?;
        Ok(expiry)
    }

    /// Notes when the entry at `position`, first delivered at `now_us`, says the clients of
    /// the sessions it touched were last heard from (a creation is noted by the caller: the
    /// session's id comes from its outcome).
    fn note_signs_of_life(&mut self, position: i64, command: &Command, now_us: u64) {
        for seen in self.tree.signs_of_life(position, command) {
            let heard_us = now_us.saturating_sub(u64::from(seen.idle_ms) * 1000);
            let news_us = self.news_us.entry(seen.session_id).or_default();
            *news_us = (*news_us).max(heard_us);
        }
    }

    /// Keeps `reapable` up to date with the entry at `position`, which joined the common
    /// sequence at `now_us` and deleted `reaping` if it was a Reap of an existing node: the
    /// reaper deletes only what is due.
    fn track_reapable(
        &mut self,
        position: i64,
        command: &Command,
        reaping: Option<String>,
        now_us: u64,
    ) -> Result<(), String> {
        if let CommandOp::Write { request, .. } = &command.op {
            let created = match request {
                Request::CreateContainer(r) => Some((&r.path, self.container_never_used_ms)),
                Request::CreateTtl(r) => Some((&r.path, r.ttl)),
                _ => None,
            };
            if let Some((path, due_after_ms)) = created {
                if self.tree.stat(path).is_some_and(|s| s.czxid == position) {
                    let node = Reapable {
                        created_us: now_us,
                        due_after_ms,
                        used: false,
                    };
                    self.reapable.insert(path.clone(), node);
                }
            }
        }
        for (path, node) in self.reapable.iter_mut() {
            node.used |= gained_a_child(&self.children, path, position);
        }
        if let Some(path) = reaping.filter(|path| self.tree.stat(path).is_none()) {
            let node = self.reapable.get(&path).ok_or_else(|| {
                format!("reaper: entry {position} deleted {path}, neither a container nor TTL")
            })?;
            if !node.due(now_us) {
                return Err(format!(
                    "reaper: entry {position} deleted {path} at {now_us} us, before it was \
                     due: {node:?}"
                ));
            }
            self.reaped += 1;
        }
        let tree = &self.tree;
        self.reapable.retain(|path, _| tree.stat(path).is_some());
        Ok(())
    }

    /// The state of `path` after position `zxid` of the common sequence.
    pub fn state_at(&self, path: &str, zxid: i64) -> Result<Option<&NodeState>, String> {
        if zxid > self.entries.len() as i64 {
            return Err(format!(
                "a read answered at zxid {zxid}, beyond the common sequence ending at {}",
                self.entries.len()
            ));
        }
        let history = &self.history[path];
        let index = history.partition_point(|(p, _)| *p <= zxid);
        Ok(history[index - 1].1.as_ref())
    }

    /// The children (sorted) of `parent` (the root or a container) after position `zxid` of
    /// the common sequence, and the position that last changed them.
    pub fn children_at(&self, parent: &str, zxid: i64) -> (i64, &[String]) {
        let history = &self.children[parent];
        let index = history.partition_point(|(p, _)| *p <= zxid);
        let (position, children) = &history[index - 1];
        (*position, children)
    }

    /// The first change of the root's children after position `zxid`.
    pub fn first_children_change_after(&self, zxid: i64) -> Option<i64> {
        let history = &self.children["/"];
        let index = history.partition_point(|(p, _)| *p <= zxid);
        history.get(index).map(|(position, _)| *position)
    }

    /// Whether `path` has no children now (as far as tracked: the root and the containers).
    pub fn childless(&self, path: &str) -> bool {
        let history = self.children.get(path);
        history.is_none_or(|history| history.last().unwrap().1.is_empty())
    }

    /// The tracked parents: the root and the containers.
    pub fn parents(&self) -> impl Iterator<Item = &str> {
        self.children.keys().map(String::as_str)
    }

    /// The first change of `path` after position `zxid` of the common sequence: where, and
    /// the node before and after it.
    pub fn first_change_after(
        &self,
        path: &str,
        zxid: i64,
    ) -> Option<(i64, Option<&NodeState>, Option<&NodeState>)> {
        let history = &self.history[path];
        let index = history.partition_point(|(p, _)| *p <= zxid);
        let (position, after) = history.get(index)?;
        Some((*position, history[index - 1].1.as_ref(), after.as_ref()))
    }

    /// The session check of the client write at `zxid`: the error it fails with, if any.
    pub fn session_check_at(&self, zxid: i64) -> Option<ErrorCode> {
        self.session_check_failures.get(&zxid).copied()
    }

    /// A write answered with `err` at `zxid`: SESSIONEXPIRED exactly when its session had
    /// ended there. A write whose session another connection held is not answered at all:
    /// the server closes the connection instead, as ZooKeeper does, so that the client takes
    /// its session over again.
    pub fn check_session_answer(&self, xid: i32, zxid: i64, err: i32) -> Result<(), String> {
        let failure = self.session_check_at(zxid);
        let expired = err == ErrorCode::SessionExpired.code();
        let consistent = match failure {
            Some(ErrorCode::SessionMoved) => false,
            Some(code) => code.code() == err,
            None => !expired && err != ErrorCode::SessionMoved.code(),
        };
        if !consistent {
            return Err(format!(
                "sessions: write xid {xid} was answered with error {err} at zxid {zxid}, where \
                 the session check gives {failure:?} (a moved session's write is not answered)"
            ));
        }
        Ok(())
    }

    /// A client received a write reply at `zxid` for its request (session, xid).
    pub fn write_acknowledged(
        &mut self,
        session_id: i64,
        xid: i32,
        zxid: i64,
    ) -> Result<(), String> {
        let entry = zxid
            .checked_sub(1)
            .and_then(|i| self.entries.get(i as usize))
            .ok_or_else(|| {
                format!(
                    "lost: session {session_id:#x} xid {xid} acknowledged at zxid {zxid}, beyond the common sequence ending at {}",
                    self.entries.len()
                )
            })?;
        let expected = EntryKind::Client {
            session_id,
            cxid: xid,
        };
        if *entry != expected {
            return Err(format!(
                "lost: session {session_id:#x} xid {xid} acknowledged at zxid {zxid}, where the common sequence has {entry:?}"
            ));
        }
        self.max_write_ack = self.max_write_ack.max(zxid);
        self.write_acks += 1;
        Ok(())
    }

    /// At the end: the trees agree with the reference, ended sessions left nothing behind.
    pub fn finish(&self, trees: &[(u64, &DataTree)]) -> Result<(), String> {
        let reference = digest(&self.tree);
        for (server, tree) in trees {
            let theirs = digest(tree);
            if theirs != reference {
                let first = theirs
                    .iter()
                    .zip(&reference)
                    .find(|(a, b)| a != b)
                    .map(|(a, b)| format!("{a} / {b}"))
                    .unwrap_or_else(|| {
                        format!("{} lines against {}", theirs.len(), reference.len())
                    });
                return Err(format!(
                    "convergence: server {server}'s tree differs from the common state at {}: {first}",
                    self.entries.len(),
                ));
            }
        }
        for (index, entry) in self.entries.iter().enumerate() {
            if let EntryKind::Client { session_id, cxid } = entry {
                if self.refused.contains(&(*session_id, *cxid)) {
                    return Err(format!(
                        "read-only: session {session_id:#x} xid {cxid} was refused with NOTREADONLY but is entry {}",
                        index + 1
                    ));
                }
            }
        }
        let sessions: BTreeSet<i64> = self.tree.sessions().map(|(id, _)| id).collect();
        for id in &self.ended_sessions {
            if sessions.contains(id) {
                return Err(format!(
                    "ephemerals: session {id:#x} was reported closed or expired to its client but is still live at the end, owning {:?}",
                    self.tree.session(*id).map(|s| s.ephemerals.iter().cloned().collect::<Vec<_>>())
                ));
            }
        }
        let mut pending = vec!["/".to_string()];
        while let Some(path) = pending.pop() {
            let Some((_, stat, children)) = self.tree.node(&path) else {
                continue;
            };
            if stat.ephemeral_owner != 0 && !sessions.contains(&stat.ephemeral_owner) {
                return Err(format!(
                    "ephemerals: {path} is owned by session {:#x}, which no longer exists",
                    stat.ephemeral_owner
                ));
            }
            for child in children {
                let child = if path == "/" {
                    format!("/{child}")
                } else {
                    format!("{path}/{child}")
                };
                pending.push(child);
            }
        }
        Ok(())
    }
}

/// Whether the entry at `position` created a child of `parent`.
fn gained_a_child(
    children: &BTreeMap<String, Vec<(i64, Vec<String>)>>,
    parent: &str,
    position: i64,
) -> bool {
    let Some(history) = children.get(parent) else {
        return false;
    };
    match history.as_slice() {
        [.., (_, before), (changed, after)] if *changed == position => {
            after.iter().any(|name| !before.contains(name))
        }
        _ => false,
    }
}

/// An expiry that ended a session at `position` was decided a whole timeout after the news
/// of its client that the log held, faults or not: the deciding server counts the signs of
/// life the tree counts, from its own delivery of each (no earlier than the first), less the
/// idle time the news reports. Its clocks read whole milliseconds, and the expiry's order
/// time is the start of the millisecond it was stamped in: two milliseconds of slack.
fn check_expiry_due(position: u64, expiry: Expiry) -> Result<(), String> {
    const ROUNDING_US: u64 = 2_000;
    if expiry.ordered_us + ROUNDING_US < expiry.news_us + expiry.timeout_us() {
        return Err(format!(
            "entry {position}: session {:#x} (timeout {} ms) expired, ordered at about {} us, \
             although the log had news of its client from {} us",
            expiry.session_id, expiry.timeout_ms, expiry.ordered_us, expiry.news_us
        ));
    }
    Ok(())
}

fn sorted_children(tree: &DataTree, path: &str) -> Vec<String> {
    let mut children = tree.node(path).map(|(_, _, c)| c).unwrap_or_default();
    children.sort();
    children
}

/// Everything clients can observe of a tree, one line per session and znode, in order:
/// what must be identical on every server. `/zookeeper` is left out: servers publish their
/// own view of the configuration there, outside the log.
pub fn digest(tree: &DataTree) -> Vec<String> {
    let mut lines = vec![format!("applied {}", tree.last_applied_zxid())];
    for (id, session) in tree.sessions() {
        lines.push(format!(
            "session {id:#x} timeout {} password {:?} touched {} ephemerals {:?}",
            session.timeout_ms,
            session.password,
            session.touched_at,
            session.ephemerals.iter().collect::<Vec<_>>()
        ));
    }
    let mut pending = vec!["/".to_string()];
    while let Some(path) = pending.pop() {
        if path == "/zookeeper" {
            continue;
        }
        let Some((data, stat, mut children)) = tree.node(&path) else {
            continue;
        };
        lines.push(format!("{path} {data:?} {stat:?}"));
        children.sort();
        for child in children.into_iter().rev() {
            pending.push(if path == "/" {
                format!("/{child}")
            } else {
                format!("{path}/{child}")
            });
        }
    }
    lines
}

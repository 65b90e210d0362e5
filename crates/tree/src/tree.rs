//! The data tree: state, apply, sessions, the reaper, and the two primitives every mutation goes
//! through (`insert_node`, `remove_node`) so bookkeeping lives in one place.

use bytes::Bytes;

use crate::acl;
use crate::node::{Children, Node, NodeKind};
use crate::path;
use crate::{Command, CommandOp, SessionSeen, TreeConfig, Zxid};
use imbl::{GenericHashMap, OrdMap, OrdSet};
use std::collections::hash_map::DefaultHasher;
use std::hash::BuildHasherDefault;
use std::ops::Bound;
use std::sync::Arc;
use zoolog_proto::{Acl, ErrorCode, EventType, Id, Response, SharedData, Stat};

/// Every znode by path, hashed with fixed keys: lookups only, never iterated, so no order can
/// leak into results. Values are behind an `Arc` because the hash trie allocates all 32 slots of
/// each of its nodes: with whole znodes inline that cost 243 MiB for 200k entries. `Arc::make_mut`
/// copies a znode only while a snapshot still shares it.
pub(crate) type NodeMap = GenericHashMap<
    String,
    Arc<Node>,
    BuildHasherDefault<DefaultHasher>,
    imbl::shared_ptr::DefaultSharedPtr,
>;

/// The znode at `path`, ready to change.
pub(crate) fn node_mut<'a>(nodes: &'a mut NodeMap, path: &str) -> Option<&'a mut Node> {
    nodes.get_mut(path).map(Arc::make_mut)
}

pub(crate) const ZOOKEEPER_PATH: &str = "/zookeeper";
pub(crate) const QUOTA_PATH: &str = zoolog_proto::quota::QUOTA_ROOT;
pub(crate) const CONFIG_PATH: &str = "/zookeeper/config";

/// Nodes no client may delete.
pub(crate) fn is_protected(path: &str) -> bool {
    matches!(path, "/" | ZOOKEEPER_PATH | QUOTA_PATH | CONFIG_PATH)
}

/// A live session as the log knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub timeout_ms: i32,
    pub password: Vec<u8>,
    /// Paths of the ephemeral nodes this session owns, sorted.
    pub ephemerals: OrdSet<String>,
    /// The zxid of the session's latest sign of life in the log: its CreateSession, a Write
    /// from its owner, a Touch listing it, or an Attach. An Expire conditioned on an earlier
    /// position is a no-op.
    pub touched_at: Zxid,
    /// Token of the connection that holds the session ([`Command::owner`] of its CreateSession
    /// or latest Attach). Writes and closes from other owners fail with SESSIONMOVED.
    pub owner: u64,
}

/// The two server-side watch tables of §8.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Data,
    Child,
}

/// Watches a read leaves behind. Data = getData/exists one-shot, Child = getChildren one-shot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    Data,
    Child,
    Persistent,
    PersistentRecursive,
}

/// One trigger call of §8.3/§8.4, in the order the registry must process them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    pub table: Table,
    pub path: String,
    pub event: EventType,
    /// The ACL that gates delivery (§8.7). Empty when the tree runs with skip_acl, since an empty
    /// ACL admits every reader.
    pub acl: Arc<Vec<Acl>>,
}

/// What applying one command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub outcome: Outcome,
    pub triggers: Vec<Trigger>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The reply for the origin session's write.
    Reply(Result<Response, ErrorCode>),
    SessionCreated {
        session_id: i64,
        timeout_ms: i32,
        password: Vec<u8>,
    },
    /// A CloseSession (of a live or unknown session), or an Expire that closed its session.
    SessionClosed,
    Reaped,
    /// A Touch: how many of the listed sessions were live (and so were touched).
    Touched {
        live: usize,
    },
    /// An Expire that did nothing: the session is unknown (`session_exists` false) or was
    /// touched after the expiry's position (`session_exists` true).
    ExpireSkipped {
        session_exists: bool,
    },
    /// An Attach: whether the session exists and the password matched (and so the session now
    /// belongs to the command's owner).
    Attached {
        session_exists: bool,
    },
}

/// A read's answer and the watch to register with it, taken at the same point of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub result: Result<Response, ErrorCode>,
    pub watch: Option<(String, WatchKind)>,
}

/// The state one entry is applied with: its zxid, time, origin and collected triggers.
pub(crate) struct Txn<'a> {
    pub zxid: Zxid,
    pub time_ms: i64,
    pub session_id: i64,
    /// The connection token the command came from; checked against the session's owner.
    pub owner: u64,
    pub identities: &'a [Id],
    pub triggers: Vec<Trigger>,
}

/// A container or TTL node as the reaper sees it at one check ([`DataTree::reap_candidates`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReapCandidate<'a> {
    pub path: &'a str,
    /// Its mzxid: a `Reap` conditioned on it deletes nothing changed since.
    pub last_change: Zxid,
    pub after: ReapAfter,
    /// Only a childless node may be reaped.
    pub childless: bool,
}

/// When a childless container or TTL node becomes due for the reaper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReapAfter {
    /// At once: a container that has had a child.
    Emptied,
    /// Once unchanged for longer than this: a TTL node's TTL, or how long a container that
    /// never had a child may stay.
    IdleMs(i64),
}

impl ReapAfter {
    /// Whether a childless node unchanged for `idle_ms` is due.
    pub fn is_due(self, idle_ms: i64) -> bool {
        match self {
            ReapAfter::Emptied => true,
            ReapAfter::IdleMs(needed_ms) => idle_ms > needed_ms,
        }
    }
}

#[derive(Clone)]
pub struct DataTree {
    pub(crate) config: Arc<TreeConfig>,
    pub(crate) nodes: NodeMap,
    pub(crate) sessions: OrdMap<i64, SessionInfo>,
    /// Real paths with a `zookeeper_limits` node under /zookeeper/quota.
    pub(crate) quota_roots: OrdSet<String>,
    /// Containers and TTL nodes: what the reaper looks at.
    pub(crate) reapable_kinds: OrdSet<String>,
    pub(crate) last_applied_zxid: Zxid,
    /// Sum of path and data lengths, as ZooKeeper's approximate data size.
    pub(crate) data_bytes: u64,
    pub(crate) ephemeral_count: usize,
}

impl std::fmt::Debug for DataTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataTree")
            .field("last_applied_zxid", &self.last_applied_zxid)
            .field("node_count", &self.nodes.len())
            .field("session_count", &self.sessions.len())
            .finish()
    }
}

/// Session ids put the server id in the top byte and the creating zxid in the other 56 bits.
const SESSION_ZXID_BITS: u32 = 56;

impl DataTree {
    /// A fresh tree holding exactly the built-in nodes of §11.5.
    pub fn new(config: TreeConfig) -> Self {
        let mut tree = DataTree::empty(config);
        let open = Arc::new(acl::open_acl_unsafe());
        tree.insert_built_in("/", Node::built_in(open.clone()));
        tree.insert_built_in(ZOOKEEPER_PATH, Node::built_in(open.clone()));
        tree.insert_built_in(QUOTA_PATH, Node::built_in(open));
        // Installed "with version −1" by ZooKeeper, hence aversion −1.
        let config_node = Node {
            aversion: -1,
            ..Node::built_in(Arc::new(acl::read_acl_unsafe()))
        };
        tree.insert_built_in(CONFIG_PATH, config_node);
        tree
    }

    /// Publishes an ensemble's membership in `/zookeeper/config`, as ZooKeeper does from its
    /// quorum configuration at startup (with version −1, as ZooKeeper installs it). Not a log
    /// entry: every member computes the same text from its own configuration.
    pub fn publish_membership(&mut self, text: &str, time_ms: i64) {
        let node = node_mut(&mut self.nodes, CONFIG_PATH).expect("built-in node");
        let old_bytes = node.data_length();
        node.data = Some(Bytes::copy_from_slice(text.as_bytes()));
        node.version = -1;
        node.mtime_ms = time_ms;
        self.data_bytes = self.data_bytes - old_bytes as u64 + text.len() as u64;
    }

    pub(crate) fn empty(config: TreeConfig) -> Self {
        DataTree {
            config: Arc::new(config),
            nodes: NodeMap::default(),
            sessions: OrdMap::new(),
            quota_roots: OrdSet::new(),
            reapable_kinds: OrdSet::new(),
            last_applied_zxid: 0,
            data_bytes: 0,
            ephemeral_count: 0,
        }
    }

    /// Built-in children are linked without advancing the parent's counter C, which is why a
    /// fresh root reports cversion −1 and /zookeeper −2 (§11.4).
    fn insert_built_in(&mut self, path: &str, node: Node) {
        self.link_node(path, node);
    }

    pub fn config(&self) -> &TreeConfig {
        &self.config
    }

    pub fn last_applied_zxid(&self) -> Zxid {
        self.last_applied_zxid
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn approximate_data_bytes(&self) -> u64 {
        self.data_bytes
    }

    pub fn ephemeral_count(&self) -> usize {
        self.ephemeral_count
    }

    pub fn session(&self, session_id: i64) -> Option<&SessionInfo> {
        self.sessions.get(&session_id)
    }

    /// The sessions that `command`, just applied at `zxid`, showed alive: those a Touch found
    /// live, and the session of a Write from its owner or of an Attach that proved itself.
    /// Each comes with how long before the command its client was heard from. (A creation is
    /// not among them: its session's id is in the outcome.)
    pub fn signs_of_life<'a>(
        &'a self,
        zxid: Zxid,
        command: &'a Command,
    ) -> impl Iterator<Item = SessionSeen> + 'a {
        command.sessions_heard().filter(move |seen| {
            self.session(seen.session_id)
                .is_some_and(|session| session.touched_at == zxid)
        })
    }

    /// Whether this tree has applied the entry that created `session_id` (its id carries that
    /// zxid), so that the session's absence means it ended. A tree behind the log cannot tell
    /// an ended session from one created after its last entry.
    pub fn has_applied_creation_of(&self, session_id: i64) -> bool {
        let id = session_id as u64;
        let creating_zxid = (id & ((1 << SESSION_ZXID_BITS) - 1)) as i64;
        id >> SESSION_ZXID_BITS == u64::from(self.config.server_id)
            && creating_zxid <= self.last_applied_zxid
    }

    /// Every live session, in id order.
    pub fn sessions(&self) -> impl Iterator<Item = (i64, &SessionInfo)> {
        self.sessions.iter().map(|(id, info)| (*id, info))
    }

    /// The Stat of a node, as a client would see it.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.nodes.get(path).map(|node| node.stat())
    }

    /// A node's data (`None` inside for null data), stat and children, for inspection and tests.
    pub fn node(&self, path: &str) -> Option<(Option<Vec<u8>>, Stat, Vec<String>)> {
        self.nodes.get(path).map(|node| {
            (
                node.data.as_deref().map(<[u8]>::to_vec),
                node.stat(),
                node.child_names(),
            )
        })
    }

    /// Applies the committed entry at `zxid`. Every replica gets the same result from the same log.
    pub fn apply(&mut self, zxid: Zxid, command: &Command) -> Applied {
        assert!(
            zxid > self.last_applied_zxid,
            "zxid {zxid} applied after {}",
            self.last_applied_zxid
        );
        self.last_applied_zxid = zxid;
        let identities: &[Id] = match &command.op {
            CommandOp::Write { identities, .. } => identities,
            _ => &[],
        };
        let mut txn = Txn {
            zxid,
            time_ms: command.time_ms,
            session_id: command.session_id,
            owner: command.owner,
            identities,
            triggers: Vec::new(),
        };
        let outcome = match &command.op {
            CommandOp::CreateSession {
                timeout_ms,
                password,
            } => self.create_session(zxid, *timeout_ms, password, command.owner),
            CommandOp::CloseSession => match self.sessions.get(&command.session_id) {
                Some(session) if session.owner != command.owner => {
                    Outcome::Reply(Err(ErrorCode::SessionMoved))
                }
                _ => {
                    self.close_session(&mut txn);
                    Outcome::SessionClosed
                }
            },
            CommandOp::Write { request, .. } => {
                let result = self.write(&mut txn, request);
                if let Some(session) = self.sessions.get_mut(&command.session_id) {
                    if session.owner == command.owner {
                        session.touched_at = zxid;
                    }
                }
                Outcome::Reply(result)
            }
            CommandOp::Touch { sessions } => {
                let mut live = 0;
                for seen in sessions {
                    if let Some(session) = self.sessions.get_mut(&seen.session_id) {
                        session.touched_at = zxid;
                        live += 1;
                    }
                }
                Outcome::Touched { live }
            }
            CommandOp::Expire {
                unless_touched_after,
            } => match self.sessions.get(&command.session_id) {
                None => Outcome::ExpireSkipped {
                    session_exists: false,
                },
                Some(session) if session.touched_at > *unless_touched_after => {
                    Outcome::ExpireSkipped {
                        session_exists: true,
                    }
                }
                Some(_) => {
                    self.close_session(&mut txn);
                    Outcome::SessionClosed
                }
            },
            CommandOp::Attach { owner, password } => {
                match self.sessions.get_mut(&command.session_id) {
                    Some(session) if session.password == *password => {
                        session.owner = *owner;
                        session.touched_at = zxid;
                        Outcome::Attached {
                            session_exists: true,
                        }
                    }
                    _ => Outcome::Attached {
                        session_exists: false,
                    },
                }
            }
            CommandOp::Reap {
                path,
                unchanged_since,
            } => {
                let reapable = match unchanged_since {
                    Some(last_change) => self.is_reapable_unchanged(path, *last_change),
                    None => self.is_reapable_at(path, command.time_ms),
                };
                if reapable {
                    self.remove_node(path, &mut txn);
                }
                Outcome::Reaped
            }
        };
        Applied {
            outcome,
            triggers: txn.triggers,
        }
    }

    fn create_session(
        &mut self,
        zxid: Zxid,
        timeout_ms: i32,
        password: &[u8],
        owner: u64,
    ) -> Outcome {
        assert!(
            zxid >> SESSION_ZXID_BITS == 0,
            "zxid {zxid} does not fit the 56 bits of a session id"
        );
        let session_id = (i64::from(self.config.server_id) << SESSION_ZXID_BITS) | zxid;
        let info = SessionInfo {
            timeout_ms,
            password: password.to_vec(),
            ephemerals: OrdSet::new(),
            touched_at: zxid,
            owner,
        };
        let previous = self.sessions.insert(session_id, info);
        assert!(
            previous.is_none(),
            "session id {session_id:#x} assigned twice"
        );
        Outcome::SessionCreated {
            session_id,
            timeout_ms,
            password: password.to_vec(),
        }
    }

    fn close_session(&mut self, txn: &mut Txn<'_>) {
        let Some(session) = self.sessions.get(&txn.session_id) else {
            return;
        };
        for path in session.ephemerals.clone() {
            let node = &self.nodes[&path];
            assert!(node.children.is_empty(), "ephemeral {path} has children");
            self.remove_node(&path, txn);
        }
        let session = self
            .sessions
            .remove(&txn.session_id)
            .expect("present above");
        assert!(
            session.ephemerals.is_empty(),
            "session closed with ephemerals left"
        );
    }

    /// ZooKeeper's `checkSession(sessionId, owner)`, at the same point of each op's checks:
    /// SESSIONEXPIRED unless the session is live at this point of the log, SESSIONMOVED when
    /// the op came through a connection that no longer holds it.
    pub(crate) fn check_session(&self, txn: &Txn<'_>) -> Result<(), ErrorCode> {
        match self.sessions.get(&txn.session_id) {
            None => Err(ErrorCode::SessionExpired),
            Some(session) if session.owner != txn.owner => Err(ErrorCode::SessionMoved),
            Some(_) => Ok(()),
        }
    }

    /// Whether a legacy `Reap` (one without [`CommandOp::Reap::unchanged_since`]) deletes
    /// `path` at `now_ms` by the command's own time: an empty container that was used (or
    /// never used for too long), or a childless TTL node unmodified for longer than its TTL.
    fn is_reapable_at(&self, path: &str, now_ms: i64) -> bool {
        let Some(node) = self.nodes.get(path) else {
            return false;
        };
        let Some(after) = self.reap_after(node) else {
            return false;
        };
        node.children.is_empty() && after.is_due(now_ms.saturating_sub(node.mtime_ms))
    }

    /// Whether a `Reap` judged due at `last_change` still deletes `path`: it is still an
    /// empty container or a childless TTL node, and nothing changed it since (a change moves
    /// its mzxid, a delete and a create make a new one). Whether it was due is the judge's
    /// business, by its clock and its settings (see [`CommandOp::Reap`]): this replica's own
    /// settings must not matter, or replicas configured apart would diverge.
    fn is_reapable_unchanged(&self, path: &str, last_change: Zxid) -> bool {
        self.nodes.get(path).is_some_and(|node| {
            node.mzxid == last_change
                && node.children.is_empty()
                && matches!(node.kind, NodeKind::Container | NodeKind::Ttl { .. })
        })
    }

    /// When a childless `node` becomes due for the reaper: at once for a container that has
    /// had a child, after `container_never_used_ms` unchanged for one that has not (never,
    /// when that is 0), after its TTL for a TTL node; `None` for the other kinds.
    fn reap_after(&self, node: &Node) -> Option<ReapAfter> {
        match node.kind {
            NodeKind::Container if node.child_creations > 0 => Some(ReapAfter::Emptied),
            NodeKind::Container => {
                let never_used_ms = self.config.container_never_used_ms;
                (never_used_ms > 0).then_some(ReapAfter::IdleMs(never_used_ms))
            }
            NodeKind::Ttl { ttl_ms } => Some(ReapAfter::IdleMs(ttl_ms)),
            NodeKind::Persistent | NodeKind::Ephemeral { .. } => None,
        }
    }

    /// The containers and TTL nodes the reaper watches, in path order: each with its last
    /// change and how long it must stay unchanged before a `Reap` may delete it. A container
    /// with children is left out (it has had a child, so it is due as soon as it is empty);
    /// a TTL node with children is not, so that its time counts while they live.
    pub fn reap_candidates(&self) -> impl Iterator<Item = ReapCandidate<'_>> {
        self.reapable_after("")
            .filter_map(|(_, candidate)| candidate)
    }

    /// The containers and TTL nodes whose paths sort after `after` (all of them after ""), in
    /// path order, each as [`DataTree::reap_candidates`] would give it, or `None` where it
    /// leaves the node out: so that a reaper can go over them a bounded number at a time.
    pub fn reapable_after<'a>(
        &'a self,
        after: &'a str,
    ) -> impl Iterator<Item = (&'a str, Option<ReapCandidate<'a>>)> + 'a {
        let range = (Bound::Excluded(after), Bound::Unbounded);
        self.reapable_kinds.range::<_, str>(range).map(|path| {
            let node = &self.nodes[path.as_str()];
            let childless = node.children.is_empty();
            let candidate = self
                .reap_after(node)
                .filter(|_| childless || node.kind != NodeKind::Container)
                .map(|after| ReapCandidate {
                    path,
                    last_change: node.mzxid,
                    after,
                    childless,
                });
            (path.as_str(), candidate)
        })
    }

    /// How many containers and TTL nodes there are.
    pub fn reapable_count(&self) -> usize {
        self.reapable_kinds.len()
    }

    /// The ACL to attach to a trigger: empty (admits all) when ACLs are skipped.
    fn trigger_acl(&self, acl: &Arc<Vec<Acl>>) -> Arc<Vec<Acl>> {
        if self.config.skip_acl {
            Arc::new(Vec::new())
        } else {
            acl.clone()
        }
    }

    fn push_trigger(
        &self,
        txn: &mut Txn<'_>,
        table: Table,
        path: &str,
        event: EventType,
        acl: &Arc<Vec<Acl>>,
    ) {
        txn.triggers.push(Trigger {
            table,
            path: path.to_owned(),
            event,
            acl: self.trigger_acl(acl),
        });
    }

    /// Links a node under its parent without touching the parent's Stat (snapshots, built-ins).
    pub(crate) fn link_node(&mut self, path: &str, node: Node) {
        if path != "/" {
            let parent_path = path::parent_of(path).expect("absolute path");
            let parent = node_mut(&mut self.nodes, parent_path).expect("parent exists");
            let inserted = parent.children.insert(Arc::from(path::name_of(path)));
            assert!(inserted, "{path} linked twice");
        }
        self.data_bytes += (path.len() + node.data_length()) as u64;
        match node.kind {
            NodeKind::Ephemeral { owner_session_id } => {
                let session = self
                    .sessions
                    .get_mut(&owner_session_id)
                    .expect("ephemeral owner is live");
                session.ephemerals.insert(path.to_owned());
                self.ephemeral_count += 1;
            }
            NodeKind::Container | NodeKind::Ttl { .. } => {
                self.reapable_kinds.insert(path.to_owned());
            }
            NodeKind::Persistent => {}
        }
        self.note_quota_node_created(path);
        let previous = self.nodes.insert(path.to_owned(), Arc::new(node));
        assert!(previous.is_none(), "{path} inserted twice");
    }

    /// A client-visible create: links the node, advances the parent's counter and pzxid, keeps
    /// quota stats, and fires NodeCreated then the parent's NodeChildrenChanged.
    pub(crate) fn insert_node(&mut self, path: &str, node: Node, txn: &mut Txn<'_>) {
        let parent_path = path::parent_of(path).expect("absolute path");
        let data_length = node.data_length() as i64;
        let acl = node.acl.clone();
        self.link_node(path, node);
        let parent = node_mut(&mut self.nodes, parent_path).expect("parent exists");
        parent.child_creations = parent.child_creations.wrapping_add(1);
        parent.pzxid = txn.zxid;
        let parent_acl = parent.acl.clone();
        // ZooKeeper's order: a new stats node is filled first, then the enclosing quota counts it.
        self.recompute_quota_stats_if_stats_node(path);
        self.note_quota_change(path, 1, data_length);
        self.push_trigger(txn, Table::Data, path, EventType::NodeCreated, &acl);
        self.push_trigger(
            txn,
            Table::Child,
            parent_path,
            EventType::NodeChildrenChanged,
            &parent_acl,
        );
    }

    /// Deletes a childless node with every side effect of §8.4 and §12.3.
    pub(crate) fn remove_node(&mut self, path: &str, txn: &mut Txn<'_>) {
        let node = Arc::unwrap_or_clone(self.nodes.remove(path).expect("removed node exists"));
        assert!(node.children.is_empty(), "{path} removed with children");
        let parent_path = path::parent_of(path).expect("absolute path");
        let parent = node_mut(&mut self.nodes, parent_path).expect("parent exists");
        let removed = parent.children.remove(path::name_of(path));
        assert!(removed, "{path} missing from its parent's children");
        parent.pzxid = txn.zxid;
        let parent_acl = parent.acl.clone();
        self.data_bytes -= (path.len() + node.data_length()) as u64;
        match node.kind {
            NodeKind::Ephemeral { owner_session_id } => {
                let session = self
                    .sessions
                    .get_mut(&owner_session_id)
                    .expect("ephemeral owner is live");
                assert!(
                    session.ephemerals.remove(path).is_some(),
                    "{path} missing from its session"
                );
                self.ephemeral_count -= 1;
            }
            NodeKind::Container | NodeKind::Ttl { .. } => {
                self.reapable_kinds.remove(path);
            }
            NodeKind::Persistent => {}
        }
        self.note_quota_node_removed(path);
        self.note_quota_change(path, -1, -(node.data_length() as i64));
        self.push_trigger(txn, Table::Data, path, EventType::NodeDeleted, &node.acl);
        self.push_trigger(txn, Table::Child, path, EventType::NodeDeleted, &node.acl);
        self.push_trigger(
            txn,
            Table::Child,
            parent_path,
            EventType::NodeChildrenChanged,
            &parent_acl,
        );
    }

    /// Replaces a node's data as setData does (version, mzxid, mtime) and fires NodeDataChanged.
    pub(crate) fn set_node_data(
        &mut self,
        path: &str,
        data: SharedData,
        txn: &mut Txn<'_>,
    ) -> Stat {
        let node = node_mut(&mut self.nodes, path).expect("node exists");
        let bytes_diff = data.as_ref().map_or(0, |d| d.len()) as i64 - node.data_length() as i64;
        node.data = data;
        node.version = node.version.wrapping_add(1);
        node.mzxid = txn.zxid;
        node.mtime_ms = txn.time_ms;
        let (stat, acl) = (node.stat(), node.acl.clone());
        self.data_bytes = self
            .data_bytes
            .checked_add_signed(bytes_diff)
            .expect("data bytes stay non-negative");
        self.note_quota_change(path, 0, bytes_diff);
        self.push_trigger(txn, Table::Data, path, EventType::NodeDataChanged, &acl);
        stat
    }

    /// Rewrites data in place, leaving version and mzxid alone (quota stats nodes, §12.3).
    pub(crate) fn overwrite_data_in_place(&mut self, path: &str, data: Vec<u8>) {
        let Some(node) = node_mut(&mut self.nodes, path) else {
            return;
        };
        let old_length = node.data_length() as u64;
        let new_length = data.len() as u64;
        node.data = Some(Bytes::from(data));
        self.data_bytes = self.data_bytes - old_length + new_length;
    }
}

impl Node {
    fn built_in(acl: Arc<Vec<Acl>>) -> Node {
        Node {
            data: Some(Bytes::new()),
            acl,
            kind: NodeKind::Persistent,
            czxid: 0,
            mzxid: 0,
            ctime_ms: 0,
            mtime_ms: 0,
            version: 0,
            aversion: 0,
            child_creations: 0,
            pzxid: 0,
            children: Children::default(),
        }
    }
}

//! Persistent watches in core mode (half the core seeds, half their clients): a client holds
//! one addWatch watch, persistent on a watched znode, persistent on the root (its children),
//! or persistent and recursive on the root (every znode), and no one-shot watches, so each
//! event it gets is that watch's. Checked: while its connection holds the watch, the client
//! gets one event for each change the watch covers, in the order of the common sequence and
//! before any reply showing a state after the change, and no other event. ZooKeeper does not
//! replay what such a watch missed while the client was away: after a reconnect, the server
//! owes the events of the changes after the SetWatches2 it answered.

use zoolog_proto::codes::EventType;
use zoolog_proto::{AddWatchMode, AddWatchRequest, ErrorCode, Request, SetWatches2, WatcherEvent};

use super::{Kind, Pending, World, PATHS};
use crate::rng::Rng;
use crate::zkcheck::ZkChecker;

/// The random stream of the persistent-watch choices: seeds without them keep every other
/// choice.
pub(super) const PERSISTENT_STREAM: u64 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Persistent on a watched znode: its creation, deletion and data changes.
    Node(&'static str),
    /// Persistent on the root: a NodeChildrenChanged for each child created or deleted.
    RootChildren,
    /// Persistent and recursive on the root: every znode's creation, deletion and data change
    /// (the clients make znodes under the root and the containers only).
    Everything,
}

impl Scope {
    fn path(self) -> &'static str {
        match self {
            Scope::Node(path) => path,
            Scope::RootChildren | Scope::Everything => "/",
        }
    }

    fn recursive(self) -> bool {
        self == Scope::Everything
    }

    /// The events the change at `position` of the common sequence owes this watch, as
    /// (type, path), in no particular order.
    fn events_at(self, checker: &ZkChecker, position: i64) -> Result<Vec<(i32, String)>, String> {
        let mut events = Vec::new();
        match self {
            Scope::Node(path) => {
                let before = checker.state_at(path, position - 1)?;
                let after = checker.state_at(path, position)?;
                let event = match (before, after) {
                    (None, Some(_)) => Some(EventType::NodeCreated),
                    (Some(_), None) => Some(EventType::NodeDeleted),
                    (Some(a), Some(b)) if a != b => Some(EventType::NodeDataChanged),
                    _ => None,
                };
                events.extend(event.map(|event| (event.code(), path.to_string())));
            }
            Scope::RootChildren => {
                let changed = children_changed(checker, "/", position);
                let event = (EventType::NodeChildrenChanged.code(), "/".to_string());
                events.extend(changed.map(|_| event.clone()));
            }
            Scope::Everything => {
                for parent in checker.parents() {
                    for (created, path) in children_changed(checker, parent, position) {
                        let event = match created {
                            true => EventType::NodeCreated,
                            false => EventType::NodeDeleted,
                        };
                        events.push((event.code(), path));
                    }
                }
                for path in PATHS {
                    let before = checker.state_at(path, position - 1)?;
                    let after = checker.state_at(path, position)?;
                    if let (Some(a), Some(b)) = (before, after) {
                        if a != b {
                            events.push((EventType::NodeDataChanged.code(), path.to_string()));
                        }
                    }
                }
            }
        }
        Ok(events)
    }

    fn covers(self, path: &str) -> bool {
        match self {
            Scope::Node(watched) => path == watched,
            Scope::RootChildren => path == "/",
            Scope::Everything => true,
        }
    }
}

/// The children of `parent` (the root or a container) that the entry at `position` created
/// (true) and deleted (false), by path.
fn children_changed<'a>(
    checker: &'a ZkChecker,
    parent: &'a str,
    position: i64,
) -> impl Iterator<Item = (bool, String)> + 'a {
    let before = checker.children_at(parent, position - 1).1;
    let after = checker.children_at(parent, position).1;
    let path = move |name: &String| match parent {
        "/" => format!("/{name}"),
        parent => format!("{parent}/{name}"),
    };
    let created = after
        .iter()
        .filter(|n| !before.contains(n))
        .map(move |n| (true, path(n)));
    let deleted = before
        .iter()
        .filter(|n| !after.contains(n))
        .map(move |n| (false, path(n)));
    created.chain(deleted)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Registration {
    /// The client holds no such watch: it sends an addWatch.
    Unset,
    /// An addWatch is in flight: the client holds the watch once it is answered.
    Adding,
    /// The connection's server holds the watch: it owes the events of the changes after
    /// `position`, of which `owed` (those of `position` itself) are still to come.
    Held {
        position: i64,
        owed: Vec<(i32, String)>,
    },
    /// Held on an earlier connection of the session: the client sends it again with
    /// SetWatches2 when it reconnects.
    Carried,
    /// Sent with SetWatches2, not yet answered.
    Resetting,
}

#[derive(Debug, Clone)]
pub(super) struct PersistentWatch {
    scope: Scope,
    registration: Registration,
}

impl PersistentWatch {
    /// For a client of a seed with persistent watches: one watch, or none.
    pub(super) fn draw(rng: &mut Rng) -> Option<PersistentWatch> {
        let scope = match rng.below(6) {
            0 => Scope::Node(PATHS[rng.below(PATHS.len() as u64) as usize]),
            1 => Scope::RootChildren,
            2 => Scope::Everything,
            _ => return None,
        };
        Some(PersistentWatch {
            scope,
            registration: Registration::Unset,
        })
    }

    /// The connection ended: a watch the server held goes with the client to its next one;
    /// one whose addWatch was not answered is not the client's.
    pub(super) fn disconnected(&mut self) {
        self.registration = match self.registration {
            Registration::Held { .. } | Registration::Resetting | Registration::Carried => {
                Registration::Carried
            }
            Registration::Adding | Registration::Unset => Registration::Unset,
        };
    }

    /// The session ended: its watches with it.
    pub(super) fn session_ended(&mut self) {
        self.registration = Registration::Unset;
    }

    /// Adds the watch to a SetWatches2 being sent after a reconnect, if the client holds it.
    pub(super) fn set_again(&mut self, request: &mut SetWatches2) {
        if self.registration != Registration::Carried {
            return;
        }
        self.registration = Registration::Resetting;
        let path = self.scope.path().to_string();
        match self.scope.recursive() {
            true => request.persistent_recursive_watches.push(path),
            false => request.persistent_watches.push(path),
        }
    }

    /// SetWatches2 was answered at `zxid`: the server holds the watch from there.
    pub(super) fn set_again_at(&mut self, zxid: i64) {
        if self.registration == Registration::Resetting {
            self.registration = Registration::Held {
                position: zxid,
                owed: Vec::new(),
            };
        }
    }

    /// Whether SetWatches2 must carry this watch.
    pub(super) fn carried(&self) -> bool {
        self.registration == Registration::Carried
    }

    pub(super) fn unset(&self) -> bool {
        self.registration == Registration::Unset
    }

    /// Moves the watch to the next change after its position that owes it events, no
    /// further than `limit`; the position of the events still owed, if any.
    fn advance(&mut self, checker: &ZkChecker, limit: i64) -> Result<Option<i64>, String> {
        let Registration::Held { position, owed } = &mut self.registration else {
            return Ok(None);
        };
        while owed.is_empty() && *position < limit {
            *position += 1;
            *owed = self.scope.events_at(checker, *position)?;
        }
        Ok((!owed.is_empty()).then_some(*position))
    }
}

impl World {
    /// Whether the client should add its persistent watch now: it holds none, and its
    /// connection carries a session.
    pub(super) fn wants_persistent_watch(&mut self, c: usize) -> bool {
        let client = &self.zk().clients[c];
        client.session.is_some() && client.persistent.as_ref().is_some_and(|w| w.unset())
    }

    pub(super) fn issue_add_watch(&mut self, c: usize) {
        let xid = self.next_xid(c);
        let client = &mut self.zk().clients[c];
        let watch = client
            .persistent
            .as_mut()
            .expect("asked for by wants_persistent_watch");
        watch.registration = Registration::Adding;
        let mode = match watch.scope.recursive() {
            true => AddWatchMode::PersistentRecursive,
            false => AddWatchMode::Persistent,
        };
        let path = watch.scope.path().to_string();
        let request = Request::AddWatch(AddWatchRequest {
            path: path.clone(),
            mode: mode.code(),
        });
        let pending = Pending::new(xid, Kind::AddWatch, path, self.now);
        self.send_request(c, pending, &request);
    }

    /// The addWatch was answered at `zxid`: on success the server holds the watch from there.
    pub(super) fn persistent_watch_added(&mut self, c: usize, zxid: i64, err: i32) {
        let zk = self.zk();
        let watch = zk.clients[c]
            .persistent
            .as_mut()
            .expect("it sent the addWatch");
        if watch.registration != Registration::Adding {
            return;
        }
        if err == ErrorCode::Ok.code() {
            watch.registration = Registration::Held {
                position: zxid,
                owed: Vec::new(),
            };
            zk.checker.watches_set += 1;
        } else {
            watch.registration = Registration::Unset;
        }
    }

    /// An event the client's persistent watch covers: it must be one the next change owes.
    /// Says whether the event was the persistent watch's.
    pub(super) fn persistent_event(
        &mut self,
        c: usize,
        event: &WatcherEvent,
    ) -> Result<bool, String> {
        let zk = self.zk.as_mut().expect("core mode");
        let client = &mut zk.clients[c];
        let client_id = client.id;
        let Some(watch) = client.persistent.as_mut() else {
            return Ok(false);
        };
        if !watch.scope.covers(&event.path) {
            return Ok(false);
        }
        let sync_connected = event.state == zoolog_proto::codes::KeeperState::SyncConnected.code();
        let last = zk.checker.entries.len() as i64;
        if !sync_connected || watch.advance(&zk.checker, last)?.is_none() {
            return Err(format!(
                "persistent watches: client {client_id} got {event:?} for its watch {:?}, \
                 which no change owes it",
                watch
            ));
        }
        let Registration::Held { position, owed } = &mut watch.registration else {
            unreachable!("advance found events owed");
        };
        let wanted = (event.event_type, event.path.clone());
        let Some(index) = owed.iter().position(|e| *e == wanted) else {
            return Err(format!(
                "persistent watches: client {client_id} got {event:?} for its watch on {} \
                 (recursive: {}), but the next change it owes events for is at zxid \
                 {position}: {owed:?}",
                watch.scope.path(),
                watch.scope.recursive()
            ));
        };
        owed.swap_remove(index);
        zk.checker.watches_fired += 1;
        zk.checker.persistent_events += 1;
        Ok(true)
    }

    /// A reply at `zxid`: the persistent watch's events of the changes up to there came
    /// before it.
    pub(super) fn check_no_persistent_event_missed(
        &mut self,
        c: usize,
        xid: i32,
        zxid: i64,
    ) -> Result<(), String> {
        let zk = self.zk.as_mut().expect("core mode");
        let client = &mut zk.clients[c];
        let client_id = client.id;
        let Some(watch) = client.persistent.as_mut() else {
            return Ok(());
        };
        if watch
            .advance(&zk.checker, zxid)?
            .is_some_and(|owed_at| owed_at <= zxid)
        {
            return Err(format!(
                "persistent watches: client {client_id} got the reply to xid {xid} at zxid \
                 {zxid}, but its watch {watch:?} is still owed those events"
            ));
        }
        Ok(())
    }
}

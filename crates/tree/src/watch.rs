//! The per-server watch registry (§8): watches belong to connections, are never replicated, and
//! turn an applied entry's triggers into notifications.

use crate::acl;
use crate::path;
use crate::tree::{DataTree, Table, Trigger, WatchKind};
use crate::{ConnectionId, Zxid};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use zoolog_proto::codes::perms;
use zoolog_proto::{EventType, Id, KeeperState, WatcherEvent, WatcherType};

/// Watch modes of one connection on one path in one table, as bits (several may coexist).
type Modes = u8;
const STANDARD: Modes = 1;
const PERSISTENT: Modes = 2;
const RECURSIVE: Modes = 4;
const ALL_MODES: Modes = STANDARD | PERSISTENT | RECURSIVE;

/// Per path, the connections watching it and how. Ordered per path so delivery order is stable.
type WatchTable = HashMap<String, BTreeMap<ConnectionId, Modes>>;

/// The path lists of setWatches/setWatches2 (§5.15).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchLists {
    pub data: Vec<String>,
    pub exist: Vec<String>,
    pub child: Vec<String>,
    pub persistent: Vec<String>,
    pub persistent_recursive: Vec<String>,
}

/// Registry totals (wchs, mntr zk_watch_count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchSummary {
    /// Connections holding at least one watch.
    pub connections: usize,
    /// Distinct watched paths across both tables.
    pub paths: usize,
    /// (path, connection) entries in both tables.
    pub watches: usize,
}

#[derive(Debug, Default)]
pub struct WatchRegistry {
    data: WatchTable,
    child: WatchTable,
    /// Paths each connection watches in either table, for dropping a connection and for wchc.
    by_connection: BTreeMap<ConnectionId, BTreeSet<String>>,
    /// Recursive entries in the data table; while zero, triggers skip the ancestor walk.
    recursive_count: usize,
}

/// Which (table, modes) a checkWatches/removeWatches type addresses (§5.12).
fn addressed_by(watcher_type: WatcherType) -> &'static [(Table, Modes)] {
    match watcher_type {
        WatcherType::Children => &[(Table::Child, STANDARD)],
        WatcherType::Data => &[(Table::Data, STANDARD)],
        WatcherType::Any => &[(Table::Child, ALL_MODES), (Table::Data, ALL_MODES)],
        WatcherType::Persistent => &[(Table::Child, PERSISTENT), (Table::Data, PERSISTENT)],
        WatcherType::PersistentRecursive => &[(Table::Data, RECURSIVE)],
    }
}

/// Where each kind of watch lives (§8.2): persistent watches sit in both tables, recursive ones
/// only in the data table.
fn entries_for(kind: WatchKind) -> &'static [(Table, Modes)] {
    match kind {
        WatchKind::Data => &[(Table::Data, STANDARD)],
        WatchKind::Child => &[(Table::Child, STANDARD)],
        WatchKind::Persistent => &[(Table::Data, PERSISTENT), (Table::Child, PERSISTENT)],
        WatchKind::PersistentRecursive => &[(Table::Data, RECURSIVE)],
    }
}

fn event(event_type: EventType, path: &str) -> WatcherEvent {
    WatcherEvent {
        event_type: event_type.code(),
        state: KeeperState::SyncConnected.code(),
        path: path.to_owned(),
    }
}

impl WatchRegistry {
    fn table(&self, table: Table) -> &WatchTable {
        match table {
            Table::Data => &self.data,
            Table::Child => &self.child,
        }
    }

    fn table_mut(&mut self, table: Table) -> &mut WatchTable {
        match table {
            Table::Data => &mut self.data,
            Table::Child => &mut self.child,
        }
    }

    fn modes(&self, table: Table, connection: ConnectionId, path: &str) -> Modes {
        self.table(table)
            .get(path)
            .and_then(|entries| entries.get(&connection))
            .copied()
            .unwrap_or(0)
    }

    pub fn add(&mut self, connection: ConnectionId, path: &str, kind: WatchKind) {
        for &(table, modes) in entries_for(kind) {
            let entry = self
                .table_mut(table)
                .entry(path.to_owned())
                .or_default()
                .entry(connection)
                .or_insert(0);
            let added = modes & !*entry;
            *entry |= modes;
            if added & RECURSIVE != 0 {
                self.recursive_count += 1;
            }
        }
        self.by_connection
            .entry(connection)
            .or_default()
            .insert(path.to_owned());
    }

    /// Clears `modes` of one entry; returns the modes that were actually set.
    fn clear(&mut self, table: Table, connection: ConnectionId, path: &str, modes: Modes) -> Modes {
        let Some(entries) = self.table_mut(table).get_mut(path) else {
            return 0;
        };
        let Some(entry) = entries.get_mut(&connection) else {
            return 0;
        };
        let cleared = *entry & modes;
        *entry &= !modes;
        if *entry == 0 {
            entries.remove(&connection);
            if entries.is_empty() {
                self.table_mut(table).remove(path);
            }
        }
        if cleared & RECURSIVE != 0 {
            self.recursive_count -= 1;
        }
        self.forget_if_unwatched(connection, path);
        cleared
    }

    fn forget_if_unwatched(&mut self, connection: ConnectionId, path: &str) {
        if self.modes(Table::Data, connection, path) | self.modes(Table::Child, connection, path)
            != 0
        {
            return;
        }
        if let Some(paths) = self.by_connection.get_mut(&connection) {
            paths.remove(path);
            if paths.is_empty() {
                self.by_connection.remove(&connection);
            }
        }
    }

    /// removeWatches (18): true if anything was removed (else the server answers NOWATCHER).
    pub fn remove(
        &mut self,
        connection: ConnectionId,
        path: &str,
        watcher_type: WatcherType,
    ) -> bool {
        let mut removed = false;
        for &(table, modes) in addressed_by(watcher_type) {
            removed |= self.clear(table, connection, path, modes) != 0;
        }
        removed
    }

    /// checkWatches (17): does this connection hold such a watch on exactly this path?
    pub fn contains(
        &self,
        connection: ConnectionId,
        path: &str,
        watcher_type: WatcherType,
    ) -> bool {
        addressed_by(watcher_type)
            .iter()
            .any(|&(table, modes)| self.modes(table, connection, path) & modes != 0)
    }

    pub fn drop_connection(&mut self, connection: ConnectionId) {
        for path in self
            .by_connection
            .get(&connection)
            .cloned()
            .unwrap_or_default()
        {
            for table in [Table::Data, Table::Child] {
                self.clear(table, connection, &path, ALL_MODES);
            }
        }
        assert!(
            !self.by_connection.contains_key(&connection),
            "connection {connection} still indexed"
        );
    }

    /// One trigger call (§8.3): every connection with an entry at the path, plus recursive
    /// watchers of data-table ancestors; standard entries at the path are consumed.
    fn collect(&mut self, table: Table, path: &str) -> BTreeSet<ConnectionId> {
        let at_path: Vec<(ConnectionId, Modes)> = self
            .table(table)
            .get(path)
            .map(|entries| entries.iter().map(|(c, m)| (*c, *m)).collect())
            .unwrap_or_default();
        let mut collected: BTreeSet<ConnectionId> =
            at_path.iter().map(|(connection, _)| *connection).collect();
        for (connection, modes) in at_path {
            if modes & STANDARD != 0 {
                self.clear(table, connection, path, STANDARD);
            }
        }
        if table == Table::Data && self.recursive_count > 0 {
            for ancestor in path::ancestors(path) {
                let recursive = self
                    .data
                    .get(ancestor)
                    .into_iter()
                    .flatten()
                    .filter(|(_, modes)| **modes & RECURSIVE != 0);
                collected.extend(recursive.map(|(connection, _)| *connection));
            }
        }
        collected
    }

    /// Resolves one applied entry's triggers (all of them, in order) into notifications.
    /// `identities` gives a connection's ids, or `None` if it is gone (its entry is still
    /// consumed). Events a connection may not READ are dropped (§8.7). A child-table NodeDeleted
    /// skips connections the data-table NodeDeleted just before it already notified (§8.4).
    pub fn fire<'a>(
        &mut self,
        triggers: &[Trigger],
        identities: impl Fn(ConnectionId) -> Option<&'a [Id]>,
    ) -> Vec<(ConnectionId, WatcherEvent)> {
        let mut events = Vec::new();
        let mut previous: Option<(&Trigger, BTreeSet<ConnectionId>)> = None;
        for trigger in triggers {
            let collected = self.collect(trigger.table, &trigger.path);
            let suppressed = match &previous {
                Some((before, notified))
                    if trigger.table == Table::Child && trigger.event == EventType::NodeDeleted =>
                {
                    assert!(
                        before.table == Table::Data
                            && before.event == EventType::NodeDeleted
                            && before.path == trigger.path
                    );
                    Some(notified)
                }
                _ => None,
            };
            for &connection in collected
                .iter()
                .filter(|c| suppressed.is_none_or(|s| !s.contains(c)))
            {
                let may_read = identities(connection)
                    .is_some_and(|ids| acl::is_permitted(&trigger.acl, ids, perms::READ, false));
                if may_read {
                    events.push((connection, event(trigger.event, &trigger.path)));
                }
            }
            previous = Some((trigger, collected));
        }
        events
    }

    /// setWatches (§5.15): catch-up events for what changed after `relative_zxid`, in list order
    /// (data, exist, child); everything else is registered. Catch-up events are not ACL-filtered.
    pub fn set_watches(
        &mut self,
        tree: &DataTree,
        connection: ConnectionId,
        relative_zxid: Zxid,
        lists: WatchLists,
    ) -> Vec<WatcherEvent> {
        let mut events = Vec::new();
        for path in lists.data {
            match tree.stat(&path) {
                None => events.push(event(EventType::NodeDeleted, &path)),
                Some(stat) if stat.mzxid > relative_zxid => {
                    events.push(event(EventType::NodeDataChanged, &path))
                }
                Some(_) => self.add(connection, &path, WatchKind::Data),
            }
        }
        for path in lists.exist {
            match tree.stat(&path) {
                Some(_) => events.push(event(EventType::NodeCreated, &path)),
                None => self.add(connection, &path, WatchKind::Data),
            }
        }
        for path in lists.child {
            match tree.stat(&path) {
                None => events.push(event(EventType::NodeDeleted, &path)),
                Some(stat) if stat.pzxid > relative_zxid => {
                    events.push(event(EventType::NodeChildrenChanged, &path))
                }
                Some(_) => self.add(connection, &path, WatchKind::Child),
            }
        }
        for path in lists.persistent {
            self.add(connection, &path, WatchKind::Persistent);
        }
        for path in lists.persistent_recursive {
            self.add(connection, &path, WatchKind::PersistentRecursive);
        }
        events
    }

    /// Totals for wchs. Like ZooKeeper's wchs, wchc and wchp, this describes the data table only
    /// (getData, exists and addWatch watches); child watches show only in [`Self::watch_count`].
    pub fn summary(&self) -> WatchSummary {
        let connections: BTreeSet<ConnectionId> = self
            .data
            .values()
            .flat_map(|entries| entries.keys().copied())
            .collect();
        WatchSummary {
            connections: connections.len(),
            paths: self.data.len(),
            watches: self.data.values().map(BTreeMap::len).sum(),
        }
    }

    /// Every watch in both tables (mntr's zk_watch_count).
    pub fn watch_count(&self) -> usize {
        self.data
            .values()
            .chain(self.child.values())
            .map(BTreeMap::len)
            .sum()
    }

    /// Each connection's data-watched paths, both sorted (wchc).
    pub fn paths_by_connection(&self) -> Vec<(ConnectionId, Vec<String>)> {
        let mut by_connection: BTreeMap<ConnectionId, BTreeSet<&str>> = BTreeMap::new();
        for (path, entries) in &self.data {
            for connection in entries.keys() {
                by_connection.entry(*connection).or_default().insert(path);
            }
        }
        by_connection
            .into_iter()
            .map(|(connection, paths)| (connection, paths.into_iter().map(str::to_owned).collect()))
            .collect()
    }

    /// Each data-watched path's connections, both sorted (wchp).
    pub fn connections_by_path(&self) -> Vec<(String, Vec<ConnectionId>)> {
        let by_path: BTreeMap<&String, Vec<ConnectionId>> = self
            .data
            .iter()
            .map(|(path, entries)| (path, entries.keys().copied().collect()))
            .collect();
        by_path
            .into_iter()
            .map(|(path, connections)| (path.clone(), connections))
            .collect()
    }
}

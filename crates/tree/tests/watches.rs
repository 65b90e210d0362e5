//! Watch registry semantics (§5.12, §5.15, §8), driven by real triggers from apply.

mod common;

use common::*;
use zoolog_proto::*;
use zoolog_tree::*;

const A: ConnectionId = 1;
const B: ConnectionId = 2;

struct World {
    h: Harness,
    watches: WatchRegistry,
    identities: Vec<Id>,
}

impl World {
    fn new() -> World {
        World {
            h: Harness::new(),
            watches: WatchRegistry::default(),
            identities: vec![Id::new("ip", "127.0.0.1")],
        }
    }

    /// Applies a write and returns (connection, event type, path) for every notification.
    fn write(&mut self, request: Request) -> Vec<(ConnectionId, EventType, String)> {
        let applied = self
            .h
            .write_as(self.h.session, vec![Id::new("super", "")], request);
        let ids = self.identities.clone();
        let events = self.watches.fire(&applied.triggers, |connection| {
            (connection != 99).then_some(ids.as_slice())
        });
        events
            .into_iter()
            .map(|(c, e)| (c, EventType::from_i32(e.event_type).unwrap(), e.path))
            .collect()
    }
}

fn set_data(path: &str) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: None,
        version: -1,
    })
}

fn delete(path: &str) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version: -1,
    })
}

fn ev(connection: ConnectionId, event: EventType, path: &str) -> (ConnectionId, EventType, String) {
    (connection, event, path.to_owned())
}

#[test]
fn standard_watches_fire_once() {
    let mut w = World::new();
    w.watches.add(A, "/a", WatchKind::Data);
    w.watches.add(B, "/", WatchKind::Child);
    assert_eq!(
        w.write(create_request("/a", b"", 0)),
        [
            ev(A, EventType::NodeCreated, "/a"),
            ev(B, EventType::NodeChildrenChanged, "/")
        ]
    );
    assert_eq!(w.write(set_data("/a")), []);
    assert_eq!(
        w.watches.summary(),
        WatchSummary {
            connections: 0,
            paths: 0,
            watches: 0
        }
    );
}

#[test]
fn delete_notifies_each_connection_once_then_the_parent() {
    let mut w = World::new();
    w.write(create_request("/a", b"", 0));
    w.watches.add(A, "/a", WatchKind::Data);
    w.watches.add(A, "/a", WatchKind::Child);
    w.watches.add(B, "/a", WatchKind::Child);
    w.watches.add(B, "/", WatchKind::Child);
    let events = w.write(delete("/a"));
    assert_eq!(
        events,
        [
            ev(A, EventType::NodeDeleted, "/a"),
            ev(B, EventType::NodeDeleted, "/a"),
            ev(B, EventType::NodeChildrenChanged, "/")
        ]
    );
    assert!(
        !w.watches.contains(A, "/a", WatcherType::Children),
        "suppressed entries are still consumed"
    );
}

#[test]
fn persistent_and_recursive_watches_differ_as_documented() {
    let mut w = World::new();
    w.write(create_request("/a", b"", 0));
    w.watches.add(A, "/a", WatchKind::Persistent);
    w.watches.add(B, "/a", WatchKind::PersistentRecursive);
    assert_eq!(
        w.write(create_request("/a/b", b"", 0)),
        [
            ev(B, EventType::NodeCreated, "/a/b"),
            ev(A, EventType::NodeChildrenChanged, "/a")
        ]
    );
    assert_eq!(
        w.write(set_data("/a/b")),
        [ev(B, EventType::NodeDataChanged, "/a/b")]
    );
    assert_eq!(
        w.write(set_data("/a")),
        [
            ev(A, EventType::NodeDataChanged, "/a"),
            ev(B, EventType::NodeDataChanged, "/a")
        ]
    );
    assert_eq!(
        w.write(delete("/a/b")),
        [
            ev(B, EventType::NodeDeleted, "/a/b"),
            ev(A, EventType::NodeChildrenChanged, "/a")
        ]
    );
    assert_eq!(
        w.write(delete("/a")),
        [
            ev(A, EventType::NodeDeleted, "/a"),
            ev(B, EventType::NodeDeleted, "/a")
        ]
    );
    assert_eq!(
        w.write(create_request("/a", b"", 0)).len(),
        2,
        "persistent watches survive deletion"
    );
}

#[test]
fn one_event_per_connection_per_trigger() {
    let mut w = World::new();
    w.write(create_request("/a", b"", 0));
    w.watches.add(A, "/a", WatchKind::Data);
    w.watches.add(A, "/a", WatchKind::Persistent);
    w.watches.add(A, "/", WatchKind::PersistentRecursive);
    assert_eq!(
        w.write(set_data("/a")),
        [ev(A, EventType::NodeDataChanged, "/a")]
    );
    assert!(!w.watches.contains(A, "/a", WatcherType::Data));
    assert!(w.watches.contains(A, "/a", WatcherType::Persistent));
}

#[test]
fn events_are_filtered_by_read_acl_and_entries_still_consumed() {
    let mut w = World::new();
    let private = Request::Create(CreateRequest {
        path: "/p".into(),
        data: None,
        acl: Some(vec![acl_of(ALL, "digest", "bob:h")]),
        flags: 0,
    });
    w.watches.add(A, "/p", WatchKind::Data);
    w.watches.add(99, "/", WatchKind::Child);
    assert_eq!(
        w.write(private),
        [],
        "A lacks READ on /p; connection 99 is gone"
    );
    assert!(!w.watches.contains(A, "/p", WatcherType::Data));
    assert!(!w.watches.contains(99, "/", WatcherType::Children));
    w.identities.push(Id::new("super", ""));
    w.watches.add(A, "/p", WatchKind::Data);
    assert_eq!(
        w.write(set_data("/p")),
        [ev(A, EventType::NodeDataChanged, "/p")]
    );
}

#[test]
fn remove_and_check_follow_watcher_types() {
    let mut w = WatchRegistry::default();
    w.add(A, "/x", WatchKind::Data);
    w.add(A, "/x", WatchKind::Persistent);
    w.add(A, "/y", WatchKind::PersistentRecursive);
    assert!(w.contains(A, "/x", WatcherType::Data));
    assert!(!w.contains(A, "/x", WatcherType::Children));
    assert!(w.contains(A, "/x", WatcherType::Any));
    assert!(!w.contains(B, "/x", WatcherType::Any));
    assert!(!w.remove(A, "/x", WatcherType::Children));
    assert!(w.remove(A, "/x", WatcherType::Persistent));
    assert!(w.contains(A, "/x", WatcherType::Data));
    assert!(!w.contains(A, "/y", WatcherType::Persistent));
    assert!(w.contains(A, "/y", WatcherType::PersistentRecursive));
    assert_eq!(
        w.summary(),
        WatchSummary {
            connections: 1,
            paths: 2,
            watches: 2
        }
    );
    assert_eq!(
        w.paths_by_connection(),
        [(A, vec!["/x".to_owned(), "/y".to_owned()])]
    );
    assert_eq!(
        w.connections_by_path(),
        [("/x".to_owned(), vec![A]), ("/y".to_owned(), vec![A])]
    );
    assert!(w.remove(A, "/y", WatcherType::Any));
    w.drop_connection(A);
    assert_eq!(
        w.summary(),
        WatchSummary {
            connections: 0,
            paths: 0,
            watches: 0
        }
    );
}

#[test]
fn set_watches_catches_up_then_registers() {
    let mut w = World::new();
    w.write(create_request("/old", b"", 0));
    w.write(create_request("/changed", b"", 0));
    let relative = w.h.zxid;
    w.write(set_data("/changed"));
    w.write(create_request("/changed/kid", b"", 0));
    let lists = WatchLists {
        data: vec!["/old".into(), "/changed".into(), "/gone".into()],
        exist: vec!["/old".into(), "/later".into()],
        child: vec!["/old".into(), "/changed".into(), "/gone".into()],
        persistent: vec!["/p".into()],
        persistent_recursive: vec!["/r".into()],
    };
    let events = w.watches.set_watches(&w.h.tree, A, relative, lists);
    let events: Vec<_> = events
        .into_iter()
        .map(|e| (EventType::from_i32(e.event_type).unwrap(), e.path))
        .collect();
    let expected = [
        (EventType::NodeDataChanged, "/changed"),
        (EventType::NodeDeleted, "/gone"),
        (EventType::NodeCreated, "/old"),
        (EventType::NodeChildrenChanged, "/changed"),
        (EventType::NodeDeleted, "/gone"),
    ];
    assert_eq!(events, expected.map(|(e, p)| (e, p.to_owned())));
    assert!(w.watches.contains(A, "/old", WatcherType::Data));
    assert!(w.watches.contains(A, "/later", WatcherType::Data));
    assert!(w.watches.contains(A, "/old", WatcherType::Children));
    assert!(w.watches.contains(A, "/p", WatcherType::Persistent));
    assert!(w
        .watches
        .contains(A, "/r", WatcherType::PersistentRecursive));
    assert_eq!(
        w.write(create_request("/later", b"", 0)),
        [ev(A, EventType::NodeCreated, "/later")]
    );
}

//! One-shot and persistent watches against a real server.

mod common;

use std::time::Duration;

use common::{connect, connect_with, within, ZkServer};
use zoolog_client::{
    open_acl_unsafe, AddWatchMode, ClientOptions, CreateMode, Error, ErrorCode, EventType,
    WatcherType,
};

const TEST_TIMEOUT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn one_shot_watches_fire_once() {
    let server = ZkServer::start();
    let watcher = connect(&server.hosts()).await;
    let writer = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        let acl = open_acl_unsafe();
        let (missing, created) = watcher.exists_w("/w").await.unwrap();
        assert_eq!(missing, None);
        writer
            .create("/w", Some(b"1"), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        let event = created.await.unwrap();
        assert_eq!(
            (event.event_type, event.path.as_str()),
            (EventType::NodeCreated, "/w")
        );

        let (_, _, changed) = watcher.get_data_w("/w").await.unwrap();
        let (_, children_changed) = watcher.get_children_w("/w").await.unwrap();
        writer.set_data("/w", Some(b"2"), None).await.unwrap();
        assert_eq!(
            changed.await.unwrap().event_type,
            EventType::NodeDataChanged
        );
        writer
            .create("/w/c", Some(b""), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        assert_eq!(
            children_changed.await.unwrap().event_type,
            EventType::NodeChildrenChanged
        );

        // Once fired, a watch is gone: the next change reaches only the new watch.
        let (_, _, deleted) = watcher.get_data_w("/w/c").await.unwrap();
        writer.set_data("/w", Some(b"3"), None).await.unwrap();
        writer.delete("/w/c", None).await.unwrap();
        let event = deleted.await.unwrap();
        assert_eq!(
            (event.event_type, event.path.as_str()),
            (EventType::NodeDeleted, "/w/c")
        );
        assert_eq!(
            watcher.check_watches("/w", WatcherType::Data).await,
            Err(Error::Server(ErrorCode::NoWatcher))
        );

        // A failed watching read registers nothing.
        assert_eq!(
            watcher.get_data_w("/nothing").await.map(drop),
            Err(Error::Server(ErrorCode::NoNode))
        );
    })
    .await;
}

/// The watcher's own write: the server sends the event before the reply, so the watch has
/// fired by the time the write returns.
#[tokio::test]
async fn own_write_event_arrives_before_the_reply() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        client
            .create(
                "/own",
                Some(b""),
                &open_acl_unsafe(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let (_, _, mut changed) = client.get_data_w("/own").await.unwrap();
        client.set_data("/own", Some(b"x"), None).await.unwrap();
        let event = futures_now(&mut changed).expect("event delivered before the setData reply");
        assert_eq!(event.unwrap().event_type, EventType::NodeDataChanged);
    })
    .await;
}

#[tokio::test]
async fn persistent_and_recursive_watches_stream_in_server_order() {
    let server = ZkServer::start();
    let watcher = connect(&server.hosts()).await;
    let writer = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        let acl = open_acl_unsafe();
        // Separate paths: ZooKeeper 3.8 keeps one mode per (connection, path).
        let mut recursive = watcher
            .add_watch("/r", AddWatchMode::PersistentRecursive)
            .await
            .unwrap();
        let mut persistent = watcher
            .add_watch("/p", AddWatchMode::Persistent)
            .await
            .unwrap();
        for path in ["/r", "/r/a", "/r/a/b", "/p", "/p/c", "/p/c/deeper"] {
            writer
                .create(path, Some(b""), &acl, CreateMode::Persistent)
                .await
                .unwrap();
        }
        for round in 0..3 {
            writer
                .set_data("/r/a/b", Some(round.to_string().as_bytes()), None)
                .await
                .unwrap();
        }
        writer.delete("/r/a/b", None).await.unwrap();
        writer.set_data("/p", Some(b""), None).await.unwrap();

        let mut seen = Vec::new();
        for _ in 0..7 {
            let event = recursive.next().await.unwrap();
            seen.push((event.event_type, event.path));
        }
        let expected = [
            (EventType::NodeCreated, "/r"),
            (EventType::NodeCreated, "/r/a"),
            (EventType::NodeCreated, "/r/a/b"),
            (EventType::NodeDataChanged, "/r/a/b"),
            (EventType::NodeDataChanged, "/r/a/b"),
            (EventType::NodeDataChanged, "/r/a/b"),
            (EventType::NodeDeleted, "/r/a/b"),
        ];
        assert_eq!(
            seen,
            expected.map(|(event_type, path)| (event_type, path.to_owned()))
        );

        // Non-recursive: the node itself and its children list, nothing deeper.
        let mut seen = Vec::new();
        for _ in 0..3 {
            let event = persistent.next().await.unwrap();
            seen.push((event.event_type, event.path));
        }
        let expected = [
            (EventType::NodeCreated, "/p"),
            (EventType::NodeChildrenChanged, "/p"),
            (EventType::NodeDataChanged, "/p"),
        ];
        assert_eq!(
            seen,
            expected.map(|(event_type, path)| (event_type, path.to_owned()))
        );

        // Types Persistent and PersistentRecursive are refused before ZooKeeper 3.9; Any works everywhere.
        watcher.check_watches("/r", WatcherType::Any).await.unwrap();
        watcher
            .remove_watches("/r", WatcherType::Any)
            .await
            .unwrap();
        assert_eq!(
            recursive.next().await.unwrap().event_type,
            EventType::PersistentWatchRemoved
        );
        assert_eq!(recursive.next().await, Err(Error::WatchEnded));
        // The other watch is untouched and still persistent.
        for data in [&b"again"[..], b"and again"] {
            writer.set_data("/p", Some(data), None).await.unwrap();
            assert_eq!(
                persistent.next().await.unwrap().event_type,
                EventType::NodeDataChanged
            );
        }
    })
    .await;
}

/// A reader that falls behind is told how many events it lost, then reads on.
#[tokio::test]
async fn a_lagging_persistent_watch_reports_what_it_missed() {
    let server = ZkServer::start();
    let options = ClientOptions {
        persistent_watch_events_max: 4,
        ..ClientOptions::default()
    };
    let watcher = connect_with(&server.hosts(), options).await;
    within(TEST_TIMEOUT, async {
        watcher
            .create(
                "/lag",
                Some(b""),
                &open_acl_unsafe(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let mut events = watcher
            .add_watch("/lag", AddWatchMode::Persistent)
            .await
            .unwrap();
        for round in 0..10 {
            watcher
                .set_data("/lag", Some(round.to_string().as_bytes()), None)
                .await
                .unwrap();
        }
        assert_eq!(events.next().await, Err(Error::WatchLagged { missed: 6 }));
        for _ in 0..4 {
            assert_eq!(
                events.next().await.unwrap().event_type,
                EventType::NodeDataChanged
            );
        }
    })
    .await;
}

#[tokio::test]
async fn removing_a_one_shot_watch_resolves_it() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        client
            .create("/rm", Some(b""), &open_acl_unsafe(), CreateMode::Persistent)
            .await
            .unwrap();
        let (_, children) = client.get_children_w("/rm").await.unwrap();
        client
            .check_watches("/rm", WatcherType::Children)
            .await
            .unwrap();
        client
            .remove_watches("/rm", WatcherType::Any)
            .await
            .unwrap();
        assert_eq!(
            children.await.unwrap().event_type,
            EventType::ChildWatchRemoved
        );
        assert_eq!(
            client.remove_watches("/rm", WatcherType::Any).await,
            Err(Error::Server(ErrorCode::NoWatcher))
        );
    })
    .await;
}

/// Polls a future once: `Some` if it is already complete.
fn futures_now<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    match std::pin::Pin::new(future).poll(&mut context) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}

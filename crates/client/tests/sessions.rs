//! Sessions across connection loss: a server restart the session survives, a network cut long
//! enough for the server to expire it, and an explicit close.

mod common;

use std::time::Duration;

use common::{
    connect, connect_with, copy_to_server, wait_for_state, within, CuttableListener, ZkServer,
};
use tokio::net::TcpListener;
use zoolog_client::{
    open_acl_unsafe, AddWatchMode, ClientOptions, CreateMode, Error, EventType, SessionState,
};

const TEST_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn session_and_watches_survive_a_server_restart() {
    let server = ZkServer::start();
    let options = ClientOptions {
        session_timeout_ms: 20_000,
        ..ClientOptions::default()
    };
    let client = connect_with(&server.hosts(), options).await;
    let mut events = client.session_events();
    let acl = open_acl_unsafe();
    client.add_auth("digest", b"bob:pw").await.unwrap();
    client
        .create("/restart", Some(b"before"), &acl, CreateMode::Persistent)
        .await
        .unwrap();
    client
        .create("/restart/mine", Some(b""), &acl, CreateMode::Ephemeral)
        .await
        .unwrap();
    let (_, _, changed) = client.get_data_w("/restart").await.unwrap();
    let mut recursive = client
        .add_watch("/restart", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let session_id = client.session_id();

    server.stop();
    within(TEST_TIMEOUT, async {
        assert_eq!(events.recv().await.unwrap(), SessionState::Disconnected);
        // A call made while disconnected waits for the next connection rather than failing.
        let waiting = tokio::spawn({
            let client = client.clone();
            async move { client.exists("/restart/mine").await }
        });
        server.restart();
        assert_eq!(events.recv().await.unwrap(), SessionState::Connected);
        assert_eq!(
            client.session_id(),
            session_id,
            "same session after reconnect"
        );
        assert!(
            waiting.await.unwrap().unwrap().is_some(),
            "the session's ephemeral survived"
        );

        // Identities were re-sent on the new connection.
        let identities = client.who_am_i().await.unwrap();
        assert!(
            identities
                .iter()
                .any(|id| id.auth_scheme == "digest" && id.user == "bob"),
            "{identities:?}"
        );

        // Watches set before the restart were restored with SetWatches and still fire.
        let writer = connect(&server.hosts()).await;
        writer
            .set_data("/restart", Some(b"after"), None)
            .await
            .unwrap();
        assert_eq!(
            changed.await.unwrap().event_type,
            EventType::NodeDataChanged
        );
        let event = recursive.next().await.unwrap();
        assert_eq!(
            (event.event_type, event.path.as_str()),
            (EventType::NodeDataChanged, "/restart")
        );
        writer
            .create("/restart/new", Some(b""), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        assert_eq!(recursive.next().await.unwrap().path, "/restart/new");
    })
    .await;
}

/// With no server left to answer, a call waits for a reconnect only so long: once no server
/// has answered for a session timeout, it fails with `ConnectionLoss` instead of hanging.
#[tokio::test]
async fn a_call_fails_once_no_server_has_answered_for_the_session_timeout() {
    let server = ZkServer::start();
    let options = ClientOptions {
        session_timeout_ms: 4_000,
        ..ClientOptions::default()
    };
    let client = connect_with(&server.hosts(), options).await;
    let mut events = client.session_events();
    server.stop();
    within(TEST_TIMEOUT, async {
        assert_eq!(events.recv().await.unwrap(), SessionState::Disconnected);
        let result = client.exists("/").await;
        assert!(matches!(result, Err(Error::ConnectionLoss)), "{result:?}");
    })
    .await;
}

/// A real expiry: the client reaches the server through a proxy that is then cut off, so the
/// server hears nothing from the session for longer than its timeout and expires it; when the
/// network comes back, the reconnect is refused as expired.
#[tokio::test]
async fn session_expires_when_the_server_hears_nothing_for_the_timeout() {
    let server = ZkServer::start();
    let server_port = server.port;
    let proxy = CuttableListener::start(move |client| copy_to_server(client, server_port)).await;
    // The server's floor is two ticks (4 s with tickTime=2000); it expires within a tick after.
    let options = ClientOptions {
        session_timeout_ms: 4_000,
        ..ClientOptions::default()
    };
    let client = connect_with(&proxy.hosts(), options).await;
    let mut events = client.session_events();
    let acl = open_acl_unsafe();
    client
        .create("/expiring", Some(b""), &acl, CreateMode::Ephemeral)
        .await
        .unwrap();
    let (_, _, watch) = client.get_data_w("/expiring").await.unwrap();
    let observer = connect(&server.hosts()).await;
    let (_, _, ephemeral_deleted) = observer.get_data_w("/expiring").await.unwrap();

    proxy.cut().await;
    within(TEST_TIMEOUT, async {
        assert_eq!(events.recv().await.unwrap(), SessionState::Disconnected);
        // The server deletes the ephemeral when it expires the session.
        assert_eq!(
            ephemeral_deleted.await.unwrap().event_type,
            EventType::NodeDeleted
        );
        proxy.heal();
        assert_eq!(
            wait_for_state(&client, SessionState::is_final, TEST_TIMEOUT).await,
            SessionState::Expired
        );
        assert_eq!(events.recv().await.unwrap(), SessionState::Expired);
        assert_eq!(client.exists("/").await, Err(Error::SessionExpired));
        assert_eq!(watch.await, Err(Error::SessionExpired));
    })
    .await;
}

#[tokio::test]
async fn close_ends_the_session_and_its_ephemerals() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    let observer = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        client
            .create(
                "/closing",
                Some(b""),
                &open_acl_unsafe(),
                CreateMode::Ephemeral,
            )
            .await
            .unwrap();
        let (_, _, deleted) = observer.get_data_w("/closing").await.unwrap();
        client.close().await.unwrap();
        assert_eq!(client.state(), SessionState::Closed);
        assert_eq!(deleted.await.unwrap().event_type, EventType::NodeDeleted);
        assert_eq!(client.exists("/").await, Err(Error::SessionClosed));
        client.close().await.unwrap();
    })
    .await;
}

/// The server answers an identity it cannot verify with AuthFailed and drops the connection;
/// the session is then unusable, as with the Java client.
#[tokio::test]
async fn a_refused_identity_ends_the_session() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        let refused = client.add_auth("no-such-scheme", b"whoever").await;
        assert_eq!(
            refused,
            Err(Error::Server(zoolog_client::ErrorCode::AuthFailed))
        );
        assert_eq!(
            wait_for_state(&client, SessionState::is_final, TEST_TIMEOUT).await,
            SessionState::AuthFailed
        );
        assert_eq!(client.exists("/").await, Err(Error::AuthFailed));
    })
    .await;
}

#[tokio::test]
async fn connect_gives_up_after_its_timeout() {
    // A listener that accepts but never answers the handshake.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hosts = silent.local_addr().unwrap().to_string();
    let options = ClientOptions {
        connect_timeout_ms: 500,
        ..ClientOptions::default()
    };
    let started = tokio::time::Instant::now();
    let result = zoolog_client::Client::connect(&hosts, options).await;
    assert!(matches!(
        result,
        Err(Error::ConnectTimeout { timeout_ms: 500 })
    ));
    assert!(started.elapsed() < Duration::from_secs(3));
}

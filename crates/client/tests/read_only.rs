//! Read-only sessions against a real 3-server ensemble: a client allowed to use a read-only
//! server gets one while no quorum is reachable, and moves by itself to a read-write server
//! once there is one.

mod common;

use std::time::Duration;

use common::{connect, connect_with, four_letter, wait_for_state, within, Ensemble};
use zoolog_client::{open_acl_unsafe, ClientOptions, CreateMode, Error, ErrorCode, SessionState};

const TEST_TIMEOUT: Duration = Duration::from_secs(90);
const POLL_PAUSE: Duration = Duration::from_millis(50);

/// One member is cut off from the others and turns read-only; the two others are then killed,
/// so the only server the client can reach is the read-only one. Once they come back and form a
/// quorum without it, the client must find them through its `isro` probes, leave the read-only
/// server and get a new, writable session (Apache's rule for a session that has never been on a
/// read-write server: its id is local to the read-only server).
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_session_moves_to_a_read_write_server_when_one_appears() {
    let ensemble = Ensemble::start(&["-Dreadonlymode.enabled=true"]);
    let isolated = (1..=Ensemble::SIZE)
        .find(|id| *id != ensemble.leader())
        .unwrap();
    let others: Vec<usize> = (1..=Ensemble::SIZE).filter(|id| *id != isolated).collect();
    within(TEST_TIMEOUT, async {
        // Written through the member to be isolated: its reply means it has applied it.
        let writer = connect(ensemble.member_hosts(isolated)).await;
        writer
            .create(
                "/ro",
                Some(b"before"),
                &open_acl_unsafe(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        writer.close().await.unwrap();
        ensemble.isolate(isolated);
        while four_letter(ensemble.member_hosts(isolated), "isro") != "ro" {
            tokio::time::sleep(POLL_PAUSE).await;
        }
        for id in &others {
            ensemble.kill(*id);
        }

        let options = ClientOptions {
            read_only_allowed: true,
            ..ClientOptions::default()
        };
        let client = connect_with(&ensemble.hosts(), options).await;
        let mut events = client.session_events();
        assert_eq!(client.state(), SessionState::ConnectedReadOnly);
        let read_only_session_id = client.session_id();
        assert_eq!(client.get_data("/ro").await.unwrap().0.unwrap(), b"before");
        assert_eq!(
            client.set_data("/ro", Some(b"refused"), None).await,
            Err(Error::Server(ErrorCode::NotReadOnly))
        );

        for id in &others {
            ensemble.start_member(*id);
        }
        wait_for_state(
            &client,
            |state| state == SessionState::Connected,
            TEST_TIMEOUT,
        )
        .await;
        assert_eq!(
            events.recv().await.unwrap(),
            SessionState::Disconnected,
            "the client left the read-only server itself"
        );
        assert_ne!(client.session_id(), read_only_session_id, "a new session");
        client.set_data("/ro", Some(b"after"), None).await.unwrap();
        let reader = connect(ensemble.member_hosts(others[0])).await;
        reader.sync("/ro").await.unwrap();
        assert_eq!(reader.get_data("/ro").await.unwrap().0.unwrap(), b"after");
    })
    .await;
}

//! zoolog's request budget (`zoolog.requestBytesMax`): a server holds at most that many bytes
//! of requests read and not yet answered, over all its connections, and reads no more until
//! replies give some back. A zoolog setting: Apache ZooKeeper bounds only the number of
//! requests, so these tests run against zoolog only.

mod common;

use std::time::Duration;

use common::{connect, four_letter, within, Ensemble, ZkServer};
use zoolog_client::{open_acl_unsafe, CreateMode};

const TEST_TIMEOUT: Duration = Duration::from_secs(90);
const POLL_PAUSE: Duration = Duration::from_millis(50);
/// Room for three of the tests' writes (a 1,000,000-byte value and about 30 bytes around it),
/// not four.
const BUDGET_BYTES: &str = "3500000";
const VALUE_BYTES: usize = 1_000_000;

fn against_zoolog() -> bool {
    std::env::var("ZK_KIND").map_or(true, |kind| kind == "zoolog")
}

/// The `Outstanding:` count of `srvr`: requests the server has read and not yet answered.
fn outstanding(hosts: &str) -> Option<usize> {
    four_letter(hosts, "srvr")
        .lines()
        .find_map(|line| line.strip_prefix("Outstanding:"))
        .and_then(|count| count.trim().parse().ok())
}

/// Writes wait at a follower whose leader is cut off (until the follower gives up on it,
/// after `syncLimit` ticks). Twenty of them are sent at once, but the follower reads only as
/// many as its budget holds, and no more while they wait.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_holds_no_more_request_bytes_than_its_budget_while_writes_wait() {
    if !against_zoolog() {
        return;
    }
    let budget = format!("-Dzoolog.requestBytesMax={BUDGET_BYTES}");
    // A tick of 2 s gives the follower 10 s before it gives up on its leader.
    let ensemble = Ensemble::start(&["tickTime=2000", &budget]);
    let leader = ensemble.leader();
    let follower = (1..=Ensemble::SIZE).find(|id| *id != leader).unwrap();
    let hosts = ensemble.member_hosts(follower).to_owned();
    within(TEST_TIMEOUT, async {
        let client = connect(&hosts).await;
        client
            .create("/big", None, &open_acl_unsafe(), CreateMode::Persistent)
            .await
            .unwrap();
        ensemble.isolate(leader);
        let value = vec![b'v'; VALUE_BYTES];
        for _ in 0..20 {
            let client = client.clone();
            let value = value.clone();
            // They fail once the follower gives up on its leader; only their reading matters.
            tokio::spawn(async move { client.set_data("/big", Some(&value), None).await });
        }
        while outstanding(&hosts).unwrap_or(0) < 3 {
            tokio::time::sleep(POLL_PAUSE).await;
        }
        // The twenty reached the follower's socket at loopback speed; had it read them, the
        // count would show them by now.
        for _ in 0..20 {
            let count = outstanding(&hosts);
            assert!(
                count.is_some_and(|count| count <= 3),
                "outstanding: {count:?}"
            );
            tokio::time::sleep(POLL_PAUSE).await;
        }
    })
    .await;
}

/// Requests that together need many times the budget all get their answers: every reply
/// gives its request's bytes back, reads and writes alike.
#[tokio::test(flavor = "multi_thread")]
async fn requests_beyond_the_budget_wait_for_room_and_all_complete() {
    if !against_zoolog() {
        return;
    }
    let server = ZkServer::start_with(&[&format!("-Dzoolog.requestBytesMax={BUDGET_BYTES}")]);
    within(TEST_TIMEOUT, async {
        let clients = [
            connect(&server.hosts()).await,
            connect(&server.hosts()).await,
        ];
        let value = vec![b'v'; VALUE_BYTES];
        let mut writes = tokio::task::JoinSet::new();
        for (index, client) in clients.iter().enumerate() {
            let path = format!("/big-{index}");
            client
                .create(&path, None, &open_acl_unsafe(), CreateMode::Persistent)
                .await
                .unwrap();
            for _ in 0..25 {
                let (client, path, value) = (client.clone(), path.clone(), value.clone());
                writes.spawn(async move {
                    client.set_data(&path, Some(&value), None).await.unwrap();
                    client.exists(&path).await.unwrap().unwrap();
                });
            }
        }
        while let Some(write) = writes.join_next().await {
            write.unwrap();
        }
        for (index, client) in clients.iter().enumerate() {
            let (_, stat) = client.get_data(&format!("/big-{index}")).await.unwrap();
            assert_eq!(stat.version, 25);
        }
    })
    .await;
}

//! Learners that need the leader's snapshot at the same time share one load of it: the leader
//! asks its driver once, and sends what comes back to every learner waiting. A load that
//! fails is asked for again, once for all of them.

mod common;

use bytes::Bytes;
use common::{ack, broadcasting_leader, follower_info, link, message, sent_to};
use zoolog_zab::{Action, Attempt, Input, Lane, Link, Message, Zab};

/// Leader 1 of five, with entries 1..=3 committed and only a snapshot at 3 left of them.
fn leader_holding_only_a_snapshot() -> Zab {
    let mut leader = broadcasting_leader(5);
    let payloads = vec![
        Bytes::from_static(b"a"),
        Bytes::from_static(b"b"),
        Bytes::from_static(b"c"),
    ];
    leader.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads,
        },
        5,
    );
    leader.handle(
        Input::Logged {
            position: 3,
            epoch: 1,
        },
        6,
    );
    for from in 2..=5 {
        let acked = Message::Ack {
            link: link(1),
            position: 3,
        };
        leader.handle(message(from, acked), 7);
    }
    assert_eq!(leader.delivered_position(), 3);
    leader.handle(Input::SnapshotSaved { position: 3 }, 8);
    leader
}

/// Server `id` restarts with an empty log and promises the leader's epoch; the actions the
/// leader takes in answer.
fn restart_with_an_empty_log(leader: &mut Zab, id: u64, now_ms: u64) -> Vec<Action> {
    let restarted = Link {
        epoch: 1,
        attempt: Attempt {
            incarnation: 1,
            round: 1,
        },
    };
    let info = follower_info(1, restarted.attempt);
    leader.handle(message(id, info), now_ms);
    let promise = Message::AckEpoch {
        link: restarted,
        counted: true,
        current_epoch: 1,
        snapshot_position: 0,
        runs: Vec::new(),
        last_position: 0,
    };
    leader.handle(message(id, promise), now_ms)
}

fn loads(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|action| matches!(action, Action::LoadSnapshot { .. }))
        .count()
}

fn snapshot_sent_to(actions: &[Action], id: u64) -> Option<Bytes> {
    sent_to(actions, id)
        .into_iter()
        .find_map(|sent| match sent {
            Message::NewLeader {
                snapshot: Some(image),
                ..
            } => Some(image.payload),
            _ => None,
        })
}

#[test]
fn learners_waiting_together_share_one_snapshot_load() {
    let mut leader = leader_holding_only_a_snapshot();
    let before = leader.learner_syncs();
    let first = restart_with_an_empty_log(&mut leader, 2, 9);
    assert_eq!(
        loads(&first),
        1,
        "the first learner's sync needs the snapshot"
    );
    let second = restart_with_an_empty_log(&mut leader, 3, 9);
    assert_eq!(
        loads(&second),
        0,
        "the load under way serves the second too"
    );

    let snapshot = Bytes::from_static(b"the tree at 3");
    let loaded = leader.handle(
        Input::SnapshotLoaded {
            position: 3,
            payload: snapshot.clone(),
        },
        10,
    );
    for id in [2, 3] {
        let sent = snapshot_sent_to(&loaded, id);
        assert_eq!(
            sent.as_ref(),
            Some(&snapshot),
            "server {id} gets the snapshot"
        );
        assert_eq!(
            sent.map(|payload| payload.as_ptr()),
            Some(snapshot.as_ptr()),
            "sent by reference, not copied"
        );
    }

    let later = restart_with_an_empty_log(&mut leader, 4, 11);
    assert_eq!(
        loads(&later),
        1,
        "a learner after the load gets a load of its own"
    );
    let syncs = leader.learner_syncs();
    assert_eq!(
        syncs.snapshots - before.snapshots,
        3,
        "one per learner, shared load or not"
    );
    assert_eq!(syncs.diffs, before.diffs);
}

#[test]
fn a_failed_load_is_asked_for_again_and_then_serves_every_waiting_learner() {
    let mut leader = leader_holding_only_a_snapshot();
    let before = leader.learner_syncs();
    restart_with_an_empty_log(&mut leader, 2, 9);
    restart_with_an_empty_log(&mut leader, 3, 9);
    let failed = leader.handle(Input::SnapshotUnavailable, 10);
    assert_eq!(loads(&failed), 0, "no retry before the resend wait");

    let retried: usize = (11..=30)
        .map(|now_ms| {
            // Servers 4 and 5 keep the leader's quorum meanwhile.
            for from in [4, 5] {
                leader.handle(ack(from, 3), now_ms);
            }
            loads(&leader.handle(Input::Tick, now_ms))
        })
        .sum();
    assert_eq!(retried, 1, "both learners wait on one new load");

    let snapshot = Bytes::from_static(b"the tree at 3");
    let loaded = leader.handle(
        Input::SnapshotLoaded {
            position: 3,
            payload: snapshot.clone(),
        },
        31,
    );
    for id in [2, 3] {
        assert_eq!(
            snapshot_sent_to(&loaded, id).as_ref(),
            Some(&snapshot),
            "server {id} gets the snapshot"
        );
    }
    let snapshots = leader.learner_syncs().snapshots - before.snapshots;
    assert_eq!(snapshots, 2, "a sync asked for again is still one sync");
}

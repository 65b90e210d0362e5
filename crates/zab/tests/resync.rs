//! The leader's side of a learner's synchronization, over time.

mod common;

use common::{broadcasting_leader, message, sent_to};
use zoolog_zab::{Attempt, Input, Link, Message};

/// A learner that has not acknowledged its `NewLeader` gets it again, but each time after
/// twice the wait: a large snapshot still crossing a slow link is not sent again and again
/// (over TCP a resend helps only after a full queue dropped the first).
#[test]
fn an_unacknowledged_sync_is_resent_at_doubling_intervals() {
    let mut leader = broadcasting_leader(3);
    let restarted = Attempt {
        incarnation: 1,
        round: 1,
    };
    let restarted_link = Link {
        epoch: 1,
        attempt: restarted,
    };
    let info = Message::FollowerInfo {
        accepted_epoch: 1,
        observer: false,
        attempt: restarted,
    };
    leader.handle(message(2, info), 10);
    let promise = Message::AckEpoch {
        link: restarted_link,
        counted: true,
        current_epoch: 1,
        snapshot_position: 0,
        runs: vec![(1, 0)],
        last_position: 0,
    };
    let mut syncs_at = Vec::new();
    let first = leader.handle(message(2, promise), 11);
    if sent_to(&first, 2)
        .iter()
        .any(|m| matches!(m, Message::NewLeader { .. }))
    {
        syncs_at.push(11);
    }
    // Ticks every millisecond until just before the learner, silent, would be dropped.
    for now_ms in 12..110 {
        let actions = leader.handle(Input::Tick, now_ms);
        if sent_to(&actions, 2)
            .iter()
            .any(|m| matches!(m, Message::NewLeader { .. }))
        {
            syncs_at.push(now_ms);
        }
    }
    assert_eq!(syncs_at.first(), Some(&11), "synced at once: {syncs_at:?}");
    let waits: Vec<u64> = syncs_at.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(
        waits.len() >= 2,
        "resent while unacknowledged: {syncs_at:?}"
    );
    let heartbeat_ms = 2;
    for (index, wait) in waits.iter().enumerate() {
        let expected = (heartbeat_ms * 4) << index;
        assert!(
            (expected..expected + heartbeat_ms).contains(wait),
            "resend {index} after {wait} ms, expected {expected}: {syncs_at:?}"
        );
    }
}

//! The leader's side of a learner's synchronization, over time: an unacknowledged `NewLeader`
//! is resent, but not while a large one may still be on its way, and each time after twice
//! the wait (over TCP a resend helps only after a full queue dropped the first); a lost
//! proposal is sent again however busy the leader is.

mod common;

use bytes::Bytes;
use common::{
    ack, broadcasting_leader, broadcasting_leader_with, config, follower_info, message, sent_to,
};
use zoolog_zab::{Attempt, Input, Lane, Link, Message, Zab};

const HEARTBEAT_MS: u64 = 2;
/// The leader drops a learner it has not heard from for this long (ten ticks of 10 ms).
const SYNC_TIMEOUT_MS: u64 = 100;

/// Server 2 restarts and promises with an empty log at `now_ms`; the times at which the
/// leader sends it `NewLeader` while it stays silent, until just before it would be dropped.
/// Server 3 acknowledges at every tick, so that the leader keeps its quorum meanwhile.
fn syncs_to_a_silent_learner(leader: &mut Zab, now_ms: u64) -> Vec<u64> {
    let restarted = Attempt {
        incarnation: 1,
        round: 1,
    };
    let info = follower_info(1, restarted);
    leader.handle(message(2, info), now_ms);
    let promise = Message::AckEpoch {
        link: Link {
            epoch: 1,
            attempt: restarted,
        },
        counted: true,
        current_epoch: 1,
        snapshot_position: 0,
        runs: vec![(1, 0)],
        last_position: 0,
    };
    let is_sync = |actions: &[zoolog_zab::Action]| {
        sent_to(actions, 2)
            .iter()
            .any(|m| matches!(m, Message::NewLeader { .. }))
    };
    let mut syncs_at = Vec::new();
    if is_sync(&leader.handle(message(2, promise), now_ms)) {
        syncs_at.push(now_ms);
    }
    for now_ms in now_ms + 1..now_ms + SYNC_TIMEOUT_MS {
        leader.handle(ack(3, 0), now_ms);
        if is_sync(&leader.handle(Input::Tick, now_ms)) {
            syncs_at.push(now_ms);
        }
    }
    assert_eq!(
        syncs_at.first(),
        Some(&now_ms),
        "synced at once: {syncs_at:?}"
    );
    syncs_at
}

/// Checks the waits between `syncs_at` against `first_wait_ms` doubling.
fn assert_doubling_waits(syncs_at: &[u64], first_wait_ms: u64) {
    let waits: Vec<u64> = syncs_at.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(
        !waits.is_empty(),
        "resent while unacknowledged: {syncs_at:?}"
    );
    for (index, wait) in waits.iter().enumerate() {
        let expected = first_wait_ms << index;
        assert!(
            (expected..expected + HEARTBEAT_MS).contains(wait),
            "resend {index} after {wait} ms, expected {expected}: {syncs_at:?}"
        );
    }
}

#[test]
fn an_unacknowledged_sync_is_resent_at_doubling_intervals() {
    let mut leader = broadcasting_leader(3);
    let before = leader.learner_syncs();
    let syncs_at = syncs_to_a_silent_learner(&mut leader, 11);
    assert!(syncs_at.len() >= 3, "{syncs_at:?}");
    assert_doubling_waits(&syncs_at, 4 * HEARTBEAT_MS);
    let diffs = leader.learner_syncs().diffs - before.diffs;
    assert_eq!(diffs, 1, "one sync, however often it was sent");
}

#[test]
fn a_large_sync_is_given_a_heartbeat_per_32_mib_before_it_is_resent() {
    let mut config = config(1, 3);
    // Room for both entries in flight at once.
    config.in_flight_bytes_max = 128 << 20;
    let mut leader = broadcasting_leader_with(config);
    let value = Bytes::from(vec![7u8; 48 << 20]);
    let appended = leader.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: vec![value.clone(), value],
        },
        5,
    );
    assert!(!appended.is_empty(), "the leader proposes the two entries");
    let syncs_at = syncs_to_a_silent_learner(&mut leader, 11);
    // 96 MiB of entries: three heartbeats more than the four.
    assert_doubling_waits(&syncs_at, 7 * HEARTBEAT_MS);
}

/// A proposal to server 2 is lost (over TCP only a full queue drops one) while server 3
/// acknowledges every entry, so commits come at every tick, each announced to server 2. The
/// announcements must not put off the check that notices server 2 has stopped progressing:
/// the lost entry is sent again within a few heartbeats.
#[test]
fn a_lost_proposal_is_sent_again_while_commit_announcements_keep_coming() {
    let mut config = config(1, 3);
    // Two entries in flight to a learner: after them, server 2 hears only announcements.
    config.proposals_in_flight_max = 2;
    let mut leader = broadcasting_leader_with(config);
    let mut positions_sent_to_two = Vec::new();
    for now_ms in 5..40 {
        let position = now_ms - 4;
        let command = Input::Append {
            lane: Lane::Commands,
            payloads: vec![Bytes::from_static(b"c")],
        };
        let mut actions = leader.handle(command, now_ms);
        actions.extend(leader.handle(Input::Logged { position, epoch: 1 }, now_ms));
        actions.extend(leader.handle(ack(3, position), now_ms));
        actions.extend(leader.handle(Input::Tick, now_ms));
        for sent in sent_to(&actions, 2) {
            if let Message::Propose { entries, .. } = sent {
                positions_sent_to_two.extend(entries.iter().map(|entry| entry.position));
            }
        }
    }
    assert_eq!(
        leader.committed_position(),
        35,
        "server 3's copies commit every entry"
    );
    let first_sent = positions_sent_to_two.iter().filter(|&&p| p == 1).count();
    assert!(
        first_sent >= 2,
        "entry 1 sent again to a learner that never acknowledged it: {positions_sent_to_two:?}"
    );
}

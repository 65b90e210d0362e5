//! A leader whose synchronized voting followers are a quorum by themselves commits on their
//! durable copies alone, so its own log may become durable later than it is written
//! ([`Zab::own_copy_optional`]); with fewer synchronized followers its own copy is needed, and
//! while only one follower holds an entry the commit awaits it ([`Zab::own_copy_awaited`]).

mod common;

use bytes::Bytes;
use common::{
    ack, broadcasting_follower, broadcasting_leader, config, follower_info, link, message,
};
use zoolog_zab::{Input, Lane, Zab};

/// Server 1 of three, leading epoch 1, whose follower 3 has come back on a new attempt
/// (restarted) and is not synchronized yet.
fn leader_with_one_follower_resynchronizing() -> Zab {
    let mut zab = broadcasting_leader(3);
    let mut restarted = link(1).attempt;
    restarted.incarnation += 1;
    let info = follower_info(1, restarted);
    zab.handle(message(3, info), 10);
    assert!(zab.status().is_serving(), "still leading with follower 2");
    zab
}

#[test]
fn a_follower_gone_silent_no_longer_counts() {
    let mut zab = broadcasting_leader(3);
    let heartbeat_ms = config(1, 3).heartbeat_ms;
    let silent_since = 4; // both followers' last word, in `broadcasting_leader`
    let now_ms = silent_since + 2 * heartbeat_ms + 1;
    zab.handle(ack(2, 0), now_ms);
    assert!(
        !zab.own_copy_optional(),
        "follower 3 has not answered two heartbeats"
    );
    zab.handle(ack(3, 0), now_ms);
    assert!(zab.own_copy_optional());
}

#[test]
fn a_leader_needs_no_copy_of_its_own_while_its_followers_are_a_quorum() {
    assert!(broadcasting_leader(3).own_copy_optional());
    assert!(broadcasting_leader(5).own_copy_optional());
    assert!(
        !leader_with_one_follower_resynchronizing().own_copy_optional(),
        "one follower and the leader are the quorum"
    );
    assert!(
        !broadcasting_follower(3).own_copy_optional(),
        "only a leader decides commits"
    );
}

/// Leader 1 of three with command 1 proposed, durable nowhere yet.
fn leader_with_one_proposed() -> Zab {
    let mut zab = broadcasting_leader(3);
    let command = Bytes::from_static(b"c");
    zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: vec![command],
        },
        10,
    );
    assert_eq!(zab.last_logged_position(), 1);
    zab
}

#[test]
fn a_leader_commits_on_its_followers_copies_before_its_own_is_durable() {
    let mut zab = leader_with_one_proposed();
    zab.handle(ack(2, 1), 11);
    assert_eq!(zab.committed_position(), 0, "one copy of three");
    zab.handle(ack(3, 1), 12);
    assert_eq!(
        zab.committed_position(),
        1,
        "two followers' copies, none of the leader's"
    );
}

#[test]
fn a_commit_awaits_the_leaders_copy_when_only_one_follower_has_its_own() {
    let mut zab = leader_with_one_proposed();
    assert!(!zab.own_copy_awaited(), "no follower holds it yet");
    zab.handle(ack(2, 1), 11);
    assert!(zab.own_copy_awaited(), "the leader's copy would make two");
    zab.handle(ack(3, 1), 12);
    assert!(!zab.own_copy_awaited(), "committed without it");

    let mut zab = leader_with_one_proposed();
    zab.handle(ack(2, 1), 11);
    zab.handle(
        Input::Logged {
            position: 1,
            epoch: 1,
        },
        12,
    );
    assert_eq!(zab.committed_position(), 1);
    assert!(!zab.own_copy_awaited(), "its copy is durable and counted");
    assert!(
        !broadcasting_follower(3).own_copy_awaited(),
        "only a leader's copy can be awaited"
    );
}

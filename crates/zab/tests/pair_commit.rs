//! Where two voters are a quorum (three voters), a follower commits what two of them hold
//! durably as soon as it knows their durable positions (its own, the leader's from its
//! proposals, the other follower's from the acknowledgements the followers send each other),
//! without waiting for the leader's commit announcement; with more voters it must wait.

mod common;

use common::{
    broadcasting_follower, broadcasting_leader_with, config, entry, link, message, propose, sent_to,
};
use zoolog_zab::{Action, Input, Lane, Message, Zab};

/// Entry 4 from the leader, which has made its log durable through 4 but committed only 2
/// (it has not heard this follower's acknowledgements yet).
fn propose_four_durable_on_the_leader(zab: &mut Zab) -> Vec<Action> {
    zab.handle(message(3, propose(vec![entry(4, 1)], 2, 4)), 10)
}

fn logged_four(zab: &mut Zab) -> Vec<Action> {
    zab.handle(
        Input::Logged {
            position: 4,
            epoch: 1,
        },
        11,
    )
}

fn delivered(actions: &[Action]) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Deliver { entries } => Some(entries.iter().map(|(position, _)| *position)),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn a_follower_of_three_commits_what_it_and_the_leader_hold_durably() {
    let mut zab = broadcasting_follower(3);
    let actions = propose_four_durable_on_the_leader(&mut zab);
    assert_eq!(
        delivered(&actions),
        vec![3],
        "3 is durable here and on the leader"
    );
    let actions = logged_four(&mut zab);
    assert_eq!(delivered(&actions), vec![4], "4 is now durable here too");
    assert_eq!(zab.committed_position(), 4);
}

#[test]
fn a_follower_of_five_waits_for_the_leaders_commit() {
    let mut zab = broadcasting_follower(5);
    propose_four_durable_on_the_leader(&mut zab);
    logged_four(&mut zab);
    assert_eq!(
        zab.delivered_position(),
        2,
        "two copies are no quorum of five"
    );
    let actions = zab.handle(message(3, propose(Vec::new(), 4, 4)), 12);
    assert_eq!(delivered(&actions), vec![3, 4]);
}

/// Server 2's acknowledgement that its log is durable through `position` in `epoch`.
fn other_follower_ack(epoch: u64, position: u64) -> zoolog_zab::Input {
    let mut other_link = link(epoch);
    other_link.attempt.round = 7;
    message(
        2,
        Message::Ack {
            link: other_link,
            position,
        },
    )
}

/// How far server 1 of `participants` has delivered once entry 4, which the leader holds
/// durably only through 3, is durable here and server 2 says it is durable there in `epoch`.
fn delivered_after_the_other_follower_acknowledges(participants: u64, epoch: u64) -> u64 {
    let mut zab = broadcasting_follower(participants);
    zab.handle(message(3, propose(vec![entry(4, 1)], 2, 3)), 10);
    logged_four(&mut zab);
    zab.handle(other_follower_ack(epoch, 4), 12);
    zab.delivered_position()
}

#[test]
fn a_follower_of_three_commits_what_it_and_the_other_follower_hold_durably() {
    assert_eq!(delivered_after_the_other_follower_acknowledges(3, 1), 4);
}

#[test]
fn a_follower_of_three_commits_what_the_leader_and_the_other_follower_hold_durably() {
    let mut zab = broadcasting_follower(3);
    zab.handle(message(3, propose(vec![entry(4, 1)], 2, 4)), 10);
    assert_eq!(
        zab.delivered_position(),
        3,
        "4 is durable on the leader, not here"
    );
    let actions = zab.handle(other_follower_ack(1, 4), 12);
    assert_eq!(
        delivered(&actions),
        vec![4],
        "the leader and server 2 hold 4 durably: committed, and held here"
    );
}

#[test]
fn another_epochs_acknowledgement_or_one_among_five_commits_nothing() {
    assert_eq!(
        delivered_after_the_other_follower_acknowledges(3, 2),
        3,
        "server 2 durable in another epoch holds another leader's history"
    );
    assert_eq!(
        delivered_after_the_other_follower_acknowledges(5, 1),
        2,
        "two copies are no quorum of five"
    );
}

#[test]
fn a_follower_of_three_acknowledges_to_the_other_follower_too_and_one_of_five_does_not() {
    for (participants, other_followers) in [(3, vec![2]), (5, Vec::new())] {
        let mut zab = broadcasting_follower(participants);
        let actions = zab.handle(message(3, propose(vec![entry(4, 1)], 2, 3)), 10);
        assert!(
            sent_to(&actions, 3).is_empty(),
            "acknowledged only once durable"
        );
        let actions = logged_four(&mut zab);
        let acks_to = |to: u64| {
            sent_to(&actions, to)
                .iter()
                .filter(|message| matches!(message, Message::Ack { position: 4, .. }))
                .count()
        };
        assert_eq!(acks_to(3), 1, "the leader hears it");
        for follower in (2..=participants).filter(|id| *id != 3) {
            let expected = usize::from(other_followers.contains(&follower));
            assert_eq!(
                acks_to(follower),
                expected,
                "follower {follower} of {participants}"
            );
        }
    }
}

/// The commit positions a leader's messages to `to` carry.
fn commits_sent_to(actions: &[Action], to: u64) -> Vec<u64> {
    sent_to(actions, to)
        .iter()
        .filter_map(|message| match message {
            Message::Propose { commit, .. } => Some(*commit),
            _ => None,
        })
        .collect()
}

/// Server 1 leads `participants` voters: it proposes entry 1, makes it durable, and hears
/// the acknowledgements of `ackers`. Returns what that last acknowledgement made it do.
/// Its heartbeats are far apart, so that what it sends on the next few ticks is only what
/// they owe.
fn leader_commits_one(participants: u64, ackers: &[u64]) -> (Zab, Vec<Action>) {
    let mut leader_config = config(1, participants);
    leader_config.heartbeat_ms = 100;
    let mut zab = broadcasting_leader_with(leader_config);
    let payloads = vec![bytes::Bytes::from_static(b"command")];
    zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads,
        },
        10,
    );
    zab.handle(
        Input::Logged {
            position: 1,
            epoch: 1,
        },
        11,
    );
    let mut last = Vec::new();
    for &from in ackers {
        last = zab.handle(message(from, ack_of_one()), 12);
    }
    (zab, last)
}

#[test]
fn a_leader_of_three_announces_no_commit_its_followers_can_work_out() {
    let (zab, actions) = leader_commits_one(3, &[2]);
    assert_eq!(zab.committed_position(), 1);
    // Server 2 holds entry 1 durably and was told that the leader does: it commits by itself.
    assert_eq!(
        commits_sent_to(&actions, 2),
        Vec::<u64>::new(),
        "{actions:?}"
    );
    // Server 3 was told that the leader holds entry 1 durably and hears server 2 say so too.
    assert_eq!(
        commits_sent_to(&actions, 3),
        Vec::<u64>::new(),
        "{actions:?}"
    );
}

#[test]
fn a_commit_the_followers_copies_make_alone_is_announced_to_neither() {
    // The leader's own copy is not durable yet (it may delay its fdatasync): the two
    // followers' acknowledgements commit entry 1, and each hears the other's.
    let mut zab = broadcasting_leader_with(config(1, 3));
    let payloads = vec![bytes::Bytes::from_static(b"command")];
    zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads,
        },
        10,
    );
    zab.handle(message(2, ack_of_one()), 11);
    let actions = zab.handle(message(3, ack_of_one()), 11);
    assert_eq!(zab.committed_position(), 1);
    for follower in [2, 3] {
        assert_eq!(
            commits_sent_to(&actions, follower),
            Vec::<u64>::new(),
            "{actions:?}"
        );
    }
}

fn ack_of_one() -> Message {
    Message::Ack {
        link: link(1),
        position: 1,
    }
}

/// The commit positions `leader` announces on a tick at `now_ms`.
fn commits_announced_on_tick(leader: &mut Zab, now_ms: u64, to: u64) -> Vec<u64> {
    let actions = leader.handle(Input::Tick, now_ms);
    commits_sent_to(&actions, to)
}

#[test]
fn a_commit_left_to_the_other_followers_word_is_announced_once_a_tick_has_passed() {
    let (mut zab, _) = leader_commits_one(3, &[2]);
    // Reached since the last tick: server 2's acknowledgement may still be on its way to 3.
    assert_eq!(
        commits_announced_on_tick(&mut zab, 13, 3),
        Vec::<u64>::new()
    );
    // A tick later it may have been lost: server 3 is told; server 2, which worked it out
    // from what it holds itself, is not.
    let actions = zab.handle(Input::Tick, 14);
    assert_eq!(commits_sent_to(&actions, 3), vec![1], "{actions:?}");
    assert_eq!(
        commits_sent_to(&actions, 2),
        Vec::<u64>::new(),
        "{actions:?}"
    );
    assert_eq!(
        commits_announced_on_tick(&mut zab, 15, 3),
        Vec::<u64>::new(),
        "told once"
    );
}

#[test]
fn a_proposal_that_carries_the_commit_leaves_nothing_owed() {
    let (mut zab, _) = leader_commits_one(3, &[2]);
    let payloads = vec![bytes::Bytes::from_static(b"next")];
    let actions = zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads,
        },
        13,
    );
    assert_eq!(
        commits_sent_to(&actions, 3),
        vec![1],
        "the proposal of entry 2"
    );
    zab.handle(Input::Tick, 14);
    assert_eq!(
        commits_announced_on_tick(&mut zab, 15, 3),
        Vec::<u64>::new()
    );
}

#[test]
fn a_leader_of_five_announces_each_commit_to_every_follower() {
    let (zab, actions) = leader_commits_one(5, &[2, 3]);
    assert_eq!(zab.committed_position(), 1);
    for follower in 2..=5 {
        assert_eq!(commits_sent_to(&actions, follower), vec![1], "{actions:?}");
    }
}

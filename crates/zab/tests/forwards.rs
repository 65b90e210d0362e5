//! A leader whose proposals in flight leave no room holds a learner's forwarded commands and
//! proposes them, in the learner's order, as commits make room: the learner's clients do not
//! wait for its stall resend (two heartbeats) under load. Its own clients' commands wait
//! with them and take turns, so neither side's clients starve the other's.

mod common;

use bytes::Bytes;
use common::{broadcasting_leader_with, config, link, message, sent_to};
use zoolog_zab::{Action, Input, Message, Zab};

/// Server 1 leads three voters and keeps at most two proposals uncommitted.
fn leader_with_room_for_two() -> Zab {
    let mut config = config(1, 3);
    config.proposals_in_flight_max = 2;
    broadcasting_leader_with(config)
}

fn forward(from_sequence: u64, commands: std::ops::RangeInclusive<u8>) -> Input {
    message(
        2,
        Message::Forward {
            link: link(1),
            first_sequence: from_sequence,
            payloads: commands.map(|command| Bytes::from(vec![command])).collect(),
        },
    )
}

/// The commands the leader appended to its log, in order.
fn proposed(actions: &[Action]) -> Vec<u8> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Append { entries } => Some(entries.iter().map(|entry| entry.payload[0])),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The leader makes its log durable through `position` and follower 2 acknowledges it: a
/// quorum of three, so `position` commits.
fn commit_through(zab: &mut Zab, position: u64, now_ms: u64) -> Vec<Action> {
    let mut actions = zab.handle(Input::Logged { position, epoch: 1 }, now_ms);
    let ack = Message::Ack {
        link: link(1),
        position,
    };
    actions.extend(zab.handle(message(2, ack), now_ms));
    actions
}

#[test]
fn forwards_beyond_the_room_in_flight_are_proposed_as_commits_make_room() {
    let mut zab = leader_with_room_for_two();
    assert_eq!(proposed(&zab.handle(forward(1, 1..=5), 10)), vec![1, 2]);
    assert_eq!(proposed(&commit_through(&mut zab, 2, 11)), vec![3, 4]);
    let actions = commit_through(&mut zab, 4, 12);
    assert_eq!(proposed(&actions), vec![5]);
    let taken: Vec<u64> = sent_to(&actions, 2)
        .iter()
        .filter_map(|message| match message {
            Message::Propose { forwards_taken, .. } => Some(*forwards_taken),
            _ => None,
        })
        .collect();
    assert_eq!(
        taken.last(),
        Some(&5),
        "the learner learns all five are taken"
    );
    assert_eq!(zab.committed_position(), 4);
}

#[test]
fn a_resent_forward_is_proposed_once() {
    let mut zab = leader_with_room_for_two();
    zab.handle(forward(1, 1..=3), 10);
    // The learner's stall resend: commands 1 to 3 again, then 4 and 5 after them.
    assert_eq!(
        proposed(&zab.handle(forward(1, 1..=5), 11)),
        Vec::<u8>::new()
    );
    assert_eq!(proposed(&commit_through(&mut zab, 2, 12)), vec![3, 4]);
    assert_eq!(proposed(&commit_through(&mut zab, 4, 13)), vec![5]);
}

#[test]
fn forwards_after_a_gap_wait_for_the_learner_to_fill_it() {
    let mut zab = leader_with_room_for_two();
    zab.handle(forward(1, 1..=1), 10);
    assert_eq!(
        proposed(&zab.handle(forward(3, 3..=4), 11)),
        Vec::<u8>::new()
    );
    assert_eq!(proposed(&zab.handle(forward(2, 2..=4), 12)), vec![2]);
    assert_eq!(proposed(&commit_through(&mut zab, 2, 13)), vec![3, 4]);
}

#[test]
fn the_leaders_own_commands_take_turns_with_a_learners() {
    let mut zab = leader_with_room_for_two();
    assert_eq!(proposed(&zab.handle(forward(1, 1..=4), 10)), vec![1, 2]);
    let own = (10..=12)
        .map(|command| Bytes::from(vec![command]))
        .collect();
    let actions = zab.handle(Input::Append { payloads: own }, 11);
    assert_eq!(proposed(&actions), Vec::<u8>::new(), "no room: it waits");
    assert_eq!(proposed(&commit_through(&mut zab, 2, 12)), vec![10, 3]);
    assert_eq!(proposed(&commit_through(&mut zab, 4, 13)), vec![11, 4]);
    assert_eq!(proposed(&commit_through(&mut zab, 6, 14)), vec![12]);
}

//! What is in flight is bounded in payload bytes as well as in entries: the leader proposes
//! no more than `in_flight_bytes_max` beyond what is both committed and durable on itself,
//! and sends a learner no more than that beyond its acknowledgements. Every such entry waits
//! in some server's log writer, whose queue must never fill; with large values a bound in
//! entries alone lets it.

mod common;

use bytes::Bytes;
use common::{ack, broadcasting_leader_with, config, link, message, proposed, sent_to};
use zoolog_zab::{Action, Input, Lane, Message, Zab};

/// Server 1 leads three voters with ten bytes of room in flight (and as many for commands
/// waiting for that room, from its own clients and from each learner).
fn leader_with_ten_bytes_of_room() -> Zab {
    let mut config = config(1, 3);
    config.in_flight_bytes_max = 10;
    broadcasting_leader_with(config)
}

/// The leader's own clients' commands, `command` repeated `bytes` times each.
fn append(commands: &[(u8, usize)]) -> Input {
    let payloads = commands
        .iter()
        .map(|(command, bytes)| Bytes::from(vec![*command; *bytes]))
        .collect();
    Input::Append {
        lane: Lane::Commands,
        payloads,
    }
}

/// Four-byte commands `commands`.
fn append_small(commands: std::ops::RangeInclusive<u8>) -> Input {
    let commands: Vec<(u8, usize)> = commands.map(|command| (command, 4)).collect();
    append(&commands)
}

/// The commands `actions` send learner `to`, in order.
fn sent_commands(actions: &[Action], to: u64) -> Vec<u8> {
    sent_to(actions, to)
        .into_iter()
        .filter_map(|message| match message {
            Message::Propose { entries, .. } => Some(entries),
            _ => None,
        })
        .flatten()
        .map(|entry| entry.payload[0])
        .collect()
}

fn logged(position: u64) -> Input {
    Input::Logged { position, epoch: 1 }
}

#[test]
fn the_leader_proposes_no_more_bytes_than_its_room_until_commits_free_it() {
    let mut zab = leader_with_ten_bytes_of_room();
    assert_eq!(proposed(&zab.handle(append_small(1..=2), 10)), vec![1, 2]);
    // A third four-byte command would make twelve.
    assert_eq!(
        proposed(&zab.handle(append_small(3..=5), 10)),
        Vec::<u8>::new()
    );
    zab.handle(logged(2), 11);
    assert_eq!(proposed(&zab.handle(ack(2, 2), 11)), vec![3, 4]);
    zab.handle(logged(4), 12);
    assert_eq!(proposed(&zab.handle(ack(2, 4), 12)), vec![5]);
}

#[test]
fn entries_committed_without_the_leaders_own_log_stay_in_flight_until_it_is_durable() {
    let mut zab = leader_with_ten_bytes_of_room();
    assert_eq!(proposed(&zab.handle(append_small(1..=3), 10)), vec![1, 2]);
    zab.handle(ack(2, 2), 11);
    let actions = zab.handle(ack(3, 2), 11);
    assert_eq!(zab.committed_position(), 2, "both followers make a quorum");
    assert_eq!(
        proposed(&actions),
        Vec::<u8>::new(),
        "its own writer holds them"
    );
    assert_eq!(proposed(&zab.handle(logged(2), 12)), vec![3]);
}

#[test]
fn a_command_larger_than_the_room_goes_alone_and_is_not_passed_by_smaller_ones() {
    let mut zab = leader_with_ten_bytes_of_room();
    let actions = zab.handle(append(&[(1, 4), (2, 30)]), 10);
    assert_eq!(proposed(&actions), vec![1]);
    let forward = Message::Forward {
        link: link(1),
        lane: Lane::Commands,
        first_sequence: 1,
        payloads: vec![Bytes::from(vec![3u8; 4])],
    };
    let actions = zab.handle(message(2, forward), 10);
    assert_eq!(
        proposed(&actions),
        Vec::<u8>::new(),
        "a learner's waits too"
    );
    zab.handle(logged(1), 11);
    assert_eq!(proposed(&zab.handle(ack(2, 1), 11)), vec![2]);
    zab.handle(logged(2), 12);
    assert_eq!(proposed(&zab.handle(ack(2, 2), 12)), vec![3]);
}

#[test]
fn a_learner_is_sent_no_more_bytes_than_the_room_ahead_of_its_acknowledgements() {
    let mut zab = leader_with_ten_bytes_of_room();
    let actions = zab.handle(append_small(1..=2), 10);
    assert_eq!(sent_commands(&actions, 3), vec![1, 2]);
    zab.handle(append_small(3..=4), 10);
    // Follower 2 keeps up; follower 3 has acknowledged nothing yet.
    zab.handle(logged(2), 11);
    let actions = zab.handle(ack(2, 2), 11);
    assert_eq!(proposed(&actions), vec![3, 4]);
    assert_eq!(sent_commands(&actions, 2), vec![3, 4]);
    assert_eq!(sent_commands(&actions, 3), Vec::<u8>::new());
    let actions = zab.handle(ack(3, 1), 12);
    assert_eq!(
        sent_commands(&actions, 3),
        vec![3],
        "four bytes freed make room for one"
    );
    assert_eq!(sent_commands(&zab.handle(ack(3, 3), 13), 3), vec![4]);
}

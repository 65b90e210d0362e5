//! A leader whose proposals in flight leave no room holds a learner's forwarded commands and
//! proposes them, in the learner's order, as commits make room: the learner's clients do not
//! wait for its stall resend (two heartbeats) under load. Its own clients' commands wait
//! with them and take turns, which go on where they stopped, so that no queue starves the
//! others even when room comes one entry at a time. A learner resends only the forwards the
//! leader says it has not received, not those it holds, waits longer after each resend the
//! leader does not receive, and takes new commands only within its room in bytes as well as
//! in number. Urgent commands, numbered apart, go ahead of every client command waiting.

mod common;

use bytes::Bytes;
use common::{
    broadcasting_follower, broadcasting_follower_with, broadcasting_leader_with, config, link,
    message, proposed, sent_to,
};
use zoolog_zab::{Action, ForwardsHeard, Input, Lane, Message, PerLane, Zab};

/// Server 1 leads three voters and keeps at most two proposals uncommitted.
fn leader_with_room_for_two() -> Zab {
    let mut config = config(1, 3);
    config.proposals_in_flight_max = 2;
    broadcasting_leader_with(config)
}

fn forward(from_sequence: u64, commands: std::ops::RangeInclusive<u8>) -> Input {
    forward_from(2, from_sequence, commands)
}

fn forward_from(learner: u64, from_sequence: u64, commands: std::ops::RangeInclusive<u8>) -> Input {
    forward_in(Lane::Commands, learner, from_sequence, commands)
}

fn forward_in(
    lane: Lane,
    learner: u64,
    from_sequence: u64,
    commands: std::ops::RangeInclusive<u8>,
) -> Input {
    message(
        learner,
        Message::Forward {
            link: link(1),
            lane,
            first_sequence: from_sequence,
            payloads: commands.map(|command| Bytes::from(vec![command])).collect(),
        },
    )
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
            Message::Propose { forwards, .. } => Some(forwards.commands.taken),
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
    let actions = zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: own,
        },
        11,
    );
    assert_eq!(proposed(&actions), Vec::<u8>::new(), "no room: it waits");
    // The learner's command 3 found no room first, so it goes first.
    assert_eq!(proposed(&commit_through(&mut zab, 2, 12)), vec![3, 10]);
    assert_eq!(proposed(&commit_through(&mut zab, 4, 13)), vec![4, 11]);
    assert_eq!(proposed(&commit_through(&mut zab, 6, 14)), vec![12]);
}

#[test]
fn when_room_comes_one_entry_at_a_time_every_queue_takes_its_turn() {
    let mut config = config(1, 3);
    config.proposals_in_flight_max = 1;
    let mut zab = broadcasting_leader_with(config);
    assert_eq!(proposed(&zab.handle(forward(1, 1..=4), 10)), vec![1]);
    let own = (10..=12)
        .map(|command| Bytes::from(vec![command]))
        .collect();
    zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: own,
        },
        11,
    );
    assert_eq!(
        proposed(&zab.handle(forward_from(3, 1, 20..=20), 11)),
        vec![]
    );
    let mut order = Vec::new();
    for position in 1..=7 {
        order.extend(proposed(&commit_through(&mut zab, position, 12 + position)));
    }
    // Taking the queues in a fixed order each time room was made, learner 3's one command
    // waited until the leader's own and learner 2's had all gone.
    assert_eq!(order, vec![2, 20, 10, 3, 11, 4, 12]);
}

/// What the leader says of the forwards it has: `received` on its way to being proposed,
/// of which `taken` are proposed.
fn heard(taken: u64, received: u64) -> Input {
    message(
        3,
        Message::Propose {
            link: link(1),
            entries: Vec::new(),
            commit: 2,
            leader_durable: 3,
            forwards: PerLane {
                commands: ForwardsHeard { taken, received },
                urgent: ForwardsHeard::default(),
            },
        },
    )
}

/// The sequence numbers of the forwards `actions` send the leader (server 3).
fn forwarded(actions: &[Action]) -> Vec<u64> {
    sent_to(actions, 3)
        .iter()
        .filter_map(|message| match message {
            Message::Forward {
                first_sequence,
                payloads,
                ..
            } => Some(*first_sequence..*first_sequence + payloads.len() as u64),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Follower 1 forwards commands 1 to 4 at 10 ms, then hears `leader_says` at 11 ms; the
/// forwards it sends after the leader has taken nothing more for two heartbeats (4 ms).
fn resent_after_a_stall(leader_says: Input) -> Vec<u64> {
    let mut zab = broadcasting_follower(3);
    let commands = (1..=4).map(|command| Bytes::from(vec![command])).collect();
    let actions = zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: commands,
        },
        10,
    );
    assert_eq!(forwarded(&actions), vec![1, 2, 3, 4]);
    zab.handle(leader_says, 11);
    (12..=16)
        .flat_map(|now_ms| forwarded(&zab.handle(Input::Tick, now_ms)))
        .collect()
}

#[test]
fn a_learner_resends_only_the_forwards_the_leader_has_not_received() {
    assert_eq!(
        resent_after_a_stall(heard(1, 1)),
        vec![2, 3, 4],
        "lost on the way: sent again"
    );
    assert_eq!(
        resent_after_a_stall(heard(1, 3)),
        vec![4],
        "held by the leader: not sent again"
    );
    assert_eq!(resent_after_a_stall(heard(1, 4)), Vec::<u64>::new());
}

#[test]
fn a_learner_waits_twice_as_long_after_each_resend_the_leader_does_not_receive() {
    let mut zab = broadcasting_follower(3);
    let commands = (1..=4).map(|command| Bytes::from(vec![command])).collect();
    zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: commands,
        },
        10,
    );
    let mut resent_ms = Vec::new();
    // The leader stays in touch (a heartbeat every millisecond) and never receives them.
    for now_ms in 11..=160 {
        if !forwarded(&zab.handle(Input::Tick, now_ms)).is_empty() {
            resent_ms.push(now_ms);
        }
        zab.handle(heard(0, 0), now_ms);
    }
    // Two heartbeats (4 ms) after the forwards, then 8, 16, 32, and at most 64 ms apart.
    assert_eq!(resent_ms, vec![14, 22, 38, 70, 134]);
    zab.handle(heard(0, 1), 161);
    let after_progress: Vec<u64> = (162..=170)
        .filter(|&now_ms| !forwarded(&zab.handle(Input::Tick, now_ms)).is_empty())
        .collect();
    assert_eq!(
        after_progress,
        vec![165],
        "two heartbeats again once the leader receives more"
    );
}

#[test]
fn a_learner_takes_commands_within_its_byte_room_until_the_leader_takes_them() {
    let mut config = config(1, 3);
    config.in_flight_bytes_max = 10;
    let mut zab = broadcasting_follower_with(config);
    let mut commands = (1..=5).map(|command| Bytes::from(vec![command; 4]));
    let taken = zab.append_capacity(Lane::Commands).fill(|| commands.next());
    assert_eq!(taken.len(), 3, "four bytes each: the third goes past ten");
    zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: taken,
        },
        10,
    );
    assert!(zab.append_capacity(Lane::Commands).is_none());
    zab.handle(heard(2, 3), 11);
    assert_eq!(
        zab.append_capacity(Lane::Commands).bytes,
        6,
        "the one not taken still counts"
    );
}

#[test]
fn an_urgent_forward_goes_ahead_of_the_client_commands_waiting() {
    let mut zab = leader_with_room_for_two();
    assert_eq!(proposed(&zab.handle(forward(1, 1..=5), 10)), vec![1, 2]);
    let own = vec![Bytes::from(vec![10])];
    zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: own,
        },
        10,
    );
    // Numbered from 1 in its own lane, though the learner's commands are at 5.
    let urgent = forward_in(Lane::Urgent, 2, 1, 50..=50);
    assert_eq!(
        proposed(&zab.handle(urgent, 11)),
        Vec::<u8>::new(),
        "no room yet"
    );
    let actions = commit_through(&mut zab, 2, 12);
    assert_eq!(proposed(&actions), vec![50, 3]);
    let heard: Vec<PerLane<ForwardsHeard>> = sent_to(&actions, 2)
        .iter()
        .filter_map(|message| match message {
            Message::Propose { forwards, .. } => Some(*forwards),
            _ => None,
        })
        .collect();
    let last = heard.last().expect("a proposal went to learner 2");
    assert_eq!((last.urgent.taken, last.commands.taken), (1, 3));
    // A resend of the urgent command is not proposed again.
    let again = forward_in(Lane::Urgent, 2, 1, 50..=50);
    assert_eq!(proposed(&zab.handle(again, 13)), Vec::<u8>::new());
    assert_eq!(proposed(&commit_through(&mut zab, 4, 14)), vec![10, 4]);
}

#[test]
fn a_follower_forwards_urgent_commands_in_their_own_lane_when_the_client_lane_is_full() {
    let mut config = config(1, 3);
    config.forwards_in_flight_max = 2;
    let mut zab = broadcasting_follower_with(config);
    let commands = (1..=2).map(|command| Bytes::from(vec![command])).collect();
    zab.handle(
        Input::Append {
            lane: Lane::Commands,
            payloads: commands,
        },
        10,
    );
    assert!(zab.append_capacity(Lane::Commands).is_none());
    assert!(!zab.append_capacity(Lane::Urgent).is_none());
    let urgent = vec![Bytes::from(vec![50])];
    let actions = zab.handle(
        Input::Append {
            lane: Lane::Urgent,
            payloads: urgent,
        },
        11,
    );
    let forwards: Vec<(Lane, u64)> = sent_to(&actions, 3)
        .iter()
        .filter_map(|message| match message {
            Message::Forward {
                lane,
                first_sequence,
                ..
            } => Some((*lane, *first_sequence)),
            _ => None,
        })
        .collect();
    assert_eq!(forwards, vec![(Lane::Urgent, 1)]);
}

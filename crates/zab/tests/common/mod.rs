//! The setup the zab tests share: servers of a small ensemble of participants, driven by
//! hand through election and synchronization.
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::BTreeMap;

use zoolog_zab::{Action, Config, Input, MemberRole, Message, PeerState, Recovered, Vote, Zab};

pub fn config(me: u64, participants: u64) -> Config {
    let members: BTreeMap<u64, MemberRole> = (1..=participants)
        .map(|id| (id, MemberRole::Participant))
        .collect();
    Config::new(me, members, 10)
}

pub fn vote(from: u64, round: u64, leader: u64) -> Input {
    Input::Message {
        from,
        message: Message::Vote {
            round,
            vote: Vote {
                epoch: 0,
                position: 0,
                leader,
            },
            state: PeerState::Looking,
            observer: false,
        },
    }
}

pub fn sent_to(actions: &[Action], to: u64) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Send { to: t, message } if *t == to => Some(message.clone()),
            _ => None,
        })
        .collect()
}

pub fn entry(position: u64, epoch: u64) -> zoolog_zab::Entry {
    zoolog_zab::Entry {
        position,
        epoch,
        payload: bytes::Bytes::from(vec![position as u8]),
    }
}

/// The link between leader 3 and server 1's first attempt (a fresh process, election round 1).
pub fn link(epoch: u64) -> zoolog_zab::Link {
    zoolog_zab::Link {
        epoch,
        attempt: zoolog_zab::Attempt {
            incarnation: 0,
            round: 1,
        },
    }
}

pub fn message(from: u64, message: Message) -> Input {
    Input::Message { from, message }
}

/// Follower `from`'s word, on its first attempt in epoch 1, that its log is durable through
/// `position`.
pub fn ack(from: u64, position: u64) -> Input {
    message(
        from,
        Message::Ack {
            link: link(1),
            position,
        },
    )
}

/// Leader 3's `Propose` in epoch 1 (to server 1's first attempt), taking no forwards.
pub fn propose(entries: Vec<zoolog_zab::Entry>, commit: u64, leader_durable: u64) -> Message {
    Message::Propose {
        link: link(1),
        entries,
        commit,
        leader_durable,
        forwards: zoolog_zab::PerLane::default(),
    }
}

/// Server 1 of `participants` (3 or 5), following server 3 in epoch 1, synchronized with
/// entries 1..=2 (committed and delivered) and 3 (logged and acknowledged).
pub fn broadcasting_follower(participants: u64) -> Zab {
    broadcasting_follower_with(config(1, participants))
}

/// As [`broadcasting_follower`], with server 1's `config`, whose members must all be
/// participants.
pub fn broadcasting_follower_with(config: Config) -> Zab {
    let participants = config.members.len() as u64;
    let (mut zab, _) = Zab::new(config, Recovered::default(), 0);
    for from in 2..=participants {
        zab.handle(vote(from, 1, 3), 1);
    }
    zab.handle(message(3, Message::NewEpoch { link: link(1) }), 2);
    let new_leader = Message::NewLeader {
        link: link(1),
        truncate_after: 0,
        snapshot: None,
        entries: vec![entry(1, 1), entry(2, 1)],
        commit: 0,
        history_end: 2,
    };
    zab.handle(message(3, new_leader), 3);
    zab.handle(
        Input::Logged {
            position: 2,
            epoch: 1,
        },
        4,
    );
    assert!(
        !zab.status().is_serving(),
        "synchronized, but the history it was synchronized to is not delivered yet"
    );
    zab.handle(message(3, propose(vec![entry(3, 1)], 2, 2)), 5);
    assert!(zab.status().is_serving());
    zab.handle(
        Input::Logged {
            position: 3,
            epoch: 1,
        },
        6,
    );
    assert_eq!(zab.delivered_position(), 2);
    assert_eq!(zab.last_logged_position(), 3);
    zab
}

/// [`broadcasting_follower`] of 3 that lost its leader and then heard that server 3 still
/// leads epoch 1: it introduces itself again, on its attempt of election round 2.
pub fn follower_rejoining_its_leader() -> Zab {
    let mut zab = broadcasting_follower(3);
    zab.handle(Input::PeerDisconnected { peer: 3 }, 7);
    assert!(!zab.status().is_serving());
    let leading = Message::Vote {
        round: 2,
        vote: Vote {
            epoch: 0,
            position: 0,
            leader: 3,
        },
        state: PeerState::Leading { epoch: 1 },
        observer: false,
    };
    zab.handle(message(3, leading), 8);
    zab
}

/// Server 1 of `participants`, leading epoch 1 with every other participant synchronized
/// (each on its first attempt, `link(1)`), on an empty history.
pub fn broadcasting_leader(participants: u64) -> Zab {
    broadcasting_leader_with(config(1, participants))
}

/// As [`broadcasting_leader`], with server 1's `config`, whose members must all be participants.
pub fn broadcasting_leader_with(config: Config) -> Zab {
    let participants = config.members.len() as u64;
    let (mut zab, _) = Zab::new(config, Recovered::default(), 0);
    let followers = 2..=participants;
    for from in followers.clone() {
        zab.handle(vote(from, 1, 1), 1);
    }
    for from in followers.clone() {
        let info = follower_info(0, link(1).attempt);
        zab.handle(message(from, info), 2);
    }
    for from in followers.clone() {
        let promise = Message::AckEpoch {
            link: link(1),
            counted: true,
            current_epoch: 0,
            snapshot_position: 0,
            runs: Vec::new(),
            last_position: 0,
        };
        zab.handle(message(from, promise), 3);
    }
    for from in followers {
        let synced = Message::AckNewLeader {
            link: link(1),
            last_position: 0,
        };
        zab.handle(message(from, synced), 4);
    }
    assert!(zab.status().is_serving(), "leader established");
    zab
}

/// The commands the leader appended to its log, in order.
pub fn proposed(actions: &[Action]) -> Vec<u8> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Append { entries } => Some(entries.iter().map(|entry| entry.payload[0])),
            _ => None,
        })
        .flatten()
        .collect()
}

/// A participant's `FollowerInfo` in `attempt`, having promised `accepted_epoch`.
pub fn follower_info(accepted_epoch: u64, attempt: zoolog_zab::Attempt) -> Message {
    Message::FollowerInfo {
        accepted_epoch,
        observer: false,
        attempt,
    }
}

/// Server 2's `FollowerInfo` to server 1 (its first attempt): a leader answers it with
/// `NewEpoch`, at once if it already leads.
pub fn introduction_from_two() -> Input {
    message(2, follower_info(0, link(1).attempt))
}

pub fn asked_for_a_new_epoch(messages: &[Message]) -> bool {
    messages
        .iter()
        .any(|message| matches!(message, Message::NewEpoch { .. }))
}

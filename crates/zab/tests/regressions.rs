//! Regression tests for bugs the simulator (`zoolog-sim`) found; each names its seed.

mod common;

use common::{
    broadcasting_follower, broadcasting_leader, config, entry, follower_info,
    follower_rejoining_its_leader, link, message, sent_to, vote,
};
use zoolog_zab::{Action, Input, Lane, Message, PeerState, Recovered, Vote, Zab};

/// Seed 29: a server that had decided to follow (not yet established) answered a looking
/// server's vote with a vote in its own, older round; the looking server answered that as a
/// vote from behind, and so on forever, and duplicated messages multiplied the chains into
/// a storm of millions of messages.
#[test]
fn an_unestablished_learner_answers_votes_in_the_senders_round() {
    let (mut zab, _) = Zab::new(config(1, 3), Recovered::default(), 0);
    zab.handle(vote(2, 1, 3), 1);
    zab.handle(vote(3, 1, 3), 1);
    let actions = zab.handle(vote(2, 7, 2), 2);
    let answers = sent_to(&actions, 2);
    assert!(!answers.is_empty(), "a looking peer gets an answer");
    for answer in answers {
        match answer {
            Message::Vote { round, .. } => assert_eq!(round, 7),
            other => panic!("unexpected answer {other:?}"),
        }
    }
}

/// Seed 8: a late copy of the leader's `NewLeader` reached a follower that was already
/// broadcasting; its snapshot was older than what the follower had delivered (an assertion
/// failed), and without a snapshot it cut entries the follower had acknowledged, which may
/// already have counted towards a commit.
#[test]
fn a_late_new_leader_of_the_same_epoch_neither_truncates_nor_rewinds() {
    let mut zab = broadcasting_follower(3);
    let stale = Message::NewLeader {
        link: link(1),
        truncate_after: 0,
        snapshot: None,
        entries: vec![entry(1, 1)],
        commit: 0,
        history_end: 1,
    };
    let actions = zab.handle(message(3, stale), 7);
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Truncate { .. })),
        "{actions:?}"
    );
    assert_eq!(zab.last_logged_position(), 3);

    let stale_snapshot = Message::NewLeader {
        link: link(1),
        truncate_after: 1,
        snapshot: Some(zoolog_zab::SnapshotImage {
            position: 1,
            epoch: 1,
            payload: bytes::Bytes::new(),
        }),
        entries: vec![entry(2, 1)],
        commit: 1,
        history_end: 2,
    };
    let actions = zab.handle(message(3, stale_snapshot), 8);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::InstallSnapshot { .. } | Action::Truncate { .. })),
        "{actions:?}"
    );
    assert_eq!(zab.last_logged_position(), 3);
    assert_eq!(zab.delivered_position(), 2);
    assert!(zab.status().is_serving());
}

/// Seed 28: the leader, having trimmed its log into a snapshot, re-synchronized a lagging
/// broadcasting follower with that snapshot. The follower skipped (never delivered) the
/// entries its clients were waiting for, yet stayed Serving throughout, so its front end was
/// never told to fail their requests. It now leaves Serving for the installation.
#[test]
fn a_snapshot_installed_while_serving_leaves_serving_first() {
    let mut zab = broadcasting_follower(3);
    let resync = Message::NewLeader {
        link: link(1),
        truncate_after: 5,
        snapshot: Some(zoolog_zab::SnapshotImage {
            position: 5,
            epoch: 1,
            payload: bytes::Bytes::new(),
        }),
        entries: vec![entry(6, 1)],
        commit: 5,
        history_end: 6,
    };
    let actions = zab.handle(message(3, resync), 7);
    let looking = actions
        .iter()
        .position(|a| *a == Action::StatusChanged(zoolog_zab::Status::Looking));
    let install = actions
        .iter()
        .position(|a| matches!(a, Action::InstallSnapshot { .. }));
    assert!(
        matches!((looking, install), (Some(l), Some(i)) if l < i),
        "{actions:?}"
    );
    assert!(zab.status().is_serving());
    assert_eq!(zab.delivered_position(), 5);
}

/// Seeds 585, 643, 646, 715, 749, 922, 930 (agreement violated) and 326 (a command
/// delivered twice): `NewLeader` carried at most `message_entries_max` entries, yet the
/// learner recorded the new epoch as current once those were durable. Holding the newer
/// current epoch with only part of the established history, it out-ranked a server that held
/// committed entries it lacked; the leader it then elected cut those entries and proposed
/// others at their positions. `NewLeader` now carries the whole established history.
#[test]
fn new_leader_carries_the_whole_established_history() {
    let mut config = config(1, 3);
    config.message_entries_max = 1;
    let recovered = Recovered {
        epochs: zoolog_zab::Epochs {
            accepted: 1,
            current: 1,
        },
        entries: (1..=5).map(|p| entry(p, 1)).collect(),
        ..Recovered::default()
    };
    let (mut zab, _) = Zab::new(config, recovered, 0);
    let mine = Vote {
        epoch: 1,
        position: 5,
        leader: 1,
    };
    for from in [2, 3] {
        let message = Message::Vote {
            round: 1,
            vote: mine,
            state: PeerState::Looking,
            observer: false,
        };
        zab.handle(Input::Message { from, message }, 1);
    }
    let info = follower_info(0, link(2).attempt);
    zab.handle(message(2, info), 2);
    let promise = Message::AckEpoch {
        link: link(2),
        counted: true,
        current_epoch: 0,
        snapshot_position: 0,
        runs: Vec::new(),
        last_position: 0,
    };
    let actions = zab.handle(message(2, promise), 3);
    let synced: Vec<u64> = sent_to(&actions, 2)
        .into_iter()
        .filter_map(|m| match m {
            Message::NewLeader { entries, .. } => entries.last().map(|e| e.position),
            _ => None,
        })
        .collect();
    assert_eq!(synced, vec![5], "{actions:?}");
}

/// Seed 893: a learner looked again and rejoined the same leader in the same epoch; a
/// `NewLeader` planned for its earlier attempt arrived late, with a snapshot older than what
/// it had delivered since, and an assertion failed. Such a snapshot is now ignored.
#[test]
fn a_snapshot_older_than_what_was_delivered_is_not_installed() {
    let mut zab = follower_rejoining_its_leader();
    zab.handle(message(3, Message::NewEpoch { link: link(1) }), 9);
    let late = Message::NewLeader {
        link: link(1),
        truncate_after: 1,
        snapshot: Some(zoolog_zab::SnapshotImage {
            position: 1,
            epoch: 1,
            payload: bytes::Bytes::new(),
        }),
        entries: vec![entry(2, 1), entry(3, 1)],
        commit: 2,
        history_end: 3,
    };
    let actions = zab.handle(message(3, late), 10);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::InstallSnapshot { .. })),
        "{actions:?}"
    );
    assert_eq!(zab.delivered_position(), 2);
}

/// Seed 710: a participant and an observer, each following a leader not yet established,
/// both answer looking votes with a looking vote of their own, so each answered the other's
/// answer, forever (millions of messages). Such answers are now rate-limited per peer.
#[test]
fn an_unestablished_server_answers_a_peer_at_most_once_per_retry_interval() {
    let (mut zab, _) = Zab::new(config(1, 3), Recovered::default(), 0);
    zab.handle(vote(2, 1, 3), 1);
    zab.handle(vote(3, 1, 3), 1);
    let first = zab.handle(vote(2, 1, 2), 2);
    let second = zab.handle(vote(2, 1, 2), 3);
    assert_eq!(sent_to(&first, 2).len(), 1);
    assert!(sent_to(&second, 2).is_empty(), "{second:?}");
    let later = zab.handle(vote(2, 1, 2), 2 + 50);
    assert_eq!(sent_to(&later, 2).len(), 1);
}

/// Seeds 22, 3107, 4384, 4397, 5603, 6573, 7388: forwards were numbered per learner attempt,
/// and when a learner started over and rejoined the same leader in the same epoch the leader
/// reset its count; a delayed `Forward` of the earlier attempt was then proposed again (one
/// command delivered twice). Every leader↔learner message now names its link (epoch and the
/// learner's attempt), and the leader drops what belongs to an attempt older than the current.
#[test]
fn a_forward_from_an_earlier_learner_attempt_is_not_proposed() {
    let attempt = |round| zoolog_zab::Attempt {
        incarnation: 0,
        round,
    };
    // Servers 2 and 3 follow server 1 in epoch 1.
    let mut zab = broadcasting_leader(3);
    let link = |round| zoolog_zab::Link {
        epoch: 1,
        attempt: attempt(round),
    };
    let forward = |round| Message::Forward {
        link: link(round),
        lane: Lane::Commands,
        first_sequence: 1,
        payloads: vec![bytes::Bytes::from_static(b"command")],
    };
    let appended = |actions: &[Action]| {
        actions
            .iter()
            .any(|action| matches!(action, Action::Append { .. }))
    };
    assert!(appended(&zab.handle(message(2, forward(1)), 5)));
    // Server 2 starts over (attempt 2) and joins again; its old forward arrives late.
    let info = follower_info(1, attempt(2));
    zab.handle(message(2, info), 6);
    let promise = Message::AckEpoch {
        link: link(2),
        counted: false,
        current_epoch: 1,
        snapshot_position: 0,
        runs: vec![(1, 1)],
        last_position: 1,
    };
    zab.handle(message(2, promise), 6);
    let synced = Message::AckNewLeader {
        link: link(2),
        last_position: 1,
    };
    zab.handle(message(2, synced), 6);
    let late = zab.handle(message(2, forward(1)), 7);
    assert!(!appended(&late), "{late:?}");
    assert_eq!(zab.last_logged_position(), 1);
}

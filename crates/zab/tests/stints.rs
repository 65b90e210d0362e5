//! A server's stints of serving (`Status::Serving::stint`): the front end appends again a
//! command it handed over in an ended stint and has not seen delivered once a new stint
//! begins, so no command of an ended stint may be delivered after that.

mod common;

use common::{
    ack, broadcasting_follower, broadcasting_leader_with, config, entry, follower_info,
    follower_rejoining_its_leader, link, message, sent_to,
};
use zoolog_zab::{Action, Attempt, Input, Lane, Link, Message, Status};

fn stint(status: Status) -> Option<u64> {
    match status {
        Status::Serving { stint, .. } => Some(stint),
        Status::Looking => None,
    }
}

/// A learner's link in epoch 1 on its attempt of election round `round`.
fn link_of_round(round: u64) -> Link {
    Link {
        epoch: 1,
        attempt: Attempt {
            incarnation: 0,
            round,
        },
    }
}

fn logged(position: u64) -> Input {
    Input::Logged { position, epoch: 1 }
}

/// A follower that lost its leader and rejoined it in the same epoch begins a new stint only
/// once it has delivered through the leader's last position when it synchronized it, even
/// when the synchronization's entries stop short of it: a command the leader took from the
/// follower's earlier attempt may sit just there.
#[test]
fn a_follower_rejoining_its_epoch_serves_again_only_through_the_leaders_history_end() {
    assert_eq!(stint(broadcasting_follower(3).status()), Some(1));
    let mut zab = follower_rejoining_its_leader();
    let rejoined = link_of_round(2);
    zab.handle(message(3, Message::NewEpoch { link: rejoined }), 9);
    let short = Message::NewLeader {
        link: rejoined,
        truncate_after: 3,
        snapshot: None,
        entries: vec![entry(4, 1)],
        commit: 4,
        history_end: 6,
    };
    zab.handle(message(3, short), 10);
    zab.handle(logged(4), 11);
    assert_eq!(zab.delivered_position(), 4);
    assert_eq!(
        zab.status(),
        Status::Looking,
        "position 6 is not delivered yet"
    );
    let rest = Message::Propose {
        link: rejoined,
        entries: vec![entry(5, 1), entry(6, 1)],
        commit: 6,
        leader_durable: 6,
        forwards: zoolog_zab::PerLane::default(),
    };
    zab.handle(message(3, rest), 12);
    zab.handle(logged(6), 13);
    assert_eq!(zab.delivered_position(), 6);
    assert_eq!(stint(zab.status()), Some(2), "a new stint");
}

/// A leader that takes a learner back into its epoch drops the forwards it held from the
/// learner's earlier attempt, and tells the learner its last position even when the entries
/// it sends stop short of it.
#[test]
fn a_leader_drops_an_earlier_attempts_held_forwards_and_names_its_history_end() {
    let mut leader_config = config(1, 3);
    leader_config.message_entries_max = 1;
    leader_config.proposals_in_flight_max = 2;
    let mut zab = broadcasting_leader_with(leader_config);
    let proposed = |actions: &[Action]| {
        actions
            .iter()
            .filter_map(|action| match action {
                Action::Append { entries } => Some(entries.len()),
                _ => None,
            })
            .sum::<usize>()
    };
    let forward = Message::Forward {
        link: link(1),
        lane: Lane::Commands,
        first_sequence: 1,
        payloads: vec![bytes::Bytes::from_static(b"a"); 3],
    };
    assert_eq!(
        proposed(&zab.handle(message(2, forward), 5)),
        2,
        "one is held"
    );
    // Server 2 starts over (attempt 2) and joins again.
    zab.handle(message(2, follower_info(1, link_of_round(2).attempt)), 6);
    let promise = Message::AckEpoch {
        link: link_of_round(2),
        counted: false,
        current_epoch: 1,
        snapshot_position: 0,
        runs: Vec::new(),
        last_position: 0,
    };
    let actions = zab.handle(message(2, promise), 7);
    let new_leader = sent_to(&actions, 2)
        .into_iter()
        .find_map(|sent| match sent {
            Message::NewLeader {
                entries,
                history_end,
                ..
            } => Some((entries.len(), history_end)),
            _ => None,
        });
    assert_eq!(new_leader, Some((1, 2)), "{actions:?}");
    // Both proposals commit and are durable here: room for the held one, were it kept.
    zab.handle(logged(2), 8);
    let settled = zab.handle(ack(3, 2), 9);
    assert_eq!(zab.committed_position(), 2);
    assert_eq!(proposed(&settled), 0, "{settled:?}");
    assert_eq!(zab.last_logged_position(), 2);
}

//! A learner starts over when its leader looks in a new election round, and only then. The
//! leader's looking votes in the round the learner decided in are copies or answers (a server
//! sends its vote again to a peer it finds behind, and answers a looking peer while not yet
//! established): a learner that started over on them dropped the attempt its leader was about
//! to answer, and the leader's answer to its new vote restarted it again, so the two met only
//! at the next resend, about 50 ms later (the slow leader kills of the twenty-sixth session).

mod common;

use common::{config, follower_info, message, sent_to, vote};
use zoolog_zab::{Action, Attempt, Input, Link, Message, Recovered, Zab};

fn attempts_introduced(actions: &[Action], to: u64) -> Vec<Attempt> {
    sent_to(actions, to)
        .iter()
        .filter_map(|message| match message {
            Message::FollowerInfo { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect()
}

/// Server 1 after server 2 (the old leader) died and server 3 won it over in round 5: it
/// follows server 3 and has introduced itself, in the attempt returned.
fn learner_of_three_in_round_five() -> (Zab, Attempt) {
    let (mut zab, _) = Zab::new(config(1, 3), Recovered::default(), 0);
    zab.handle(Input::PeerDisconnected { peer: 2 }, 1);
    let actions = zab.handle(vote(3, 5, 3), 2);
    let attempts = attempts_introduced(&actions, 3);
    assert_eq!(attempts.len(), 1, "server 1 follows server 3: {actions:?}");
    (zab, attempts[0])
}

#[test]
fn a_leaders_vote_again_in_the_decided_round_keeps_the_attempt() {
    let (mut zab, attempt) = learner_of_three_in_round_five();
    // Server 3 found server 1 behind (round 1) and sent its vote once more.
    let actions = zab.handle(vote(3, 5, 3), 3);
    assert!(attempts_introduced(&actions, 3).is_empty(), "{actions:?}");
    let link = Link { epoch: 1, attempt };
    let actions = zab.handle(message(3, Message::NewEpoch { link }), 4);
    let promised = sent_to(&actions, 3)
        .iter()
        .any(|message| matches!(message, Message::AckEpoch { .. }));
    assert!(promised, "the first attempt is answered: {actions:?}");
}

#[test]
fn a_leader_looking_in_a_new_round_makes_its_learner_look_too() {
    let (mut zab, attempt) = learner_of_three_in_round_five();
    let actions = zab.handle(vote(3, 6, 3), 3);
    let attempts = attempts_introduced(&actions, 3);
    assert_eq!(attempts.len(), 1, "a new attempt: {actions:?}");
    assert!(attempts[0] > attempt);
}

#[test]
fn a_leader_looks_again_in_a_round_after_its_learners_attempts() {
    let config = config(1, 3);
    let sync_timeout_ms = config.sync_timeout_ms;
    let (mut zab, _) = Zab::new(config, Recovered::default(), 0);
    zab.handle(Input::PeerDisconnected { peer: 3 }, 1);
    zab.handle(vote(2, 1, 1), 2);
    // Server 2 numbers its attempt by the round it decided in, later than server 1's own.
    let attempt = Attempt {
        incarnation: 0,
        round: 9,
    };
    let introduction = follower_info(0, attempt);
    zab.handle(message(2, introduction), 3);
    // Server 2 never promises: server 1 gives up and looks again.
    let actions = zab.handle(Input::Tick, 4 + sync_timeout_ms);
    let rounds: Vec<u64> = sent_to(&actions, 2)
        .iter()
        .filter_map(|message| match message {
            Message::Vote { round, .. } => Some(*round),
            _ => None,
        })
        .collect();
    assert!(!rounds.is_empty(), "server 1 looks again: {actions:?}");
    assert!(rounds.iter().all(|round| *round > 9), "{rounds:?}");
}

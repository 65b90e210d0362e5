//! The finalize wait gives a better vote still on its way time to arrive. A participant whose
//! connection is down cannot send one, so a quorum that lost a member (its leader, say) decides
//! as soon as every participant it can hear from agrees, rather than waiting for a vote that
//! will not come; a member heard from again is waited for as before.

mod common;

use common::{asked_for_a_new_epoch, config, introduction_from_two, link, message, sent_to, vote};
use zoolog_zab::{Input, Message, Recovered, Zab};

/// Server 1 leads: it asks server 2, which introduced itself, for its promise.
fn leads(actions: &[zoolog_zab::Action]) -> bool {
    asked_for_a_new_epoch(&sent_to(actions, 2))
}

#[test]
fn a_quorum_that_lost_a_member_decides_without_the_finalize_wait() {
    let (mut zab, _) = Zab::new(config(1, 3), Recovered::default(), 0);
    zab.handle(Input::PeerDisconnected { peer: 3 }, 0);
    zab.handle(introduction_from_two(), 1);
    let actions = zab.handle(vote(2, 1, 1), 2);
    assert!(leads(&actions), "server 1 leads at server 2's vote");
}

#[test]
fn a_member_heard_from_again_is_waited_for() {
    let config = config(1, 3);
    let finalize_ms = config.election_finalize_ms;
    let (mut zab, _) = Zab::new(config, Recovered::default(), 0);
    zab.handle(Input::PeerDisconnected { peer: 3 }, 0);
    // Server 3 is back, with a vote from a round long gone.
    zab.handle(vote(3, 0, 3), 1);
    zab.handle(introduction_from_two(), 2);
    let actions = zab.handle(vote(2, 1, 1), 3);
    assert!(!leads(&actions), "server 3's vote may still come");
    let actions = zab.handle(Input::Tick, 3 + finalize_ms);
    assert!(leads(&actions), "server 1 leads after the finalize wait");
}

#[test]
fn a_disconnection_during_the_finalize_wait_ends_it() {
    let (mut zab, _) = Zab::new(config(1, 3), Recovered::default(), 0);
    zab.handle(introduction_from_two(), 1);
    let actions = zab.handle(vote(2, 1, 1), 2);
    assert!(!leads(&actions), "server 3 may still vote");
    let actions = zab.handle(Input::PeerDisconnected { peer: 3 }, 3);
    assert!(leads(&actions), "nothing is left to wait for");
}

#[test]
fn a_vote_changed_and_decided_at_once_still_goes_out_first() {
    let (mut zab, _) = Zab::new(config(1, 3), Recovered::default(), 0);
    zab.handle(Input::PeerDisconnected { peer: 3 }, 0);
    // Server 2 is the better candidate; server 1 comes round to it and, with server 3 down,
    // decides at once. Server 2 has no other voter: it must hear of the change.
    let actions = zab.handle(vote(2, 1, 2), 1);
    let to_two = sent_to(&actions, 2);
    let vote_for_two = to_two
        .iter()
        .position(|message| matches!(message, Message::Vote { vote, .. } if vote.leader == 2));
    let follower_info = to_two
        .iter()
        .position(|message| matches!(message, Message::FollowerInfo { .. }));
    assert!(vote_for_two.is_some(), "{to_two:?}");
    assert!(
        follower_info.is_some(),
        "server 1 follows server 2: {to_two:?}"
    );
    assert!(vote_for_two < follower_info, "{to_two:?}");
}

/// A learner that chose server 3 and has not heard from it yet, in a 4-participant ensemble
/// (servers 2 and 4 agreed with it; the quorum is 3).
fn learner_of_three() -> Zab {
    let (mut zab, _) = Zab::new(config(1, 4), Recovered::default(), 0);
    zab.handle(vote(2, 1, 3), 1);
    zab.handle(vote(4, 1, 3), 2);
    zab.handle(vote(3, 1, 3), 3);
    assert!(!zab.status().is_serving());
    zab
}

fn answered_leader(actions: &[zoolog_zab::Action], to: u64) -> Option<u64> {
    sent_to(actions, to)
        .iter()
        .find_map(|message| match message {
            Message::Vote { vote, .. } => Some(vote.leader),
            _ => None,
        })
}

#[test]
fn a_learner_offers_only_a_leader_it_has_heard_from() {
    let mut zab = learner_of_three();
    // Server 3 is gone; server 2 looks again and asks.
    let actions = zab.handle(vote(2, 2, 2), 10);
    assert_eq!(answered_leader(&actions, 2), Some(1), "its own candidacy");
    // Server 3 is there after all: once it has spoken, the final vote is offered.
    zab.handle(message(3, Message::NewEpoch { link: link(1) }), 11);
    let actions = zab.handle(vote(4, 2, 4), 10 + 2 * config(1, 4).election_retry_ms);
    assert_eq!(
        answered_leader(&actions, 4),
        Some(3),
        "the vote that chose 3"
    );
}

#[test]
fn a_learner_offers_the_vote_that_chose_its_leader_to_that_leader_still_looking() {
    let mut zab = learner_of_three();
    // Server 3 did not get the votes for it and looks on in the same round: it needs them.
    let actions = zab.handle(vote(3, 1, 3), 10);
    assert_eq!(
        answered_leader(&actions, 3),
        Some(3),
        "the vote that chose 3"
    );
}

//! A looking participant answers, at once, a vote in its own round that is worse than its own:
//! votes are ordered, so the sender would have taken ours had it heard it. It can miss it: a
//! follower that receives a looking vote before it notices its leader is gone answers with
//! that leader, and starts its own election without the vote. The two then met only at the
//! next resend, an election retry interval later (a traced 64 ms leader kill in a 40-trial
//! run, against about 9 ms for the others; run 48's 59 ms one fits it).

mod common;

use common::{config, sent_to, vote};
use zoolog_zab::{Action, Input, Message, Recovered, Zab};

/// The rounds of the votes sent to `to` for `leader`.
fn votes_for(actions: &[Action], to: u64, leader: u64) -> Vec<u64> {
    sent_to(actions, to)
        .iter()
        .filter_map(|message| match message {
            Message::Vote { round, vote, .. } if vote.leader == leader => Some(*round),
            _ => None,
        })
        .collect()
}

/// Server 2, looking after its leader (server 3) went away; the round it votes in.
fn looking_server_two() -> (Zab, u64) {
    let (mut zab, actions) = Zab::new(config(2, 3), Recovered::default(), 0);
    zab.handle(Input::PeerDisconnected { peer: 3 }, 1);
    let rounds = votes_for(&actions, 1, 2);
    assert_eq!(rounds.len(), 1, "server 2 votes for itself: {actions:?}");
    (zab, rounds[0])
}

#[test]
fn a_worse_vote_in_our_round_is_answered_with_ours_at_once() {
    let (mut zab, round) = looking_server_two();
    let actions = zab.handle(vote(1, round, 1), 2);
    assert_eq!(votes_for(&actions, 1, 2), [round], "{actions:?}");
}

#[test]
fn a_vote_like_ours_is_not_answered() {
    let (mut zab, round) = looking_server_two();
    let actions = zab.handle(vote(1, round, 2), 2);
    assert!(
        sent_to(&actions, 1)
            .iter()
            .all(|message| !matches!(message, Message::Vote { .. })),
        "agreeing votes end the exchange: {actions:?}"
    );
}

#[test]
fn a_better_vote_is_taken_and_sent_on() {
    let (mut zab, round) = looking_server_two();
    let actions = zab.handle(vote(1, round, 3), 2);
    assert_eq!(votes_for(&actions, 1, 3), [round], "{actions:?}");
}

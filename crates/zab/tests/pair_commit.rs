//! Where a follower and the leader are a quorum by themselves (three voters), the follower
//! commits what both hold durably as soon as it knows the leader's durable position, without
//! waiting for the leader's commit announcement; with more voters it must wait.

mod common;

use common::{broadcasting_follower, entry, message, propose};
use zoolog_zab::{Action, Input, Zab};

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

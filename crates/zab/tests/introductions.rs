//! A learner may decide for its leader before the leader has decided itself (each waits out
//! the finalize wait from when it saw a quorum, and the learner usually sees it a hop
//! sooner). Its `FollowerInfo` then reaches a server still looking, which keeps it and takes it
//! up when it comes to lead, rather than leaving the learner to send it again an election
//! retry later.

mod common;

use common::{asked_for_a_new_epoch, config, introduction_from_two, sent_to, vote};
use zoolog_zab::{Input, Recovered, Zab};

#[test]
fn a_leader_takes_up_the_introduction_that_came_while_it_was_still_looking() {
    let config = config(1, 3);
    let finalize_ms = config.election_finalize_ms;
    let (mut zab, _) = Zab::new(config, Recovered::default(), 0);
    // Server 3 is down: two of three agree, and server 1 waits out the finalize wait.
    zab.handle(vote(2, 1, 1), 1);
    zab.handle(introduction_from_two(), 2);
    assert!(!zab.status().is_serving(), "still looking");
    let actions = zab.handle(Input::Tick, 1 + finalize_ms);
    assert!(
        asked_for_a_new_epoch(&sent_to(&actions, 2)),
        "server 2 is asked for its promise as soon as server 1 leads"
    );
}

#[test]
fn a_server_that_follows_another_drops_the_introductions_it_held() {
    let config = config(1, 3);
    let finalize_ms = config.election_finalize_ms;
    let (mut zab, _) = Zab::new(config, Recovered::default(), 0);
    zab.handle(introduction_from_two(), 1);
    // Server 3 is the better candidate, and server 2 comes round to it too.
    zab.handle(vote(3, 1, 3), 2);
    let actions = zab.handle(Input::Tick, 2 + finalize_ms);
    assert!(
        !asked_for_a_new_epoch(&sent_to(&actions, 2)),
        "a learner asks no one for promises"
    );
}

//! A learner's timeouts on its leader count only the time the learner itself was running: a
//! pause of its own (SIGSTOP, a stalled driver) is no evidence that the leader went silent.
//! A leader gets no such excuse, and leaves as soon as its followers would leave it.

mod common;

use common::{ack, broadcasting_follower, broadcasting_leader, config, message, propose};
use zoolog_zab::{Input, ServingRole, Status, Zab};

/// When `broadcasting_follower` last heard from its leader; it last ran at 6 ms.
const LAST_HEARD_MS: u64 = 5;

fn leader_timeout_ms() -> u64 {
    config(1, 3).leader_timeout_ms
}

fn is_following(zab: &Zab) -> bool {
    matches!(
        zab.status(),
        Status::Serving {
            role: ServingRole::Follower,
            ..
        }
    )
}

/// Ticks every `every_ms` from `from_ms` until the follower stops following; returns when.
fn tick_until_it_looks(zab: &mut Zab, from_ms: u64, every_ms: u64) -> u64 {
    let mut now_ms = from_ms;
    for _ in 0..1000 {
        now_ms += every_ms;
        zab.handle(Input::Tick, now_ms);
        if !is_following(zab) {
            return now_ms;
        }
    }
    panic!("still following a leader silent since before {from_ms} ms");
}

#[test]
fn a_follower_that_did_not_run_for_ten_leader_timeouts_keeps_following() {
    let mut zab = broadcasting_follower(3);
    let resumed_ms = 6 + 10 * leader_timeout_ms();
    zab.handle(Input::Tick, resumed_ms);
    assert!(
        is_following(&zab),
        "its own pause is not the leader's silence"
    );
    let heartbeat = propose(Vec::new(), 2, 3);
    zab.handle(message(3, heartbeat), resumed_ms + 1);
    zab.handle(Input::Tick, resumed_ms + leader_timeout_ms() / 2);
    assert!(is_following(&zab));
}

#[test]
fn a_follower_that_runs_leaves_a_silent_leader_after_the_timeout() {
    let mut zab = broadcasting_follower(3);
    let looked_ms = tick_until_it_looks(&mut zab, 6, 1);
    assert_eq!(looked_ms, LAST_HEARD_MS + leader_timeout_ms() + 1);
}

#[test]
fn a_follower_that_keeps_stalling_still_leaves_a_silent_leader() {
    let mut zab = broadcasting_follower(3);
    let every_ms = 10 * leader_timeout_ms();
    let looked_ms = tick_until_it_looks(&mut zab, 6, every_ms);
    // 1 ms of silence counted before the stalls, then a quarter of the timeout per stalled
    // tick: the fourth takes it past the timeout.
    assert_eq!(looked_ms, 6 + 4 * every_ms);
}

#[test]
fn a_leader_that_did_not_run_for_longer_than_the_leader_timeout_steps_down() {
    let mut zab = broadcasting_leader(3);
    zab.handle(Input::Tick, 4 + 2 * leader_timeout_ms());
    assert!(
        !zab.status().is_serving(),
        "its followers counted its silence and left it"
    );
}

/// Ticks `leader` every millisecond from `from_ms`, follower 2 acknowledging every `ack_every_ms`
/// (never when 0), until it stops serving or `until_ms`; returns when it stopped, if it did.
fn tick_leader(leader: &mut Zab, from_ms: u64, ack_every_ms: u64, until_ms: u64) -> Option<u64> {
    for now_ms in from_ms + 1..=until_ms {
        if ack_every_ms > 0 && now_ms % ack_every_ms == 0 {
            leader.handle(ack(2, 0), now_ms);
        }
        leader.handle(Input::Tick, now_ms);
        if !leader.status().is_serving() {
            return Some(now_ms);
        }
    }
    None
}

/// A leader that stops hearing from a quorum steps down one timeout after it last did, as its
/// followers leave a silent leader after one timeout: later, and it would go on serving as
/// leader beside the one they elect (reads, and `srvr` saying leader on two servers).
#[test]
fn a_leader_steps_down_one_timeout_after_it_last_heard_from_a_quorum() {
    let mut zab = broadcasting_leader(3);
    let stopped_ms = tick_leader(&mut zab, 4, 0, 10 * leader_timeout_ms());
    assert_eq!(
        stopped_ms,
        Some(4 + leader_timeout_ms() + 1),
        "followers last heard at 4 ms"
    );
}

#[test]
fn a_leader_that_hears_from_a_quorum_keeps_leading() {
    let mut zab = broadcasting_leader(3);
    let until_ms = 10 * leader_timeout_ms();
    let stopped_ms = tick_leader(&mut zab, 4, leader_timeout_ms() / 2, until_ms);
    assert_eq!(stopped_ms, None, "follower 2 and the leader are a quorum");
}

//! When a leader syncs its own log: a decision on the protocol's state and the time, which
//! the driver carries out on its log (the tokio driver on its replica log's writer, the
//! simulator on its simulated disk). A leader whose followers are a quorum by themselves
//! ([`Zab::own_copy_optional`]) keeps its own log written but not synced for up to
//! [`LEADER_SYNC_DELAY_US`], so that one fdatasync takes in several batches: the followers'
//! copies make the commits, and fewer syncs leave the leader, the busiest member, more CPU and
//! a shared disk fewer flushes (bench/README, twenty-third session). A commit that waits for
//! the leader's copy all the same (one follower is slow) makes it sync at once after
//! [`COMMIT_STALL_US`].

use crate::{Position, Zab};

/// The longest a leader keeps its own log written but not synced while its followers are a
/// quorum by themselves.
pub const LEADER_SYNC_DELAY_US: u64 = 3_000;

/// While the leader delays its syncs, a commit that has waited this long for the leader's own
/// copy ([`Zab::own_copy_awaited`]: one follower holds the entries, the other not yet) makes
/// the leader sync at once, so a slow follower costs a commit about this much more. Shorter
/// waits, down to 300 µs, made the leader sync nearly as often as without a delay: the two
/// followers' acknowledgements are often that far apart.
pub const COMMIT_STALL_US: u64 = 1_000;

/// Follows a leader's protocol state over time and says when to delay its syncs, when to
/// stop delaying, and when to sync at once.
#[derive(Debug)]
pub struct OwnSync {
    /// Whether the log has the leader's sync delay.
    delayed: bool,
    /// The commit position last seen, and whether it waited for the leader's own copy.
    commit: Position,
    awaited: bool,
    /// When the commit last moved or began to wait for the leader's copy, whichever came
    /// last.
    since_us: u64,
    /// Whether a sync was asked for since then.
    asked: bool,
}

/// What [`OwnSync`] asks of the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct OwnSyncSteps {
    /// Set the sync delay to this (0: none).
    pub delay_us: Option<u64>,
    /// End the delay under way (or the next one): sync what is written.
    pub sync_now: bool,
}

impl OwnSync {
    /// `now_us` here and below: any clock in microseconds that never goes back.
    pub fn new(commit: Position, now_us: u64) -> OwnSync {
        OwnSync {
            delayed: false,
            commit,
            awaited: false,
            since_us: now_us,
            asked: false,
        }
    }

    /// Follows `zab` at `now_us`; see [`OwnSync::follow`].
    pub fn follow_zab(&mut self, zab: &Zab, now_us: u64) -> OwnSyncSteps {
        let optional = zab.own_copy_optional();
        // Only a delaying leader's commit can wait for its copy.
        let awaited = optional && zab.own_copy_awaited();
        self.follow(optional, awaited, zab.committed_position(), now_us)
    }

    /// Follows the protocol (whether the leader's copy is optional, whether the commit waits
    /// for it, the commit) at `now_us`: sets or lifts the sync delay, and asks for a sync once
    /// per stall.
    pub fn follow(
        &mut self,
        optional: bool,
        awaited: bool,
        commit: Position,
        now_us: u64,
    ) -> OwnSyncSteps {
        let mut steps = OwnSyncSteps::default();
        if optional != self.delayed {
            self.delayed = optional;
            steps.delay_us = Some(if optional { LEADER_SYNC_DELAY_US } else { 0 });
            // Nothing written may wait out a delay that no longer holds.
            steps.sync_now = !optional;
        }
        if commit != self.commit || (awaited && !self.awaited) {
            self.since_us = now_us;
            self.asked = false;
        }
        self.commit = commit;
        self.awaited = awaited;
        if self
            .stall_deadline_us()
            .is_some_and(|deadline_us| now_us >= deadline_us)
        {
            self.asked = true;
            steps.sync_now = true;
        }
        steps
    }

    /// When the commit counts as stalled, if it can: the leader delays its syncs, the commit
    /// waits for the leader's copy, and no sync was asked for yet. A driver wakes then (if no
    /// input came before) and follows again.
    pub fn stall_deadline_us(&self) -> Option<u64> {
        (self.delayed && self.awaited && !self.asked).then(|| self.since_us + COMMIT_STALL_US)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START_US: u64 = 1_000_000;

    /// An `OwnSync` whose leader has just taken the sync delay, with commit 10 waiting for
    /// its copy since `START_US`.
    fn delaying_and_awaited() -> OwnSync {
        let mut own_sync = OwnSync::new(10, START_US);
        let steps = own_sync.follow(true, true, 10, START_US);
        let delaying = OwnSyncSteps {
            delay_us: Some(LEADER_SYNC_DELAY_US),
            sync_now: false,
        };
        assert_eq!(steps, delaying);
        own_sync
    }

    #[test]
    fn a_leader_syncs_at_once_when_its_commit_stalls_while_it_delays() {
        let mut own_sync = delaying_and_awaited();
        let before_us = START_US + COMMIT_STALL_US / 2;
        let steps = own_sync.follow(true, true, 10, before_us);
        assert_eq!(steps, OwnSyncSteps::default());
        let stalled_us = START_US + COMMIT_STALL_US;
        assert_eq!(own_sync.stall_deadline_us(), Some(stalled_us));
        assert!(own_sync.follow(true, true, 10, stalled_us).sync_now);
        assert_eq!(own_sync.stall_deadline_us(), None, "asked once per stall");
        let later_us = stalled_us + COMMIT_STALL_US;
        assert!(!own_sync.follow(true, true, 10, later_us).sync_now);
        let moved_us = stalled_us + COMMIT_STALL_US * 2;
        assert!(!own_sync.follow(true, true, 11, moved_us).sync_now);
        assert_eq!(
            own_sync.stall_deadline_us(),
            Some(moved_us + COMMIT_STALL_US),
            "a stall counts from the last move of the commit"
        );
    }

    #[test]
    fn a_stall_counts_only_while_the_commit_waits_for_the_leaders_copy() {
        let mut own_sync = delaying_and_awaited();
        let later_us = START_US + COMMIT_STALL_US * 3;
        let steps = own_sync.follow(true, false, 11, later_us);
        assert_eq!(steps, OwnSyncSteps::default());
        assert_eq!(
            own_sync.stall_deadline_us(),
            None,
            "the followers made the commit"
        );
        let awaited_us = later_us + COMMIT_STALL_US * 3;
        assert!(!own_sync.follow(true, true, 11, awaited_us).sync_now);
        assert_eq!(
            own_sync.stall_deadline_us(),
            Some(awaited_us + COMMIT_STALL_US)
        );
    }

    #[test]
    fn lifting_the_delay_syncs_what_waits_and_ends_stalls() {
        let mut own_sync = delaying_and_awaited();
        let steps = own_sync.follow(false, true, 10, START_US + COMMIT_STALL_US / 2);
        let lifted = OwnSyncSteps {
            delay_us: Some(0),
            sync_now: true,
        };
        assert_eq!(steps, lifted);
        assert_eq!(own_sync.stall_deadline_us(), None, "no delay, no stall");
    }
}

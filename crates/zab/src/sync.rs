//! Deciding how a learner's log is brought to the leader's history.
//!
//! Logs obey the matching property: two logs holding an entry of the same epoch at the same
//! position hold the same entries up to there (an epoch has one leader, which only appends,
//! and learners accept only the next position). So "the learner's entry at `p` matches" is
//! true up to some position and false after it, and a binary search over epochs finds where
//! the two logs part, without shipping any payload.

use crate::history::History;
use crate::{Epoch, Position};

/// What a learner reported of its log in `AckEpoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LearnerLog {
    pub snapshot_position: Position,
    /// (epoch, first position) runs covering `snapshot_position + 1 ..= last_position`.
    pub runs: Vec<(Epoch, Position)>,
    pub last_position: Position,
}

impl LearnerLog {
    fn epoch_at(&self, position: Position) -> Option<Epoch> {
        if position <= self.snapshot_position || position > self.last_position {
            return None;
        }
        self.runs
            .iter()
            .take_while(|(_, first)| *first <= position)
            .last()
            .map(|(epoch, _)| *epoch)
    }
}

/// How to synchronize one learner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncPlan {
    /// Keep the learner's log through `truncate_after`, drop the rest, send what follows.
    Diff { truncate_after: Position },
    /// The leader no longer holds entries the learner lacks: send a snapshot.
    Snapshot,
}

pub(crate) fn plan(leader: &History, learner: &LearnerLog) -> SyncPlan {
    let upper = learner.last_position.min(leader.last_position());
    let matches = |position: Position| -> bool {
        position <= learner.snapshot_position
            || (learner.epoch_at(position).is_some()
                && learner.epoch_at(position) == leader.epoch_at(position))
    };
    // Positions at or below the leader's snapshot can be checked only at the snapshot itself.
    let low = learner.snapshot_position.max(leader.base());
    if low > upper || !matches(low) {
        return if learner.snapshot_position >= leader.base() {
            SyncPlan::Diff {
                truncate_after: learner.snapshot_position.min(upper),
            }
        } else {
            SyncPlan::Snapshot
        };
    }
    // Invariant: matches(good); !matches(bad) or bad beyond upper.
    let (mut good, mut bad) = (low, upper + 1);
    while bad - good > 1 {
        let middle = good + (bad - good) / 2;
        if matches(middle) {
            good = middle;
        } else {
            bad = middle;
        }
    }
    SyncPlan::Diff {
        truncate_after: good,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Entry;
    use bytes::Bytes;

    fn history(base: Position, base_epoch: Epoch, epochs: &[Epoch]) -> History {
        let mut history = History::new(base, base_epoch, 0);
        for (offset, epoch) in epochs.iter().enumerate() {
            history.append(Entry {
                position: base + 1 + offset as Position,
                epoch: *epoch,
                payload: Bytes::new(),
            });
        }
        history
    }

    fn learner(snapshot_position: Position, epochs: &[Epoch]) -> LearnerLog {
        let whole = history(snapshot_position, 0, epochs);
        LearnerLog {
            snapshot_position,
            runs: whole.runs_after(snapshot_position),
            last_position: whole.last_position(),
        }
    }

    #[test]
    fn a_prefix_is_kept_whole() {
        let leader = history(0, 0, &[1, 1, 1, 2, 2]);
        assert_eq!(
            plan(&leader, &learner(0, &[1, 1, 1])),
            SyncPlan::Diff { truncate_after: 3 }
        );
    }

    #[test]
    fn a_divergent_suffix_is_cut_where_epochs_part() {
        let leader = history(0, 0, &[1, 1, 1, 3, 3]);
        assert_eq!(
            plan(&leader, &learner(0, &[1, 1, 1, 2, 2, 2, 2])),
            SyncPlan::Diff { truncate_after: 3 }
        );
    }

    #[test]
    fn an_empty_learner_gets_everything() {
        let leader = history(0, 0, &[1, 1]);
        assert_eq!(
            plan(&leader, &learner(0, &[])),
            SyncPlan::Diff { truncate_after: 0 }
        );
    }

    #[test]
    fn a_learner_behind_the_leaders_snapshot_needs_a_snapshot() {
        let leader = history(10, 1, &[1, 2]);
        assert_eq!(plan(&leader, &learner(0, &[1, 1])), SyncPlan::Snapshot);
        // ... unless it holds the snapshot's own entry: then the logs agree up to there.
        let whole: Vec<Epoch> = vec![1; 10];
        assert_eq!(
            plan(&leader, &learner(0, &whole)),
            SyncPlan::Diff { truncate_after: 10 }
        );
        let mut diverged = vec![1; 9];
        diverged.push(2);
        assert_eq!(plan(&leader, &learner(0, &diverged)), SyncPlan::Snapshot);
    }

    #[test]
    fn a_learner_with_a_newer_snapshot_keeps_it() {
        let leader = history(3, 1, &[1, 1, 1, 2]);
        assert_eq!(
            plan(&leader, &learner(5, &[1, 4])),
            SyncPlan::Diff { truncate_after: 6 }
        );
    }
}

//! Fast leader election, in the manner of ZooKeeper's: rounds of votes that converge on the
//! best candidate a quorum can hear.
//!
//! Election only proposes a leader. Nothing here is needed for safety (discovery checks
//! that the leader's history dominates its quorum's); it is what makes the ensemble pick the
//! server with the newest history quickly, so that discovery usually succeeds first time.

use std::collections::{BTreeMap, BTreeSet};

use crate::message::{Attempt, PeerState, Vote};
use crate::{Config, Epoch, ServerId};

#[derive(Debug, Clone)]
pub(crate) struct Election {
    pub round: u64,
    /// This server's vote in `round` (None for an observer, which never votes).
    pub vote: Option<Vote>,
    /// Votes of looking participants in `round`.
    votes: BTreeMap<ServerId, Vote>,
    /// What non-looking servers reported: the leader they follow and its epoch.
    reports: BTreeMap<ServerId, (ServerId, Epoch)>,
    /// When this server's vote first had a quorum, for the finalize wait.
    quorum_since_ms: Option<u64>,
    pub last_broadcast_ms: u64,
    /// Learners that decided for this server before it decided itself: their `FollowerInfo`,
    /// taken up if it comes to lead, so that they need not wait to send it again.
    pub introductions: BTreeMap<ServerId, Introduction>,
}

/// A learner's `FollowerInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Introduction {
    pub accepted_epoch: Epoch,
    pub observer: bool,
    pub attempt: Attempt,
}

/// Who can vote in time: the configuration's participants but the peers whose connection is
/// down (`unreachable`, until a message from them comes in).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Voters<'a> {
    pub config: &'a Config,
    pub unreachable: &'a BTreeSet<ServerId>,
}

impl Voters<'_> {
    fn count(&self) -> usize {
        self.config
            .participants()
            .filter(|id| *id == self.config.me || !self.unreachable.contains(id))
            .count()
    }
}

/// What a looking server should do after an election event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Undecided,
    /// Broadcast this server's (changed) vote, then see whether it is decided.
    Rebroadcast,
    /// Follow (or, if it is this server, lead) `leader`.
    Decided {
        leader: ServerId,
    },
}

impl Election {
    pub fn start(round: u64, own: Option<Vote>, now_ms: u64) -> Election {
        Election {
            round,
            vote: own,
            votes: BTreeMap::new(),
            reports: BTreeMap::new(),
            quorum_since_ms: None,
            last_broadcast_ms: now_ms,
            introductions: BTreeMap::new(),
        }
    }

    /// Keeps the newest attempt's introduction of each learner.
    pub fn hold_introduction(&mut self, from: ServerId, introduction: Introduction) {
        let held = self.introductions.entry(from).or_insert(introduction);
        if introduction.attempt >= held.attempt {
            *held = introduction;
        }
    }

    /// A vote from a looking participant. `own` is this server's own candidacy, which a new
    /// round starts from.
    pub fn receive_vote(
        &mut self,
        voters: Voters<'_>,
        from: ServerId,
        round: u64,
        vote: Vote,
        own: Option<Vote>,
        now_ms: u64,
    ) -> Outcome {
        let mut changed = false;
        if round > self.round {
            self.round = round;
            self.votes.clear();
            self.quorum_since_ms = None;
            self.vote = own.map(|own| own.max(vote));
            changed = true;
        } else if round < self.round {
            // The sender is behind: our vote (sent back by the caller) brings it forward.
            return Outcome::Rebroadcast;
        } else if let Some(mine) = self.vote {
            if vote > mine {
                self.vote = Some(vote);
                self.quorum_since_ms = None;
                changed = true;
            }
        }
        self.votes.insert(from, vote);
        if changed {
            // The peers hear of the change before this server decides: one that has no other
            // voter but this one (its quorum's other member is down) waits for it.
            return Outcome::Rebroadcast;
        }
        self.decide(voters, now_ms)
    }

    /// A report from a server that is not looking: it follows or leads `leader` in `epoch`.
    pub fn receive_report(
        &mut self,
        config: &Config,
        from: ServerId,
        leader: ServerId,
        state: PeerState,
    ) -> Outcome {
        let epoch = match state {
            PeerState::Looking => return Outcome::Undecided,
            PeerState::Following { epoch } | PeerState::Leading { epoch } => epoch,
        };
        self.reports.insert(from, (leader, epoch));
        // A leader that says so itself is worth trying: if it has no quorum the attempt
        // times out and this server looks again. Otherwise a quorum must agree.
        let leader_says_so = matches!(state, PeerState::Leading { .. }) && from == leader;
        let agreeing = self
            .reports
            .iter()
            .filter(|(id, report)| config.is_participant(**id) && **report == (leader, epoch))
            .count();
        if leader_says_so || agreeing >= config.quorum_size() {
            return Outcome::Decided { leader };
        }
        Outcome::Undecided
    }

    /// Called on every tick and when a peer's connection goes down: decides once the
    /// finalize wait has passed, or at once when it need not be waited out.
    pub fn poll(&mut self, voters: Voters<'_>, now_ms: u64) -> Outcome {
        self.decide(voters, now_ms)
    }

    /// Decides for this server's vote once a quorum supports it and either every participant
    /// that can still vote does, or the finalize wait (for a better vote still on its way) has
    /// passed. A participant whose connection is down cannot vote in time: without leaving
    /// it out, a quorum that lost its leader always waited out the finalize wait for the dead
    /// leader's vote. Deciding early is safe: election only proposes (see the module docs).
    fn decide(&mut self, voters: Voters<'_>, now_ms: u64) -> Outcome {
        let config = voters.config;
        let Some(mine) = self.vote else {
            return Outcome::Undecided;
        };
        let supporters = config
            .participants()
            .filter(|id| *id == config.me || self.votes.get(id) == Some(&mine))
            .count();
        if supporters < config.quorum_size() {
            self.quorum_since_ms = None;
            return Outcome::Undecided;
        }
        let since = *self.quorum_since_ms.get_or_insert(now_ms);
        let everyone_voted = supporters == voters.count();
        if everyone_voted || now_ms >= since + config.election_finalize_ms {
            return Outcome::Decided {
                leader: mine.leader,
            };
        }
        Outcome::Undecided
    }
}

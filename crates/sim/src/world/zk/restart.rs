//! Clients killed and started again in core mode (half the core seeds): now and then, before
//! the run winds down, a client's process dies without closing its session, as one killed
//! with `kill -9` does. Mostly its socket closes with it; in some draws its host vanishes and
//! the server hears nothing more. A new process takes its place a little later, with a new
//! session and no memory of the old one. The session left behind must end (expire, or close
//! if the process died with its close on the way), and its ephemerals go with it (the lock and membership recipes rest on that): the run does not
//! count as settled before the log has ended it, so a session that never expires fails the
//! liveness deadline. Once faults have stopped, its expiry must also be ordered within a
//! timeout (and a tick) of the last of: its client's death, the log's news of it, the
//! faults' end, and the deciding server's start of service (a new leader gives every session
//! a full timeout); or within a tick of an earlier expiry of it, cancelled by a report
//! ordered first, joining the log.

use std::collections::BTreeMap;

use super::{Phase, World, ZkState};
use crate::rng::Rng;
use crate::zkcheck::Expiry;

/// The random stream of the clients' deaths: seeds without them keep every other choice.
pub(super) const RESTART_STREAM: u64 = 7;
/// The chance that a client dies at one of its steps.
const DEATH_P: f64 = 0.001;
/// The chance that a dying client's host vanishes (its socket does not close).
const SILENT_P: f64 = 0.2;
/// How long after its death the new process connects, at most.
const RESTART_DELAY_MAX_US: u64 = 100_000;
/// How long after its due time an expiry may be ordered: the deciding server looks at its
/// sessions once a core tick (at most a quarter of a tick, 10 ms here), and it learns the
/// news the due time counts from when it delivers it, which may be a little after the first
/// server did. (Seeds 0-2999 were at most 8 ms late.)
const EXPIRY_LATE_MAX_US: u64 = 25_000;

/// The deaths of a seed that has them: its random stream, and the sessions the dead clients
/// left, by id, with when their clients died.
pub(super) struct Restarts {
    rng: Rng,
    abandoned: BTreeMap<i64, u64>,
    /// Sessions left behind, all told.
    left: u64,
}

impl Restarts {
    /// Half the seeds kill clients.
    pub(super) fn draw(parent: &Rng) -> Option<Restarts> {
        let mut rng = parent.fork(RESTART_STREAM);
        rng.chance(0.5).then(|| Restarts {
            rng,
            abandoned: BTreeMap::new(),
            left: 0,
        })
    }
}

impl ZkState {
    /// Sessions that killed clients left behind, all told.
    pub(crate) fn sessions_abandoned(&self) -> u64 {
        self.restarts.as_ref().map_or(0, |restarts| restarts.left)
    }
}

impl World {
    /// At a step of client `c` before the run winds down: maybe its process dies, leaving its
    /// session behind, and a new one takes its place. Says whether it died.
    pub(super) fn maybe_kill_client(&mut self, c: usize) -> bool {
        let now = self.now;
        let zk = self.zk();
        let Some(restarts) = &mut zk.restarts else {
            return false;
        };
        if !restarts.rng.chance(DEATH_P) {
            return false;
        }
        let socket_closes = !restarts.rng.chance(SILENT_P);
        let restart_us = restarts.rng.range(0, RESTART_DELAY_MAX_US);
        let client = &zk.clients[c];
        if let Some(session) = client.logged_session() {
            restarts.abandoned.insert(session.id, now);
            restarts.left += 1;
        }
        let client_id = client.id;
        let session_id = client.session.as_ref().map_or(0, |s| s.id);
        self.log(None, || {
            format!("client {client_id}: killed, leaving session {session_id:#x}")
        });
        self.client_disconnect(c, socket_closes);
        self.zk().clients[c].start_again(now + restart_us);
        true
    }

    /// Every session a dead client left has been ended by the log.
    pub(super) fn abandoned_sessions_ended(&self) -> bool {
        let zk = self.zk.as_ref().expect("core mode");
        zk.restarts.as_ref().is_none_or(|restarts| {
            restarts
                .abandoned
                .keys()
                .all(|id| zk.checker.ended_in_log.contains_key(id))
        })
    }

    /// An expiry ordered by server `decider` ended a session: if a dead client left it, and
    /// faults have stopped, it was ordered in time. (Its order time is the one its decider's
    /// wall clock stamped, unless that clock was stepped back and may have read it twice.)
    pub(super) fn check_abandoned_expiry(
        &mut self,
        expiry: Expiry,
        decider: usize,
        stamp_exact: bool,
    ) -> Result<(), String> {
        let (phase, faults_end) = (self.phase, self.faults_end);
        let serving_since_us = self.nodes[decider].serving_since_us;
        let decider_id = self.nodes[decider].id;
        let Some(restarts) = &mut self.zk().restarts else {
            return Ok(());
        };
        let Some(died_us) = restarts.abandoned.remove(&expiry.session_id) else {
            return Ok(());
        };
        let Some(serving_since_us) = serving_since_us else {
            return Ok(()); // it stopped serving since: when it started is gone
        };
        if phase != Phase::Liveness || !stamp_exact {
            return Ok(());
        }
        let counted_from_us = died_us
            .max(expiry.news_us)
            .max(faults_end)
            .max(serving_since_us);
        let cancelled_us = expiry.cancelled_us.unwrap_or(0);
        let due_us = (counted_from_us + expiry.timeout_us()).max(cancelled_us);
        if expiry.ordered_us > due_us + EXPIRY_LATE_MAX_US {
            return Err(format!(
                "session {:#x} (timeout {} ms), left by a client that died at {died_us} us, \
                 expired at about {} us, by server {decider_id} (serving since \
                 {serving_since_us} us): due at {due_us} us (the log's last news of the client \
                 {} us, the faults' end {faults_end} us)",
                expiry.session_id, expiry.timeout_ms, expiry.ordered_us, expiry.news_us
            ));
        }
        Ok(())
    }
}

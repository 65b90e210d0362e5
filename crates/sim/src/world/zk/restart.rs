//! Clients killed and started again in core mode (half the core seeds): now and then, before
//! the run winds down, a client's process dies without closing its session, as one killed
//! with `kill -9` does. Mostly its socket closes with it; in some draws its host vanishes and
//! the server hears nothing more. A new process takes its place a little later, with a new
//! session and no memory of the old one. The session left behind must end (expire, or close
//! if the process died with its close on the way), and its ephemerals go with it (the lock
//! and membership recipes rest on that): the run does not count as settled before the log
//! has ended it, so a session that never expires fails the liveness deadline. (When it
//! expires is not bounded here: an expiry waits its turn with the client commands, behind
//! whatever backlog a seed's small windows build.)

use std::collections::BTreeSet;

use super::{World, ZkState};
use crate::rng::Rng;

/// The random stream of the clients' deaths: seeds without them keep every other choice.
const RESTART_STREAM: u64 = 7;
/// The chance that a client dies at one of its steps.
const DEATH_P: f64 = 0.001;
/// The chance that a dying client's host vanishes (its socket does not close).
const SILENT_P: f64 = 0.2;
/// How long after its death the new process connects, at most.
const RESTART_DELAY_MAX_US: u64 = 100_000;

/// The deaths of a seed that has them: its random stream, and the sessions the dead clients
/// left.
pub(super) struct Restarts {
    rng: Rng,
    abandoned: BTreeSet<i64>,
}

impl Restarts {
    /// Half the seeds kill clients.
    pub(super) fn draw(parent: &Rng) -> Option<Restarts> {
        let mut rng = parent.fork(RESTART_STREAM);
        rng.chance(0.5).then(|| Restarts {
            rng,
            abandoned: BTreeSet::new(),
        })
    }
}

impl ZkState {
    /// Sessions that killed clients left behind, all told.
    pub(crate) fn sessions_abandoned(&self) -> u64 {
        self.restarts
            .as_ref()
            .map_or(0, |restarts| restarts.abandoned.len() as u64)
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
            restarts.abandoned.insert(session.id);
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
                .iter()
                .all(|id| zk.checker.ended_in_log.contains_key(id))
        })
    }
}

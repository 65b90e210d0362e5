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
//!
//! Strangers knock on those sessions: now and then a client without a session first tries to
//! take one over with the wrong password (a session's id is no secret: any reader sees it as an
//! ephemeral's owner). No server may hand it over, and the knocks must not keep the session
//! alive: they go on while the run winds down, until the log has ended every session left.

use std::collections::BTreeMap;

use zoolog_proto::ConnectResponse;

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
/// The chance that a client without a session knocks at a step where it would connect (or,
/// winding down, stay away).
const KNOCK_P: f64 = 0.1;

/// The deaths of a seed that has them: its random stream, the sessions the dead clients left
/// (with their passwords, so that a stranger's is surely wrong), and the strangers' knocks
/// answered.
pub(super) struct Restarts {
    rng: Rng,
    abandoned: BTreeMap<i64, Vec<u8>>,
    knocks_refused: u64,
}

impl Restarts {
    /// Half the seeds kill clients.
    pub(super) fn draw(parent: &Rng) -> Option<Restarts> {
        let mut rng = parent.fork(RESTART_STREAM);
        rng.chance(0.5).then(|| Restarts {
            rng,
            abandoned: BTreeMap::new(),
            knocks_refused: 0,
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

    /// Strangers' attempts to take those sessions over, all refused.
    pub(crate) fn knocks_refused(&self) -> u64 {
        self.restarts
            .as_ref()
            .map_or(0, |restarts| restarts.knocks_refused)
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
            restarts
                .abandoned
                .insert(session.id, session.password.clone());
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
        self.abandoned_sessions_unended().is_empty()
    }

    /// The sessions dead clients left that the log has not ended yet, in id order.
    pub(super) fn abandoned_sessions_unended(&self) -> Vec<i64> {
        let zk = self.zk.as_ref().expect("core mode");
        zk.restarts.as_ref().map_or(Vec::new(), |restarts| {
            restarts
                .abandoned
                .keys()
                .filter(|id| !zk.checker.ended_in_log.contains_key(id))
                .copied()
                .collect()
        })
    }

    /// At a step where client `c`, without a session, would connect (or, winding down, stay
    /// away): maybe it first knocks on a session a dead client left that the log has not
    /// ended yet, with the wrong password. Says whether it knocks.
    pub(super) fn maybe_knock(&mut self, c: usize) -> Result<bool, String> {
        let open = self.abandoned_sessions_unended();
        let zk = self.zk();
        let Some(restarts) = &mut zk.restarts else {
            return Ok(false);
        };
        if open.is_empty() || !restarts.rng.chance(KNOCK_P) {
            return Ok(false);
        }
        let session_id = open[restarts.rng.below(open.len() as u64) as usize];
        let mut wrong_password = restarts.abandoned[&session_id].clone();
        match wrong_password.first_mut() {
            Some(byte) => *byte ^= 1,
            None => wrong_password.push(1),
        }
        let client_id = zk.clients[c].id;
        self.log(None, || {
            format!("client {client_id}: knocks on session {session_id:#x}, password wrong")
        });
        self.client_connect(c, Some((session_id, wrong_password)))?;
        Ok(true)
    }

    /// A server answered a stranger's knock on `session_id`: it must not have handed the
    /// session over. The stranger hangs up and goes on as a client without a session.
    pub(super) fn knock_answered(
        &mut self,
        c: usize,
        session_id: i64,
        response: &ConnectResponse,
    ) -> Result<(), String> {
        let client_id = self.zk().clients[c].id;
        if response.timeout_ms > 0 && response.session_id != 0 {
            return Err(format!(
                "client {client_id}: knocking with the wrong password on session \
                 {session_id:#x}, it was handed session {:#x}",
                response.session_id
            ));
        }
        let restarts = self.zk().restarts.as_mut().expect("only they knock");
        restarts.knocks_refused += 1;
        self.client_disconnect(c, true);
        Ok(())
    }
}

//! Multis in core mode (half the core seeds): a client sends an atomic batch of one to three
//! ops (check, setData, create, ephemeral or not, and delete) on distinct watched znodes. Each
//! reply is judged against the common state before and after its entry: either every op took
//! effect there, or none did and the results name the first op that fails on the state
//! before, as ZooKeeper answers (0 for the ops before it, −2 for the ops after).

use zoolog_proto::{
    CheckVersionRequest, CreateRequest, DeleteRequest, ErrorCode, MultiResult, OpCode, Request,
    Response, SetDataRequest,
};

use super::{open_acl, Kind, Pending, World, PATHS};
use crate::zkcheck::{NodeState, ZkChecker};

/// The random stream of the multi choices: seeds without multis keep every other choice.
pub(super) const MULTI_STREAM: u64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MultiKind {
    Check,
    SetData,
    Create { ephemeral: bool },
    Delete,
}

#[derive(Debug, Clone)]
pub(super) struct MultiOp {
    kind: MultiKind,
    path: &'static str,
    version: i32,
    value: String,
}

impl MultiOp {
    fn request(&self) -> Request {
        let path = self.path.to_string();
        let data = Some(self.value.clone().into_bytes());
        let version = self.version;
        match self.kind {
            MultiKind::Check => Request::Check(CheckVersionRequest { path, version }),
            MultiKind::SetData => Request::SetData(SetDataRequest {
                path,
                data,
                version,
            }),
            MultiKind::Create { ephemeral } => Request::Create(CreateRequest {
                path,
                data,
                acl: Some(open_acl()),
                flags: i32::from(ephemeral),
            }),
            MultiKind::Delete => Request::Delete(DeleteRequest { path, version }),
        }
    }

    /// Why the op fails on `before`, the state of its znode, if it does: the checks
    /// ZooKeeper makes, in its order (the root is the parent, and a watched znode has no
    /// children).
    fn failure(&self, before: Option<&NodeState>) -> Option<ErrorCode> {
        let version_differs =
            |state: &NodeState| self.version != -1 && self.version != state.version;
        match (self.kind, before) {
            (MultiKind::Create { .. }, Some(_)) => Some(ErrorCode::NodeExists),
            (MultiKind::Create { .. }, None) => None,
            (_, None) => Some(ErrorCode::NoNode),
            (_, Some(state)) if version_differs(state) => Some(ErrorCode::BadVersion),
            _ => None,
        }
    }

    /// Whether `result` is this op's, done by the entry at `zxid`, which left `after`.
    fn took_effect(&self, result: &MultiResult, after: Option<&NodeState>, zxid: i64) -> bool {
        let value = Some(self.value.as_bytes());
        match (self.kind, result, after) {
            (MultiKind::Check, MultiResult::Check, Some(state)) => state.mzxid < zxid,
            (MultiKind::SetData, MultiResult::SetData(reply), Some(state)) => {
                reply.stat.mzxid == zxid
                    && state.mzxid == zxid
                    && reply.stat.version == state.version
                    && state.data.as_deref() == value
            }
            (MultiKind::Create { .. }, MultiResult::Create(reply), Some(state)) => {
                reply.path == self.path && state.czxid == zxid && state.data.as_deref() == value
            }
            (MultiKind::Delete, MultiResult::Delete, None) => true,
            _ => false,
        }
    }
}

/// The results of a multi that failed at op `failed` with `code`.
fn failed_results(count: usize, failed: usize, code: ErrorCode) -> Vec<MultiResult> {
    (0..count)
        .map(|index| match index.cmp(&failed) {
            std::cmp::Ordering::Less => MultiResult::Error(ErrorCode::Ok),
            std::cmp::Ordering::Equal => MultiResult::Error(code),
            std::cmp::Ordering::Greater => MultiResult::Error(ErrorCode::RuntimeInconsistency),
        })
        .collect()
}

/// The first op that fails on the common state before `zxid`, and why.
fn first_failing_op(
    checker: &ZkChecker,
    ops: &[MultiOp],
    zxid: i64,
) -> Result<Option<(usize, ErrorCode)>, String> {
    for (index, op) in ops.iter().enumerate() {
        if let Some(code) = op.failure(checker.state_at(op.path, zxid - 1)?) {
            return Ok(Some((index, code)));
        }
    }
    Ok(None)
}

/// Whether the multi answered `results` at `zxid` did what the common sequence says: all of
/// it, or nothing and the first op that fails on the state before named.
fn judge(
    checker: &ZkChecker,
    ops: &[MultiOp],
    results: &[MultiResult],
    zxid: i64,
) -> Result<bool, String> {
    // ZooKeeper checks the session as part of each op, so a multi of a session that ended
    // fails at its first op.
    let failure = match checker.session_check_at(zxid) {
        Some(code) => Some((0, code)),
        None => first_failing_op(checker, ops, zxid)?,
    };
    if let Some((index, code)) = failure {
        for op in ops {
            if checker.state_at(op.path, zxid)? != checker.state_at(op.path, zxid - 1)? {
                return Ok(false);
            }
        }
        return Ok(results == failed_results(ops.len(), index, code));
    }
    if results.len() != ops.len() {
        return Ok(false);
    }
    for (op, result) in ops.iter().zip(results) {
        if !op.took_effect(result, checker.state_at(op.path, zxid)?, zxid) {
            return Ok(false);
        }
    }
    Ok(true)
}

impl World {
    /// Sends a multi of one to three ops on distinct watched znodes, each op's kind, version
    /// (any, or the last one the client saw) and value from the multi stream.
    pub(super) fn issue_multi(&mut self, c: usize) {
        let zk = self.zk();
        let rng = zk.multi_rng.as_mut().expect("multis enabled");
        let client = &mut zk.clients[c];
        let count = rng.range(1, PATHS.len() as u64) as usize;
        let first = rng.below(PATHS.len() as u64) as usize;
        let mut ops = Vec::with_capacity(count);
        for offset in 0..count {
            let path = PATHS[(first + offset) % PATHS.len()];
            let seen = client.seen_version.get(path).copied();
            // Mostly ops the client's last look says may succeed, so that some multis do.
            let kind = match rng.below(8) {
                0 => MultiKind::Check,
                1 | 2 => MultiKind::SetData,
                3 => MultiKind::Delete,
                4 | 5 if seen.is_some() => MultiKind::SetData,
                _ => MultiKind::Create {
                    ephemeral: rng.chance(0.5),
                },
            };
            let version = if rng.chance(0.5) {
                -1
            } else {
                seen.unwrap_or(0)
            };
            client.values += 1;
            let value = format!("c{}v{}", client.id, client.values);
            ops.push(MultiOp {
                kind,
                path,
                version,
                value,
            });
        }
        let request = Request::Multi(ops.iter().map(MultiOp::request).collect());
        let xid = self.next_xid(c);
        let pending = Pending {
            ops,
            ..Pending::new(xid, Kind::Multi, String::new(), self.now)
        };
        self.send_request(c, pending, &request);
    }

    /// A multi answered without an error at `zxid`: its results against the common state,
    /// then what the client learns from them.
    pub(super) fn check_multi(
        &mut self,
        c: usize,
        pending: &Pending,
        zxid: i64,
        body: &[u8],
    ) -> Result<(), String> {
        let client_id = self.zk().clients[c].id;
        let results = match Response::decode(OpCode::Multi, body) {
            Ok(Response::Multi(results)) if zxid > 0 => results,
            other => {
                return Err(format!(
                    "multi: client {client_id}'s multi xid {} was answered at zxid {zxid} with \
                     {other:?}",
                    pending.xid
                ))
            }
        };
        let checker = &mut self.zk().checker;
        if checker.session_check_at(zxid) == Some(ErrorCode::SessionMoved) {
            return Err(format!(
                "sessions: client {client_id}'s multi xid {} was answered at zxid {zxid}, where \
                 another connection held its session: its connection should have closed",
                pending.xid
            ));
        }
        if !judge(checker, &pending.ops, &results, zxid)? {
            return Err(format!(
                "multi: client {client_id}'s multi xid {} of {:?} was answered {results:?} at \
                 zxid {zxid}, which the common states before and after that entry ({:?} and \
                 {:?}) do not bear out",
                pending.xid,
                pending.ops,
                states_at(checker, &pending.ops, zxid - 1)?,
                states_at(checker, &pending.ops, zxid)?,
            ));
        }
        match results.first() {
            Some(MultiResult::Error(ErrorCode::SessionExpired)) => {
                // As for any write: reconnecting tells the client for sure.
                checker.multis_failed += 1;
                self.client_disconnect(c, true);
                return Ok(());
            }
            Some(MultiResult::Error(_)) => checker.multis_failed += 1,
            _ => checker.multis_applied += 1,
        }
        let client = &mut self.zk().clients[c];
        for (op, result) in pending.ops.iter().zip(&results) {
            match (op.kind, result) {
                (MultiKind::SetData, MultiResult::SetData(reply)) => {
                    client
                        .seen_version
                        .insert(op.path.to_string(), reply.stat.version);
                }
                (MultiKind::Create { ephemeral: true }, MultiResult::Create(_)) => {
                    client.ephemerals.push(op.path.to_string());
                }
                (MultiKind::Delete, MultiResult::Delete) => {
                    client.ephemerals.retain(|path| path != op.path);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn states_at<'a>(
    checker: &'a ZkChecker,
    ops: &[MultiOp],
    zxid: i64,
) -> Result<Vec<Option<&'a NodeState>>, String> {
    ops.iter()
        .map(|op| checker.state_at(op.path, zxid))
        .collect()
}

//! Client writes (§5.1, §5.2, §5.5, §5.7, §9.3): each check in ZooKeeper's order, the first
//! failure deciding the error code, and nothing mutated before every check has passed.

use bytes::Bytes;

use crate::acl;
use crate::node::{Children, Node, NodeKind};
use crate::path;
use crate::tree::{is_protected, node_mut, DataTree, Txn};
use std::borrow::Cow;
use std::sync::Arc;
use zoolog_proto::codes::perms;
use zoolog_proto::request::allowed_in_multi;
use zoolog_proto::{
    Acl, CheckVersionRequest, Create2Response, CreateMode, CreateRequest, CreateResponse,
    CreateTtlRequest, Data, DeleteRequest, ErrorCode, MultiResult, OpCode, PathRequest, Request,
    Response, SetAclRequest, SetDataRequest, StatResponse,
};

/// Largest TTL ZooKeeper can encode: 40 bits of milliseconds.
const TTL_MS_MAX: i64 = (1 << 40) - 1;

/// The fields every create opcode carries; `ttl_ms` is −1 unless the opcode was createTTL.
struct CreateArgs<'a> {
    path: &'a str,
    data: &'a Data,
    acl: Option<&'a [Acl]>,
    flags: i32,
    ttl_ms: i64,
}

impl<'a> CreateArgs<'a> {
    fn plain(request: &'a CreateRequest) -> Self {
        CreateArgs {
            path: &request.path,
            data: &request.data,
            acl: request.acl.as_deref(),
            flags: request.flags,
            ttl_ms: -1,
        }
    }

    fn ttl(request: &'a CreateTtlRequest) -> Self {
        let CreateTtlRequest {
            path,
            data,
            acl,
            flags,
            ttl,
        } = request;
        CreateArgs {
            path,
            data,
            acl: acl.as_deref(),
            flags: *flags,
            ttl_ms: *ttl,
        }
    }
}

/// BADVERSION unless `expected` is −1 (any) or equals `current`.
fn check_version(current: i32, expected: i32) -> Result<(), ErrorCode> {
    if expected == -1 || expected == current {
        Ok(())
    } else {
        Err(ErrorCode::BadVersion)
    }
}

fn data_length(data: &Data) -> i64 {
    data.as_ref().map_or(0, Vec::len) as i64
}

impl DataTree {
    /// One client write request, multi included.
    pub(crate) fn write(
        &mut self,
        txn: &mut Txn<'_>,
        request: &Request,
    ) -> Result<Response, ErrorCode> {
        match request {
            Request::Multi(ops) => self.multi(txn, ops),
            // check is only meaningful inside a multi.
            Request::Check(_) => Err(ErrorCode::Unimplemented),
            Request::Reconfig(_) => Err(ErrorCode::ReconfigDisabled),
            op => self.write_op(txn, op),
        }
    }

    fn write_op(&mut self, txn: &mut Txn<'_>, request: &Request) -> Result<Response, ErrorCode> {
        match request {
            Request::Create(r) => self.create(txn, CreateArgs::plain(r)).map(Response::Create),
            Request::Create2(r) | Request::CreateContainer(r) => {
                self.create2(txn, CreateArgs::plain(r))
            }
            Request::CreateTtl(r) => self.create2(txn, CreateArgs::ttl(r)),
            Request::Delete(r) => self.delete(txn, r).map(|()| Response::Empty),
            Request::DeleteContainer(r) => self
                .delete_container(txn, &r.path)
                .map(|()| Response::Empty),
            Request::SetData(r) => self
                .set_data(txn, r)
                .map(|stat| Response::Stat(StatResponse { stat })),
            Request::SetAcl(r) => self
                .set_acl(txn, r)
                .map(|stat| Response::Stat(StatResponse { stat })),
            Request::Check(r) => self.check(txn, r).map(|()| Response::Empty),
            Request::Sync(r) => self.sync(txn, r).map(Response::Sync),
            _ => Err(ErrorCode::Unimplemented),
        }
    }

    fn create2(&mut self, txn: &mut Txn<'_>, args: CreateArgs<'_>) -> Result<Response, ErrorCode> {
        let CreateResponse { path } = self.create(txn, args)?;
        let stat = self.nodes[&path].stat();
        Ok(Response::Create2(Create2Response { path, stat }))
    }

    /// §5.1, checks 0–12 in order.
    fn create(
        &mut self,
        txn: &mut Txn<'_>,
        args: CreateArgs<'_>,
    ) -> Result<CreateResponse, ErrorCode> {
        let mode = CreateMode::from_i32(args.flags).ok_or(ErrorCode::BadArguments)?;
        if mode.is_ttl() && !self.config.extended_types_enabled {
            return Err(ErrorCode::Unimplemented);
        }
        let ttl_is_valid = if mode.is_ttl() {
            args.ttl_ms > 0 && args.ttl_ms <= TTL_MS_MAX
        } else {
            args.ttl_ms < 0
        };
        if !ttl_is_valid {
            return Err(ErrorCode::BadArguments);
        }
        self.check_session(txn)?;
        let parent_path = path::parent_of(args.path)
            .filter(|_| !args.path.contains('\0'))
            .ok_or(ErrorCode::BadArguments)?;
        let acl = acl::fix_up(args.acl, txn.identities)?;
        let parent = self.nodes.get(parent_path).ok_or(ErrorCode::NoNode)?;
        self.require(&parent.acl, perms::CREATE, txn.identities)?;
        let path = if mode.is_sequential() {
            format!("{}{:010}", args.path, parent.child_creations)
        } else {
            args.path.to_owned()
        };
        if !path::is_valid(&path) {
            return Err(ErrorCode::BadArguments);
        }
        if self.nodes.contains_key(&path) {
            return Err(ErrorCode::NodeExists);
        }
        if parent.is_session_ephemeral() {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        self.check_quota(&path, 1, data_length(args.data))?;
        assert_eq!(
            path::parent_of(&path),
            Some(parent_path),
            "a sequence suffix never adds a segment"
        );
        let kind = match mode {
            CreateMode::Ephemeral | CreateMode::EphemeralSequential => NodeKind::Ephemeral {
                owner_session_id: txn.session_id,
            },
            CreateMode::Container => NodeKind::Container,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl => {
                NodeKind::Ttl {
                    ttl_ms: args.ttl_ms,
                }
            }
            CreateMode::Persistent | CreateMode::PersistentSequential => NodeKind::Persistent,
        };
        // Children usually share their parent's ACL; sharing the list keeps memory per node small.
        let acl = if *parent.acl == acl {
            parent.acl.clone()
        } else {
            Arc::new(acl)
        };
        let node = Node {
            data: args.data.as_deref().map(Bytes::copy_from_slice),
            acl,
            kind,
            czxid: txn.zxid,
            mzxid: txn.zxid,
            ctime_ms: txn.time_ms,
            mtime_ms: txn.time_ms,
            version: 0,
            aversion: 0,
            child_creations: 0,
            pzxid: txn.zxid,
            children: Children::default(),
        };
        self.insert_node(&path, node, txn);
        Ok(CreateResponse { path })
    }

    /// §5.2.
    fn delete(&mut self, txn: &mut Txn<'_>, request: &DeleteRequest) -> Result<(), ErrorCode> {
        self.check_session(txn)?;
        let parent_path = deletable_parent(&request.path)?;
        let parent = self.nodes.get(parent_path).ok_or(ErrorCode::NoNode)?;
        self.require(&parent.acl, perms::DELETE, txn.identities)?;
        let node = self.nodes.get(&request.path).ok_or(ErrorCode::NoNode)?;
        check_version(node.version, request.version)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.remove_node(&request.path, txn);
        Ok(())
    }

    /// deleteContainer (20): ZooKeeper's reaper op, reachable by clients; no session or ACL
    /// check, and BADVERSION for a session ephemeral (its quirk).
    fn delete_container(&mut self, txn: &mut Txn<'_>, path: &str) -> Result<(), ErrorCode> {
        deletable_parent(path)?;
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        if node.is_session_ephemeral() {
            return Err(ErrorCode::BadVersion);
        }
        self.remove_node(path, txn);
        Ok(())
    }

    /// §5.5.
    fn set_data(
        &mut self,
        txn: &mut Txn<'_>,
        request: &SetDataRequest,
    ) -> Result<zoolog_proto::Stat, ErrorCode> {
        self.check_session(txn)?;
        let node = self.existing_valid_path(&request.path)?;
        self.require(&node.acl, perms::WRITE, txn.identities)?;
        self.check_quota(
            &request.path,
            0,
            data_length(&request.data) - node.data_length() as i64,
        )?;
        check_version(node.version, request.version)?;
        Ok(self.set_node_data(
            &request.path,
            request.data.as_deref().map(Bytes::copy_from_slice),
            txn,
        ))
    }

    /// §5.7: bumps aversion only, fires nothing.
    fn set_acl(
        &mut self,
        txn: &mut Txn<'_>,
        request: &SetAclRequest,
    ) -> Result<zoolog_proto::Stat, ErrorCode> {
        self.check_session(txn)?;
        if !path::is_valid(&request.path) {
            return Err(ErrorCode::BadArguments);
        }
        let acl = acl::fix_up(request.acl.as_deref(), txn.identities)?;
        let node = self.nodes.get(&request.path).ok_or(ErrorCode::NoNode)?;
        self.require(&node.acl, perms::ADMIN, txn.identities)?;
        check_version(node.aversion, request.version)?;
        let node = node_mut(&mut self.nodes, &request.path).expect("checked above");
        node.acl = Arc::new(acl);
        node.aversion = node.aversion.wrapping_add(1);
        Ok(node.stat())
    }

    /// §9.3 check: exists, READ, version.
    fn check(&mut self, txn: &mut Txn<'_>, request: &CheckVersionRequest) -> Result<(), ErrorCode> {
        self.check_session(txn)?;
        let node = self.existing_valid_path(&request.path)?;
        self.require(&node.acl, perms::READ, txn.identities)?;
        check_version(node.version, request.version)
    }

    /// sync (9) ordered through the log: ZooKeeper checks the session only (no path or ACL
    /// check) and answers with the request's path. Changes nothing, fires nothing.
    fn sync(&mut self, txn: &mut Txn<'_>, request: &PathRequest) -> Result<PathRequest, ErrorCode> {
        self.check_session(txn)?;
        Ok(request.clone())
    }

    fn existing_valid_path(&self, path: &str) -> Result<&Node, ErrorCode> {
        if !path::is_valid(path) {
            return Err(ErrorCode::BadArguments);
        }
        self.nodes
            .get(path)
            .map(|node| &**node)
            .ok_or(ErrorCode::NoNode)
    }

    /// NOAUTH unless the caller holds one of `wanted_perms` on `acl`.
    pub(crate) fn require(
        &self,
        acl: &[Acl],
        wanted_perms: i32,
        identities: &[zoolog_proto::Id],
    ) -> Result<(), ErrorCode> {
        if acl::is_permitted(acl, identities, wanted_perms, self.config.skip_acl) {
            Ok(())
        } else {
            Err(ErrorCode::NoAuth)
        }
    }

    /// §9.3: ops run in order on a clone (O(1) with persistent maps), each seeing the ones
    /// before; the clone replaces the tree only if all succeed. One zxid and time for all.
    fn multi(&mut self, txn: &mut Txn<'_>, ops: &[Request]) -> Result<Response, ErrorCode> {
        if !ops
            .iter()
            .all(|op| allowed_in_multi(OpCode::Multi, op.opcode()))
        {
            return Err(ErrorCode::MarshallingError);
        }
        let mut attempt = self.clone();
        let triggers_before = txn.triggers.len();
        let mut results = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            let op = rebuilt_from_flags(op);
            match attempt.write_op(txn, &op) {
                Ok(response) => results.push(multi_result(&op, response)),
                Err(code) => {
                    txn.triggers.truncate(triggers_before);
                    return Ok(Response::Multi(failed_multi_results(
                        ops.len(),
                        index,
                        code,
                    )));
                }
            }
        }
        *self = attempt;
        Ok(Response::Multi(results))
    }
}

/// The reference server rebuilds each create op of a multi from its flags alone, whatever opcode
/// it came with (found by the differential test against Apache ZooKeeper): create2 runs as a
/// plain create and reports type 1, a container flag runs as createContainer, and a createTTL
/// whose flags are not a TTL mode runs as a plain create with its ttl dropped. An op with a TTL
/// flag but no ttl field is left alone for the create checks to refuse.
fn rebuilt_from_flags(op: &Request) -> Cow<'_, Request> {
    let (create, ttl) = match op {
        Request::Create(create) | Request::Create2(create) | Request::CreateContainer(create) => {
            (create.clone(), None)
        }
        Request::CreateTtl(r) => {
            let create = CreateRequest {
                path: r.path.clone(),
                data: r.data.clone(),
                acl: r.acl.clone(),
                flags: r.flags,
            };
            (create, Some(r.ttl))
        }
        other => return Cow::Borrowed(other),
    };
    Cow::Owned(match (CreateMode::from_i32(create.flags), ttl) {
        (Some(mode), Some(ttl)) if mode.is_ttl() => Request::CreateTtl(CreateTtlRequest {
            path: create.path,
            data: create.data,
            acl: create.acl,
            flags: create.flags,
            ttl,
        }),
        (Some(mode), None) if mode.is_ttl() => return Cow::Borrowed(op),
        (Some(CreateMode::Container), _) => Request::CreateContainer(create),
        _ => Request::Create(create),
    })
}

/// The parent of a path a client may delete: BADARGUMENTS for paths without '/', with NUL, or
/// naming a built-in node.
fn deletable_parent(path: &str) -> Result<&str, ErrorCode> {
    path::parent_of(path)
        .filter(|_| !path.contains('\0') && !is_protected(path))
        .ok_or(ErrorCode::BadArguments)
}

/// A successful op's entry in the multi reply; create2, createContainer and createTTL all
/// report as Create2.
fn multi_result(op: &Request, response: Response) -> MultiResult {
    match (op, response) {
        (_, Response::Create(created)) => MultiResult::Create(created),
        (_, Response::Create2(created)) => MultiResult::Create2(created),
        (_, Response::Stat(stat)) => MultiResult::SetData(stat),
        (Request::Check(_), Response::Empty) => MultiResult::Check,
        (Request::Delete(_), Response::Empty) => MultiResult::Delete,
        (op, response) => unreachable!("{:?} answered {response:?} inside a multi", op.opcode()),
    }
}

/// A failed multi's results: 0 for ops before the failure, its code, −2 for the rest.
fn failed_multi_results(op_count: usize, failed_index: usize, code: ErrorCode) -> Vec<MultiResult> {
    (0..op_count)
        .map(|index| match index.cmp(&failed_index) {
            std::cmp::Ordering::Less => MultiResult::Error(ErrorCode::Ok),
            std::cmp::Ordering::Equal => MultiResult::Error(code),
            std::cmp::Ordering::Greater => MultiResult::Error(ErrorCode::RuntimeInconsistency),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::tree::node_mut;
    use crate::{Command, CommandOp, DataTree, Outcome, TreeConfig};
    use zoolog_proto::*;

    fn apply(tree: &mut DataTree, zxid: i64, session_id: i64, request: Request) -> Outcome {
        let op = CommandOp::Write {
            request,
            identities: vec![],
        };
        tree.apply(
            zxid,
            &Command {
                session_id,
                cxid: 0,
                time_ms: 0,
                owner: 0,
                op,
            },
        )
        .outcome
    }

    /// Versions are signed 32-bit and wrap as in ZooKeeper 3.9 (−2 is followed by −1).
    #[test]
    fn versions_wrap_like_java_ints() {
        let mut tree = DataTree::new(TreeConfig::default());
        let session = (1 << 56) | 1;
        tree.apply(
            1,
            &Command {
                session_id: 0,
                cxid: 0,
                time_ms: 0,
                owner: 0,
                op: CommandOp::CreateSession {
                    timeout_ms: 1,
                    password: vec![],
                },
            },
        );
        let acl = Some(crate::acl::open_acl_unsafe());
        apply(
            &mut tree,
            2,
            session,
            Request::Create(CreateRequest {
                path: "/v".into(),
                data: None,
                acl: acl.clone(),
                flags: 0,
            }),
        );
        let node = node_mut(&mut tree.nodes, "/v").unwrap();
        node.version = i32::MAX;
        node.aversion = -2;
        node.child_creations = i32::MAX;
        let set = Request::SetData(SetDataRequest {
            path: "/v".into(),
            data: None,
            version: i32::MAX,
        });
        assert!(
            matches!(apply(&mut tree, 3, session, set), Outcome::Reply(Ok(Response::Stat(r))) if r.stat.version == i32::MIN)
        );
        let set_acl = Request::SetAcl(SetAclRequest {
            path: "/v".into(),
            acl: acl.clone(),
            version: -2,
        });
        assert!(
            matches!(apply(&mut tree, 4, session, set_acl), Outcome::Reply(Ok(Response::Stat(r))) if r.stat.aversion == -1)
        );
        let seq = Request::Create(CreateRequest {
            path: "/v/s".into(),
            data: None,
            acl: acl.clone(),
            flags: 2,
        });
        let Outcome::Reply(Ok(Response::Create(created))) =
            apply(&mut tree, 5, session, seq.clone())
        else {
            panic!()
        };
        assert_eq!(created.path, "/v/s2147483647");
        let Outcome::Reply(Ok(Response::Create(created))) = apply(&mut tree, 6, session, seq)
        else {
            panic!()
        };
        assert_eq!(created.path, "/v/s-2147483648");
        assert_eq!(
            tree.stat("/v").unwrap().cversion,
            2i32.wrapping_mul(i32::MIN.wrapping_add(1)).wrapping_sub(2)
        );
    }
}

//! Reads (§5.3, §5.4, §5.6, §5.8, §5.17, §5.18, §9.4), evaluated against the current state.

use crate::acl;
use crate::tree::{DataTree, Read, WatchKind};
use zoolog_proto::codes::perms;
use zoolog_proto::{
    ErrorCode, GetAclResponse, GetAllChildrenNumberResponse, GetChildren2Response,
    GetChildrenResponse, GetDataResponse, GetEphemeralsResponse, Id, MultiResult, PathWatchRequest,
    Request, Response, StatResponse,
};

impl Read {
    fn answer(result: Result<Response, ErrorCode>) -> Read {
        Read {
            result,
            watch: None,
        }
    }

    /// The watch is left only when asked for and the read succeeded.
    fn watching(
        result: Result<Response, ErrorCode>,
        request: &PathWatchRequest,
        kind: WatchKind,
    ) -> Read {
        let watch = (request.watch && result.is_ok()).then(|| (request.path.clone(), kind));
        Read { result, watch }
    }
}

impl DataTree {
    /// A read request against the current state, with the watch to register if any. Requests
    /// that are not reads answer UNIMPLEMENTED.
    pub fn read(&self, session_id: i64, identities: &[Id], request: &Request) -> Read {
        match request {
            Request::Exists(r) => self.exists(r, identities),
            Request::GetData(r) => Read::watching(
                self.get_data(&r.path, identities).map(Response::GetData),
                r,
                WatchKind::Data,
            ),
            Request::GetChildren(r) => {
                let result = self
                    .get_children(&r.path, identities)
                    .map(|(children, _)| GetChildrenResponse { children });
                Read::watching(result.map(Response::GetChildren), r, WatchKind::Child)
            }
            Request::GetChildren2(r) => {
                let result = self
                    .get_children(&r.path, identities)
                    .map(|(children, stat)| GetChildren2Response { children, stat });
                Read::watching(result.map(Response::GetChildren2), r, WatchKind::Child)
            }
            Request::GetAcl(r) => Read::answer(self.get_acl(&r.path, identities)),
            Request::GetAllChildrenNumber(r) => {
                Read::answer(self.all_children_number(&r.path, identities))
            }
            Request::GetEphemerals(r) => {
                Read::answer(Ok(self.ephemerals_of(session_id, r.prefix_path.as_deref())))
            }
            // Watch flags inside multiRead are not honoured: Read carries one watch, and the
            // Java client always sends false.
            Request::MultiRead(ops) => Read::answer(Ok(Response::Multi(
                ops.iter()
                    .map(|op| self.multi_read_op(op, identities))
                    .collect(),
            ))),
            _ => Read::answer(Err(ErrorCode::Unimplemented)),
        }
    }

    /// §5.3: an exists watch is left even when the node is missing (that is how NodeCreated is
    /// delivered), but not after NOAUTH or BADARGUMENTS.
    fn exists(&self, request: &PathWatchRequest, identities: &[Id]) -> Read {
        if request.path.contains('\0') {
            return Read::answer(Err(ErrorCode::BadArguments));
        }
        let result = match self.nodes.get(read_key(&request.path)) {
            None => Err(ErrorCode::NoNode),
            Some(node) => match self.require(&node.acl, perms::READ, identities) {
                Err(code) => return Read::answer(Err(code)),
                Ok(()) => Ok(Response::Stat(StatResponse { stat: node.stat() })),
            },
        };
        let watch = request
            .watch
            .then(|| (request.path.clone(), WatchKind::Data));
        Read { result, watch }
    }

    fn readable_node(
        &self,
        path: &str,
        identities: &[Id],
    ) -> Result<&crate::node::Node, ErrorCode> {
        let node = self.nodes.get(read_key(path)).ok_or(ErrorCode::NoNode)?;
        self.require(&node.acl, perms::READ, identities)?;
        Ok(node)
    }

    fn get_data(&self, path: &str, identities: &[Id]) -> Result<GetDataResponse, ErrorCode> {
        let node = self.readable_node(path, identities)?;
        Ok(GetDataResponse {
            data: node.data.clone(),
            stat: node.stat(),
        })
    }

    fn get_children(
        &self,
        path: &str,
        identities: &[Id],
    ) -> Result<(Vec<String>, zoolog_proto::Stat), ErrorCode> {
        let node = self.readable_node(path, identities)?;
        Ok((node.child_names(), node.stat()))
    }

    /// §5.6: READ or ADMIN; digest hashes redacted for callers without ADMIN.
    fn get_acl(&self, path: &str, identities: &[Id]) -> Result<Response, ErrorCode> {
        let node = self.nodes.get(read_key(path)).ok_or(ErrorCode::NoNode)?;
        self.require(&node.acl, perms::READ | perms::ADMIN, identities)?;
        let acl = match self.require(&node.acl, perms::ADMIN, identities) {
            Ok(()) => node.acl.to_vec(),
            Err(_) => acl::redacted(&node.acl),
        };
        Ok(Response::GetAcl(GetAclResponse {
            acl,
            stat: node.stat(),
        }))
    }

    /// §5.18: descendants, not counting the node itself.
    fn all_children_number(&self, path: &str, identities: &[Id]) -> Result<Response, ErrorCode> {
        self.readable_node(path, identities)?;
        let path = read_key(path);
        let descendants = if path == "/" {
            self.nodes.len() as u64 - 1
        } else {
            self.subtree_totals(path).0 - 1
        };
        Ok(Response::GetAllChildrenNumber(
            GetAllChildrenNumberResponse {
                total_number: descendants as i32,
            },
        ))
    }

    /// §5.17: the caller's own ephemerals, filtered by plain string prefix unless the prefix is
    /// null, blank or "/" (judged after Java's trim, matched untrimmed).
    fn ephemerals_of(&self, session_id: i64, prefix: Option<&str>) -> Response {
        let prefix = prefix.filter(|p| !matches!(p.trim_matches(|c: char| c <= ' '), "" | "/"));
        let ephemerals = self
            .sessions
            .get(&session_id)
            .map_or_else(Vec::new, |session| {
                session
                    .ephemerals
                    .iter()
                    .filter(|path| prefix.is_none_or(|p| path.starts_with(p)))
                    .cloned()
                    .collect()
            });
        Response::GetEphemerals(GetEphemeralsResponse { ephemerals })
    }

    fn multi_read_op(&self, op: &Request, identities: &[Id]) -> MultiResult {
        let result = match op {
            Request::GetData(r) => self.get_data(&r.path, identities).map(MultiResult::GetData),
            Request::GetChildren(r) => self
                .get_children(&r.path, identities)
                .map(|(children, _)| MultiResult::GetChildren(GetChildrenResponse { children })),
            _ => Err(ErrorCode::MarshallingError),
        };
        result.unwrap_or_else(MultiResult::Error)
    }
}

/// Reads of "" find the root, as in Java where the root is stored under "" as well as "/".
/// A watch set with "" stays on "" (and so never fires), also as in Java.
fn read_key(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

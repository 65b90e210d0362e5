//! Long random operation sequences applied both to DataTree and to a deliberately simple
//! reference model (a BTreeMap of plain nodes, children found by scanning), comparing every
//! result, every trigger list and the whole visible state after each step. Along the way the
//! tree is replaced by its own snapshot round trip, and a second tree fed the same (encoded and
//! decoded) commands must end with an identical snapshot.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use zoolog_proto::codes::perms;
use zoolog_proto::*;
use zoolog_tree::*;

const SEEDS: u64 = 200;
const STEPS: usize = 400;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

#[derive(Clone, Debug)]
struct ModelNode {
    data: Option<Vec<u8>>,
    acl: Vec<Acl>,
    kind: Kind,
    czxid: i64,
    mzxid: i64,
    ctime: i64,
    mtime: i64,
    version: i32,
    aversion: i32,
    creations: i32,
    pzxid: i64,
}

#[derive(Clone)]
struct Model {
    nodes: BTreeMap<String, ModelNode>,
    /// Live sessions: id → (touched_at, owner).
    sessions: BTreeMap<i64, (i64, u64)>,
    triggers: Vec<(Table, String, EventType)>,
}

fn parent(path: &str) -> String {
    match path.rfind('/') {
        Some(0) => "/".into(),
        Some(i) => path[..i].into(),
        None => unreachable!(),
    }
}

fn world(perms: i32) -> Acl {
    Acl {
        perms,
        id: Id::new("world", "anyone"),
    }
}

fn fresh(acl: Vec<Acl>) -> ModelNode {
    ModelNode {
        data: Some(vec![]),
        acl,
        kind: Kind::Persistent,
        czxid: 0,
        mzxid: 0,
        ctime: 0,
        mtime: 0,
        version: 0,
        aversion: 0,
        creations: 0,
        pzxid: 0,
    }
}

/// Everything the model needs to know about one applied command.
struct Ctx<'a> {
    zxid: i64,
    time: i64,
    session: i64,
    owner: u64,
    ids: &'a [Id],
}

fn permitted(acl: &[Acl], ids: &[Id], perm: i32) -> bool {
    acl.is_empty()
        || ids.iter().any(|id| id.scheme == "super")
        || acl.iter().any(|a| {
            a.perms & perm != 0
                && ((a.id.scheme == "world" && a.id.id == "anyone") || ids.contains(&a.id))
        })
}

fn simple_valid(path: &str) -> bool {
    path == "/"
        || (path.starts_with('/')
            && !path.ends_with('/')
            && path[1..]
                .split('/')
                .all(|s| !s.is_empty() && s != "." && s != ".."))
}

impl Model {
    fn new() -> Model {
        let mut nodes = BTreeMap::new();
        for path in ["/", "/zookeeper", "/zookeeper/quota"] {
            nodes.insert(path.to_owned(), fresh(vec![world(perms::ALL)]));
        }
        nodes.insert(
            "/zookeeper/config".into(),
            ModelNode {
                aversion: -1,
                ..fresh(vec![world(perms::READ)])
            },
        );
        Model {
            nodes,
            sessions: BTreeMap::new(),
            triggers: vec![],
        }
    }

    fn children(&self, path: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .nodes
            .keys()
            .filter(|p| *p != "/" && parent(p) == path)
            .map(|p| p.rsplit('/').next().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }

    fn stat(&self, path: &str) -> Stat {
        let n = &self.nodes[path];
        let num_children = self.children(path).len() as i32;
        Stat {
            czxid: n.czxid,
            mzxid: n.mzxid,
            ctime: n.ctime,
            mtime: n.mtime,
            version: n.version,
            cversion: n.creations.wrapping_mul(2).wrapping_sub(num_children),
            aversion: n.aversion,
            ephemeral_owner: if let Kind::Ephemeral(s) = n.kind {
                s
            } else {
                0
            },
            data_length: n.data.as_ref().map_or(0, |d| d.len() as i32),
            num_children,
            pzxid: n.pzxid,
        }
    }

    fn fix_acl(acl: &Option<Vec<Acl>>, ids: &[Id]) -> Result<Vec<Acl>, ErrorCode> {
        let acl = acl
            .clone()
            .filter(|a| !a.is_empty())
            .ok_or(ErrorCode::InvalidAcl)?;
        let mut out = vec![];
        for entry in acl {
            if entry.id.scheme == "auth" {
                let digests: Vec<_> = ids.iter().filter(|id| id.scheme == "digest").collect();
                if digests.is_empty() {
                    return Err(ErrorCode::InvalidAcl);
                }
                out.extend(digests.into_iter().map(|id| Acl {
                    perms: entry.perms,
                    id: id.clone(),
                }));
            } else if !out.contains(&entry) {
                out.push(entry);
            }
        }
        Ok(out)
    }

    fn live(&self, c: &Ctx) -> Result<(), ErrorCode> {
        match self.sessions.get(&c.session) {
            None => Err(ErrorCode::SessionExpired),
            Some(&(_, owner)) if owner != c.owner => Err(ErrorCode::SessionMoved),
            Some(_) => Ok(()),
        }
    }

    fn create(&mut self, c: &Ctx, r: &CreateTtlRequest) -> Result<String, ErrorCode> {
        if !(0..=6).contains(&r.flags) {
            return Err(ErrorCode::BadArguments);
        }
        let ttl_mode = r.flags == 5 || r.flags == 6;
        if (ttl_mode && !(r.ttl > 0 && r.ttl < 1 << 40)) || (!ttl_mode && r.ttl >= 0) {
            return Err(ErrorCode::BadArguments);
        }
        self.live(c)?;
        if !r.path.contains('/') {
            return Err(ErrorCode::BadArguments);
        }
        let acl = Model::fix_acl(&r.acl, c.ids)?;
        let parent_path = parent(&r.path);
        let p = self.nodes.get(&parent_path).ok_or(ErrorCode::NoNode)?;
        if !permitted(&p.acl, c.ids, perms::CREATE) {
            return Err(ErrorCode::NoAuth);
        }
        let path = if [2, 3, 6].contains(&r.flags) {
            format!("{}{:010}", r.path, p.creations)
        } else {
            r.path.clone()
        };
        if !simple_valid(&path) {
            return Err(ErrorCode::BadArguments);
        }
        if self.nodes.contains_key(&path) {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(p.kind, Kind::Ephemeral(_)) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let kind = match r.flags {
            1 | 3 => Kind::Ephemeral(c.session),
            4 => Kind::Container,
            5 | 6 => Kind::Ttl(r.ttl),
            _ => Kind::Persistent,
        };
        let node = ModelNode {
            data: r.data.clone(),
            acl,
            kind,
            czxid: c.zxid,
            mzxid: c.zxid,
            ctime: c.time,
            mtime: c.time,
            version: 0,
            aversion: 0,
            creations: 0,
            pzxid: c.zxid,
        };
        let p = self.nodes.get_mut(&parent_path).unwrap();
        p.creations = p.creations.wrapping_add(1);
        p.pzxid = c.zxid;
        self.nodes.insert(path.clone(), node);
        self.triggers
            .push((Table::Data, path.clone(), EventType::NodeCreated));
        self.triggers
            .push((Table::Child, parent_path, EventType::NodeChildrenChanged));
        Ok(path)
    }

    fn remove(&mut self, c: &Ctx, path: &str) {
        self.nodes.remove(path);
        let parent_path = parent(path);
        self.nodes.get_mut(&parent_path).unwrap().pzxid = c.zxid;
        self.triggers
            .push((Table::Data, path.into(), EventType::NodeDeleted));
        self.triggers
            .push((Table::Child, path.into(), EventType::NodeDeleted));
        self.triggers
            .push((Table::Child, parent_path, EventType::NodeChildrenChanged));
    }

    fn delete(&mut self, c: &Ctx, r: &DeleteRequest) -> Result<(), ErrorCode> {
        self.live(c)?;
        if !r.path.contains('/')
            || ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"]
                .contains(&r.path.as_str())
        {
            return Err(ErrorCode::BadArguments);
        }
        let p = self.nodes.get(&parent(&r.path)).ok_or(ErrorCode::NoNode)?;
        if !permitted(&p.acl, c.ids, perms::DELETE) {
            return Err(ErrorCode::NoAuth);
        }
        let n = self.nodes.get(&r.path).ok_or(ErrorCode::NoNode)?;
        if r.version != -1 && r.version != n.version {
            return Err(ErrorCode::BadVersion);
        }
        if !self.children(&r.path).is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.remove(c, &r.path);
        Ok(())
    }

    fn existing(&self, c: &Ctx, path: &str, perm: i32) -> Result<&ModelNode, ErrorCode> {
        self.live(c)?;
        if !simple_valid(path) {
            return Err(ErrorCode::BadArguments);
        }
        let n = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if permitted(&n.acl, c.ids, perm) {
            Ok(n)
        } else {
            Err(ErrorCode::NoAuth)
        }
    }

    fn set_data(&mut self, c: &Ctx, r: &SetDataRequest) -> Result<Stat, ErrorCode> {
        let n = self.existing(c, &r.path, perms::WRITE)?;
        if r.version != -1 && r.version != n.version {
            return Err(ErrorCode::BadVersion);
        }
        let n = self.nodes.get_mut(&r.path).unwrap();
        n.data = r.data.clone();
        n.version = n.version.wrapping_add(1);
        n.mzxid = c.zxid;
        n.mtime = c.time;
        self.triggers
            .push((Table::Data, r.path.clone(), EventType::NodeDataChanged));
        Ok(self.stat(&r.path))
    }

    fn set_acl(&mut self, c: &Ctx, r: &SetAclRequest) -> Result<Stat, ErrorCode> {
        self.live(c)?;
        if !simple_valid(&r.path) {
            return Err(ErrorCode::BadArguments);
        }
        let acl = Model::fix_acl(&r.acl, c.ids)?;
        let n = self.nodes.get(&r.path).ok_or(ErrorCode::NoNode)?;
        if !permitted(&n.acl, c.ids, perms::ADMIN) {
            return Err(ErrorCode::NoAuth);
        }
        if r.version != -1 && r.version != n.aversion {
            return Err(ErrorCode::BadVersion);
        }
        let n = self.nodes.get_mut(&r.path).unwrap();
        n.acl = acl;
        n.aversion += 1;
        Ok(self.stat(&r.path))
    }

    fn op(&mut self, c: &Ctx, request: &Request) -> Result<Response, ErrorCode> {
        let as_ttl = |r: &CreateRequest| CreateTtlRequest {
            path: r.path.clone(),
            data: r.data.clone(),
            acl: r.acl.clone(),
            flags: r.flags,
            ttl: -1,
        };
        let create2 = |m: &mut Model, r: &CreateTtlRequest| {
            m.create(c, r).map(|path| {
                Response::Create2(Create2Response {
                    stat: m.stat(&path),
                    path,
                })
            })
        };
        match request {
            Request::Create(r) => self
                .create(c, &as_ttl(r))
                .map(|path| Response::Create(CreateResponse { path })),
            Request::Create2(r) | Request::CreateContainer(r) => create2(self, &as_ttl(r)),
            Request::CreateTtl(r) => create2(self, r),
            Request::Delete(r) => self.delete(c, r).map(|()| Response::Empty),
            Request::SetData(r) => self
                .set_data(c, r)
                .map(|stat| Response::Stat(StatResponse { stat })),
            Request::SetAcl(r) => self
                .set_acl(c, r)
                .map(|stat| Response::Stat(StatResponse { stat })),
            Request::Check(r) => {
                let n = self.existing(c, &r.path, perms::READ)?;
                if r.version != -1 && r.version != n.version {
                    return Err(ErrorCode::BadVersion);
                }
                Ok(Response::Empty)
            }
            Request::Sync(r) => {
                self.live(c)?;
                Ok(Response::Sync(r.clone()))
            }
            Request::Multi(ops) => {
                let saved = self.clone();
                let mut results = vec![];
                for (i, op) in ops.iter().enumerate() {
                    let op = &model_multi_op(op);
                    match self.op(c, op) {
                        Ok(Response::Create(r)) => results.push(MultiResult::Create(r)),
                        Ok(Response::Create2(r)) => results.push(MultiResult::Create2(r)),
                        Ok(Response::Stat(r)) => results.push(MultiResult::SetData(r)),
                        Ok(_) if matches!(op, Request::Check(_)) => {
                            results.push(MultiResult::Check)
                        }
                        Ok(_) => results.push(MultiResult::Delete),
                        Err(code) => {
                            *self = saved;
                            let mut failed = vec![MultiResult::Error(ErrorCode::Ok); i];
                            failed.push(MultiResult::Error(code));
                            failed.resize(
                                ops.len(),
                                MultiResult::Error(ErrorCode::RuntimeInconsistency),
                            );
                            return Ok(Response::Multi(failed));
                        }
                    }
                }
                Ok(Response::Multi(results))
            }
            _ => unreachable!(),
        }
    }

    fn apply(&mut self, zxid: i64, command: &Command, config: &TreeConfig) -> Outcome {
        self.triggers.clear();
        let ids: &[Id] = match &command.op {
            CommandOp::Write { identities, .. } => identities,
            _ => &[],
        };
        let c = Ctx {
            zxid,
            time: command.time_ms,
            session: command.session_id,
            owner: command.owner,
            ids,
        };
        match &command.op {
            CommandOp::CreateSession {
                timeout_ms,
                password,
            } => {
                let session_id = (1 << 56) | zxid;
                self.sessions.insert(session_id, (zxid, command.owner));
                Outcome::SessionCreated {
                    session_id,
                    timeout_ms: *timeout_ms,
                    password: password.clone(),
                }
            }
            CommandOp::CloseSession => match self.sessions.get(&c.session) {
                Some(&(_, owner)) if owner != c.owner => {
                    Outcome::Reply(Err(ErrorCode::SessionMoved))
                }
                _ => self.close(&c),
            },
            CommandOp::Touch { sessions } => {
                let mut live = 0;
                for seen in sessions {
                    if let Some(session) = self.sessions.get_mut(&seen.session_id) {
                        session.0 = zxid;
                        live += 1;
                    }
                }
                Outcome::Touched { live }
            }
            CommandOp::Expire {
                unless_touched_after,
            } => match self.sessions.get(&c.session) {
                None => Outcome::ExpireSkipped {
                    session_exists: false,
                },
                Some(&(touched, _)) if touched > *unless_touched_after => Outcome::ExpireSkipped {
                    session_exists: true,
                },
                Some(_) => self.close(&c),
            },
            CommandOp::Attach { owner, password } => match self.sessions.get_mut(&c.session) {
                // Every session of this model is created with the password [1; 16].
                Some(session) if *password == vec![1; 16] => {
                    *session = (zxid, *owner);
                    Outcome::Attached {
                        session_exists: true,
                    }
                }
                _ => Outcome::Attached {
                    session_exists: false,
                },
            },
            CommandOp::Reap {
                path,
                unchanged_since,
            } => {
                let reapable = match unchanged_since {
                    Some(last_change) => self.reapable_unchanged(path, *last_change),
                    None => self.reapable(path, c.time, config),
                };
                if reapable {
                    self.remove(&c, path);
                }
                Outcome::Reaped
            }
            CommandOp::Write { request, .. } => {
                let result = match request {
                    Request::Check(_) => Err(ErrorCode::Unimplemented),
                    request => self.op(&c, request),
                };
                if let Some(session) = self.sessions.get_mut(&c.session) {
                    if session.1 == c.owner {
                        session.0 = zxid;
                    }
                }
                Outcome::Reply(result)
            }
        }
    }

    fn close(&mut self, c: &Ctx) -> Outcome {
        let owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.kind == Kind::Ephemeral(c.session))
            .map(|(p, _)| p.clone())
            .collect();
        for path in owned {
            self.remove(c, &path);
        }
        self.sessions.remove(&c.session);
        Outcome::SessionClosed
    }

    fn reapable(&self, path: &str, now: i64, config: &TreeConfig) -> bool {
        let Some(n) = self.nodes.get(path) else {
            return false;
        };
        let idle = now - n.mtime;
        self.children(path).is_empty()
            && match n.kind {
                Kind::Container => n.creations > 0 || idle > config.container_never_used_ms,
                Kind::Ttl(ttl) => idle > ttl,
                _ => false,
            }
    }

    fn reapable_unchanged(&self, path: &str, last_change: i64) -> bool {
        self.nodes.get(path).is_some_and(|n| {
            n.mzxid == last_change
                && self.children(path).is_empty()
                && matches!(n.kind, Kind::Container | Kind::Ttl(_))
        })
    }
}

struct Generator {
    rng: StdRng,
    sessions: Vec<i64>,
}

const PATHS: &[&str] = &[
    "/a",
    "/a/b",
    "/a/b/c",
    "/b",
    "/b/x",
    "/c",
    "/a/",
    "a",
    "/a/./d",
    "/zookeeper",
    "/zookeeper/config",
];

impl Generator {
    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.rng.gen_range(0..items.len())].clone()
    }

    fn acl(&mut self) -> Option<Vec<Acl>> {
        let bob = Id::new("digest", "bob:hash");
        match self.rng.gen_range(0..12) {
            0 => None,
            1 => Some(vec![]),
            2 => Some(vec![Acl {
                perms: perms::ALL,
                id: Id::new("auth", ""),
            }]),
            3 => Some(vec![Acl {
                perms: perms::ALL,
                id: bob,
            }]),
            4 => Some(vec![world(perms::READ | perms::CREATE)]),
            5 => Some(vec![world(perms::ALL), world(perms::ALL)]),
            _ => Some(vec![world(perms::ALL)]),
        }
    }

    fn version(&mut self) -> i32 {
        if self.rng.gen_bool(0.6) {
            -1
        } else {
            self.rng.gen_range(0..3)
        }
    }

    fn data(&mut self) -> Option<Vec<u8>> {
        match self.rng.gen_range(0..4) {
            0 => None,
            1 => Some(vec![]),
            n => Some(vec![b'x'; n * 3]),
        }
    }

    fn write_op(&mut self) -> Request {
        let path = self.pick(PATHS).to_owned();
        match self.rng.gen_range(0..10) {
            0..=3 => {
                let flags = self.pick(&[0, 0, 1, 2, 3, 4, 5, 6, 9]);
                let (data, acl) = (self.data(), self.acl());
                let ttl = self.pick(&[-1, -1, 0, 50, 1500]);
                let r = CreateRequest {
                    path: path.clone(),
                    data: data.clone(),
                    acl: acl.clone(),
                    flags,
                };
                match self.rng.gen_range(0..4) {
                    0 => Request::Create(r),
                    1 => Request::Create2(r),
                    2 => Request::CreateContainer(r),
                    _ => Request::CreateTtl(CreateTtlRequest {
                        path,
                        data,
                        acl,
                        flags,
                        ttl,
                    }),
                }
            }
            4..=5 => Request::Delete(DeleteRequest {
                path,
                version: self.version(),
            }),
            6..=7 => Request::SetData(SetDataRequest {
                path,
                data: self.data(),
                version: self.version(),
            }),
            8 if self.rng.gen_bool(0.2) => Request::Sync(PathRequest { path }),
            8 => Request::SetAcl(SetAclRequest {
                path,
                acl: self.acl(),
                version: self.version(),
            }),
            _ => Request::Check(CheckVersionRequest {
                path,
                version: self.version(),
            }),
        }
    }

    fn command(&mut self, time_ms: i64, zxid: i64) -> Command {
        let session_id = if self.sessions.is_empty() || self.rng.gen_bool(0.03) {
            424242
        } else {
            self.pick(&self.sessions.clone())
        };
        let identities = match self.rng.gen_range(0..6) {
            0 => vec![Id::new("ip", "127.0.0.1"), Id::new("digest", "bob:hash")],
            1 => vec![Id::new("super", "")],
            _ => vec![Id::new("ip", "127.0.0.1")],
        };
        // Mostly the owner that created the sessions; sometimes a connection they never had.
        let owner = if self.rng.gen_bool(0.9) { 0 } else { 7 };
        let op = match self.rng.gen_range(0..46) {
            0..=1 => CommandOp::CreateSession {
                timeout_ms: 5000,
                password: vec![1; 16],
            },
            2 => CommandOp::CloseSession,
            40..=41 => {
                let count = if self.sessions.is_empty() {
                    0
                } else {
                    self.rng.gen_range(0..3)
                };
                let mut sessions: Vec<SessionSeen> = (0..count)
                    .map(|_| SessionSeen {
                        session_id: self.pick(&self.sessions.clone()),
                        idle_ms: self.rng.gen_range(0..5_000),
                    })
                    .collect();
                sessions.push(SessionSeen::just_now(424242));
                CommandOp::Touch { sessions }
            }
            42..=43 => CommandOp::Expire {
                unless_touched_after: zxid - self.rng.gen_range(1..60),
            },
            44 => CommandOp::Attach {
                owner: self.pick(&[0, 7]),
                password: self.pick(&[vec![1; 16], vec![1; 16], vec![2; 16]]),
            },
            // A judged Reap names a last change: mostly the node's own (see `run`).
            3..=4 => CommandOp::Reap {
                path: self.pick(PATHS).to_owned(),
                unchanged_since: self.rng.gen_bool(0.5).then(|| zxid - 1),
            },
            5..=9 => {
                let count = self.rng.gen_range(0..4);
                // setACL is not a multi op (the decoder refuses it); check stands in for it.
                let ops = (0..count)
                    .map(|_| self.write_op())
                    .filter(|op| !matches!(op, Request::SetAcl(_) | Request::Sync(_)))
                    .collect();
                CommandOp::Write {
                    request: Request::Multi(ops),
                    identities,
                }
            }
            _ => CommandOp::Write {
                request: self.write_op(),
                identities,
            },
        };
        Command {
            session_id,
            cxid: 1,
            time_ms,
            owner,
            op,
        }
    }
}

fn snapshot(tree: &DataTree) -> Vec<u8> {
    let mut bytes = Vec::new();
    tree.encode_snapshot(&mut bytes);
    bytes
}

fn assert_same_state(tree: &DataTree, model: &Model, context: &str) {
    assert_eq!(
        tree.node_count(),
        model.nodes.len(),
        "{context}: node count"
    );
    for (path, node) in &model.nodes {
        let expected = (node.data.clone(), model.stat(path), model.children(path));
        assert_eq!(tree.node(path), Some(expected), "{context}: {path}");
    }
    let sessions: BTreeMap<i64, (i64, u64)> = tree
        .sessions()
        .map(|(id, info)| (id, (info.touched_at, info.owner)))
        .collect();
    assert_eq!(sessions, model.sessions, "{context}: sessions");
    let ephemerals = model
        .nodes
        .values()
        .filter(|n| matches!(n.kind, Kind::Ephemeral(_)))
        .count();
    assert_eq!(tree.ephemeral_count(), ephemerals, "{context}: ephemerals");
}

/// How often the session commands took each branch, so the test shows it exercised them.
#[derive(Default, Debug)]
struct Coverage {
    expired: usize,
    expiry_skipped: usize,
    moved: usize,
    attached: usize,
    reaped_unchanged: usize,
}

fn run(seed: u64, coverage: &mut Coverage) {
    let config = TreeConfig {
        extended_types_enabled: true,
        container_never_used_ms: 3_000,
        ..TreeConfig::default()
    };
    let mut tree = DataTree::new(config.clone());
    let mut twin = DataTree::new(config.clone());
    let mut model = Model::new();
    let mut generator = Generator {
        rng: StdRng::seed_from_u64(seed),
        sessions: vec![],
    };
    let mut time_ms = 1_000_000;
    for step in 1..=STEPS {
        let zxid = step as i64;
        time_ms += generator.rng.gen_range(0..400);
        let mut command = generator.command(time_ms, zxid);
        if let CommandOp::Reap {
            path,
            unchanged_since: Some(last_change),
        } = &mut command.op
        {
            if let Some(node) = model.nodes.get(path.as_str()) {
                if generator.rng.gen_bool(0.8) {
                    *last_change = node.mzxid;
                }
            }
        }
        let context = format!("seed {seed} step {step} {command:?}");
        let expected = model.apply(zxid, &command, &config);
        let applied = tree.apply(zxid, &command);
        assert_eq!(applied.outcome, expected, "{context}");
        match (&command.op, &applied.outcome) {
            (CommandOp::Expire { .. }, Outcome::SessionClosed) => coverage.expired += 1,
            (
                _,
                Outcome::ExpireSkipped {
                    session_exists: true,
                },
            ) => coverage.expiry_skipped += 1,
            (
                _,
                Outcome::Attached {
                    session_exists: true,
                },
            ) => coverage.attached += 1,
            (_, Outcome::Reply(Err(ErrorCode::SessionMoved))) => coverage.moved += 1,
            (
                CommandOp::Reap {
                    unchanged_since: Some(_),
                    ..
                },
                _,
            ) if !applied.triggers.is_empty() => coverage.reaped_unchanged += 1,
            _ => {}
        }
        let triggers: Vec<_> = applied
            .triggers
            .iter()
            .map(|t| (t.table, t.path.clone(), t.event))
            .collect();
        assert_eq!(triggers, model.triggers, "{context}: triggers");
        twin.apply(
            zxid,
            &Command::decode(&command.encode()).expect("commands round-trip"),
        );
        if let Outcome::SessionCreated { session_id, .. } = applied.outcome {
            generator.sessions.push(session_id);
        }
        assert_same_state(&tree, &model, &context);
        let mut due = Vec::new();
        for candidate in tree.reap_candidates() {
            let node = &model.nodes[candidate.path];
            assert_eq!(candidate.last_change, node.mzxid, "{context}");
            if candidate.childless && candidate.after.is_due(time_ms - node.mtime) {
                due.push(candidate.path.to_owned());
            }
        }
        let expected: Vec<&String> = (model.nodes.keys())
            .filter(|path| model.reapable(path, time_ms, &config))
            .collect();
        assert_eq!(due.iter().collect::<Vec<_>>(), expected, "{context}: due");
        if generator.rng.gen_bool(0.05) {
            let bytes = snapshot(&tree);
            let decoded =
                DataTree::decode_snapshot(&bytes, config.clone()).expect("own snapshot decodes");
            assert_eq!(snapshot(&decoded), bytes, "{context}: snapshot round trip");
            assert_eq!(
                decoded.approximate_data_bytes(),
                tree.approximate_data_bytes(),
                "{context}"
            );
            tree = decoded;
        }
    }
    assert_eq!(
        snapshot(&twin),
        snapshot(&tree),
        "seed {seed}: replicas diverged"
    );
}

#[test]
fn tree_matches_the_reference_model() {
    let mut coverage = Coverage::default();
    for seed in 0..SEEDS {
        run(seed, &mut coverage);
    }
    assert!(
        coverage.expired > 0
            && coverage.expiry_skipped > 0
            && coverage.moved > 0
            && coverage.attached > 0
            && coverage.reaped_unchanged > 0,
        "{coverage:?}"
    );
}

/// Inside a multi Apache ZooKeeper picks the create variant from the flags: a TTL flag keeps a
/// createTTL as it is, a container flag makes createContainer, anything else a plain create.
fn model_multi_op(op: &Request) -> Request {
    let plain = |path: &String, data: &Data, acl: &Option<Vec<Acl>>, flags: i32| CreateRequest {
        path: path.clone(),
        data: data.clone(),
        acl: acl.clone(),
        flags,
    };
    match op {
        Request::CreateTtl(r) if r.flags == 5 || r.flags == 6 => op.clone(),
        Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r)
            if r.flags == 5 || r.flags == 6 =>
        {
            op.clone()
        }
        Request::CreateTtl(r) if r.flags == 4 => {
            Request::CreateContainer(plain(&r.path, &r.data, &r.acl, r.flags))
        }
        Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) if r.flags == 4 => {
            Request::CreateContainer(r.clone())
        }
        Request::CreateTtl(r) => Request::Create(plain(&r.path, &r.data, &r.acl, r.flags)),
        Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => {
            Request::Create(r.clone())
        }
        other => other.clone(),
    }
}

//! Shared test harness: a tree plus a zxid counter and one open session.
#![allow(dead_code)]

use zoolog_proto::codes::perms;
use zoolog_proto::*;
use zoolog_tree::*;

pub struct Harness {
    pub tree: DataTree,
    pub zxid: Zxid,
    pub session: i64,
    pub time_ms: i64,
    pub identities: Vec<Id>,
    /// The connection token stamped on every command applied (`Command::owner`).
    pub owner: u64,
}

pub fn open() -> Vec<Acl> {
    zoolog_tree::acl::open_acl_unsafe()
}

pub fn create_request(path: &str, data: &[u8], flags: i32) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        acl: Some(open()),
        flags,
    })
}

pub fn acl_of(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id::new(scheme, id),
    }
}

pub const ALL: i32 = perms::ALL;

impl Harness {
    pub fn new() -> Harness {
        Harness::with(TreeConfig::default())
    }

    pub fn with(config: TreeConfig) -> Harness {
        let mut harness = Harness {
            tree: DataTree::new(config),
            zxid: 0,
            session: 0,
            time_ms: 1_000,
            identities: vec![Id::new("ip", "127.0.0.1")],
            owner: 0,
        };
        harness.session = harness.new_session();
        harness
    }

    pub fn apply_op(&mut self, session_id: i64, op: CommandOp) -> Applied {
        self.zxid += 1;
        self.time_ms += 10;
        let command = Command {
            session_id,
            cxid: 1,
            time_ms: self.time_ms,
            owner: self.owner,
            op,
        };
        self.tree.apply(self.zxid, &command)
    }

    pub fn new_session(&mut self) -> i64 {
        match self
            .apply_op(
                0,
                CommandOp::CreateSession {
                    timeout_ms: 10_000,
                    password: vec![7; 16],
                },
            )
            .outcome
        {
            Outcome::SessionCreated { session_id, .. } => session_id,
            other => panic!("{other:?}"),
        }
    }

    pub fn write_as(&mut self, session: i64, identities: Vec<Id>, request: Request) -> Applied {
        self.apply_op(
            session,
            CommandOp::Write {
                request,
                identities,
            },
        )
    }

    pub fn write_full(&mut self, request: Request) -> Applied {
        self.write_as(self.session, self.identities.clone(), request)
    }

    pub fn write(&mut self, request: Request) -> Result<Response, ErrorCode> {
        match self.write_full(request).outcome {
            Outcome::Reply(result) => result,
            other => panic!("{other:?}"),
        }
    }

    pub fn create(&mut self, path: &str, flags: i32) -> Result<String, ErrorCode> {
        match self.write(create_request(path, b"", flags))? {
            Response::Create(CreateResponse { path }) => Ok(path),
            other => panic!("{other:?}"),
        }
    }

    pub fn must_create(&mut self, path: &str) {
        assert_eq!(self.create(path, 0), Ok(path.to_owned()));
    }

    pub fn stat(&self, path: &str) -> Stat {
        self.tree
            .stat(path)
            .unwrap_or_else(|| panic!("{path} missing"))
    }

    pub fn read(&self, request: Request) -> Read {
        self.tree.read(self.session, &self.identities, &request)
    }
}

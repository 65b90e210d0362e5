//! `Client`: the caller's handle on one session; each method is one request (or one multi).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch, Semaphore};
use tokio::task::JoinHandle;
use zoolog_proto::{
    Acl, AddWatchMode, AddWatchRequest, AuthPacket, CheckVersionRequest, ClientInfo, CreateMode,
    CreateRequest, CreateTtlRequest, DeleteRequest, ErrorCode, GetEphemeralsRequest, MultiResult,
    PathRequest, PathWatchRequest, ReconfigRequest, Request, Response, SetAclRequest,
    SetDataRequest, Stat, WatcherType, WatchesRequest,
};

use crate::hosts::{Chroot, ConnectString};
use crate::session::{Call, Session, SessionStatus};
use crate::types::wire_version;
use crate::watches::{self, PersistentWatch, Watch, WatchChange, WatchChangeKind};
use crate::{ClientOptions, Error, MultiFailure, Op, OpResult, ReadOp, ReadResult, SessionState};

/// A handle on one ZooKeeper session. Cheap to clone; every clone drives the same session, and
/// the session task stops when the last clone is dropped (call [`Client::close`] to end the
/// session on the server at once rather than letting it expire).
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    calls: mpsc::UnboundedSender<Call>,
    outstanding: Arc<Semaphore>,
    chroot: Chroot,
    events: broadcast::Sender<SessionState>,
    status: watch::Receiver<SessionStatus>,
    persistent_watch_events_max: usize,
    session_task: JoinHandle<()>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.session_task.abort();
    }
}

/// Picks the one response variant a request can succeed with; any other is a server bug.
macro_rules! expect_response {
    ($response:expr, $pattern:pat => $value:expr) => {
        match $response {
            $pattern => Ok($value),
            _ => Err(Error::UnexpectedResponse),
        }
    };
}

impl Client {
    /// Connects to one of `hosts` (`"h1:p1,h2:p2[/chroot]"`) and waits until a session is
    /// established or `options.connect_timeout_ms` passes.
    pub async fn connect(hosts: &str, options: ClientOptions) -> Result<Client, Error> {
        let connect_string = ConnectString::parse(hosts)?;
        if options.requests_outstanding_max == 0 {
            return Err(Error::InvalidArgument(
                "requests_outstanding_max must be at least 1".into(),
            ));
        }
        // Bounded by the permits of `outstanding`, which every call holds (see `Call`).
        let (calls, calls_receiver) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(options.session_events_max.max(1));
        let (status_sender, mut status) = watch::channel(SessionStatus {
            state: SessionState::Disconnected,
            session_id: 0,
            negotiated_timeout_ms: options.session_timeout_ms,
        });
        let chroot = connect_string.chroot.clone();
        let connect_timeout_ms = options.connect_timeout_ms;
        let shared = Shared {
            calls,
            outstanding: Arc::new(Semaphore::new(options.requests_outstanding_max)),
            chroot,
            events: events.clone(),
            status: status.clone(),
            persistent_watch_events_max: options.persistent_watch_events_max,
            session_task: tokio::spawn(
                Session::new(connect_string, options, events, status_sender).run(calls_receiver),
            ),
        };
        let established = tokio::time::timeout(
            Duration::from_millis(connect_timeout_ms),
            status.wait_for(|status| status.state != SessionState::Disconnected),
        )
        .await;
        // Dropping `shared` on the error paths aborts the session task.
        let state = match established {
            Ok(Ok(status)) => status.state,
            Ok(Err(_)) => SessionState::Closed,
            Err(_) => {
                return Err(Error::ConnectTimeout {
                    timeout_ms: connect_timeout_ms,
                })
            }
        };
        match state {
            SessionState::Connected | SessionState::ConnectedReadOnly => Ok(Client {
                shared: Arc::new(shared),
            }),
            _ => Err(Error::SessionExpired),
        }
    }

    /// Every session state change from now on, in order (Disconnected, Connected, Expired…).
    pub fn session_events(&self) -> broadcast::Receiver<SessionState> {
        self.shared.events.subscribe()
    }

    /// The session's state right now.
    pub fn state(&self) -> SessionState {
        self.shared.status.borrow().state
    }

    /// Waits until the session is in a state `wanted` accepts, returning that state.
    pub async fn wait_for_state(&self, wanted: impl Fn(SessionState) -> bool) -> SessionState {
        let mut status = self.shared.status.clone();
        let reached = status
            .wait_for(|status| wanted(status.state))
            .await
            .map(|status| status.state);
        reached.unwrap_or(SessionState::Closed)
    }

    /// The id the server gave the session, unchanged across reconnects, with one exception: a
    /// session that began on a read-only server gets a new id when it moves to a read-write one
    /// (see [`ClientOptions::read_only_allowed`]).
    pub fn session_id(&self) -> i64 {
        self.shared.status.borrow().session_id
    }

    /// The session timeout the server granted.
    pub fn negotiated_timeout_ms(&self) -> u32 {
        self.shared.status.borrow().negotiated_timeout_ms
    }

    /// Creates a node and returns its path (with the sequence suffix for sequential modes).
    /// TTL modes need [`Client::create_ttl`].
    pub async fn create(
        &self,
        path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<String, Error> {
        let request = self.create_request(path, data, acl, mode, None, Request::Create)?;
        match self.call(request, None).await? {
            Response::Create(created) => Ok(self.client_path(&created.path)),
            // Containers have their own opcode, which answers like create2.
            Response::Create2(created) => Ok(self.client_path(&created.path)),
            _ => Err(Error::UnexpectedResponse),
        }
    }

    /// Creates a node and returns its path and Stat (create2).
    pub async fn create2(
        &self,
        path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<(String, Stat), Error> {
        let request = self.create_request(path, data, acl, mode, None, Request::Create2)?;
        self.created_with_stat(request).await
    }

    /// Creates a node that the server deletes once it has had no children and no changes for
    /// `ttl_ms` (mode PersistentWithTtl or PersistentSequentialWithTtl; the server needs
    /// extended types enabled).
    pub async fn create_ttl(
        &self,
        path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        mode: CreateMode,
        ttl_ms: i64,
    ) -> Result<(String, Stat), Error> {
        let request = self.create_request(path, data, acl, mode, Some(ttl_ms), Request::Create2)?;
        self.created_with_stat(request).await
    }

    async fn created_with_stat(&self, request: Request) -> Result<(String, Stat), Error> {
        let response = self.call(request, None).await?;
        expect_response!(response, Response::Create2(created) => (self.client_path(&created.path), created.stat))
    }

    /// Deletes a node; `version: None` deletes whatever the version.
    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), Error> {
        let request = Request::Delete(DeleteRequest {
            path: self.server_path(path)?,
            version: wire_version(version),
        });
        self.call(request, None).await.map(drop)
    }

    /// The node's Stat, or `None` if it does not exist.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        let request = Request::Exists(self.path_watch_request(path, false)?);
        exists_result(self.call(request, None).await)
    }

    /// Like [`Client::exists`], and watches for the node's creation, change or deletion.
    pub async fn exists_w(&self, path: &str) -> Result<(Option<Stat>, Watch), Error> {
        let request = Request::Exists(self.path_watch_request(path, true)?);
        let (sender, watch) = watches::one_shot();
        let response = self
            .call(
                request,
                self.watch_change(path, WatchChangeKind::Exists(sender))?,
            )
            .await;
        Ok((exists_result(response)?, watch))
    }

    /// The node's data (`None` when it is null, as opposed to empty) and Stat.
    pub async fn get_data(&self, path: &str) -> Result<(Option<Vec<u8>>, Stat), Error> {
        let request = Request::GetData(self.path_watch_request(path, false)?);
        data_result(self.call(request, None).await?)
    }

    /// Like [`Client::get_data`], and watches for the node's next change or deletion.
    pub async fn get_data_w(&self, path: &str) -> Result<(Option<Vec<u8>>, Stat, Watch), Error> {
        let request = Request::GetData(self.path_watch_request(path, true)?);
        let (sender, watch) = watches::one_shot();
        let response = self
            .call(
                request,
                self.watch_change(path, WatchChangeKind::Data(sender))?,
            )
            .await?;
        let (data, stat) = data_result(response)?;
        Ok((data, stat, watch))
    }

    /// Replaces the node's data (`None` makes it null); `version: None` whatever the version.
    pub async fn set_data(
        &self,
        path: &str,
        data: Option<&[u8]>,
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let request = Request::SetData(SetDataRequest {
            path: self.server_path(path)?,
            data: data.map(<[u8]>::to_vec),
            version: wire_version(version),
        });
        expect_response!(self.call(request, None).await?, Response::Stat(reply) => reply.stat)
    }

    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat), Error> {
        let request = Request::GetAcl(PathRequest {
            path: self.server_path(path)?,
        });
        expect_response!(self.call(request, None).await?, Response::GetAcl(reply) => (reply.acl, reply.stat))
    }

    /// Replaces the node's ACL; `version: None` whatever its ACL version.
    pub async fn set_acl(
        &self,
        path: &str,
        acl: &[Acl],
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let request = Request::SetAcl(SetAclRequest {
            path: self.server_path(path)?,
            acl: Some(acl.to_vec()),
            version: wire_version(version),
        });
        expect_response!(self.call(request, None).await?, Response::Stat(reply) => reply.stat)
    }

    /// The names of the node's children, in no particular order.
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        let request = Request::GetChildren(self.path_watch_request(path, false)?);
        expect_response!(self.call(request, None).await?, Response::GetChildren(reply) => reply.children)
    }

    /// Like [`Client::get_children`], and watches for a child added or removed, or the node's deletion.
    pub async fn get_children_w(&self, path: &str) -> Result<(Vec<String>, Watch), Error> {
        let request = Request::GetChildren(self.path_watch_request(path, true)?);
        let (sender, watch) = watches::one_shot();
        let response = self
            .call(
                request,
                self.watch_change(path, WatchChangeKind::Children(sender))?,
            )
            .await?;
        expect_response!(response, Response::GetChildren(reply) => (reply.children, watch))
    }

    /// The children's names and the node's Stat (getChildren2).
    pub async fn get_children2(&self, path: &str) -> Result<(Vec<String>, Stat), Error> {
        let request = Request::GetChildren2(self.path_watch_request(path, false)?);
        expect_response!(self.call(request, None).await?, Response::GetChildren2(reply) => (reply.children, reply.stat))
    }

    /// Waits until the server this session talks to has applied every write committed before.
    pub async fn sync(&self, path: &str) -> Result<(), Error> {
        let request = Request::Sync(PathRequest {
            path: self.server_path(path)?,
        });
        self.call(request, None).await.map(drop)
    }

    /// Applies all `ops` atomically, or none. On failure the error is
    /// [`Error::MultiFailed`] with the failing op and every op's code.
    pub async fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>, Error> {
        let requests = ops
            .iter()
            .map(|op| self.op_request(op))
            .collect::<Result<Vec<_>, _>>()?;
        let response = self.call(Request::Multi(requests), None).await?;
        let results = expect_response!(response, Response::Multi(results) => results)?;
        if let Some(failure) = multi_failure(&results) {
            return Err(Error::MultiFailed(Box::new(failure)));
        }
        results
            .into_iter()
            .map(|result| self.op_result(result))
            .collect()
    }

    /// Runs the reads at one point in the server's history; each succeeds or fails on its own.
    pub async fn multi_read(
        &self,
        ops: &[ReadOp],
    ) -> Result<Vec<Result<ReadResult, ErrorCode>>, Error> {
        let requests = ops
            .iter()
            .map(|op| match op {
                ReadOp::GetData { path } => {
                    Ok(Request::GetData(self.path_watch_request(path, false)?))
                }
                ReadOp::GetChildren { path } => {
                    Ok(Request::GetChildren(self.path_watch_request(path, false)?))
                }
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let response = self.call(Request::MultiRead(requests), None).await?;
        let results = expect_response!(response, Response::Multi(results) => results)?;
        results
            .into_iter()
            .map(|result| match result {
                MultiResult::GetData(reply) => Ok(Ok(ReadResult::Data {
                    data: reply.data.map(Vec::from),
                    stat: reply.stat,
                })),
                MultiResult::GetChildren(reply) => Ok(Ok(ReadResult::Children {
                    children: reply.children,
                })),
                MultiResult::Error(code) => Ok(Err(code)),
                _ => Err(Error::UnexpectedResponse),
            })
            .collect()
    }

    /// Succeeds if this connection holds a server-side watch of that type on exactly `path`
    /// (else `NoWatcher`); removes nothing.
    pub async fn check_watches(&self, path: &str, watcher_type: WatcherType) -> Result<(), Error> {
        let request = Request::CheckWatches(WatchesRequest {
            path: self.server_path(path)?,
            watcher_type: watcher_type.code(),
        });
        self.call(request, None).await.map(drop)
    }

    /// Removes this session's watches of that type on `path`, on the server and here: pending
    /// one-shot watches resolve with a `*WatchRemoved` event, persistent streams get
    /// `PersistentWatchRemoved` and then end.
    pub async fn remove_watches(&self, path: &str, watcher_type: WatcherType) -> Result<(), Error> {
        let request = Request::RemoveWatches(WatchesRequest {
            path: self.server_path(path)?,
            watcher_type: watcher_type.code(),
        });
        self.call(
            request,
            self.watch_change(path, WatchChangeKind::Remove(watcher_type))?,
        )
        .await
        .map(drop)
    }

    /// Watches `path` until removed: with `Persistent`, its own changes and its children list;
    /// with `PersistentRecursive`, changes to it and every descendant. The node need not exist.
    pub async fn add_watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> Result<PersistentWatch, Error> {
        let (sender, stream) = watches::persistent(self.shared.persistent_watch_events_max);
        let kind = match mode {
            AddWatchMode::Persistent => WatchChangeKind::Persistent(sender),
            AddWatchMode::PersistentRecursive => WatchChangeKind::PersistentRecursive(sender),
        };
        let request = Request::AddWatch(AddWatchRequest {
            path: self.server_path(path)?,
            mode: mode.code(),
        });
        self.call(request, self.watch_change(path, kind)?).await?;
        Ok(stream)
    }

    /// Full paths of this session's ephemeral nodes whose path starts with `prefix`
    /// (a plain string prefix; "/" for all).
    pub async fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>, Error> {
        let request = Request::GetEphemerals(GetEphemeralsRequest {
            prefix_path: Some(self.server_path(prefix)?),
        });
        let ephemerals = expect_response!(self.call(request, None).await?, Response::GetEphemerals(reply) => reply.ephemerals)?;
        Ok(ephemerals
            .iter()
            .map(|path| self.client_path(path))
            .collect())
    }

    /// The number of descendants of `path`, not counting itself.
    pub async fn get_all_children_number(&self, path: &str) -> Result<i32, Error> {
        let request = Request::GetAllChildrenNumber(PathRequest {
            path: self.server_path(path)?,
        });
        expect_response!(self.call(request, None).await?, Response::GetAllChildrenNumber(reply) => reply.total_number)
    }

    /// Asks the ensemble to change its membership, as ZooKeeperAdmin's `reconfigure` does:
    /// `joining` and `leaving` servers (incremental), or the whole `new_members` list;
    /// `from_config` is the configuration version the change applies to (-1: whichever is
    /// current). Returns the new configuration and the Stat of its node. A server without
    /// reconfiguration answers `ReconfigDisabled`.
    pub async fn reconfig(
        &self,
        joining: Option<&str>,
        leaving: Option<&str>,
        new_members: Option<&str>,
        from_config: i64,
    ) -> Result<(Option<Vec<u8>>, Stat), Error> {
        let request = Request::Reconfig(ReconfigRequest {
            joining_servers: joining.map(str::to_owned),
            leaving_servers: leaving.map(str::to_owned),
            new_members: new_members.map(str::to_owned),
            cur_config_id: from_config,
        });
        data_result(self.call(request, None).await?)
    }

    /// The identities this connection holds (ip, digest user, super…).
    pub async fn who_am_i(&self) -> Result<Vec<ClientInfo>, Error> {
        expect_response!(self.call(Request::WhoAmI, None).await?, Response::WhoAmI(reply) => reply.client_info)
    }

    /// Adds an identity (e.g. scheme "digest", auth b"user:password"), kept for every later
    /// connection of the session. A refused identity ends the session with `AuthFailed`.
    pub async fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<(), Error> {
        let request = Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: scheme.to_owned(),
            auth: Some(auth.to_vec()),
        });
        self.call(request, None).await.map(drop)
    }

    /// Ends the session on the server (its ephemerals go at once); later calls fail with
    /// `SessionClosed`. Waits for a connection if the client is between servers.
    pub async fn close(&self) -> Result<(), Error> {
        match self.call(Request::CloseSession, None).await {
            Ok(_) | Err(Error::SessionClosed) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Hands a request to the session task, first waiting for an outstanding-request slot.
    async fn call(
        &self,
        request: Request,
        watch_change: Option<WatchChange>,
    ) -> Result<Response, Error> {
        // The semaphore is never closed, and the session task outlives every Client handle.
        let permit = self
            .shared
            .outstanding
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::SessionClosed)?;
        let (reply, response) = oneshot::channel();
        let call = Call {
            request,
            watch_change,
            reply,
            permit,
        };
        self.shared
            .calls
            .send(call)
            .map_err(|_| Error::SessionClosed)?;
        response.await.map_err(|_| Error::SessionClosed)?
    }

    fn server_path(&self, path: &str) -> Result<String, Error> {
        self.shared.chroot.server_path(path)
    }

    fn client_path(&self, server_path: &str) -> String {
        self.shared.chroot.client_path(server_path)
    }

    fn path_watch_request(&self, path: &str, watch: bool) -> Result<PathWatchRequest, Error> {
        Ok(PathWatchRequest {
            path: self.server_path(path)?,
            watch,
        })
    }

    fn watch_change(
        &self,
        path: &str,
        kind: WatchChangeKind,
    ) -> Result<Option<WatchChange>, Error> {
        Ok(Some(WatchChange {
            server_path: self.server_path(path)?,
            kind,
        }))
    }

    /// The create request for `mode`: containers and TTL nodes have opcodes of their own, other
    /// modes use `plain` (create or create2).
    fn create_request(
        &self,
        path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        mode: CreateMode,
        ttl_ms: Option<i64>,
        plain: fn(CreateRequest) -> Request,
    ) -> Result<Request, Error> {
        let path = self.server_path(path)?;
        let (data, acl, flags) = (data.map(<[u8]>::to_vec), Some(acl.to_vec()), mode.code());
        match (mode.is_ttl(), ttl_ms) {
            (true, Some(ttl)) => Ok(Request::CreateTtl(CreateTtlRequest {
                path,
                data,
                acl,
                flags,
                ttl,
            })),
            (true, None) => Err(Error::InvalidArgument(format!("{mode:?} needs create_ttl"))),
            (false, Some(_)) => Err(Error::InvalidArgument(format!("{mode:?} takes no TTL"))),
            (false, None) if mode.is_container() => Ok(Request::CreateContainer(CreateRequest {
                path,
                data,
                acl,
                flags,
            })),
            (false, None) => Ok(plain(CreateRequest {
                path,
                data,
                acl,
                flags,
            })),
        }
    }

    fn op_request(&self, op: &Op) -> Result<Request, Error> {
        Ok(match op {
            Op::Create {
                path,
                data,
                acl,
                mode,
            } => self.create_request(path, data.as_deref(), acl, *mode, None, Request::Create2)?,
            Op::CreateTtl {
                path,
                data,
                acl,
                mode,
                ttl_ms,
            } => self.create_request(
                path,
                data.as_deref(),
                acl,
                *mode,
                Some(*ttl_ms),
                Request::Create2,
            )?,
            Op::Delete { path, version } => Request::Delete(DeleteRequest {
                path: self.server_path(path)?,
                version: wire_version(*version),
            }),
            Op::SetData {
                path,
                data,
                version,
            } => Request::SetData(SetDataRequest {
                path: self.server_path(path)?,
                data: data.clone(),
                version: wire_version(*version),
            }),
            Op::Check { path, version } => Request::Check(CheckVersionRequest {
                path: self.server_path(path)?,
                version: wire_version(*version),
            }),
        })
    }

    fn op_result(&self, result: MultiResult) -> Result<OpResult, Error> {
        match result {
            MultiResult::Create(created) => Ok(OpResult::Create {
                path: self.client_path(&created.path),
                stat: None,
            }),
            MultiResult::Create2(created) => Ok(OpResult::Create {
                path: self.client_path(&created.path),
                stat: Some(created.stat),
            }),
            MultiResult::Delete => Ok(OpResult::Delete),
            MultiResult::SetData(reply) => Ok(OpResult::SetData { stat: reply.stat }),
            MultiResult::Check => Ok(OpResult::Check),
            _ => Err(Error::UnexpectedResponse),
        }
    }
}

/// A multi failed if any result is an error other than `Ok` (which marks a rolled-back op).
fn multi_failure(results: &[MultiResult]) -> Option<MultiFailure> {
    let op_codes: Vec<ErrorCode> = results
        .iter()
        .map(|result| match result {
            MultiResult::Error(code) => *code,
            _ => ErrorCode::Ok,
        })
        .collect();
    let failed_op_index = op_codes.iter().position(|code| *code != ErrorCode::Ok)?;
    Some(MultiFailure {
        failed_op_index,
        code: op_codes[failed_op_index],
        op_codes,
    })
}

/// exists answers a missing node with NoNode, which is an answer, not a failure.
fn exists_result(response: Result<Response, Error>) -> Result<Option<Stat>, Error> {
    match response {
        Ok(Response::Stat(reply)) => Ok(Some(reply.stat)),
        Ok(_) => Err(Error::UnexpectedResponse),
        Err(Error::Server(ErrorCode::NoNode)) => Ok(None),
        Err(error) => Err(error),
    }
}

fn data_result(response: Response) -> Result<(Option<Vec<u8>>, Stat), Error> {
    expect_response!(response, Response::GetData(reply) => (reply.data.map(Vec::from), reply.stat))
}

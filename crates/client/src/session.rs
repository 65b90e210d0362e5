//! The session task: the one owner of the TCP connection, the xid counter, the FIFO of requests
//! awaiting replies, pings, and reconnection with the same session id and password.
//!
//! Nothing in the loop ever waits on a caller: replies go into oneshots and events into bounded
//! broadcasts, so a slow caller can never stall pings and lose the session. The loop reads and
//! writes the socket itself with cancel-safe `read_buf` and `write`, so reading and writing never
//! wait on each other. Its cost per request is what a saturated client spends, so it batches:
//! every call already queued is encoded into the outbox before the next write, one read takes in
//! every reply that has arrived, and the ping timer is re-armed only when it fires.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use rand::seq::SliceRandom;
use rand::Rng;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, mpsc, oneshot, watch, OwnedSemaphorePermit};
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, timeout, Instant};
use tracing::{debug, warn};
use zoolog_proto::codes::xid;
use zoolog_proto::{
    frame_length, framed, AuthPacket, ConnectRequest, ConnectResponse, ErrorCode, EventType, Jute,
    OpCode, Reader, ReplyHeader, Request, Response, WatcherEvent,
};

use crate::buffers::{Inbound, Outbox};
use crate::hosts::ConnectString;
use crate::read_write_search::find_read_write_server;
use crate::watches::{WatchChange, WatchRegistry};
use crate::{ClientOptions, Error, SessionState};

/// ReplyHeader: int xid, long zxid, int err.
const REPLY_HEADER_BYTES: usize = 16;
/// After every host failed, wait up to this long before the next round, so a cluster coming
/// back is not hammered by every client at once.
const RECONNECT_PAUSE_MS_MAX: u64 = 1000;

/// What a caller hands the session task. The channel that carries calls needs no bound of its
/// own: a call cannot exist without a permit, so at most `requests_outstanding_max` are queued.
pub(crate) struct Call {
    pub request: Request,
    pub watch_change: Option<WatchChange>,
    pub reply: oneshot::Sender<Result<Response, Error>>,
    /// Held until the reply is delivered: this is what bounds outstanding requests.
    pub permit: OwnedSemaphorePermit,
}

/// What the client knows about its session, published through a `watch` channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionStatus {
    pub state: SessionState,
    pub session_id: i64,
    pub negotiated_timeout_ms: u32,
}

/// A request on the wire awaiting its reply.
struct Pending {
    xid: i32,
    opcode: OpCode,
    waiter: Waiter,
}

enum Waiter {
    Caller {
        reply: oneshot::Sender<Result<Response, Error>>,
        watch_change: Option<WatchChange>,
        _permit: OwnedSemaphorePermit,
    },
    /// SetWatches sent by the client itself after a reconnect.
    Restore,
}

/// Why a connection ended.
enum ConnectionEnd {
    Lost(String),
    Final(SessionState),
}

/// One TCP connection with an established session.
struct Connection {
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    outbox: Outbox,
    pending: VecDeque<Pending>,
    /// Auth replies (xid −4) are matched apart from the FIFO: the Java server answers them at once.
    auth_waiters: VecDeque<Option<oneshot::Sender<Result<Response, Error>>>>,
    last_send: Instant,
    last_receive: Instant,
    /// On a read-only server: the background search for a read-write one (see
    /// [`find_read_write_server`]), which ends this connection when it finds one.
    read_write_search: Option<JoinHandle<String>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(search) = &self.read_write_search {
            search.abort();
        }
    }
}

impl Connection {
    /// Fails everything awaiting a reply on this connection.
    fn fail_waiting(&mut self, error: &Error) {
        for pending in self.pending.drain(..) {
            if let Waiter::Caller { reply, .. } = pending.waiter {
                let _ = reply.send(Err(error.clone()));
            }
        }
        for waiter in self.auth_waiters.drain(..).flatten() {
            let _ = waiter.send(Err(error.clone()));
        }
    }
}

pub(crate) struct Session {
    connect_string: ConnectString,
    options: ClientOptions,
    session_id: i64,
    password: Vec<u8>,
    negotiated_timeout_ms: u32,
    last_zxid_seen: i64,
    last_xid: i32,
    /// Apache's `seenRwServerBefore`: until a read-write server has granted the session, its id
    /// is one a read-only server made up for itself, which no other server knows, so every
    /// handshake asks for a new session (id 0) instead of resuming it.
    seen_read_write_server: bool,
    /// Tried first by the next connect: the read-write server the search just found.
    preferred_address: Option<String>,
    /// Re-sent on every new connection: the server keeps identities per connection.
    auths: Vec<AuthPacket>,
    watches: WatchRegistry,
    events: broadcast::Sender<SessionState>,
    status: watch::Sender<SessionStatus>,
}

impl Session {
    pub fn new(
        connect_string: ConnectString,
        options: ClientOptions,
        events: broadcast::Sender<SessionState>,
        status: watch::Sender<SessionStatus>,
    ) -> Session {
        let negotiated_timeout_ms = options.session_timeout_ms;
        Session {
            connect_string,
            options,
            session_id: 0,
            password: vec![0; 16],
            negotiated_timeout_ms,
            last_zxid_seen: 0,
            last_xid: 0,
            seen_read_write_server: false,
            preferred_address: None,
            auths: Vec::new(),
            watches: WatchRegistry::default(),
            events,
            status,
        }
    }

    /// Runs the session until it ends, then fails every later call with the reason.
    pub async fn run(mut self, mut calls: mpsc::UnboundedReceiver<Call>) {
        let final_state = loop {
            let Some(mut connection) = self.connect(&mut calls).await else {
                break SessionState::Expired;
            };
            let end = self.serve(&mut connection, &mut calls).await;
            let error = match end {
                ConnectionEnd::Lost(_) => Error::ConnectionLoss,
                ConnectionEnd::Final(state) => final_error(state),
            };
            connection.fail_waiting(&error);
            match end {
                ConnectionEnd::Lost(reason) => {
                    debug!(session_id = self.session_id, %reason, "connection lost; reconnecting");
                    self.publish(SessionState::Disconnected);
                }
                ConnectionEnd::Final(state) => break state,
            }
        };
        let error = final_error(final_state);
        self.watches.end_all(&error);
        self.publish(final_state);
        while let Some(call) = calls.recv().await {
            let _ = call.reply.send(Err(error.clone()));
        }
    }

    fn publish(&self, state: SessionState) {
        let _ = self.events.send(state);
        self.status.send_replace(SessionStatus {
            state,
            session_id: self.session_id,
            negotiated_timeout_ms: self.negotiated_timeout_ms,
        });
    }

    /// Tries the hosts in random order, round after round, until one accepts the session.
    /// `None` means the server said the session is gone. Calls made meanwhile wait for the
    /// connection, but once no server has answered for a whole session timeout they fail
    /// with `ConnectionLoss`, after every round: the session is most likely expired by then,
    /// and its servers may never come back. (Apache's client fails them at the first failed
    /// attempt.)
    async fn connect(&mut self, calls: &mut mpsc::UnboundedReceiver<Call>) -> Option<Connection> {
        let unreachable_since = Instant::now();
        let give_up_calls_after = Duration::from_millis(u64::from(self.negotiated_timeout_ms));
        loop {
            let mut addresses = self.connect_string.addresses.clone();
            addresses.shuffle(&mut rand::thread_rng());
            if let Some(preferred) = self.preferred_address.take() {
                addresses.insert(0, preferred);
            }
            for address in &addresses {
                match self.handshake(address).await {
                    Ok(Some((_, response))) if is_expired(&response) => return None,
                    Ok(Some((stream, response))) => {
                        return Some(self.establish(address, stream, response))
                    }
                    Ok(None) => debug!(%address, "handshake timed out"),
                    Err(error) => debug!(%address, %error, "handshake failed"),
                }
            }
            if unreachable_since.elapsed() >= give_up_calls_after {
                while let Ok(call) = calls.try_recv() {
                    let _ = call.reply.send(Err(Error::ConnectionLoss));
                }
            }
            let pause_ms = rand::thread_rng().gen_range(0..=RECONNECT_PAUSE_MS_MAX);
            sleep(Duration::from_millis(pause_ms)).await;
        }
    }

    /// Java's rule: each host gets an equal share of the session timeout to answer.
    fn connect_timeout_per_host(&self) -> Duration {
        let hosts = self.connect_string.addresses.len() as u64;
        Duration::from_millis((u64::from(self.negotiated_timeout_ms) / hosts).max(100))
    }

    async fn handshake(
        &mut self,
        address: &str,
    ) -> io::Result<Option<(TcpStream, ConnectResponse)>> {
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid_seen,
            timeout_ms: i32::try_from(self.options.session_timeout_ms).unwrap_or(i32::MAX),
            session_id: if self.seen_read_write_server {
                self.session_id
            } else {
                0
            },
            password: self.password.clone(),
            read_only: Some(self.options.read_only_allowed),
        };
        let bytes_max = self.options.packet_bytes_max;
        let attempt = async {
            let mut stream = TcpStream::connect(address).await?;
            stream.set_nodelay(true)?;
            stream.write_all(&framed(&request.encode())).await?;
            let frame = read_frame(&mut stream, bytes_max).await?;
            let response = ConnectResponse::decode(&frame).map_err(invalid_data)?;
            Ok((stream, response))
        };
        timeout(self.connect_timeout_per_host(), attempt)
            .await
            .ok()
            .transpose()
    }

    /// Adopts the session the server at `address` granted, then queues what a new connection
    /// owes the server before any call: the identities, then the watches (SetWatches). On a
    /// read-only server it also starts looking for a read-write one.
    fn establish(
        &mut self,
        address: &str,
        stream: TcpStream,
        response: ConnectResponse,
    ) -> Connection {
        let read_only = response.read_only == Some(true);
        self.session_id = response.session_id;
        self.password = response.password;
        self.negotiated_timeout_ms = u32::try_from(response.timeout_ms).unwrap_or(1);
        self.seen_read_write_server |= !read_only;
        let (reader, writer) = stream.into_split();
        let now = Instant::now();
        let mut connection = Connection {
            reader,
            writer,
            outbox: Outbox::default(),
            pending: VecDeque::new(),
            auth_waiters: VecDeque::new(),
            last_send: now,
            last_receive: now,
            read_write_search: read_only.then(|| {
                let others = self
                    .connect_string
                    .addresses
                    .iter()
                    .filter(|other| *other != address)
                    .cloned()
                    .collect();
                tokio::spawn(find_read_write_server(others))
            }),
        };
        for auth in &self.auths {
            connection
                .outbox
                .push(xid::AUTH, &Request::Auth(auth.clone()));
            connection.auth_waiters.push_back(None);
        }
        for request in self.watches.set_watches_requests(self.last_zxid_seen) {
            self.send(&mut connection, request, Waiter::Restore);
        }
        debug!(
            session_id = self.session_id,
            timeout_ms = self.negotiated_timeout_ms,
            read_only,
            "session established"
        );
        self.publish(if read_only {
            SessionState::ConnectedReadOnly
        } else {
            SessionState::Connected
        });
        connection
    }

    /// Serves one connection: replies, notifications, calls, pings, until it ends.
    ///
    /// The branches are polled in order. Writing comes first, so whatever is queued goes out
    /// before anything else happens; calls come before reads, and cannot starve them, because
    /// each call holds an outstanding-request permit that only a reply gives back.
    async fn serve(
        &mut self,
        connection: &mut Connection,
        calls: &mut mpsc::UnboundedReceiver<Call>,
    ) -> ConnectionEnd {
        let timeouts = Timeouts::for_session(self.negotiated_timeout_ms);
        let timer = sleep_until(timeouts.next_deadline(connection));
        tokio::pin!(timer);
        let mut inbound = Inbound::new(self.options.packet_bytes_max);
        loop {
            let outbox_has_room = connection.outbox.has_room();
            tokio::select! {
                biased;
                written = connection.writer.write(connection.outbox.unsent()), if !connection.outbox.is_empty() => match written {
                    Ok(0) => return ConnectionEnd::Lost("socket closed for writing".into()),
                    Ok(count) => {
                        connection.outbox.advance(count);
                        connection.last_send = Instant::now();
                    }
                    Err(error) => return ConnectionEnd::Lost(error.to_string()),
                },
                () = timer.as_mut() => {
                    if let Err(end) = timeouts.on_timer(connection) {
                        return end;
                    }
                    // Sends and receives only move the deadline later, so rather than following
                    // every one of them the timer fires early now and then and is re-armed here.
                    timer.as_mut().reset(timeouts.next_deadline(connection));
                }
                call = calls.recv(), if outbox_has_room => match call {
                    Some(call) => {
                        self.submit(connection, call);
                        self.submit_queued(connection, calls);
                        // With other requests in flight, callers are pipelining, and the ones
                        // that replies just woke are likely about to call again: letting them run
                        // first puts their requests in the same write.
                        if connection.pending.len() > 1 {
                            tokio::task::yield_now().await;
                            self.submit_queued(connection, calls);
                        }
                    }
                    // Every Client handle is gone (the task is aborted then; this is belt and braces).
                    None => return ConnectionEnd::Final(SessionState::Closed),
                },
                read = connection.reader.read_buf(inbound.read_buffer()) => match read {
                    Ok(0) => return ConnectionEnd::Lost("server closed the connection".into()),
                    Ok(_) => {
                        connection.last_receive = Instant::now();
                        if let Err(end) = self.receive_frames(connection, &mut inbound) {
                            return end;
                        }
                    }
                    Err(error) => return ConnectionEnd::Lost(error.to_string()),
                },
                found = read_write_server_found(&mut connection.read_write_search) => {
                    // Apache's way: drop the read-only connection and connect there first.
                    self.preferred_address = Some(found.clone());
                    return ConnectionEnd::Lost(format!("read-write server {found} found"));
                }
            }
        }
    }

    /// Submits every call already queued while the outbox has room, so that one write carries
    /// them all.
    fn submit_queued(
        &mut self,
        connection: &mut Connection,
        calls: &mut mpsc::UnboundedReceiver<Call>,
    ) {
        while connection.outbox.has_room() {
            match calls.try_recv() {
                Ok(call) => self.submit(connection, call),
                // Empty, or closed: the next `recv` in the loop tells which.
                Err(_) => return,
            }
        }
    }

    /// Handles every complete frame the last read brought in.
    fn receive_frames(
        &mut self,
        connection: &mut Connection,
        inbound: &mut Inbound,
    ) -> Result<(), ConnectionEnd> {
        while let Some(frame) = inbound
            .next_frame()
            .map_err(|error| ConnectionEnd::Lost(error.to_string()))?
        {
            self.receive(connection, frame)?;
        }
        Ok(())
    }

    /// Puts a caller's request on the wire, or fails it at once if it cannot be sent.
    fn submit(&mut self, connection: &mut Connection, call: Call) {
        let Call {
            request,
            watch_change,
            reply,
            permit,
        } = call;
        if let Request::Auth(auth) = &request {
            match connection
                .outbox
                .push_checked(xid::AUTH, &request, self.options.packet_bytes_max)
            {
                Ok(()) => {
                    self.auths.push(auth.clone());
                    connection.auth_waiters.push_back(Some(reply));
                }
                Err(bytes) => {
                    let _ = reply.send(Err(self.request_too_large(bytes)));
                }
            }
            return;
        }
        self.send(
            connection,
            request,
            Waiter::Caller {
                reply,
                watch_change,
                _permit: permit,
            },
        );
    }

    fn send(&mut self, connection: &mut Connection, request: Request, waiter: Waiter) {
        let xid = self.next_xid();
        let pushed = connection
            .outbox
            .push_checked(xid, &request, self.options.packet_bytes_max);
        if let Err(bytes) = pushed {
            let error = self.request_too_large(bytes);
            match waiter {
                Waiter::Caller { reply, .. } => {
                    let _ = reply.send(Err(error));
                }
                Waiter::Restore => warn!(%error, "SetWatches batch dropped"),
            }
            return;
        }
        connection.pending.push_back(Pending {
            xid,
            opcode: request.opcode(),
            waiter,
        });
    }

    fn request_too_large(&self, bytes: usize) -> Error {
        Error::RequestTooLarge {
            bytes,
            bytes_max: self.options.packet_bytes_max,
        }
    }

    /// Java's sequence: 1, 2, … wrapping from i32::MAX back to 1 (xids ≤ 0 are reserved).
    fn next_xid(&mut self) -> i32 {
        self.last_xid = if self.last_xid == i32::MAX {
            1
        } else {
            self.last_xid + 1
        };
        self.last_xid
    }

    /// Handles one frame from the server; an error ends the connection.
    fn receive(&mut self, connection: &mut Connection, frame: &[u8]) -> Result<(), ConnectionEnd> {
        let header = ReplyHeader::read_from(&mut Reader::new(frame)).map_err(protocol_error)?;
        let body = &frame[REPLY_HEADER_BYTES..];
        match header.xid {
            xid::NOTIFICATION => self.notify(header.zxid, body),
            xid::PING => Ok(()),
            xid::AUTH => finish_auth(connection, header.err),
            _ => self.finish_call(connection, &header, body),
        }
    }

    fn notify(&mut self, zxid: i64, body: &[u8]) -> Result<(), ConnectionEnd> {
        let event = WatcherEvent::read_from(&mut Reader::new(body)).map_err(protocol_error)?;
        match EventType::from_i32(event.event_type) {
            Some(event_type) => {
                self.watches
                    .dispatch(event_type, &event.path, zxid, &self.connect_string.chroot)
            }
            None => {
                warn!(event_type = event.event_type, path = %event.path, "unknown event type ignored")
            }
        }
        Ok(())
    }

    /// Replies must come in request order; anything else means the stream cannot be trusted.
    fn finish_call(
        &mut self,
        connection: &mut Connection,
        header: &ReplyHeader,
        body: &[u8],
    ) -> Result<(), ConnectionEnd> {
        let expected_xid = connection.pending.front().map(|pending| pending.xid);
        if expected_xid != Some(header.xid) {
            return Err(ConnectionEnd::Lost(format!(
                "reply xid {} but expected {expected_xid:?}",
                header.xid
            )));
        }
        let Some(pending) = connection.pending.pop_front() else {
            unreachable!("front was just checked")
        };
        self.last_zxid_seen = self.last_zxid_seen.max(header.zxid);
        let result = match header.err {
            0 => Response::decode(pending.opcode, body).map_err(Error::Decode),
            code => Err(Error::from_server_code(code)),
        };
        let decode_failed = matches!(result, Err(Error::Decode(_)));
        match pending.waiter {
            Waiter::Caller {
                reply,
                watch_change,
                ..
            } => {
                if let Some(change) = watch_change {
                    let no_node = result == Err(Error::Server(ErrorCode::NoNode));
                    self.watches.apply(
                        change,
                        result.is_ok(),
                        no_node,
                        &self.connect_string.chroot,
                    );
                }
                let _ = reply.send(result);
            }
            Waiter::Restore => {
                if let Err(error) = result {
                    warn!(%error, "SetWatches failed; some watches may not be restored");
                }
            }
        }
        if decode_failed {
            return Err(ConnectionEnd::Lost("undecodable reply".into()));
        }
        if pending.opcode == OpCode::CloseSession {
            return Err(ConnectionEnd::Final(SessionState::Closed));
        }
        Ok(())
    }
}

/// When a connection pings, and when its silence means it is dead.
struct Timeouts {
    ping_interval: Duration,
    read_timeout: Duration,
}

impl Timeouts {
    fn for_session(negotiated_timeout_ms: u32) -> Timeouts {
        let timeout_ms = u64::from(negotiated_timeout_ms);
        Timeouts {
            ping_interval: Duration::from_millis(timeout_ms / 3),
            // Java's rule: silence for two thirds of the timeout means the connection is dead,
            // which leaves the last third to reach another server before the session expires.
            read_timeout: Duration::from_millis(timeout_ms * 2 / 3),
        }
    }

    fn next_deadline(&self, connection: &Connection) -> Instant {
        (connection.last_send + self.ping_interval).min(connection.last_receive + self.read_timeout)
    }

    /// Ends a connection silent for too long, and queues a ping if nothing went out for a while;
    /// does nothing when the timer fired before a deadline that moved.
    fn on_timer(&self, connection: &mut Connection) -> Result<(), ConnectionEnd> {
        let now = Instant::now();
        if now >= connection.last_receive + self.read_timeout {
            return Err(ConnectionEnd::Lost(format!(
                "nothing heard for {} ms",
                self.read_timeout.as_millis()
            )));
        }
        if now >= connection.last_send + self.ping_interval {
            connection.outbox.push(xid::PING, &Request::Ping);
            // Counted as sent now so that a stuck socket does not queue a ping per wakeup.
            connection.last_send = now;
        }
        Ok(())
    }
}

/// The address the read-write search found; pending while there is no search (or it failed).
/// Cancel-safe, and a finished search is forgotten so that it is never polled again.
async fn read_write_server_found(search: &mut Option<JoinHandle<String>>) -> String {
    if let Some(running) = search {
        let outcome = running.await;
        *search = None;
        if let Ok(address) = outcome {
            return address;
        }
    }
    std::future::pending().await
}

/// The server refuses a session it no longer knows with timeout 0 and session id 0.
fn is_expired(response: &ConnectResponse) -> bool {
    response.timeout_ms <= 0 || response.session_id == 0
}

fn final_error(state: SessionState) -> Error {
    match state {
        SessionState::AuthFailed => Error::AuthFailed,
        SessionState::Closed => Error::SessionClosed,
        _ => Error::SessionExpired,
    }
}

/// A refused identity is final: the server drops the connection right after saying so.
fn finish_auth(connection: &mut Connection, err: i32) -> Result<(), ConnectionEnd> {
    let waiter = connection.auth_waiters.pop_front().flatten();
    let result = match err {
        0 => Ok(Response::Empty),
        code => Err(Error::from_server_code(code)),
    };
    let failed = result.is_err();
    if let Some(waiter) = waiter {
        let _ = waiter.send(result);
    }
    if failed {
        return Err(ConnectionEnd::Final(SessionState::AuthFailed));
    }
    Ok(())
}

fn protocol_error(error: zoolog_proto::DecodeError) -> ConnectionEnd {
    ConnectionEnd::Lost(format!("undecodable frame: {error}"))
}

fn invalid_data(error: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error)
}

/// The handshake's one length-prefixed frame, refusing lengths over the limit before allocating.
async fn read_frame(
    reader: &mut (impl AsyncRead + Unpin),
    bytes_max: usize,
) -> io::Result<Vec<u8>> {
    let mut prefix = [0; 4];
    reader.read_exact(&mut prefix).await?;
    let length = frame_length(prefix, bytes_max).map_err(invalid_data)?;
    let mut frame = vec![0; length];
    reader.read_exact(&mut frame).await?;
    Ok(frame)
}

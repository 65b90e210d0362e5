//! # zoolog-client
//!
//! An async (tokio) client for ZooKeeper and zoolog, speaking the real wire protocol.
//!
//! It owns one session: the TCP connection to one server at a time, the handshake, pipelined
//! requests matched to replies in strict FIFO order, pings at a third of the negotiated timeout,
//! reconnection to the listed hosts (random order) with the same session id and password, and
//! the re-sending of identities and watches (SetWatches/SetWatches2 with the last zxid seen)
//! on every new connection. It tells the caller about the session through
//! [`SessionState`] events and fails calls with [`Error::SessionExpired`] once the server has
//! forgotten the session.
//!
//! It never retries a request on its own (a call cut off by a lost connection fails with
//! [`Error::ConnectionLoss`], because the write may or may not have happened), never reorders
//! replies or events, never blocks its IO loop on a slow caller, and never buffers without a
//! bound: frames are capped at jute.maxbuffer, outstanding requests at
//! [`ClientOptions::requests_outstanding_max`] (further callers wait), and persistent watch
//! streams at [`ClientOptions::persistent_watch_events_max`] (a reader that falls behind is told
//! how many events it missed). Recipes (locks, queues, elections) belong on top of it, not in it:
//! they are in [`recipes`], built from the public API alone.
//!
//! ```no_run
//! use zoolog_client::{open_acl_unsafe, Client, ClientOptions, CreateMode};
//!
//! # async fn example() -> Result<(), zoolog_client::Error> {
//! let client = Client::connect("127.0.0.1:2181/app", ClientOptions::default()).await?;
//! let acl = open_acl_unsafe();
//! client.create("/config", Some(b"v1"), &acl, CreateMode::Persistent).await?;
//! let (data, stat, changed) = client.get_data_w("/config").await?;
//! assert_eq!((data.as_deref(), stat.version), (Some(b"v1".as_slice()), 0));
//! client.set_data("/config", Some(b"v2"), Some(stat.version)).await?;
//! assert_eq!(changed.await?.path, "/config");
//! // `None` is null data, which ZooKeeper tells apart from empty data.
//! client.create("/flag", None, &acl, CreateMode::Persistent).await?;
//! assert_eq!(client.get_data("/flag").await?.0, None);
//! client.close().await
//! # }
//! ```
//!
//! Persistent, recursive watches arrive as a stream:
//!
//! ```no_run
//! use zoolog_client::{AddWatchMode, Client, ClientOptions};
//!
//! # async fn example(client: Client) -> Result<(), zoolog_client::Error> {
//! let mut events = client.add_watch("/services", AddWatchMode::PersistentRecursive).await?;
//! loop {
//!     let event = events.next().await?;
//!     println!("{:?} {}", event.event_type, event.path);
//! }
//! # }
//! ```
//!
//! A client may accept a read-only server (one cut off from its quorum) rather than wait for a
//! writable one; it keeps looking for a read-write server and moves there by itself:
//!
//! ```no_run
//! use zoolog_client::{Client, ClientOptions, Error, ErrorCode, SessionState};
//!
//! # async fn example() -> Result<(), zoolog_client::Error> {
//! let options = ClientOptions { read_only_allowed: true, ..ClientOptions::default() };
//! let client = Client::connect("10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181", options).await?;
//! let mut events = client.session_events();
//! if client.state() == SessionState::ConnectedReadOnly {
//!     let (config, _) = client.get_data("/config").await?; // reads are served
//!     let refused = client.set_data("/config", config.as_deref(), None).await;
//!     assert_eq!(refused.err(), Some(Error::Server(ErrorCode::NotReadOnly)));
//!     // Disconnected, then Connected once a read-write server has taken the session.
//!     while events.recv().await.ok() != Some(SessionState::Connected) {}
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Errors carry the server's code, so the usual ZooKeeper idioms read naturally:
//!
//! ```
//! use zoolog_client::{Error, ErrorCode};
//!
//! let error = Error::Server(ErrorCode::NodeExists);
//! assert_eq!(error.code(), ErrorCode::NodeExists);
//! assert_eq!(Error::ConnectionLoss.code(), ErrorCode::ConnectionLoss);
//! ```

mod buffers;
mod client;
mod error;
mod hosts;
mod read_write_search;
pub mod recipes;
mod session;
mod types;
mod watches;

pub use client::Client;
pub use error::{Error, MultiFailure};
pub use types::{
    creator_all_acl, open_acl_unsafe, read_acl_unsafe, ClientOptions, Op, OpResult, ReadOp,
    ReadResult, SessionState, WatchedEvent,
};
pub use watches::{PersistentWatch, Watch};
pub use zoolog_proto::codes::perms;
pub use zoolog_proto::{
    Acl, AddWatchMode, ClientInfo, CreateMode, ErrorCode, EventType, Id, Stat, WatcherType,
};

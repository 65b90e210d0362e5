//! What a call can fail with: a server error code, or the connection or session giving way.

use zoolog_proto::{DecodeError, ErrorCode};

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The server answered with this error code (NoNode, NodeExists, BadVersion…).
    #[error("server replied {0:?}")]
    Server(ErrorCode),
    /// The server answered with a code this client does not know.
    #[error("server replied unknown error code {0}")]
    UnknownServerCode(i32),
    /// The connection dropped before the reply arrived: the request may or may not have been
    /// applied. The session itself lives on and the client is reconnecting.
    #[error("connection lost before the reply arrived")]
    ConnectionLoss,
    /// The server no longer knows the session; every later call fails the same way.
    #[error("session expired")]
    SessionExpired,
    /// The session was closed by [`Client::close`](crate::Client::close) (or the client dropped).
    #[error("session closed")]
    SessionClosed,
    /// The server refused an identity given to [`Client::add_auth`](crate::Client::add_auth) and
    /// dropped the connection; the session is unusable.
    #[error("authentication failed")]
    AuthFailed,
    /// No server accepted a session within the connect timeout.
    #[error("no server accepted a session within {timeout_ms} ms")]
    ConnectTimeout { timeout_ms: u64 },
    /// The caller's arguments were refused before anything was sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The encoded request is longer than the server's frame limit (jute.maxbuffer).
    #[error("request of {bytes} bytes is longer than the frame limit of {bytes_max} bytes")]
    RequestTooLarge { bytes: usize, bytes_max: usize },
    /// The reply could not be decoded; the connection is dropped and re-established.
    #[error("undecodable reply: {0}")]
    Decode(#[from] DecodeError),
    /// The reply decoded to a record that does not belong to the request (a server bug).
    #[error("reply record does not match the request")]
    UnexpectedResponse,
    /// A multi was rolled back; see [`MultiFailure`].
    #[error("multi failed at op {}: {:?}", .0.failed_op_index, .0.code)]
    MultiFailed(Box<MultiFailure>),
    /// A persistent watch stream fell behind and lost this many events; it goes on with newer ones.
    #[error("persistent watch lagged and lost {missed} events")]
    WatchLagged { missed: u64 },
    /// A persistent watch stream ended: the watch was removed or the session ended.
    #[error("persistent watch ended")]
    WatchEnded,
}

/// The per-op outcome of a rolled-back multi: ops before the failing one report `Ok` (rolled
/// back), the failing one its own code, later ones `RuntimeInconsistency`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiFailure {
    pub failed_op_index: usize,
    pub code: ErrorCode,
    pub op_codes: Vec<ErrorCode>,
}

impl Error {
    /// The error as a ZooKeeper code, for callers that think in KeeperException terms.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Server(code) => *code,
            Error::MultiFailed(failure) => failure.code,
            Error::ConnectionLoss | Error::ConnectTimeout { .. } => ErrorCode::ConnectionLoss,
            Error::SessionExpired => ErrorCode::SessionExpired,
            Error::SessionClosed => ErrorCode::SessionExpired,
            Error::AuthFailed => ErrorCode::AuthFailed,
            Error::InvalidArgument(_) => ErrorCode::BadArguments,
            Error::Decode(_) | Error::UnexpectedResponse | Error::RequestTooLarge { .. } => {
                ErrorCode::MarshallingError
            }
            Error::UnknownServerCode(_) | Error::WatchLagged { .. } | Error::WatchEnded => {
                ErrorCode::SystemError
            }
        }
    }

    /// Maps a non-zero `ReplyHeader.err`.
    pub(crate) fn from_server_code(code: i32) -> Error {
        ErrorCode::from_i32(code).map_or(Error::UnknownServerCode(code), Error::Server)
    }
}

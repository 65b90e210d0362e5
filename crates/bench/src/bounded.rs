//! Bounded waits around the client's recipes ([`zoolog_client::recipes`]), which wait as long
//! as the coordination takes. A benchmark must not: a participant stops waiting when `give_up`
//! is set (another participant stopped, or Ctrl-C) or after [`WAIT_MAX`]. Dropping a recipe's
//! future mid-way is safe: its nodes are released in the background or go with the session.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use zoolog_client::Error;

use crate::control::Signal;

/// Longest a participant waits for the others before it reports a stall.
pub const WAIT_MAX: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub enum WaitError {
    Client(Error),
    /// `give_up` was set while waiting.
    GaveUp,
    /// Nothing happened within [`WAIT_MAX`].
    Stalled,
}

impl fmt::Display for WaitError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Client(error) => error.fmt(formatter),
            WaitError::GaveUp => formatter.write_str("gave up waiting"),
            WaitError::Stalled => write!(formatter, "no progress within {WAIT_MAX:?}"),
        }
    }
}

/// Runs `work` until it ends, `give_up` is set, or [`WAIT_MAX`] passes.
pub async fn within<T>(
    give_up: &Signal,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, WaitError> {
    tokio::select! {
        done = work => done.map_err(WaitError::Client),
        _ = give_up.wait() => Err(WaitError::GaveUp),
        _ = tokio::time::sleep(WAIT_MAX) => Err(WaitError::Stalled),
    }
}

use std::io;
use std::path::PathBuf;

use crate::Position;

/// Why [`crate::OrderingLayer::append`] refused an entry. Nothing refused is ever ordered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// The bounded queue in front of the writer is full; the caller should push back on its
    /// clients (ZooKeeper clients see this as a slow server) and retry later.
    #[error("append queue is full")]
    Full,
    #[error("entry of {entry_bytes} bytes exceeds the limit of {entry_bytes_max} bytes")]
    TooLarge {
        entry_bytes: usize,
        entry_bytes_max: usize,
    },
    #[error("the log has been closed")]
    Closed,
    /// The writer hit an IO error and stopped; the log accepts nothing more until reopened.
    #[error("the log has failed and accepts no more entries")]
    Failed,
    /// A replica append that does not continue the log: a bug in the caller, which decides
    /// positions itself (see [`crate::ReplicaLog::append`]).
    #[error(
        "append at position {found} does not continue the log, which expects position {expected}"
    )]
    NotConsecutive { expected: Position, found: Position },
    /// One append holds more than the whole queue may: it could never be accepted, so
    /// retrying is pointless; split it.
    #[error("an append of {entries} entries and {bytes} bytes exceeds the queue limits of {queue_entries_max} entries and {queue_bytes_max} bytes")]
    BatchTooLarge {
        entries: usize,
        bytes: usize,
        queue_entries_max: usize,
        queue_bytes_max: usize,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// The files on disk are damaged in a way that recovery must not paper over. The message
    /// names the file, byte offset and position, and what the operator can do.
    #[error("log is corrupt: {0}")]
    Corrupt(String),
    #[error("{} is in use by another process or another open log (lock file {})", .dir.display(), .lock_file.display())]
    Locked { dir: PathBuf, lock_file: PathBuf },
    #[error("invalid log configuration: {0}")]
    InvalidConfig(String),
    #[error("snapshot at position {position} is beyond the committed position {committed}")]
    SnapshotBeyondCommitted {
        position: Position,
        committed: Position,
    },
    #[error("the log writer failed: {0}")]
    WriterFailed(String),
    /// The caller asked for something that would break the log's invariants (truncating
    /// below a snapshot, epochs going backwards...): a bug in the caller; nothing was done.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl LogError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        LogError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Attaches a human context to IO results, so an error says which file and what step failed.
pub(crate) trait IoContext<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T, LogError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T, LogError> {
        self.map_err(|source| LogError::io(context(), source))
    }
}

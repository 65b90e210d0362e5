//! # zoolog-proto
//!
//! Owns the bytes of the ZooKeeper 3.9 client protocol: the jute encoding, every request and
//! response record, both handshake forms, opcodes, error codes and the frame length rule.
//!
//! It must never do IO, keep state between frames, or decide what a request means: decoding
//! either yields a typed value or a [`DecodeError`] that says precisely what was wrong, for any
//! input bytes (the decoder is fuzzed).

pub mod codes;
pub mod connect;
pub mod jute;
pub mod quota;
pub mod records;
pub mod request;
pub mod response;

/// The ZooKeeper release whose client protocol zoolog speaks, and zoolog's own version: what
/// the server reports (`srvr`, `envi`) and the shell's `version` prints.
pub const ZOOKEEPER_VERSION: &str = concat!("3.9.3-zoolog-", env!("CARGO_PKG_VERSION"));

pub use codes::{AddWatchMode, CreateMode, ErrorCode, EventType, KeeperState, OpCode, WatcherType};
pub use connect::{ConnectRequest, ConnectResponse};
pub use jute::{Jute, Reader};
pub use records::*;
pub use request::Request;
pub use response::{encode_notification, encode_reply, MultiResult, Response, REPLY_BYTES_MIN};

/// ZooKeeper's default `jute.maxbuffer`: the largest frame a server accepts (1 MiB − 1).
pub const PACKET_BYTES_MAX_DEFAULT: usize = 0xfffff;

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("frame ends at byte {offset} but {wanted} more bytes were needed")]
    Truncated { offset: usize, wanted: usize },
    #[error("length {length} at byte {offset} is negative or longer than the frame")]
    BadLength { offset: usize, length: i32 },
    #[error("string at byte {offset} is not valid UTF-8")]
    BadUtf8 { offset: usize },
    #[error("unknown opcode {opcode}")]
    UnknownOpcode { opcode: i32 },
    #[error("opcode {opcode} is not allowed in this multi")]
    BadMultiOp { opcode: i32 },
    #[error("unknown error code {code}")]
    UnknownErrorCode { code: i32 },
    #[error("{extra} bytes left over after the record")]
    TrailingBytes { extra: usize },
}

/// Why a frame length prefix was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("frame length {length} is outside 0..={bytes_max} (jute.maxbuffer)")]
pub struct FrameTooLong {
    pub length: i32,
    pub bytes_max: usize,
}

/// Checks a frame's 4-byte length prefix against the limit.
pub fn frame_length(prefix: [u8; 4], bytes_max: usize) -> Result<usize, FrameTooLong> {
    let length = i32::from_be_bytes(prefix);
    usize::try_from(length)
        .ok()
        .filter(|&length| length <= bytes_max)
        .ok_or(FrameTooLong { length, bytes_max })
}

/// Prepends the 4-byte length to a payload.
pub fn framed(payload: &[u8]) -> Vec<u8> {
    frame_with(payload.len(), |out| out.extend_from_slice(payload))
}

/// The length prefix in front of every frame.
pub const FRAME_PREFIX_BYTES: usize = 4;

/// A frame in a buffer of its own, its payload encoded in place by `encode` behind the length
/// prefix, so that framing copies nothing; the buffer starts with room for `payload_bytes_hint`.
pub fn frame_with(payload_bytes_hint: usize, encode: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_PREFIX_BYTES + payload_bytes_hint);
    out.extend_from_slice(&[0; FRAME_PREFIX_BYTES]);
    encode(&mut out);
    let length = i32::try_from(out.len() - FRAME_PREFIX_BYTES)
        .expect("a frame's payload fits its length prefix");
    out[..FRAME_PREFIX_BYTES].copy_from_slice(&length.to_be_bytes());
    out
}

//! Exact snapshots: the whole state at `last_applied_zxid` (nodes with their null-data flags and
//! counters, sessions), in a versioned jute-style encoding. Derived state (children sets,
//! ephemeral sets, quota roots, totals) is rebuilt on decode, and decode checks every invariant
//! it relies on, so corrupt input is an error, never a panic.

use bytes::Bytes;

use crate::node::{Children, Node, NodeKind};
use crate::path;
use crate::tree::{DataTree, SessionInfo, CONFIG_PATH, QUOTA_PATH, ZOOKEEPER_PATH};
use crate::TreeConfig;
use imbl::OrdSet;
use std::io::Read;
use std::sync::Arc;
use zoolog_proto::jute::write_buffer;
use zoolog_proto::{Acl, DecodeError, Jute, Reader};

/// The last byte is the format version. Version 2 added each session's `touched_at` and
/// `owner`; version 1 snapshots still decode, with both 0.
const MAGIC: &[u8; 8] = b"ZLTREE\0\x02";
const MAGIC_V1: &[u8; 8] = b"ZLTREE\0\x01";

/// The pieces [`DataTree::encode_snapshot`] builds its result from.
const SNAPSHOT_PIECE_BYTES: usize = 64 << 10;

const KIND_PERSISTENT: u8 = 0;
const KIND_EPHEMERAL: u8 = 1;
const KIND_CONTAINER: u8 = 2;
const KIND_TTL: u8 = 3;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a zoolog tree snapshot (bad magic)")]
    BadMagic,
    #[error("snapshot does not decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("snapshot is inconsistent: {0}")]
    Inconsistent(String),
    #[error("snapshot cannot be read: {0}")]
    Read(String),
}

fn inconsistent(what: impl Into<String>) -> SnapshotError {
    SnapshotError::Inconsistent(what.into())
}

impl DataTree {
    /// Appends the snapshot of this state. Meant for a frozen clone on a background thread.
    pub fn encode_snapshot(&self, out: &mut Vec<u8>) {
        let appended: Result<(), std::convert::Infallible> =
            self.encode_snapshot_in_pieces(SNAPSHOT_PIECE_BYTES, |piece| {
                out.extend_from_slice(piece);
                Ok(())
            });
        appended.unwrap_or_else(|never| match never {});
    }

    /// Encodes the snapshot of this state and hands it to `sink` in consecutive pieces of
    /// about `piece_bytes` (more when one node's data is larger), so that a large tree's
    /// snapshot can go to a file without ever being whole in memory.
    pub fn encode_snapshot_in_pieces<E>(
        &self,
        piece_bytes: usize,
        mut sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut out = Vec::with_capacity(piece_bytes.min(SNAPSHOT_PIECE_BYTES) + 1024);
        let mut flush_if_full = |out: &mut Vec<u8>| -> Result<(), E> {
            if out.len() >= piece_bytes {
                sink(out)?;
                out.clear();
            }
            Ok(())
        };
        out.extend_from_slice(MAGIC);
        self.last_applied_zxid.write_to(&mut out);
        (self.sessions.len() as i64).write_to(&mut out);
        for (session_id, session) in &self.sessions {
            session_id.write_to(&mut out);
            session.timeout_ms.write_to(&mut out);
            write_buffer(Some(&session.password), &mut out);
            session.touched_at.write_to(&mut out);
            (session.owner as i64).write_to(&mut out);
            flush_if_full(&mut out)?;
        }
        (self.nodes.len() as i64).write_to(&mut out);
        // Parents before children, children in name order: decode links as it reads.
        let mut pending = vec![String::from("/")];
        while let Some(current) = pending.pop() {
            let node = &self.nodes[&current];
            encode_node(&current, node, &mut out);
            flush_if_full(&mut out)?;
            pending.extend(
                node.children
                    .iter()
                    .rev()
                    .map(|name| path::child_path(&current, name)),
            );
        }
        if out.is_empty() {
            return Ok(());
        }
        sink(&out)
    }

    /// Decodes a snapshot that is whole in memory.
    pub fn decode_snapshot(bytes: &[u8], config: TreeConfig) -> Result<DataTree, SnapshotError> {
        DataTree::decode_snapshot_from(bytes, bytes.len() as u64, config)
    }

    /// Decodes the snapshot of `snapshot_bytes` that `source` reads, holding no more of it
    /// in memory than a window and the largest node: a restart then needs the tree's memory,
    /// not the tree's and its snapshot's.
    pub fn decode_snapshot_from(
        source: impl Read,
        snapshot_bytes: u64,
        config: TreeConfig,
    ) -> Result<DataTree, SnapshotError> {
        let stream = &mut SnapshotStream::new(source, snapshot_bytes);
        let has_liveness = stream.next(|reader| match reader.take(MAGIC.len())? {
            magic if magic == MAGIC => Ok(true),
            magic if magic == MAGIC_V1 => Ok(false),
            _ => Err(SnapshotError::BadMagic),
        })?;
        let mut tree = DataTree::empty(config);
        tree.last_applied_zxid = stream.next(|reader| Ok(i64::read_from(reader)?))?;
        if tree.last_applied_zxid < 0 {
            return Err(inconsistent("negative zxid"));
        }
        let session_bytes_min = if has_liveness {
            8 + 4 + 4 + 8 + 8
        } else {
            8 + 4 + 4
        };
        for _ in 0..read_count(stream, session_bytes_min)? {
            let (session_id, info) = stream.next(|reader| decode_session(reader, has_liveness))?;
            if !(0..=tree.last_applied_zxid).contains(&info.touched_at) {
                return Err(inconsistent(format!(
                    "session {session_id:#x} touched at {}, outside the snapshot",
                    info.touched_at
                )));
            }
            if tree.sessions.insert(session_id, info).is_some() {
                return Err(inconsistent(format!("session {session_id:#x} twice")));
            }
        }
        let node_count = read_count(stream, 4)?;
        for index in 0..node_count {
            let (path, mut node) = stream.next(decode_node)?;
            tree.check_decoded_node(index, &path, &node)?;
            tree.share_parent_acl(&path, &mut node);
            tree.link_node(&path, node);
        }
        stream.finish()?;
        for built_in in [ZOOKEEPER_PATH, QUOTA_PATH, CONFIG_PATH] {
            if !tree.nodes.contains_key(built_in) {
                return Err(inconsistent(format!("{built_in} missing")));
            }
        }
        Ok(tree)
    }

    fn share_parent_acl(&self, path: &str, node: &mut Node) {
        let parent = path::parent_of(path)
            .filter(|_| path != "/")
            .and_then(|parent| self.nodes.get(parent));
        if let Some(parent) = parent.filter(|parent| parent.acl == node.acl) {
            node.acl = parent.acl.clone();
        }
    }

    /// Everything `link_node` asserts, checked up front so bad bytes become an error.
    fn check_decoded_node(&self, index: u64, path: &str, node: &Node) -> Result<(), SnapshotError> {
        if (index == 0) != (path == "/") {
            return Err(inconsistent(format!(
                "node {index} is {path:?}; the root must come first, once"
            )));
        }
        if !path::is_valid(path) || self.nodes.contains_key(path) {
            return Err(inconsistent(format!("{path:?} invalid or repeated")));
        }
        if index > 0 {
            let parent = path::parent_of(path).and_then(|parent| self.nodes.get(parent));
            if parent.is_none_or(|parent| parent.is_session_ephemeral()) {
                return Err(inconsistent(format!(
                    "{path} comes before its parent, or under an ephemeral"
                )));
            }
        }
        if let NodeKind::Ephemeral { owner_session_id } = node.kind {
            if !self.sessions.contains_key(&owner_session_id) {
                return Err(inconsistent(format!(
                    "{path} owned by unknown session {owner_session_id:#x}"
                )));
            }
        }
        Ok(())
    }
}

/// Bytes of a streamed snapshot decoded from at once; a larger node grows the window while
/// it is decoded.
const DECODE_WINDOW_BYTES: usize = 1 << 20;

/// A snapshot read from a stream and decoded item by item from a window of it.
struct SnapshotStream<R> {
    source: R,
    /// Bytes read from `source`; those from `start` on are not decoded yet.
    buffer: Vec<u8>,
    start: usize,
    /// Bytes of the snapshot `source` has not given yet.
    unread_bytes: u64,
}

impl<R: Read> SnapshotStream<R> {
    fn new(source: R, snapshot_bytes: u64) -> Self {
        SnapshotStream {
            source,
            buffer: Vec::new(),
            start: 0,
            unread_bytes: snapshot_bytes,
        }
    }

    /// Bytes not decoded yet, read or not.
    fn remaining(&self) -> u64 {
        (self.buffer.len() - self.start) as u64 + self.unread_bytes
    }

    /// Decodes the next item, reading on while the window ends inside it.
    fn next<T>(
        &mut self,
        decode: impl Fn(&mut Reader<'_>) -> Result<T, SnapshotError>,
    ) -> Result<T, SnapshotError> {
        loop {
            let mut reader = Reader::new(&self.buffer[self.start..]);
            match decode(&mut reader) {
                Ok(item) => {
                    self.start += reader.consumed();
                    return Ok(item);
                }
                Err(SnapshotError::Decode(
                    DecodeError::Truncated { .. } | DecodeError::BadLength { .. },
                )) if self.unread_bytes > 0 => self.read_more()?,
                Err(error) => return Err(error),
            }
        }
    }

    /// Reads a window's worth more, or as much as is held if that is more (so an item of n
    /// bytes is decoded after O(log n) tries), or the rest.
    fn read_more(&mut self) -> Result<(), SnapshotError> {
        self.buffer.drain(..self.start);
        self.start = 0;
        let held = self.buffer.len();
        let more = (held.max(DECODE_WINDOW_BYTES) as u64).min(self.unread_bytes) as usize;
        self.buffer.resize(held + more, 0);
        self.source
            .read_exact(&mut self.buffer[held..])
            .map_err(|error| SnapshotError::Read(error.to_string()))?;
        self.unread_bytes -= more as u64;
        Ok(())
    }

    /// Fails unless the whole snapshot was decoded.
    fn finish(&self) -> Result<(), SnapshotError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(DecodeError::TrailingBytes {
                extra: usize::try_from(extra).unwrap_or(usize::MAX),
            }
            .into()),
        }
    }
}

fn read_count<R: Read>(
    stream: &mut SnapshotStream<R>,
    min_bytes_each: usize,
) -> Result<u64, SnapshotError> {
    let count = stream.next(|reader| Ok(i64::read_from(reader)?))?;
    let count = u64::try_from(count).map_err(|_| inconsistent("negative count"))?;
    if count.saturating_mul(min_bytes_each as u64) > stream.remaining() {
        return Err(inconsistent(format!(
            "count {count} larger than the snapshot"
        )));
    }
    Ok(count)
}

fn decode_session(
    reader: &mut Reader<'_>,
    has_liveness: bool,
) -> Result<(i64, SessionInfo), SnapshotError> {
    let session_id = i64::read_from(reader)?;
    let timeout_ms = i32::read_from(reader)?;
    let password = Option::<Vec<u8>>::read_from(reader)?.unwrap_or_default();
    let (touched_at, owner) = if has_liveness {
        (i64::read_from(reader)?, i64::read_from(reader)? as u64)
    } else {
        (0, 0)
    };
    let info = SessionInfo {
        timeout_ms,
        password,
        ephemerals: OrdSet::new(),
        touched_at,
        owner,
    };
    Ok((session_id, info))
}

fn encode_node(path: &str, node: &Node, out: &mut Vec<u8>) {
    path.to_owned().write_to(out);
    write_buffer(node.data.as_deref(), out);
    node.acl.write_to(out);
    for value in [
        node.czxid,
        node.mzxid,
        node.ctime_ms,
        node.mtime_ms,
        node.pzxid,
    ] {
        value.write_to(out);
    }
    for value in [node.version, node.aversion, node.child_creations] {
        value.write_to(out);
    }
    match node.kind {
        NodeKind::Persistent => out.push(KIND_PERSISTENT),
        NodeKind::Ephemeral { owner_session_id } => {
            out.push(KIND_EPHEMERAL);
            owner_session_id.write_to(out);
        }
        NodeKind::Container => out.push(KIND_CONTAINER),
        NodeKind::Ttl { ttl_ms } => {
            out.push(KIND_TTL);
            ttl_ms.write_to(out);
        }
    }
}

fn decode_node(reader: &mut Reader<'_>) -> Result<(String, Node), SnapshotError> {
    let path = String::read_from(reader)?;
    let data = Option::<Vec<u8>>::read_from(reader)?.map(Bytes::from);
    let acl = Arc::new(Vec::<Acl>::read_from(reader)?);
    let czxid = i64::read_from(reader)?;
    let mzxid = i64::read_from(reader)?;
    let ctime_ms = i64::read_from(reader)?;
    let mtime_ms = i64::read_from(reader)?;
    let pzxid = i64::read_from(reader)?;
    let version = i32::read_from(reader)?;
    let aversion = i32::read_from(reader)?;
    let child_creations = i32::read_from(reader)?;
    let kind = match reader.take(1)?[0] {
        KIND_PERSISTENT => NodeKind::Persistent,
        KIND_EPHEMERAL => NodeKind::Ephemeral {
            owner_session_id: i64::read_from(reader)?,
        },
        KIND_CONTAINER => NodeKind::Container,
        KIND_TTL => NodeKind::Ttl {
            ttl_ms: i64::read_from(reader)?,
        },
        tag => return Err(inconsistent(format!("{path}: unknown node kind {tag}"))),
    };
    let children = Children::default();
    let node = Node {
        data,
        acl,
        kind,
        czxid,
        mzxid,
        ctime_ms,
        mtime_ms,
        version,
        aversion,
        child_creations,
        pzxid,
        children,
    };
    Ok((path, node))
}

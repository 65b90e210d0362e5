//! Snapshot files: an opaque state image exact at one log position.
//!
//! File format, little endian: `magic "ZLSNAP01" | position: u64 | payload_len: u64 |
//! crc32c: u32 | payload`. The checksum covers position, length and payload, so a snapshot
//! cut short by a crash, or renamed to another position by hand, is rejected.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;

use crate::error::{IoContext, LogError};
use crate::fsutil::{create_dir, file_names, fsync_dir, remove_file, remove_file_gradually};
use crate::{Position, POSITION_MAX};

const MAGIC: &[u8; 8] = b"ZLSNAP01";
const HEADER_BYTES: usize = 28;
const PREFIX: &str = "snapshot-";
const SUFFIX: &str = ".snap";
const TMP_SUFFIX: &str = ".tmp";

/// ZooKeeper's `autopurge.snapRetainCount` floor: fewer would let one bad snapshot plus the
/// purge of the WAL it depended on lose data.
pub const SNAPSHOTS_RETAINED_MIN: usize = 3;

fn snapshot_file_name(position: Position) -> String {
    format!("{PREFIX}{position:016x}{SUFFIX}")
}

/// Accepts exactly the names [`snapshot_file_name`] produces, up to POSITION_MAX.
fn parse_snapshot_file_name(name: &str) -> Option<Position> {
    let hex = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    u64::from_str_radix(hex, 16)
        .ok()
        .filter(|position| *position <= POSITION_MAX && snapshot_file_name(*position) == name)
}

/// The checksum of position, length and payload, from the payload's own checksum: the
/// payload can be summed as it is written, before its length is known.
fn checksum_of_parts(position: Position, payload_len: u64, payload_crc: u32) -> u32 {
    let mut crc = crc32c::crc32c(&position.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &payload_len.to_le_bytes());
    crc32c::crc32c_combine(crc, payload_crc, payload_len as usize)
}

fn encode_header(position: Position, payload_len: u64, payload_crc: u32) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[0..8].copy_from_slice(MAGIC);
    header[8..16].copy_from_slice(&position.to_le_bytes());
    header[16..24].copy_from_slice(&payload_len.to_le_bytes());
    let crc = checksum_of_parts(position, payload_len, payload_crc);
    header[24..28].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Where a snapshot's payload goes while it is produced: to the file, summed and counted.
pub struct SnapshotSink<'a> {
    out: BufWriter<&'a File>,
    payload_crc: u32,
    payload_len: u64,
}

impl SnapshotSink<'_> {
    /// Appends the next bytes of the payload.
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.payload_crc = crc32c::crc32c_append(self.payload_crc, bytes);
        self.payload_len += bytes.len() as u64;
        Ok(())
    }
}

/// Bytes a snapshot's file writes gather before they go to the kernel.
const SINK_BUFFER_BYTES: usize = 1 << 20;

struct Header {
    position: Position,
    payload_len: u64,
    crc: u32,
}

fn decode_header(bytes: &[u8]) -> Result<Header, String> {
    let header = bytes
        .get(..HEADER_BYTES)
        .ok_or_else(|| format!("{} bytes is shorter than the header", bytes.len()))?;
    if &header[0..8] != MAGIC {
        return Err("bad magic, not a zoolog snapshot".into());
    }
    Ok(Header {
        position: u64::from_le_bytes(header[8..16].try_into().expect("8 bytes")),
        payload_len: u64::from_le_bytes(header[16..24].try_into().expect("8 bytes")),
        crc: u32::from_le_bytes(header[24..28].try_into().expect("4 bytes")),
    })
}

/// Opens the snapshot file at `path`, named for `position`, and reads its header. Answers the
/// file, at its payload, and its header if the header and the file's length are those of a
/// complete snapshot of that position, else why not.
fn open_and_read_header(
    path: &Path,
    position: Position,
) -> Result<(File, Result<Header, String>), LogError> {
    let mut file = File::open(path).context(|| format!("open snapshot {}", path.display()))?;
    let file_bytes = file
        .metadata()
        .context(|| format!("stat snapshot {}", path.display()))?
        .len();
    let mut header_bytes = Vec::with_capacity(HEADER_BYTES);
    (&mut file)
        .take(HEADER_BYTES as u64)
        .read_to_end(&mut header_bytes)
        .context(|| format!("read snapshot {}", path.display()))?;
    let complete = decode_header(&header_bytes).and_then(|header| {
        if header.position != position {
            return Err(format!(
                "its header names position {}, not the one in its name",
                header.position
            ));
        }
        let expected_bytes = (HEADER_BYTES as u64).checked_add(header.payload_len);
        if expected_bytes != Some(file_bytes) {
            return Err(format!(
                "file is {file_bytes} bytes but its header promises {} bytes of payload",
                header.payload_len
            ));
        }
        Ok(header)
    });
    Ok((file, complete))
}

/// The payload of the snapshot file at `path`, named for `position`, with its header; `None`,
/// with a warning, when the file is not a complete snapshot of that position.
fn open_payload(
    path: &Path,
    position: Position,
) -> Result<Option<(Header, SnapshotPayload)>, LogError> {
    let (file, complete) = open_and_read_header(path, position)?;
    let header = match complete {
        Ok(header) => header,
        Err(reason) => {
            tracing::warn!(file = %path.display(), %reason, "skipping damaged snapshot");
            return Ok(None);
        }
    };
    let payload = SnapshotPayload {
        file: BufReader::with_capacity(PAYLOAD_READ_BYTES, file),
        left_bytes: header.payload_len,
        crc: 0,
        read_error: None,
    };
    Ok(Some((header, payload)))
}

/// A snapshot's payload as it comes off its file, summed as it is read: whoever decodes it
/// learns once it is all read whether these were the bytes written.
pub struct SnapshotPayload {
    file: BufReader<File>,
    left_bytes: u64,
    crc: u32,
    /// The first read error, kept for the store: a snapshot it could not read is not judged
    /// damaged, and start-up fails on it.
    read_error: Option<std::io::Error>,
}

impl SnapshotPayload {
    /// Bytes of the payload not read yet.
    pub fn left_bytes(&self) -> u64 {
        self.left_bytes
    }

    /// The rest of the payload, whole in memory: the decoder of those who want the bytes.
    pub fn read_whole(&mut self) -> Result<Bytes, String> {
        let capacity = usize::try_from(self.left_bytes).unwrap_or(0);
        let mut bytes = Vec::with_capacity(capacity);
        self.read_to_end(&mut bytes)
            .map_err(|error| error.to_string())?;
        Ok(Bytes::from(bytes))
    }
}

impl Read for SnapshotPayload {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let wanted =
            usize::try_from(self.left_bytes).map_or(buffer.len(), |left| left.min(buffer.len()));
        if wanted == 0 {
            return Ok(0);
        }
        let read = match self.file.read(&mut buffer[..wanted]) {
            // The header was checked against the file's length: it shrank while read.
            Ok(0) => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
            read => read,
        };
        match read {
            Ok(count) => {
                self.crc = crc32c::crc32c_append(self.crc, &buffer[..count]);
                self.left_bytes -= count as u64;
                Ok(count)
            }
            Err(error) => {
                if error.kind() != std::io::ErrorKind::Interrupted && self.read_error.is_none() {
                    self.read_error = Some(std::io::Error::new(error.kind(), error.to_string()));
                }
                Err(error)
            }
        }
    }
}

/// Bytes a snapshot's payload is read in.
const PAYLOAD_READ_BYTES: usize = 1 << 20;

/// Snapshot files in one directory (ZooKeeper's dataDir).
///
/// This is a store of its own rather than a part of [`crate::SingleLog`] because every
/// ordering layer needs snapshots, and not all of them have a local WAL: a Zab follower keeps
/// its own WAL and snapshots, while a translation server over a CORFU shared log keeps only
/// snapshots and replays the shared log from the snapshot's position. `SingleLog` owns one
/// and adds what only it knows: which WAL segments a snapshot makes unnecessary.
///
/// The store does not lock its directory; whoever opens it must be its only user
/// (`SingleLog` holds a lock file for that).
#[derive(Debug)]
pub struct SnapshotStore {
    dir: PathBuf,
    snapshots_retained: usize,
    /// Serialises save and purge so a purge never judges a snapshot that is half renamed.
    file_lock: Mutex<()>,
}

impl SnapshotStore {
    /// Opens (creating if needed) the snapshot directory and deletes temporary files left by
    /// a save that a crash interrupted; they were never renamed, so nothing relies on them.
    pub fn open(dir: impl Into<PathBuf>, snapshots_retained: usize) -> Result<Self, LogError> {
        if snapshots_retained < SNAPSHOTS_RETAINED_MIN {
            return Err(LogError::InvalidConfig(format!(
                "snapshots_retained is {snapshots_retained}, the minimum is {SNAPSHOTS_RETAINED_MIN}"
            )));
        }
        let dir = dir.into();
        create_dir(&dir)?;
        let store = SnapshotStore {
            dir,
            snapshots_retained,
            file_lock: Mutex::new(()),
        };
        store.remove_leftover_tmp_files()?;
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn remove_leftover_tmp_files(&self) -> Result<(), LogError> {
        let mut removed_any = false;
        for name in file_names(&self.dir)? {
            if name.starts_with(PREFIX) && name.ends_with(TMP_SUFFIX) {
                let path = self.dir.join(&name);
                tracing::warn!(file = %path.display(), "deleting unfinished snapshot left by a crash");
                remove_file(&path)?;
                removed_any = true;
            }
        }
        if removed_any {
            fsync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Durably stores `payload` as the state exact at `position`; see [`SnapshotStore::save_streamed`].
    pub fn save(&self, position: Position, payload: &[u8]) -> Result<(), LogError> {
        self.save_streamed(position, |sink| sink.write(payload))
            .map(|_| ())
    }

    /// Durably stores the payload `produce` writes, piece by piece, as the state exact at
    /// `position`, and returns its length: a large state goes to the file without being whole
    /// in memory. Blocking: call it from a thread that may wait for the disk. A crash at any
    /// point leaves either the previous set of snapshots or the previous set plus this one,
    /// never a half-written snapshot under its final name.
    pub fn save_streamed(
        &self,
        position: Position,
        produce: impl FnOnce(&mut SnapshotSink<'_>) -> std::io::Result<()>,
    ) -> Result<u64, LogError> {
        let _guard = self
            .file_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let final_path = self.dir.join(snapshot_file_name(position));
        let tmp_path = self
            .dir
            .join(format!("{}{TMP_SUFFIX}", snapshot_file_name(position)));
        let write = || -> std::io::Result<u64> {
            let file = File::create(&tmp_path)?;
            // The header, which sums the whole payload, is written last, over this space.
            (&file).write_all(&[0; HEADER_BYTES])?;
            let mut sink = SnapshotSink {
                out: BufWriter::with_capacity(SINK_BUFFER_BYTES, &file),
                payload_crc: 0,
                payload_len: 0,
            };
            produce(&mut sink)?;
            sink.out.flush()?;
            let header = encode_header(position, sink.payload_len, sink.payload_crc);
            file.write_all_at(&header, 0)?;
            file.sync_all()?;
            Ok(sink.payload_len)
        };
        let payload_len = match write() {
            Ok(payload_len) => payload_len,
            Err(error) => {
                // Nothing refers to it; a restart would delete it anyway.
                let _ = fs::remove_file(&tmp_path);
                return Err(error).context(|| format!("write snapshot {}", tmp_path.display()));
            }
        };
        fs::rename(&tmp_path, &final_path)
            .context(|| format!("rename {} to {}", tmp_path.display(), final_path.display()))?;
        fsync_dir(&self.dir)?;
        Ok(payload_len)
    }

    /// Positions of the snapshot files present, newest first, whatever their state.
    fn positions_newest_first(&self) -> Result<Vec<Position>, LogError> {
        let mut positions: Vec<Position> = file_names(&self.dir)?
            .iter()
            .filter_map(|name| parse_snapshot_file_name(name))
            .collect();
        positions.sort_unstable_by(|a, b| b.cmp(a));
        Ok(positions)
    }

    fn path_of(&self, position: Position) -> PathBuf {
        self.dir.join(snapshot_file_name(position))
    }

    /// The newest snapshot whose checksum holds, whole in memory. Damaged ones are skipped
    /// with a warning: an older snapshot plus a longer WAL tail reaches the same state.
    pub fn load_newest_valid(&self) -> Result<Option<(Position, Bytes)>, LogError> {
        self.decode_newest_valid(SnapshotPayload::read_whole)
    }

    /// What `decode` makes of the newest snapshot whose checksum holds. The payload streams
    /// through `decode`, so it is never whole in memory unless `decode` keeps it so. Damaged
    /// snapshots are skipped with a warning, as in [`SnapshotStore::load_newest_valid`]; one
    /// that cannot be read, or whose checksum holds but which `decode` refuses, is an error.
    pub fn decode_newest_valid<T>(
        &self,
        mut decode: impl FnMut(&mut SnapshotPayload) -> Result<T, String>,
    ) -> Result<Option<(Position, T)>, LogError> {
        for position in self.positions_newest_first()? {
            let path = self.path_of(position);
            let Some((header, mut payload)) = open_payload(&path, position)? else {
                continue;
            };
            let decoded = decode(&mut payload);
            // What `decode` left unread (all of it, if it gave up) counts in the checksum too.
            let drained = std::io::copy(&mut payload, &mut std::io::sink());
            let read_error = payload.read_error.take().or(drained.err());
            if let Some(error) = read_error {
                return Err(error).context(|| format!("read snapshot {}", path.display()));
            }
            let computed = checksum_of_parts(position, header.payload_len, payload.crc);
            if computed != header.crc {
                tracing::warn!(
                    file = %path.display(),
                    reason = format_args!(
                        "checksum mismatch (stored {:#010x}, computed {computed:#010x})",
                        header.crc
                    ),
                    "skipping damaged snapshot"
                );
                continue;
            }
            return match decoded {
                Ok(value) => Ok(Some((position, value))),
                Err(reason) => Err(LogError::Corrupt(format!(
                    "{} passes its checksum but does not decode: {reason}. Move it away to \
                     start from the snapshot before it.",
                    path.display()
                ))),
            };
        }
        Ok(None)
    }

    /// Whether a snapshot file looks complete from its header and size alone, so purge can
    /// decide without reading gigabytes; full checksums are verified by recovery.
    fn looks_complete(&self, position: Position) -> Result<bool, LogError> {
        let (_, complete) = open_and_read_header(&self.path_of(position), position)?;
        Ok(complete.is_ok())
    }

    /// Keeps the newest `snapshots_retained` complete-looking snapshots and deletes every
    /// snapshot file older than the oldest of them. Returns that oldest retained position
    /// once the full number is retained: the WAL at or below it is no longer needed. While
    /// fewer snapshots exist, nothing is deleted and `None` is returned, so a single bad
    /// snapshot can always fall back to the WAL.
    pub fn purge(&self) -> Result<Option<Position>, LogError> {
        let _guard = self
            .file_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let positions = self.positions_newest_first()?;
        let mut retained = Vec::with_capacity(self.snapshots_retained);
        for &position in &positions {
            if retained.len() == self.snapshots_retained {
                break;
            }
            if self.looks_complete(position)? {
                retained.push(position);
            }
        }
        if retained.len() < self.snapshots_retained {
            return Ok(None);
        }
        let oldest_retained = *retained.last().expect("retained is full");
        let doomed: Vec<Position> = positions
            .into_iter()
            .filter(|position| *position < oldest_retained)
            .collect();
        for &position in &doomed {
            remove_file_gradually(&self.path_of(position))?;
        }
        if !doomed.is_empty() {
            fsync_dir(&self.dir)?;
            tracing::info!(?doomed, oldest_retained, "purged old snapshots");
        }
        Ok(Some(oldest_retained))
    }

    /// Positions of the snapshot files present, oldest first.
    pub fn positions(&self) -> Result<Vec<Position>, LogError> {
        let mut positions = self.positions_newest_first()?;
        positions.reverse();
        Ok(positions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(position: Position, payload: &[u8]) -> Vec<u8> {
        let mut bytes =
            encode_header(position, payload.len() as u64, crc32c::crc32c(payload)).to_vec();
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn the_checksum_summed_in_parts_is_the_one_files_have_always_had() {
        let payload = b"a state of some length, summed before its length is known";
        let mut direct = crc32c::crc32c(&42u64.to_le_bytes());
        direct = crc32c::crc32c_append(direct, &(payload.len() as u64).to_le_bytes());
        direct = crc32c::crc32c_append(direct, payload);
        let checksum =
            |payload: &[u8]| checksum_of_parts(42, payload.len() as u64, crc32c::crc32c(payload));
        assert_eq!(checksum(payload), direct);
        assert_eq!(checksum(b""), {
            let crc = crc32c::crc32c(&42u64.to_le_bytes());
            crc32c::crc32c_append(crc, &0u64.to_le_bytes())
        });
    }

    #[test]
    fn a_payload_saved_in_pieces_is_the_file_saved_whole() {
        let dir = tempfile::tempdir().unwrap();
        let whole_store = SnapshotStore::open(dir.path().join("whole"), 3).unwrap();
        let pieces_store = SnapshotStore::open(dir.path().join("pieces"), 3).unwrap();
        let payload: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        whole_store.save(7, &payload).unwrap();
        let length = pieces_store
            .save_streamed(7, |sink| {
                payload.chunks(999).try_for_each(|piece| sink.write(piece))
            })
            .unwrap();
        assert_eq!(length, payload.len() as u64);
        let file = |store: &SnapshotStore| fs::read(store.path_of(7)).unwrap();
        assert_eq!(file(&pieces_store), file(&whole_store));
        assert_eq!(
            pieces_store.load_newest_valid().unwrap(),
            Some((7, Bytes::from(payload)))
        );
    }

    #[test]
    fn a_producer_that_fails_leaves_no_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path(), 3).unwrap();
        store.save(3, b"older").unwrap();
        let error = store
            .save_streamed(9, |sink| {
                sink.write(b"half a state")?;
                Err(std::io::Error::other("the encoder gave up"))
            })
            .unwrap_err();
        assert!(error.to_string().contains("the encoder gave up"), "{error}");
        assert_eq!(
            store.load_newest_valid().unwrap(),
            Some((3, Bytes::from_static(b"older")))
        );
        assert_eq!(
            file_names(dir.path()).unwrap(),
            vec![snapshot_file_name(3)],
            "the unfinished file is gone"
        );
    }

    /// A store holding a good snapshot at position 3, under a newer file of `image`'s bytes.
    fn store_under(image: &[u8]) -> (tempfile::TempDir, SnapshotStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path(), 3).unwrap();
        store.save(3, b"older").unwrap();
        fs::write(store.path_of(42), image).unwrap();
        (dir, store)
    }

    #[test]
    fn a_saved_image_loads_back() {
        let (_dir, store) = store_under(&image(42, b"state"));
        assert_eq!(
            store.load_newest_valid().unwrap(),
            Some((42, Bytes::from_static(b"state")))
        );
    }

    #[test]
    fn every_truncation_and_flipped_bit_is_skipped_for_the_older_snapshot() {
        let bytes = image(42, b"state");
        let older = Some((3, Bytes::from_static(b"older")));
        for cut in 0..bytes.len() {
            let (_dir, store) = store_under(&bytes[..cut]);
            assert_eq!(store.load_newest_valid().unwrap(), older, "cut at {cut}");
        }
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x10;
            let (_dir, store) = store_under(&damaged);
            assert_eq!(store.load_newest_valid().unwrap(), older, "flip at {index}");
        }
    }

    #[test]
    fn the_checksum_covers_what_a_decoder_left_unread() {
        let mut damaged = image(42, b"state");
        *damaged.last_mut().unwrap() ^= 1;
        let (_dir, store) = store_under(&damaged);
        let first_byte = |payload: &mut SnapshotPayload| {
            let mut byte = [0u8; 1];
            payload
                .read_exact(&mut byte)
                .map_err(|error| error.to_string())?;
            Ok(byte[0])
        };
        assert_eq!(
            store.decode_newest_valid(first_byte).unwrap(),
            Some((3, b'o'))
        );
    }

    #[test]
    fn a_snapshot_whose_checksum_holds_but_does_not_decode_is_an_error() {
        let (_dir, store) = store_under(&image(42, b"state"));
        let refuse = |_: &mut SnapshotPayload| -> Result<(), String> { Err("not a tree".into()) };
        let error = store.decode_newest_valid(refuse).unwrap_err();
        assert!(
            matches!(&error, LogError::Corrupt(message) if message.contains("not a tree")),
            "{error}"
        );
    }

    #[test]
    fn file_names_parse_back() {
        assert_eq!(
            parse_snapshot_file_name(&snapshot_file_name(0x1234)),
            Some(0x1234)
        );
        assert_eq!(
            parse_snapshot_file_name("snapshot-0000000000001234.snap.tmp"),
            None
        );
    }
}

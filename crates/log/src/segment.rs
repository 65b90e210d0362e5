//! WAL segment files as every local log here uses them: recovering the segments in a
//! directory, and appending records to the last one with one fdatasync per batch.
//!
//! Shared by [`crate::SingleLog`] and [`crate::ReplicaLog`]; what a record's payload means
//! is up to them. This module decides nothing about recovery (that is `recovery`), it only
//! carries out the verdicts on files.
//!
//! Purged segments are recycled rather than deleted, a few at a time: a new segment is a
//! retired file renamed and overwritten from its start. Freeing a 64 MiB segment's blocks
//! (trimming them too, on a `discard` mount) stalled the WAL's fdatasyncs behind that work,
//! at every purge; and appending into freshly allocated blocks makes every fdatasync write
//! metadata for the new file size (the inode without a journal, a journal commit with one),
//! while overwriting blocks the file already has does not. What the recycled file held
//! beyond the new records is only ever at the end of the last segment, where recovery cuts
//! it like an unfinished write: a segment's stale end is cut before the next segment starts,
//! and stale records carry positions below the segment's own, which recovery never takes for
//! later ones.
//!
//! Every write covers whole pages, from the page where the segment's records end: the bytes
//! already in that page are written again (the same bytes, so a torn write cannot change
//! them) and the rest of the last page is zeros, which recovery cuts like any unfinished
//! write. A write that covers only part of a page the page cache no longer holds makes the
//! kernel read that page from the disk first, synchronously, inside the write. On a VM that
//! reclaims page cache unused for about a minute (DAMON), members that had run for a few
//! minutes did that in about two of every five batches under one create worker: a disk read
//! ahead of the batch's fdatasync, for the record's page of a recycled segment.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{IoContext, LogError};
use crate::fsutil::{file_names, fsync_dir, remove_file_gradually};
use crate::fsync_stats::FsyncStats;
use crate::record::{encode_record_parts, encoded_len, zeros_from, SegmentBytes};
use crate::recovery::{
    first_segment_to_read, is_recycled_file_name, parse_segment_file_name, recycled_file_name,
    segment_file_name, segments_to_purge, RecoveredTail, SegmentVerdict, TailRecovery,
};
use crate::snapshot::{SnapshotPayload, SnapshotStore};
use crate::Position;

/// First positions of the segment files in `wal_dir`, sorted.
pub(crate) fn list_segments(wal_dir: &Path) -> Result<Vec<Position>, LogError> {
    let mut first_positions: Vec<Position> = file_names(wal_dir)?
        .iter()
        .filter_map(|name| parse_segment_file_name(name))
        .collect();
    first_positions.sort_unstable();
    Ok(first_positions)
}

/// Retired segments kept for reuse, at most; beyond them purged segments are deleted.
const RECYCLED_SEGMENTS_MAX: usize = 2;

/// Retires the segments that only hold entries at or below `oldest_retained` (the oldest
/// snapshot kept): up to [`RECYCLED_SEGMENTS_MAX`] are kept for reuse, the rest deleted.
/// Returns how many were retired.
pub(crate) fn purge_segments(wal_dir: &Path, oldest_retained: Position) -> Result<usize, LogError> {
    let first_positions = list_segments(wal_dir)?;
    let doomed = segments_to_purge(&first_positions, oldest_retained);
    let mut recycled = recycled_files(wal_dir)?.len();
    for &first_position in doomed {
        let path = wal_dir.join(segment_file_name(first_position));
        if recycled < RECYCLED_SEGMENTS_MAX {
            let target = wal_dir.join(recycled_file_name(first_position));
            fs::rename(&path, &target)
                .context(|| format!("rename {} to {}", path.display(), target.display()))?;
            recycled += 1;
        } else {
            remove_file_gradually(&path)?;
        }
    }
    if !doomed.is_empty() {
        fsync_dir(wal_dir)?;
        tracing::info!(
            segments = doomed.len(),
            oldest_retained,
            "purged WAL segments"
        );
    }
    Ok(doomed.len())
}

fn recycled_files(wal_dir: &Path) -> Result<Vec<PathBuf>, LogError> {
    let mut names: Vec<String> = file_names(wal_dir)?
        .into_iter()
        .filter(|name| is_recycled_file_name(name))
        .collect();
    names.sort_unstable();
    Ok(names.iter().map(|name| wal_dir.join(name)).collect())
}

/// The last segment as recovery left it: its first position and its length in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LastSegment {
    pub first_position: Position,
    pub valid_bytes: u64,
    pub next_position: Position,
}

/// How long opening a log spent reading what it recovered, for the server's start-up metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadTimes {
    /// Reading, checking and (through the opener's decoder) decoding the newest valid
    /// snapshot.
    pub snapshot_us: u64,
    /// Reading the WAL's segments after it.
    pub wal_us: u64,
}

/// What either log reads back when it opens: `S` is what the opener's decoder made of the
/// snapshot.
pub(crate) struct ReadBack<S> {
    pub snapshot: Option<(Position, S)>,
    pub tail: RecoveredTail,
    pub last_segment: Option<LastSegment>,
    pub times: ReadTimes,
}

/// Reads the newest valid snapshot through `decode`, then the WAL's entries after it, timing
/// each.
pub(crate) fn read_snapshot_and_wal<S>(
    snapshots: &SnapshotStore,
    wal_dir: &Path,
    decode: impl FnMut(&mut SnapshotPayload) -> Result<S, String>,
) -> Result<ReadBack<S>, LogError> {
    let reading = Instant::now();
    let snapshot = snapshots.decode_newest_valid(decode)?;
    let snapshot_us = reading.elapsed().as_micros() as u64;
    let snapshot_position = snapshot.as_ref().map_or(0, |(position, _)| *position);
    let reading = Instant::now();
    let (tail, last_segment) = recover_wal(wal_dir, snapshot_position)?;
    Ok(ReadBack {
        snapshot,
        tail,
        last_segment,
        times: ReadTimes {
            snapshot_us,
            wal_us: reading.elapsed().as_micros() as u64,
        },
    })
}

/// Reads every segment that can hold entries after `snapshot_position`, truncating a torn
/// tail of the last one, and refusing damage anywhere else.
fn recover_wal(
    wal_dir: &Path,
    snapshot_position: Position,
) -> Result<(RecoveredTail, Option<LastSegment>), LogError> {
    let first_positions = list_segments(wal_dir)?;
    let Some(start) = first_segment_to_read(&first_positions, snapshot_position, wal_dir)? else {
        return Ok((TailRecovery::new(snapshot_position).finish(), None));
    };
    let mut recovery = TailRecovery::new(snapshot_position);
    let mut last_segment = None;
    let to_read = &first_positions[start..];
    for (index, &first_position) in to_read.iter().enumerate() {
        let path = wal_dir.join(segment_file_name(first_position));
        let mut segment = SegmentFile::open(&path, READ_WINDOW_BYTES)
            .context(|| format!("open {}", path.display()))?;
        let file_bytes = segment.len() as u64;
        let is_last = index + 1 == to_read.len();
        let verdict = recovery.accept_segment(&path, first_position, &mut segment, is_last)?;
        let valid_bytes = match verdict {
            SegmentVerdict::Intact => file_bytes,
            SegmentVerdict::TruncateTornTail {
                valid_bytes,
                position,
                fault,
            } => {
                let discarded_bytes = file_bytes - valid_bytes;
                let only_zeros = zeros_from(&mut segment, valid_bytes as usize)
                    .context(|| format!("read {}", path.display()))?;
                if only_zeros {
                    // The zeros that fill the page of every write's last record.
                    tracing::debug!(
                        file = %path.display(),
                        discarded_bytes,
                        "cutting the zeros after the WAL's last record"
                    );
                } else {
                    tracing::warn!(
                        file = %path.display(),
                        byte_offset = valid_bytes,
                        position,
                        %fault,
                        discarded_bytes,
                        "cutting the WAL after its last intact record: an unfinished write, \
                         or what a recycled segment held before"
                    );
                }
                drop(segment);
                truncate_file(&path, valid_bytes)?;
                valid_bytes
            }
        };
        last_segment = Some((first_position, valid_bytes));
    }
    let recovered = recovery.finish();
    let last_segment = last_segment.map(|(first_position, valid_bytes)| LastSegment {
        first_position,
        valid_bytes,
        next_position: recovered.wal_last_position + 1,
    });
    Ok((recovered, last_segment))
}

/// How much of a segment file recovery reads at once.
pub(crate) const READ_WINDOW_BYTES: usize = 1 << 20;

/// A segment file read through one buffer, which holds a window of the file (more only while
/// a larger record is in hand). Reads go front to back; going back reads again. Reading whole segments instead cost a
/// restart most of its time on a VM: a fresh buffer of a segment's size (64 MiB) is memory
/// the kernel must zero page by page, where this buffer's pages are touched once and reused.
pub(crate) struct SegmentFile {
    file: File,
    len: usize,
    window_bytes: usize,
    buffer: Vec<u8>,
    /// The file offset of `buffer[0]`.
    buffer_offset: usize,
}

impl SegmentFile {
    pub(crate) fn open(path: &Path, window_bytes: usize) -> std::io::Result<SegmentFile> {
        assert!(window_bytes > 0, "a window holds something");
        let file = File::open(path)?;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| std::io::Error::other("the file is larger than memory can address"))?;
        Ok(SegmentFile {
            file,
            len,
            window_bytes,
            buffer: Vec::new(),
            buffer_offset: 0,
        })
    }
}

impl SegmentBytes for SegmentFile {
    fn len(&self) -> usize {
        self.len
    }

    fn bytes_at(&mut self, offset: usize, wanted: usize) -> std::io::Result<&[u8]> {
        if offset < self.buffer_offset {
            // Back to an earlier part (the bytes after a fault, once the search beyond it is
            // done): read it again.
            self.buffer.clear();
            self.buffer_offset = offset;
        }
        let wanted_end = offset.saturating_add(wanted).min(self.len);
        let buffered_end = self.buffer_offset + self.buffer.len();
        if wanted_end > buffered_end {
            // Keep what is buffered from `offset` on and read on from its end, a window's
            // worth at least, or the rest of the file.
            let kept_from = offset.min(buffered_end);
            self.buffer.drain(..kept_from - self.buffer_offset);
            self.buffer_offset = kept_from;
            let read_end = wanted_end.max(offset.saturating_add(self.window_bytes).min(self.len));
            let read_from = self.buffer_offset + self.buffer.len();
            self.buffer.resize(read_end - self.buffer_offset, 0);
            // A file that shrank meanwhile ends early: an error, not a shorter segment.
            self.file.read_exact_at(
                &mut self.buffer[read_from - self.buffer_offset..],
                read_from as u64,
            )?;
        }
        Ok(&self.buffer[offset - self.buffer_offset..])
    }
}

/// Cuts `path` to `valid_bytes` and makes the new length durable.
pub(crate) fn truncate_file(path: &Path, valid_bytes: u64) -> Result<(), LogError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .context(|| format!("open {} to truncate it", path.display()))?;
    file.set_len(valid_bytes)
        .and_then(|()| file.sync_all())
        .context(|| format!("truncate {} to {valid_bytes} bytes", path.display()))
}

/// Writes start at a multiple of this and cover whole multiples of it: the page size of
/// x86-64 and of most arm64 kernels, and the block size of ext4 and XFS by default. Where
/// pages are larger, the kernel reads a page now and then as before; nothing else changes.
const PAGE_BYTES: usize = 4096;

/// The segment a writer appends to.
#[derive(Debug)]
pub(crate) struct ActiveSegment {
    file: File,
    path: PathBuf,
    /// Where its records end.
    bytes: u64,
    /// The records' bytes in the page where they end (fewer than [`PAGE_BYTES`]): the next
    /// write starts with them.
    last_page: Vec<u8>,
}

impl ActiveSegment {
    /// Continues the recovered last segment when the next entry belongs at its end;
    /// otherwise (an empty WAL, or one that ends before the snapshot) starts a new one.
    pub fn open_or_create(
        wal_dir: &Path,
        last_segment: Option<LastSegment>,
        next_position: Position,
        stats: &FsyncStats,
    ) -> Result<Self, LogError> {
        match last_segment {
            Some(last) if last.next_position == next_position => {
                Self::open_existing(wal_dir, last.first_position, last.valid_bytes)
            }
            _ => Self::create(wal_dir, next_position, stats),
        }
    }

    /// Opens an existing segment whose intact records end at `valid_bytes` (the file's
    /// length: recovery or a truncation has already cut anything after them).
    pub fn open_existing(
        wal_dir: &Path,
        first_position: Position,
        valid_bytes: u64,
    ) -> Result<Self, LogError> {
        let path = wal_dir.join(segment_file_name(first_position));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .context(|| format!("open {} for appending", path.display()))?;
        let page_start = valid_bytes - valid_bytes % PAGE_BYTES as u64;
        let mut last_page = vec![0; (valid_bytes - page_start) as usize];
        file.read_exact_at(&mut last_page, page_start)
            .context(|| format!("read the last page of {}", path.display()))?;
        Ok(ActiveSegment {
            file,
            path,
            bytes: valid_bytes,
            last_page,
        })
    }

    /// A new segment at `first_position`: a recycled file when there is one, written over
    /// from its start, else a new file.
    pub fn create(
        wal_dir: &Path,
        first_position: Position,
        stats: &FsyncStats,
    ) -> Result<Self, LogError> {
        let path = wal_dir.join(segment_file_name(first_position));
        let file = match recycled_files(wal_dir)?.first() {
            Some(recycled) => {
                fs::rename(recycled, &path)
                    .context(|| format!("rename {} to {}", recycled.display(), path.display()))?;
                OpenOptions::new().write(true).open(&path)
            }
            None => OpenOptions::new().write(true).create_new(true).open(&path),
        }
        .context(|| format!("create segment {}", path.display()))?;
        stats.timed_fsync(&wal_dir.display(), || fsync_dir(wal_dir))?;
        Ok(ActiveSegment {
            file,
            path,
            bytes: 0,
            last_page: Vec::new(),
        })
    }
}

/// Encodes records into a buffer and writes them to the active segment, rolling to a new
/// segment before a record would take it past `segment_bytes_max`. Nothing is durable until
/// [`SegmentWriter::write_and_sync`] returns.
#[derive(Debug)]
pub(crate) struct SegmentWriter {
    wal_dir: PathBuf,
    segment: ActiveSegment,
    segment_bytes_max: u64,
    /// The next write: the segment's bytes from the start of the page where its records end
    /// (`written_bytes` of them, already durable), then the encoded records not yet
    /// written. Bounded by one batch plus one record and a page.
    buffer: Vec<u8>,
    written_bytes: usize,
}

impl SegmentWriter {
    pub fn new(wal_dir: PathBuf, segment: ActiveSegment, segment_bytes_max: u64) -> Self {
        let mut writer = SegmentWriter {
            wal_dir,
            segment,
            segment_bytes_max,
            buffer: Vec::new(),
            written_bytes: 0,
        };
        writer.start_at_last_page();
        writer
    }

    /// Makes the active segment's last page the start of the next write.
    fn start_at_last_page(&mut self) {
        self.buffer = std::mem::take(&mut self.segment.last_page);
        self.written_bytes = self.buffer.len();
    }

    fn unwritten_bytes(&self) -> usize {
        self.buffer.len() - self.written_bytes
    }

    pub fn wal_dir(&self) -> &Path {
        &self.wal_dir
    }

    /// Buffers the record for `position` whose payload is `parts` concatenated; when the
    /// active segment cannot take it, first makes what it has durable and starts a segment
    /// at `position`.
    pub fn push(
        &mut self,
        position: Position,
        parts: &[&[u8]],
        stats: &FsyncStats,
    ) -> Result<(), LogError> {
        let payload_bytes = parts.iter().map(|part| part.len()).sum();
        if self.segment_cannot_take(encoded_len(payload_bytes)) {
            self.write_and_sync(stats)?;
            self.cut_stale_end()?;
            self.segment = ActiveSegment::create(&self.wal_dir, position, stats)?;
            self.start_at_last_page();
        }
        encode_record_parts(position, parts, &mut self.buffer);
        Ok(())
    }

    fn segment_cannot_take(&self, record_bytes: usize) -> bool {
        let pending = self.segment.bytes + self.unwritten_bytes() as u64;
        pending > 0 && pending + record_bytes as u64 > self.segment_bytes_max
    }

    /// Cuts what a recycled file held after this segment's records, and the zeros of its
    /// last page, so that only the last segment can ever end in bytes that are not records.
    fn cut_stale_end(&self) -> Result<(), LogError> {
        let path = &self.segment.path;
        let file_bytes = self
            .segment
            .file
            .metadata()
            .context(|| format!("stat {}", path.display()))?
            .len();
        if file_bytes > self.segment.bytes {
            truncate_file(path, self.segment.bytes)?;
        }
        Ok(())
    }

    /// Writes the buffered records and fdatasyncs them: one sync for the whole batch. The
    /// write covers whole pages (see the module's doc).
    pub fn write_and_sync(&mut self, stats: &FsyncStats) -> Result<(), LogError> {
        if self.unwritten_bytes() == 0 {
            return Ok(());
        }
        let page_start = self.segment.bytes - self.written_bytes as u64;
        assert_eq!(
            page_start % PAGE_BYTES as u64,
            0,
            "a segment write starts at a page boundary"
        );
        let records_end = self.buffer.len();
        self.buffer
            .resize(records_end.next_multiple_of(PAGE_BYTES), 0);
        let path = &self.segment.path;
        let written = self
            .segment
            .file
            .write_all_at(&self.buffer, page_start)
            .context(|| format!("write {}", path.display()));
        self.buffer.truncate(records_end);
        written?;
        let file = &self.segment.file;
        stats.timed_fsync(&path.display(), || {
            file.sync_data()
                .context(|| format!("fdatasync {}", path.display()))
        })?;
        self.segment.bytes = page_start + records_end as u64;
        self.buffer.drain(..records_end - records_end % PAGE_BYTES);
        self.written_bytes = self.buffer.len();
        Ok(())
    }

    /// Continues in another segment, after a truncation or a snapshot install rewrote the
    /// segment files underneath this writer.
    ///
    /// # Panics
    /// If records are buffered: they would land in the wrong file.
    pub fn restart(&mut self, segment: ActiveSegment) {
        assert_eq!(
            self.unwritten_bytes(),
            0,
            "a segment writer restarts only with nothing buffered"
        );
        self.segment = segment;
        self.start_at_last_page();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_record, scan_segment, Record, SegmentScan};
    use proptest::prelude::*;

    fn scanned<S: SegmentBytes>(source: &mut S) -> (SegmentScan, Vec<(Position, Vec<u8>)>, bool) {
        let mut entries = Vec::new();
        let scan = scan_segment(source, 10, |record: &Record<'_>| {
            entries.push((record.position, record.payload.to_vec()))
        })
        .expect("reads");
        let end = scan
            .fault
            .as_ref()
            .map_or(source.len(), |fault| fault.offset);
        let zeros = zeros_from(source, end).expect("reads");
        (scan, entries, zeros)
    }

    proptest! {
        /// Read through a window of any size, a segment file scans exactly as the same bytes
        /// whole in memory: the same records, the same fault, the same search after it.
        #[test]
        fn a_file_read_through_a_window_scans_as_its_bytes_in_memory(
            before in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6),
            damage in proptest::collection::vec(any::<u8>(), 0..40),
            after in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..3),
            zeros in 0usize..300,
            window_bytes in prop_oneof![1usize..40, Just(4096usize)],
        ) {
            let mut bytes = Vec::new();
            for (index, payload) in before.iter().enumerate() {
                encode_record(10 + index as Position, payload, &mut bytes);
            }
            bytes.extend_from_slice(&damage);
            for (index, payload) in after.iter().enumerate() {
                encode_record(11 + (before.len() + index) as Position, payload, &mut bytes);
            }
            bytes.resize(bytes.len() + zeros, 0);
            let dir = tempfile::tempdir().expect("temp dir");
            let path = dir.path().join("segment");
            fs::write(&path, &bytes).expect("write");
            let mut file = SegmentFile::open(&path, window_bytes).expect("open");
            prop_assert_eq!(scanned(&mut file), scanned(&mut &bytes[..]));
        }
    }

    #[test]
    fn a_segment_that_shrinks_while_it_is_read_is_an_error() {
        let mut bytes = Vec::new();
        for position in 10..20 {
            encode_record(position, &[7; 100], &mut bytes);
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("segment");
        fs::write(&path, &bytes).expect("write");
        let mut file = SegmentFile::open(&path, 256).expect("open");
        File::options()
            .write(true)
            .open(&path)
            .and_then(|cut| cut.set_len(300))
            .expect("cut");
        let read = scan_segment(&mut file, 10, |_| {});
        assert_eq!(
            read.expect_err("the file ended early").kind(),
            std::io::ErrorKind::UnexpectedEof
        );
    }
}

//! Recovery decisions over segment contents: the caller hands over each segment's bytes (a
//! file read through a window) and carries out the verdicts (truncate a torn tail, refuse to
//! start); this module opens, writes and deletes nothing, so every rule here is testable on
//! byte arrays.
//!
//! The rule: damage that nothing intact follows, at the end of the last segment, is an
//! unfinished write and is cut off; any other damage refuses to start. The strict side is
//! chosen on purpose: an intact record after the damage may have been acknowledged, and
//! silently dropping it would lose a committed entry. The price is that a power loss in the
//! middle of one batch's write, if the disk persisted its pages out of order, also refuses to
//! start; the message then tells the operator the exact `truncate` that discards only what
//! follows the damage.

use std::path::Path;

use bytes::Bytes;

use crate::error::{IoContext, LogError};
use crate::record::{scan_segment, ScanFault, SegmentBytes};
use crate::{Position, POSITION_MAX};

const SEGMENT_PREFIX: &str = "segment-";
const SEGMENT_SUFFIX: &str = ".wal";
const RECYCLED_PREFIX: &str = "recycled-";

/// Names sort in position order because the position is fixed-width hex.
pub(crate) fn segment_file_name(first_position: Position) -> String {
    format!("{SEGMENT_PREFIX}{first_position:016x}{SEGMENT_SUFFIX}")
}

/// A retired segment kept for reuse (see [`crate::segment::purge_segments`]); recovery never
/// reads it, since the name does not parse as a segment.
pub(crate) fn recycled_file_name(first_position: Position) -> String {
    format!("{RECYCLED_PREFIX}{first_position:016x}{SEGMENT_SUFFIX}")
}

pub(crate) fn is_recycled_file_name(name: &str) -> bool {
    name.starts_with(RECYCLED_PREFIX) && name.ends_with(SEGMENT_SUFFIX)
}

/// Accepts exactly the names [`segment_file_name`] produces, for positions 1..=POSITION_MAX.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<Position> {
    let hex = name
        .strip_prefix(SEGMENT_PREFIX)?
        .strip_suffix(SEGMENT_SUFFIX)?;
    u64::from_str_radix(hex, 16)
        .ok()
        .filter(|first| (1..=POSITION_MAX).contains(first) && segment_file_name(*first) == name)
}

/// Index, into segments sorted by first position, of the first segment recovery must read
/// to find every entry after `snapshot_position`; `None` when there are no segments.
pub(crate) fn first_segment_to_read(
    first_positions: &[Position],
    snapshot_position: Position,
    wal_dir: &Path,
) -> Result<Option<usize>, LogError> {
    assert!(
        first_positions.windows(2).all(|w| w[0] < w[1]),
        "segments must be sorted"
    );
    let Some(&oldest) = first_positions.first() else {
        return Ok(None);
    };
    let needed = snapshot_position + 1;
    match first_positions.iter().rposition(|first| *first <= needed) {
        Some(index) => Ok(Some(index)),
        None => Err(LogError::Corrupt(format!(
            "entries {needed}..{} are missing: the oldest WAL segment in {} is {} and no valid \
             snapshot at or after position {} exists. Restore the missing segments or a newer \
             snapshot from a backup or another server.",
            oldest - 1,
            wal_dir.display(),
            segment_file_name(oldest),
            oldest - 1,
        ))),
    }
}

/// Segments (by first position, sorted) whose entries all lie at or below `purge_up_to`,
/// oldest first. The last segment is never among them: it is the one being written.
pub(crate) fn segments_to_purge(
    first_positions: &[Position],
    purge_up_to: Position,
) -> &[Position] {
    assert!(
        first_positions.windows(2).all(|w| w[0] < w[1]),
        "segments must be sorted"
    );
    let deletable = first_positions
        .windows(2)
        .take_while(|pair| pair[1] - 1 <= purge_up_to)
        .count();
    &first_positions[..deletable]
}

/// What recovery must do to one segment file after reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SegmentVerdict {
    Intact,
    /// The last segment ends in a record that never finished being written: cut it off.
    TruncateTornTail {
        valid_bytes: u64,
        position: Position,
        fault: String,
    },
}

/// Walks the segments in order, checking that they chain without gaps, and collects the
/// entries that follow the snapshot.
#[derive(Debug)]
pub(crate) struct TailRecovery {
    snapshot_position: Position,
    next_position: Option<Position>,
    tail: Vec<(Position, Bytes)>,
}

/// Where the recovered log ends, and what comes after the snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RecoveredTail {
    pub tail: Vec<(Position, Bytes)>,
    /// Last position found intact in the WAL, 0 when it holds none.
    pub wal_last_position: Position,
}

impl TailRecovery {
    pub fn new(snapshot_position: Position) -> Self {
        TailRecovery {
            snapshot_position,
            next_position: None,
            tail: Vec::new(),
        }
    }

    /// Scans one segment, read from `source`, keeping the entries after the snapshot.
    pub fn accept_segment<S: SegmentBytes>(
        &mut self,
        file: &Path,
        first_position: Position,
        source: &mut S,
        is_last: bool,
    ) -> Result<SegmentVerdict, LogError> {
        self.check_chain(file, first_position)?;
        // Each entry gets bytes of its own: the source's buffer is reused as it reads on, and
        // an ensemble member holds its entries until its next snapshot.
        let (snapshot_position, tail) = (self.snapshot_position, &mut self.tail);
        let scan = scan_segment(source, first_position, |record| {
            if record.position > snapshot_position {
                tail.push((record.position, Bytes::copy_from_slice(record.payload)));
            }
        })
        .context(|| format!("read {}", file.display()))?;
        let verdict = match scan.fault {
            None => SegmentVerdict::Intact,
            Some(fault) => judge_fault(file, fault, is_last)?,
        };
        self.next_position = Some(first_position + scan.records);
        Ok(verdict)
    }

    fn check_chain(&self, file: &Path, first_position: Position) -> Result<(), LogError> {
        match self.next_position {
            Some(expected) if expected != first_position => Err(LogError::Corrupt(format!(
                "{} starts at position {first_position} but the segment before it ends at \
                 position {}: {}. Restore the missing segment(s) from a backup or another \
                 server; do not delete files to make the log start, since entries would be lost.",
                file.display(),
                expected - 1,
                if first_position > expected {
                    format!("positions {expected}..{} are missing", first_position - 1)
                } else {
                    "the segments overlap".to_string()
                },
            ))),
            None if first_position > self.snapshot_position + 1 => Err(LogError::Corrupt(format!(
                "{} starts at position {first_position} but the snapshot recovery uses is \
                     at position {}: positions {}..{} are missing. Restore them, or a newer \
                     snapshot, from a backup or another server.",
                file.display(),
                self.snapshot_position,
                self.snapshot_position + 1,
                first_position - 1,
            ))),
            _ => Ok(()),
        }
    }

    pub fn finish(self) -> RecoveredTail {
        let wal_last_position = self.next_position.map_or(0, |next| next - 1);
        assert!(
            self.tail.windows(2).all(|w| w[1].0 == w[0].0 + 1),
            "recovered tail must be contiguous"
        );
        assert!(
            self.tail
                .first()
                .is_none_or(|first| first.0 == self.snapshot_position + 1),
            "recovered tail must start right after the snapshot"
        );
        RecoveredTail {
            tail: self.tail,
            wal_last_position,
        }
    }
}

fn judge_fault(file: &Path, fault: ScanFault, is_last: bool) -> Result<SegmentVerdict, LogError> {
    let where_ = format!(
        "{} at byte offset {} (position {}): {}",
        file.display(),
        fault.offset,
        fault.position,
        fault.fault
    );
    if let Some((later_offset, later_position)) = fault.intact_record_after {
        return Err(LogError::Corrupt(format!(
            "damaged record in {where_}, yet an intact record for position {later_position} \
             follows at byte offset {later_offset}, so this is not an unfinished write. \
             Restore the file from a backup or another server; or, accepting the loss of \
             position {} onwards, truncate it with `truncate -s {} {}` and move every later \
             segment away.",
            fault.position,
            fault.offset,
            file.display(),
        )));
    }
    if !is_last {
        return Err(LogError::Corrupt(format!(
            "damaged record in {where_}, but this is not the last segment, so its end was \
             made durable before the next segment was started. Restore the file from a \
             backup or another server."
        )));
    }
    Ok(SegmentVerdict::TruncateTornTail {
        valid_bytes: fault.offset as u64,
        position: fault.position,
        fault: fault.fault.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::encode_record;
    use proptest::prelude::*;

    proptest! {
        /// Whatever a segment holds, recovery answers with a verdict or an error, never a
        /// panic, and never returns an entry it did not find intact.
        #[test]
        fn arbitrary_segment_bytes_never_panic(
            intact in 0u64..4,
            damage in proptest::collection::vec(any::<u8>(), 0..96),
            first in 1u64..1_000,
            is_last in any::<bool>(),
        ) {
            let mut bytes = segment(first, intact);
            bytes.extend_from_slice(&damage);
            let mut recovery = TailRecovery::new(first - 1);
            if recovery.accept_segment(Path::new("s"), first, &mut &bytes[..], is_last).is_ok() {
                let recovered = recovery.finish();
                prop_assert!(recovered.tail.len() as u64 >= intact);
                prop_assert_eq!(recovered.tail.first().map(|e| e.0), (intact > 0).then_some(first));
            }
        }
    }

    fn segment(first: Position, count: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for position in first..first + count {
            encode_record(position, format!("entry {position}").as_bytes(), &mut out);
        }
        out
    }

    fn positions(tail: &[(Position, Bytes)]) -> Vec<Position> {
        tail.iter().map(|(p, _)| *p).collect()
    }

    #[test]
    fn segment_names_sort_by_position_and_parse_back() {
        let names: Vec<_> = [1u64, 0xff, 0x100, POSITION_MAX]
            .map(segment_file_name)
            .into();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        for (name, first) in names.iter().zip([1u64, 0xff, 0x100, POSITION_MAX]) {
            assert_eq!(parse_segment_file_name(name), Some(first));
        }
        assert_eq!(parse_segment_file_name("segment-1.wal"), None);
        assert_eq!(
            parse_segment_file_name("segment-+000000000000001.wal"),
            None
        );
        assert_eq!(
            parse_segment_file_name("segment-00000000000000FF.wal"),
            None
        );
        assert_eq!(
            parse_segment_file_name(&segment_file_name(POSITION_MAX + 1)),
            None
        );
        assert_eq!(
            parse_segment_file_name("segment-0000000000000000.wal"),
            None
        );
        assert_eq!(
            parse_segment_file_name("snapshot-0000000000000001.snap"),
            None
        );
    }

    #[test]
    fn reading_starts_at_the_segment_holding_the_entry_after_the_snapshot() {
        let dir = Path::new("/wal");
        assert_eq!(first_segment_to_read(&[], 5, dir).unwrap(), None);
        assert_eq!(
            first_segment_to_read(&[1, 10, 20], 0, dir).unwrap(),
            Some(0)
        );
        assert_eq!(
            first_segment_to_read(&[1, 10, 20], 9, dir).unwrap(),
            Some(1)
        );
        assert_eq!(
            first_segment_to_read(&[1, 10, 20], 8, dir).unwrap(),
            Some(0)
        );
        assert_eq!(
            first_segment_to_read(&[1, 10, 20], 50, dir).unwrap(),
            Some(2)
        );
        let error = first_segment_to_read(&[10, 20], 3, dir)
            .unwrap_err()
            .to_string();
        assert!(error.contains("entries 4..9 are missing"), "{error}");
    }

    #[test]
    fn purge_takes_only_segments_wholly_at_or_below_the_cutoff() {
        let firsts = [1, 10, 20, 30];
        assert_eq!(segments_to_purge(&firsts, 0), &[] as &[Position]);
        assert_eq!(segments_to_purge(&firsts, 8), &[] as &[Position]);
        assert_eq!(segments_to_purge(&firsts, 9), &[1]);
        assert_eq!(segments_to_purge(&firsts, 19), &[1, 10]);
        assert_eq!(segments_to_purge(&firsts, 1000), &[1, 10, 20]);
        assert_eq!(segments_to_purge(&[5], 1000), &[] as &[Position]);
    }

    #[test]
    fn tail_after_snapshot_spans_segments() {
        let mut recovery = TailRecovery::new(3);
        let verdict = recovery
            .accept_segment(Path::new("a"), 1, &mut &segment(1, 5)[..], false)
            .unwrap();
        assert_eq!(verdict, SegmentVerdict::Intact);
        recovery
            .accept_segment(Path::new("b"), 6, &mut &segment(6, 2)[..], true)
            .unwrap();
        let recovered = recovery.finish();
        assert_eq!(positions(&recovered.tail), vec![4, 5, 6, 7]);
        assert_eq!(&recovered.tail[0].1[..], b"entry 4");
        assert_eq!(recovered.wal_last_position, 7);
    }

    #[test]
    fn first_segment_must_reach_back_to_the_snapshot() {
        let mut recovery = TailRecovery::new(3);
        let error = recovery
            .accept_segment(Path::new("segment-b"), 6, &mut &segment(6, 2)[..], true)
            .unwrap_err()
            .to_string();
        assert!(error.contains("positions 4..5 are missing"), "{error}");
    }

    #[test]
    fn missing_segment_names_the_gap_and_the_file() {
        let mut recovery = TailRecovery::new(0);
        recovery
            .accept_segment(Path::new("a"), 1, &mut &segment(1, 5)[..], false)
            .unwrap();
        let error = recovery
            .accept_segment(Path::new("segment-c"), 9, &mut &segment(9, 1)[..], true)
            .unwrap_err()
            .to_string();
        assert!(error.contains("segment-c"), "{error}");
        assert!(error.contains("positions 6..8 are missing"), "{error}");
    }

    #[test]
    fn torn_end_of_last_segment_is_truncated() {
        let mut bytes = segment(1, 3);
        let valid = bytes.len() as u64;
        bytes.extend_from_slice(&segment(4, 1)[..10]);
        let mut recovery = TailRecovery::new(0);
        let verdict = recovery
            .accept_segment(Path::new("a"), 1, &mut &bytes[..], true)
            .unwrap();
        assert!(matches!(
            verdict,
            SegmentVerdict::TruncateTornTail { valid_bytes, position: 4, .. } if valid_bytes == valid
        ));
        assert_eq!(recovery.finish().wal_last_position, 3);
    }

    #[test]
    fn torn_end_of_an_earlier_segment_is_corruption() {
        let mut bytes = segment(1, 3);
        bytes.truncate(bytes.len() - 1);
        let mut recovery = TailRecovery::new(0);
        let error = recovery
            .accept_segment(Path::new("segment-a"), 1, &mut &bytes[..], false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("segment-a") && error.contains("position 3"),
            "{error}"
        );
    }

    #[test]
    fn damage_before_intact_records_is_corruption_with_offset() {
        let mut bytes = segment(1, 3);
        let second_record_offset = bytes.len() / 3;
        bytes[second_record_offset + 20] ^= 1;
        let mut recovery = TailRecovery::new(0);
        let error = recovery
            .accept_segment(Path::new("segment-a"), 1, &mut &bytes[..], true)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("byte offset {second_record_offset}")),
            "{error}"
        );
        assert!(error.contains("position 2"), "{error}");
    }
}

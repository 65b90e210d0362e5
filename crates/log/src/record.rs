//! WAL record framing, as pure functions over bytes.
//!
//! A record is `crc32c: u32 | payload_len: u32 | position: u64 | payload`, all little endian.
//! The checksum covers everything after itself, so a record is trusted only when its length,
//! its position and its payload all arrived intact. The position is stored in every record
//! (not only implied by the file name) so that a record that lands in the wrong place, or a
//! stale record left behind in reused space, is detected instead of silently renumbered.

use std::fmt;
use std::io;

use crate::Position;

pub(crate) const RECORD_HEADER_BYTES: usize = 16;

/// Hard ceiling of the format: a length field above it cannot come from a healthy writer,
/// whatever its configuration, so it is reported as damage rather than trusted.
pub(crate) const RECORD_PAYLOAD_BYTES_MAX: usize = 1 << 30;

pub(crate) fn encoded_len(payload_bytes: usize) -> usize {
    RECORD_HEADER_BYTES + payload_bytes
}

#[cfg(test)]
pub(crate) fn encode_record(position: Position, payload: &[u8], out: &mut Vec<u8>) {
    encode_record_parts(position, &[payload], out);
}

/// Encodes one record whose payload is `parts` concatenated, without first copying them
/// into one buffer (a replica's record is its entry's epoch followed by the entry).
pub(crate) fn encode_record_parts(position: Position, parts: &[&[u8]], out: &mut Vec<u8>) {
    let payload_bytes: usize = parts.iter().map(|part| part.len()).sum();
    assert!(
        payload_bytes <= RECORD_PAYLOAD_BYTES_MAX,
        "payload exceeds the record format limit"
    );
    assert!(
        position > 0,
        "position 0 means 'nothing' and is never written"
    );
    let payload_len = payload_bytes as u32;
    let mut crc = crc32c::crc32c(&payload_len.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &position.to_le_bytes());
    for part in parts {
        crc = crc32c::crc32c_append(crc, part);
    }
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&payload_len.to_le_bytes());
    out.extend_from_slice(&position.to_le_bytes());
    for part in parts {
        out.extend_from_slice(part);
    }
}

/// Why the bytes at some offset are not the record that was expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecordFault {
    /// The file ends before the header or the payload does.
    Incomplete {
        bytes_present: usize,
        bytes_needed: usize,
    },
    LengthOutOfRange {
        payload_len: u64,
    },
    ChecksumMismatch {
        stored: u32,
        computed: u32,
    },
    /// The checksum is good but the record carries another position than the one that
    /// must come next: a gap or a duplicate.
    UnexpectedPosition {
        found: Position,
    },
}

impl fmt::Display for RecordFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordFault::Incomplete {
                bytes_present,
                bytes_needed,
            } => write!(
                f,
                "incomplete record ({bytes_present} of {bytes_needed} bytes present)"
            ),
            RecordFault::LengthOutOfRange { payload_len } => {
                write!(f, "payload length {payload_len} is beyond the format limit")
            }
            RecordFault::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            RecordFault::UnexpectedPosition { found } => {
                write!(f, "record carries position {found}")
            }
        }
    }
}

/// A segment's bytes as a scan reads them: whole in memory, or a file read through a window
/// (recovery), so that scanning a segment holds no more of it in memory than its largest
/// record and a window.
pub(crate) trait SegmentBytes {
    /// The segment's length.
    fn len(&self) -> usize;

    /// The segment's bytes from `offset` on: at least `wanted` of them, or all that are left.
    /// Scans ask for offsets front to back, so a source may keep only what follows the last
    /// offset asked for.
    fn bytes_at(&mut self, offset: usize, wanted: usize) -> io::Result<&[u8]>;
}

impl SegmentBytes for &[u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn bytes_at(&mut self, offset: usize, _wanted: usize) -> io::Result<&[u8]> {
        Ok(&self[offset..])
    }
}

/// An intact record, borrowed from where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub position: Position,
    pub payload: &'a [u8],
    /// The segment offset just after the record.
    pub end: usize,
}

/// Decodes the record starting at `offset`, whatever position it carries. A length beyond
/// the segment's end is reported without reading the rest of the segment.
fn decode_record<S: SegmentBytes>(
    source: &mut S,
    offset: usize,
) -> io::Result<Result<Record<'_>, RecordFault>> {
    let remaining = source.len().saturating_sub(offset);
    let incomplete = |bytes_needed| RecordFault::Incomplete {
        bytes_present: remaining,
        bytes_needed,
    };
    if remaining < RECORD_HEADER_BYTES {
        return Ok(Err(incomplete(RECORD_HEADER_BYTES)));
    }
    let header: [u8; RECORD_HEADER_BYTES] = source.bytes_at(offset, RECORD_HEADER_BYTES)?
        [..RECORD_HEADER_BYTES]
        .try_into()
        .expect("a header's bytes");
    let stored_crc = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
    let payload_len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    let position = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    if payload_len as usize > RECORD_PAYLOAD_BYTES_MAX {
        return Ok(Err(RecordFault::LengthOutOfRange {
            payload_len: payload_len.into(),
        }));
    }
    let record_bytes = encoded_len(payload_len as usize);
    if remaining < record_bytes {
        return Ok(Err(incomplete(record_bytes)));
    }
    let record = &source.bytes_at(offset, record_bytes)?[..record_bytes];
    let payload = &record[RECORD_HEADER_BYTES..];
    let mut computed = crc32c::crc32c(&header[4..16]);
    computed = crc32c::crc32c_append(computed, payload);
    if computed != stored_crc {
        return Ok(Err(RecordFault::ChecksumMismatch {
            stored: stored_crc,
            computed,
        }));
    }
    Ok(Ok(Record {
        position,
        payload,
        end: offset + record_bytes,
    }))
}

/// A damaged record found by [`scan_segment`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanFault {
    pub offset: usize,
    pub position: Position,
    pub fault: RecordFault,
    /// An intact record with a later position somewhere after the damage, proof that the
    /// damage is not just the unfinished end of the last write.
    pub intact_record_after: Option<(usize, Position)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentScan {
    /// How many consecutive intact records the segment starts with.
    pub records: u64,
    pub fault: Option<ScanFault>,
}

/// Reads consecutive records from the start of a segment whose first record must carry
/// `first_position`, handing each to `on_record`, and stops at the first damaged one.
pub(crate) fn scan_segment<S: SegmentBytes>(
    source: &mut S,
    first_position: Position,
    mut on_record: impl FnMut(&Record<'_>),
) -> io::Result<SegmentScan> {
    let mut offset = 0;
    let mut expected = first_position;
    while offset < source.len() {
        let fault = match decode_record(source, offset)? {
            Ok(record) if record.position == expected => {
                on_record(&record);
                offset = record.end;
                expected += 1;
                continue;
            }
            Ok(record) => RecordFault::UnexpectedPosition {
                found: record.position,
            },
            Err(fault) => fault,
        };
        let intact_record_after = find_intact_record_after(source, offset, expected)?;
        return Ok(SegmentScan {
            records: expected - first_position,
            fault: Some(ScanFault {
                offset,
                position: expected,
                fault,
                intact_record_after,
            }),
        });
    }
    Ok(SegmentScan {
        records: expected - first_position,
        fault: None,
    })
}

/// How many bytes [`find_intact_record_after`] looks through at once for plausible headers.
const SEARCH_STEP_BYTES: usize = 64 << 10;

/// Looks at every byte offset after `damaged_offset` for an intact record whose position is
/// at least `min_position`. Positions are dense, so a genuine later record can carry at most
/// one position per header's worth of bytes beyond `min_position`; the cheap range test
/// rejects nearly every offset before a checksum is computed.
fn find_intact_record_after<S: SegmentBytes>(
    source: &mut S,
    damaged_offset: usize,
    min_position: Position,
) -> io::Result<Option<(usize, Position)>> {
    let Some(last_start) = source.len().checked_sub(RECORD_HEADER_BYTES) else {
        return Ok(None);
    };
    let positions_that_fit = ((source.len() - damaged_offset) / RECORD_HEADER_BYTES) as u64;
    let plausible = |header: &[u8]| {
        let position = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
        position >= min_position && position - min_position <= positions_that_fit
    };
    let mut offset = damaged_offset + 1;
    while offset <= last_start {
        let window = source.bytes_at(offset, SEARCH_STEP_BYTES)?;
        // Every offset whose header the window holds whole (at least the one at `offset`).
        let starts = window.len() - RECORD_HEADER_BYTES + 1;
        let Some(found) = (0..starts).find(|start| plausible(&window[*start..])) else {
            offset += starts;
            continue;
        };
        let candidate = offset + found;
        if let Ok(record) = decode_record(source, candidate)? {
            return Ok(Some((candidate, record.position)));
        }
        offset = candidate + 1;
    }
    Ok(None)
}

/// Whether every byte of the segment from `offset` on is zero.
pub(crate) fn zeros_from<S: SegmentBytes>(source: &mut S, offset: usize) -> io::Result<bool> {
    let mut offset = offset;
    while offset < source.len() {
        let window = source.bytes_at(offset, SEARCH_STEP_BYTES)?;
        if window.iter().any(|byte| *byte != 0) {
            return Ok(false);
        }
        offset += window.len();
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(first: Position, payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, payload) in payloads.iter().enumerate() {
            encode_record(first + i as Position, payload, &mut out);
        }
        out
    }

    /// The records a scan hands over, and the scan's result.
    struct Scanned {
        entries: Vec<(Position, Vec<u8>)>,
        fault: Option<ScanFault>,
    }

    fn scan_segment(bytes: &[u8], first_position: Position) -> Scanned {
        let mut entries = Vec::new();
        let scan = super::scan_segment(&mut &bytes[..], first_position, |record| {
            entries.push((record.position, record.payload.to_vec()))
        })
        .expect("bytes in memory always read");
        assert_eq!(scan.records, entries.len() as u64);
        Scanned {
            entries,
            fault: scan.fault,
        }
    }

    #[test]
    fn round_trip_reads_every_record_back() {
        let bytes = segment(7, &[b"a", b"", b"hello world"]);
        let scan = scan_segment(&bytes, 7);
        assert_eq!(scan.fault, None);
        assert_eq!(
            scan.entries,
            vec![
                (7, b"a".to_vec()),
                (8, b"".to_vec()),
                (9, b"hello world".to_vec())
            ]
        );
    }

    #[test]
    fn a_record_from_parts_is_the_record_of_their_concatenation() {
        let mut whole = Vec::new();
        encode_record(3, b"epochpayload", &mut whole);
        let mut parts = Vec::new();
        encode_record_parts(3, &[b"epoch", b"", b"payload"], &mut parts);
        assert_eq!(parts, whole);
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let bytes = segment(1, &[b"payload"]);
        for index in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[index] ^= 1 << bit;
                let scan = scan_segment(&damaged, 1);
                assert!(
                    scan.entries.is_empty(),
                    "flip at byte {index} bit {bit} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn truncated_record_is_incomplete_with_nothing_after() {
        let bytes = segment(1, &[b"first", b"second"]);
        let first_end = encoded_len(5);
        for cut in first_end + 1..bytes.len() {
            let scan = scan_segment(&bytes[..cut], 1);
            assert_eq!(scan.entries.len(), 1);
            let fault = scan.fault.expect("cut record is reported");
            assert_eq!(fault.offset, first_end);
            assert!(
                matches!(fault.fault, RecordFault::Incomplete { .. }),
                "{:?}",
                fault.fault
            );
            assert_eq!(fault.intact_record_after, None);
        }
    }

    #[test]
    fn damage_followed_by_an_intact_record_is_told_apart() {
        let mut bytes = segment(1, &[b"one", b"two", b"three"]);
        let second = encoded_len(3);
        bytes[second + RECORD_HEADER_BYTES] ^= 0xff;
        let scan = scan_segment(&bytes, 1);
        let fault = scan.fault.expect("damage is reported");
        assert_eq!(fault.offset, second);
        assert_eq!(fault.position, 2);
        assert!(matches!(fault.fault, RecordFault::ChecksumMismatch { .. }));
        assert_eq!(fault.intact_record_after, Some((second * 2, 3)));
    }

    #[test]
    fn gap_in_positions_is_reported_as_unexpected_position() {
        let mut bytes = segment(1, &[b"one"]);
        encode_record(3, b"three", &mut bytes);
        let scan = scan_segment(&bytes, 1);
        let fault = scan.fault.expect("gap is reported");
        assert_eq!(fault.fault, RecordFault::UnexpectedPosition { found: 3 });
        assert_eq!(fault.position, 2);
    }

    #[test]
    fn zeroed_space_is_not_a_record() {
        let mut bytes = segment(1, &[b"one"]);
        let valid = bytes.len();
        bytes.resize(valid + 4096, 0);
        let fault = scan_segment(&bytes, 1).fault.expect("zeroes are reported");
        assert_eq!(fault.offset, valid);
        assert_eq!(fault.intact_record_after, None);
    }

    #[test]
    fn absurd_length_is_rejected_without_reading_past_the_end() {
        let mut bytes = segment(1, &[b"one"]);
        bytes[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let scan = scan_segment(&bytes, 1);
        assert!(matches!(
            scan.fault.expect("reported").fault,
            RecordFault::LengthOutOfRange { .. }
        ));
    }
}

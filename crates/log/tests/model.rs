//! Property: whatever sequence of appends, reopens, snapshots and damage to the end of the
//! WAL happens, recovery yields a prefix of what was appended, and that prefix holds every
//! committed entry the damage did not physically remove.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::*;
use proptest::prelude::*;
use tokio::sync::mpsc::Receiver;
use zoolog_log::{CommittedBatch, Recovered, SingleLog, SingleLogConfig};

#[derive(Debug, Clone)]
enum Op {
    Append(usize),
    Reopen,
    Snapshot,
    /// Junk after the last record, as a crash mid-write or preallocated space leaves.
    AppendJunk(Vec<u8>),
    /// Bytes lost from the end of the last segment (a write the disk never kept).
    CutTail(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..12).prop_map(Op::Append),
        2 => Just(Op::Reopen),
        2 => Just(Op::Snapshot),
        1 => proptest::collection::vec(any::<u8>(), 1..48).prop_map(Op::AppendJunk),
        1 => (1u64..120).prop_map(Op::CutTail),
    ]
}

fn entry(index: usize) -> Bytes {
    let mut bytes = format!("entry-{index}-").into_bytes();
    bytes.resize(bytes.len() + index % 23, index as u8);
    Bytes::from(bytes)
}

/// The test's state machine is "the list of entries"; a snapshot is that list encoded.
fn encode_state(entries: &[Bytes]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for entry in entries {
        out.put_u32_le(entry.len() as u32);
        out.put_slice(entry);
    }
    out.to_vec()
}

fn decode_state(mut bytes: Bytes) -> Vec<Bytes> {
    let mut entries = Vec::new();
    while bytes.has_remaining() {
        let len = bytes.get_u32_le() as usize;
        entries.push(bytes.split_to(len));
    }
    entries
}

fn recovered_entries(recovered: Recovered) -> Vec<Bytes> {
    let mut entries = match recovered.snapshot {
        Some((position, state)) => {
            let entries = decode_state(state);
            assert_eq!(
                entries.len() as u64,
                position,
                "snapshot holds exactly its position's entries"
            );
            entries
        }
        None => Vec::new(),
    };
    for (position, payload) in recovered.tail {
        assert_eq!(
            position,
            entries.len() as u64 + 1,
            "tail continues the snapshot without gaps"
        );
        entries.push(payload);
    }
    entries
}

struct Harness {
    config: SingleLogConfig,
    log: Option<(SingleLog, Receiver<CommittedBatch>)>,
    /// Everything committed and not physically removed by the test, in order.
    model: Vec<Bytes>,
    newest_snapshot: u64,
    appended: usize,
}

impl Harness {
    fn reopen(&mut self, entries_lost_to_damage: usize) {
        drop(self.log.take());
        let (log, recovered, committed) = open(&self.config);
        let recovered = recovered_entries(recovered);
        let kept = (self.model.len() - entries_lost_to_damage).max(self.newest_snapshot as usize);
        assert_eq!(
            recovered,
            self.model[..kept],
            "recovered exactly the surviving prefix"
        );
        self.model.truncate(kept);
        self.log = Some((log, committed));
    }

    /// The last segment, closed, and where its records end: a recycled file goes on with
    /// what it held before, so its length says nothing about the log's end.
    fn closed_last_segment(&mut self) -> (std::path::PathBuf, u64) {
        drop(self.log.take());
        let segment = last_segment(&self.config.wal_dir);
        let name = segment.file_name().unwrap().to_str().unwrap();
        let hex = name.trim_start_matches("segment-").trim_end_matches(".wal");
        let first_position = u64::from_str_radix(hex, 16).unwrap() as usize;
        let records_end = self.model[first_position - 1..]
            .iter()
            .map(|entry| (RECORD_HEADER_BYTES + entry.len()) as u64)
            .sum();
        (segment, records_end)
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Append(count) => {
                let entries: Vec<Bytes> =
                    (self.appended..self.appended + count).map(entry).collect();
                self.appended += count;
                let (log, committed) = self.log.as_mut().expect("open");
                let first = self.model.len() as u64 + 1;
                assert_eq!(
                    append_all(log, committed, &entries),
                    numbered(&entries, first)
                );
                self.model.extend(entries);
            }
            Op::Reopen => self.reopen(0),
            Op::Snapshot => {
                let (log, _) = self.log.as_ref().expect("open");
                let position = self.model.len() as u64;
                log.save_snapshot(position, &encode_state(&self.model))
                    .expect("snapshot saved");
                self.newest_snapshot = position;
            }
            Op::AppendJunk(junk) => {
                let (segment, records_end) = self.closed_last_segment();
                OpenOptions::new()
                    .write(true)
                    .open(segment)
                    .unwrap()
                    .write_all_at(&junk, records_end)
                    .unwrap();
                self.reopen(0);
            }
            Op::CutTail(bytes) => {
                let (segment, records_end) = self.closed_last_segment();
                let cut = bytes.min(records_end);
                OpenOptions::new()
                    .write(true)
                    .open(&segment)
                    .unwrap()
                    .set_len(records_end - cut)
                    .unwrap();
                let lost = self.entries_touched_by_cut(cut);
                self.reopen(lost);
            }
        }
    }

    /// The last segment holds a suffix of the model, so cutting `cut` bytes off it destroys
    /// the last m entries, m the fewest whose records add up to at least `cut` bytes.
    fn entries_touched_by_cut(&self, cut: u64) -> usize {
        let mut removed_bytes = 0u64;
        let mut lost = 0;
        for entry in self.model.iter().rev() {
            if removed_bytes >= cut {
                break;
            }
            removed_bytes += (RECORD_HEADER_BYTES + entry.len()) as u64;
            lost += 1;
        }
        lost
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn recovery_yields_the_surviving_prefix(ops in proptest::collection::vec(op(), 1..30)) {
        let root = tempfile::tempdir().unwrap();
        let mut config = config(root.path());
        config.limits.segment_bytes_max = 160;
        let mut harness = Harness {
            config,
            log: None,
            model: Vec::new(),
            newest_snapshot: 0,
            appended: 0,
        };
        harness.reopen(0);
        for op in ops {
            harness.apply(op);
        }
        harness.reopen(0);
    }
}

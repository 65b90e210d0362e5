//! Snapshots, recovery from snapshot plus tail, fallback past damaged snapshots, purge.

mod common;

use std::fs;
use std::path::Path;

use bytes::Bytes;
use common::*;
use zoolog_log::{LogError, OrderingLayer, SingleLog, SnapshotStore};

fn state_at(position: u64) -> Vec<u8> {
    format!("state exact at {position}").into_bytes()
}

#[test]
fn recovery_returns_the_snapshot_and_the_entries_after_it() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let payloads: Vec<Bytes> = (0..30).map(|i| payload("snap", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads[..20]);
        log.save_snapshot(12, &state_at(12)).unwrap();
        append_all(&log, &mut committed, &payloads[20..]);
    }
    let (log, recovered, mut committed) = open(&config);
    assert_eq!(recovered.snapshot, Some((12, Bytes::from(state_at(12)))));
    assert_eq!(recovered.tail, numbered(&payloads[12..], 13));
    assert_eq!(recovered.last_position(), 30);
    let next = append_all(&log, &mut committed, &[payload("next", 0)]);
    assert_eq!(next[0].0, 31);
}

#[test]
fn snapshot_of_the_whole_log_recovers_with_an_empty_tail() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    {
        let (log, _, mut committed) = open(&config);
        append_all(
            &log,
            &mut committed,
            &[payload("all", 0), payload("all", 1)],
        );
        log.save_snapshot(2, &state_at(2)).unwrap();
    }
    let (log, recovered, _) = open(&config);
    assert_eq!(recovered.snapshot, Some((2, Bytes::from(state_at(2)))));
    assert!(recovered.tail.is_empty());
    assert_eq!(log.committed_position(), 2);
}

#[test]
fn snapshot_beyond_the_committed_position_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let (log, _, mut committed) = open(&config(root.path()));
    append_all(&log, &mut committed, &[payload("one", 0)]);
    assert!(matches!(
        log.save_snapshot(2, b"future"),
        Err(LogError::SnapshotBeyondCommitted {
            position: 2,
            committed: 1
        })
    ));
}

#[test]
fn damaged_newest_snapshot_falls_back_to_the_previous_one() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let payloads: Vec<Bytes> = (0..20).map(|i| payload("fallback", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads);
        log.save_snapshot(5, &state_at(5)).unwrap();
        log.save_snapshot(15, &state_at(15)).unwrap();
    }
    let newest = snapshot_files(&config.snapshot_dir).pop().unwrap();
    let mut bytes = fs::read(&newest).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x08;
    fs::write(&newest, &bytes).unwrap();

    let (_log, recovered, _) = open(&config);
    assert_eq!(recovered.snapshot, Some((5, Bytes::from(state_at(5)))));
    assert_eq!(recovered.tail, numbered(&payloads[5..], 6));
}

#[test]
fn truncated_newest_snapshot_and_leftover_tmp_files_are_skipped_and_tmp_files_removed() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let payloads: Vec<Bytes> = (0..10).map(|i| payload("tmp", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads);
        log.save_snapshot(4, &state_at(4)).unwrap();
        log.save_snapshot(8, &state_at(8)).unwrap();
    }
    let newest = snapshot_files(&config.snapshot_dir).pop().unwrap();
    let bytes = fs::metadata(&newest).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&newest)
        .unwrap()
        .set_len(bytes - 3)
        .unwrap();
    let leftover = config
        .snapshot_dir
        .join("snapshot-0000000000000009.snap.tmp");
    fs::write(&leftover, b"half a snapshot").unwrap();

    let (_log, recovered, _) = open(&config);
    assert_eq!(recovered.snapshot, Some((4, Bytes::from(state_at(4)))));
    assert_eq!(recovered.tail, numbered(&payloads[4..], 5));
    assert!(!leftover.exists(), "leftover tmp file is removed on open");
}

#[test]
fn wal_that_does_not_reach_the_snapshot_is_corruption() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 100;
    let payloads: Vec<Bytes> = (0..20).map(|i| payload("connect", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads);
        log.save_snapshot(2, &state_at(2)).unwrap();
    }
    // Records here are 29 bytes, so the first segment holds 1..=3. It goes missing, and with
    // it position 3: the tail cannot connect to the snapshot.
    fs::remove_file(segment_files(&config.wal_dir).remove(0)).unwrap();
    match SingleLog::open(config) {
        Err(LogError::Corrupt(message)) => assert!(message.contains("missing"), "{message}"),
        other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn purge_keeps_the_retained_snapshots_and_every_segment_still_needed() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 120;
    let payloads: Vec<Bytes> = (0..60).map(|i| payload("purge", i)).collect();
    let (log, _, mut committed) = open(&config);
    append_all(&log, &mut committed, &payloads);
    let segments_before = segment_files(&config.wal_dir).len();

    log.save_snapshot(10, &state_at(10)).unwrap();
    log.save_snapshot(20, &state_at(20)).unwrap();
    assert_eq!(
        segment_files(&config.wal_dir).len(),
        segments_before,
        "fewer than 3 snapshots: no WAL purge"
    );
    log.save_snapshot(30, &state_at(30)).unwrap();
    log.save_snapshot(40, &state_at(40)).unwrap();
    log.save_snapshot(50, &state_at(50)).unwrap();

    let positions = log.snapshot_store().positions().unwrap();
    assert_eq!(positions, vec![30, 40, 50]);
    let remaining = segment_files(&config.wal_dir);
    assert!(
        remaining.len() < segments_before,
        "old segments were deleted"
    );
    let first_remaining = first_position_of(&remaining[0]);
    assert!(
        first_remaining <= 31,
        "the segment holding position 31 must stay, kept {remaining:?}"
    );
    let second_remaining = remaining.get(1).map(|segment| first_position_of(segment));
    assert!(
        second_remaining.is_none_or(|second| second > 31),
        "the first kept segment must be the one holding 31, so nothing removable stays: {remaining:?}"
    );
    drop(log);

    // Even if the two newest snapshots go bad, the oldest retained one still recovers.
    for newest in snapshot_files(&config.snapshot_dir).iter().skip(1) {
        fs::write(newest, b"garbage").unwrap();
    }
    let (_log, recovered, _) = open(&config);
    assert_eq!(recovered.snapshot, Some((30, Bytes::from(state_at(30)))));
    assert_eq!(recovered.tail, numbered(&payloads[30..], 31));
}

#[test]
fn repeated_purges_keep_the_segment_being_written_and_the_log_going() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 100;
    let payloads: Vec<Bytes> = (0..12).map(|i| payload("timer", i)).collect();
    let (log, _, mut committed) = open(&config);
    append_all(&log, &mut committed, &payloads[..10]);
    for position in [8, 9, 10] {
        log.save_snapshot(position, &state_at(position)).unwrap();
    }
    let remaining = segment_files(&config.wal_dir);
    // Records are 27 bytes here, three to a segment: 1..=3, 4..=6, 7..=9, 10.
    let firsts: Vec<u64> = remaining
        .iter()
        .map(|segment| first_position_of(segment))
        .collect();
    assert_eq!(
        firsts,
        vec![7, 10],
        "segments wholly at or below 8 are gone, 7..=9 is kept"
    );
    log.purge().unwrap();
    log.purge().unwrap();
    assert_eq!(
        segment_files(&config.wal_dir),
        remaining,
        "purging again changes nothing"
    );

    let next = append_all(&log, &mut committed, &payloads[10..]);
    assert_eq!(next, numbered(&payloads[10..], 11));
    drop(log);
    let (_log, recovered, _) = open(&config);
    assert_eq!(recovered.snapshot, Some((10, Bytes::from(state_at(10)))));
    assert_eq!(recovered.tail, numbered(&payloads[10..], 11));
}

#[test]
fn snapshot_store_stands_alone_for_other_ordering_layers() {
    let root = tempfile::tempdir().unwrap();
    assert!(matches!(
        SnapshotStore::open(root.path(), 1),
        Err(LogError::InvalidConfig(_))
    ));
    let store = SnapshotStore::open(root.path(), 3).unwrap();
    assert_eq!(store.load_newest_valid().unwrap(), None);
    for position in [7, 9, 11, 13] {
        store.save(position, &state_at(position)).unwrap();
    }
    assert_eq!(store.purge().unwrap(), Some(9));
    assert_eq!(store.positions().unwrap(), vec![9, 11, 13]);
    assert_eq!(
        store.load_newest_valid().unwrap(),
        Some((13, Bytes::from(state_at(13))))
    );
}

fn first_position_of(segment: &Path) -> u64 {
    let name = segment.file_stem().unwrap().to_string_lossy();
    u64::from_str_radix(name.trim_start_matches("segment-"), 16).unwrap()
}

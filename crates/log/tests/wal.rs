//! The single-node log end to end on real files: ordering, recovery, damage, group commit,
//! limits.

mod common;

use std::fs::{self, OpenOptions};
use std::sync::{Arc, Barrier};

use bytes::Bytes;
use common::*;
use zoolog_log::{AppendError, LogError, OrderingLayer, SingleLog};

#[test]
fn entries_commit_in_append_order_with_consecutive_positions() {
    let root = tempfile::tempdir().unwrap();
    let (log, recovered, mut committed) = open(&config(root.path()));
    assert_eq!(recovered.snapshot, None);
    assert!(recovered.tail.is_empty());
    assert_eq!(log.committed_position(), 0);

    let payloads: Vec<Bytes> = (0..200).map(|i| payload("order", i)).collect();
    let entries = append_all(&log, &mut committed, &payloads);
    assert_eq!(entries, numbered(&payloads, 1));
    assert_eq!(log.committed_position(), 200);
    let stats = log.stats();
    assert_eq!(stats.entries_committed, 200);
    assert!(stats.batches_committed >= 1 && stats.batches_committed <= 200);
    assert!(
        stats.fsync.count >= stats.batches_committed,
        "every batch is fsynced: {stats:?}"
    );
}

#[test]
fn reopen_recovers_everything_and_continues_after_it() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let first: Vec<Bytes> = (0..50).map(|i| payload("first", i)).collect();
    let second: Vec<Bytes> = (0..10).map(|i| payload("second", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &first);
    }
    {
        let (log, recovered, mut committed) = open(&config);
        assert_eq!(recovered.tail, numbered(&first, 1));
        assert_eq!(log.committed_position(), 50);
        assert_eq!(
            append_all(&log, &mut committed, &second),
            numbered(&second, 51)
        );
    }
    let (_log, recovered, _committed) = open(&config);
    assert_eq!(
        recovered.tail,
        [numbered(&first, 1), numbered(&second, 51)].concat()
    );
}

#[test]
fn segments_roll_at_the_size_limit_and_recover_across_files() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 200;
    let payloads: Vec<Bytes> = (0..40).map(|i| payload("roll", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads);
    }
    let segments = segment_files(&config.wal_dir);
    assert!(
        segments.len() >= 5,
        "expected several segments, got {segments:?}"
    );
    for segment in &segments[..segments.len() - 1] {
        let bytes = fs::metadata(segment).unwrap().len();
        assert!(bytes <= 200, "{} is {bytes} bytes", segment.display());
    }
    let (_log, recovered, _) = open(&config);
    assert_eq!(recovered.tail, numbered(&payloads, 1));
}

#[test]
fn torn_last_record_is_truncated_at_every_byte_offset() {
    let root = tempfile::tempdir().unwrap();
    let original = config(root.path());
    let payloads: Vec<Bytes> = (0..5).map(|i| payload("torn", i)).collect();
    {
        let (log, _, mut committed) = open(&original);
        append_all(&log, &mut committed, &payloads);
    }
    let segment_name = last_segment(&original.wal_dir)
        .file_name()
        .unwrap()
        .to_owned();
    // The file goes on with zeros to the end of the page.
    let full_bytes = records_bytes(&payloads);
    let last_record_start = records_bytes(&payloads[..4]);

    for cut in last_record_start..full_bytes {
        let case = tempfile::tempdir().unwrap();
        let config = common::config(case.path());
        copy_dir(&original.wal_dir, &config.wal_dir);
        let segment = config.wal_dir.join(&segment_name);
        OpenOptions::new()
            .write(true)
            .open(&segment)
            .unwrap()
            .set_len(cut)
            .unwrap();

        let replacement = payload("after-cut", cut as usize);
        {
            let (log, recovered, mut committed) = open(&config);
            assert_eq!(
                recovered.tail,
                numbered(&payloads[..4], 1),
                "cut at byte {cut}"
            );
            assert_eq!(fs::metadata(&segment).unwrap().len(), last_record_start);
            let appended = append_all(&log, &mut committed, std::slice::from_ref(&replacement));
            assert_eq!(appended, vec![(5, replacement.clone())]);
        }
        let (_log, recovered, _) = open(&config);
        let mut expected = numbered(&payloads[..4], 1);
        expected.push((5, replacement));
        assert_eq!(recovered.tail, expected, "cut at byte {cut}");
    }
}

#[test]
fn records_sharing_a_page_survive_every_reopen_and_each_write_fills_its_last_page() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    // Records of 16 + 4080 bytes fill a page exactly; the fourth ends at the second page's end.
    let sizes = [4080, 1, 100, 8192 - 4229 - RECORD_HEADER_BYTES, 9000, 2];
    let mut written: Vec<Bytes> = Vec::new();
    for (round, size) in sizes.into_iter().enumerate() {
        let payload = Bytes::from(vec![round as u8 + 1; size]);
        let (log, recovered, mut committed) = open(&config);
        assert_eq!(recovered.tail, numbered(&written, 1), "round {round}");
        append_all(&log, &mut committed, std::slice::from_ref(&payload));
        drop(log);
        written.push(payload);
        let records_end = records_bytes(&written);
        let file_bytes = fs::metadata(last_segment(&config.wal_dir)).unwrap().len();
        assert_eq!(
            file_bytes,
            records_end.next_multiple_of(4096),
            "round {round}"
        );
    }
    assert_eq!(records_bytes(&written[..4]), 8192);
    let (_log, recovered, _) = open(&config);
    assert_eq!(recovered.tail, numbered(&written, 1));
}

#[test]
fn zeroed_or_scribbled_space_after_the_last_record_is_truncated() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let payloads: Vec<Bytes> = (0..3).map(|i| payload("zero", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads);
    }
    let segment = last_segment(&config.wal_dir);
    let intact_bytes = records_bytes(&payloads);
    let padded_bytes = fs::metadata(&segment).unwrap().len();
    assert_eq!(padded_bytes % 4096, 0, "every write fills its last page");
    let page_zeros = fs::read(&segment).unwrap().split_off(intact_bytes as usize);
    assert!(page_zeros.iter().all(|byte| *byte == 0));
    OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(padded_bytes + 4096)
        .unwrap();
    {
        let (_log, recovered, _) = open(&config);
        assert_eq!(recovered.tail, numbered(&payloads, 1));
    }
    assert_eq!(fs::metadata(&segment).unwrap().len(), intact_bytes);

    let mut bytes = fs::read(&segment).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(&segment, &bytes).unwrap();
    let (_log, recovered, _) = open(&config);
    assert_eq!(
        recovered.tail,
        numbered(&payloads[..2], 1),
        "a damaged last record is cut off"
    );
}

/// Where records holding `payloads` end in a segment of their own.
fn records_bytes(payloads: &[Bytes]) -> u64 {
    payloads
        .iter()
        .map(|payload| (RECORD_HEADER_BYTES + payload.len()) as u64)
        .sum()
}

fn expect_corrupt(result: Result<impl Sized, LogError>) -> String {
    match result {
        Err(LogError::Corrupt(message)) => message,
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, but the log opened"),
    }
}

#[test]
fn damage_in_the_middle_refuses_to_start_naming_file_offset_and_position() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let payloads: Vec<Bytes> = (0..3).map(|i| payload("mid", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads);
    }
    let segment = last_segment(&config.wal_dir);
    let record_bytes = RECORD_HEADER_BYTES + payloads[0].len();
    let mut bytes = fs::read(&segment).unwrap();
    bytes[record_bytes + RECORD_HEADER_BYTES + 2] ^= 0x40;
    fs::write(&segment, &bytes).unwrap();

    let message = expect_corrupt(SingleLog::open(config.clone()));
    let file_name = segment.file_name().unwrap().to_string_lossy().into_owned();
    assert!(message.contains(&file_name), "{message}");
    assert!(
        message.contains(&format!("byte offset {record_bytes}")),
        "{message}"
    );
    assert!(message.contains("position 2"), "{message}");
    assert_eq!(
        fs::read(&segment).unwrap(),
        bytes,
        "a refused start must not modify the file"
    );
}

#[test]
fn damage_at_the_end_of_an_earlier_segment_refuses_to_start() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 100;
    let payloads: Vec<Bytes> = (0..20).map(|i| payload("early", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads);
    }
    let first_segment = segment_files(&config.wal_dir).remove(0);
    let bytes = fs::metadata(&first_segment).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&first_segment)
        .unwrap()
        .set_len(bytes - 1)
        .unwrap();
    let message = expect_corrupt(SingleLog::open(config));
    assert!(
        message.contains(&*first_segment.file_name().unwrap().to_string_lossy()),
        "{message}"
    );
}

#[test]
fn missing_segment_refuses_to_start_naming_the_gap() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 100;
    let payloads: Vec<Bytes> = (0..20).map(|i| payload("gap", i)).collect();
    {
        let (log, _, mut committed) = open(&config);
        append_all(&log, &mut committed, &payloads);
    }
    let segments = segment_files(&config.wal_dir);
    assert!(segments.len() >= 3);
    fs::remove_file(&segments[1]).unwrap();
    let message = expect_corrupt(SingleLog::open(config));
    assert!(message.contains("are missing"), "{message}");
    assert!(
        message.contains(&*segments[2].file_name().unwrap().to_string_lossy()),
        "{message}"
    );
}

#[test]
fn many_concurrent_appenders_share_fsyncs() {
    const APPENDERS: usize = 8;
    const PER_APPENDER: usize = 200;
    let total = APPENDERS * PER_APPENDER;
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    // With one slot for published batches and nobody receiving yet, the writer stalls after
    // at most two batches, so the appends below pile up in the queue whatever the timing.
    config.committed_batches_max = 1;
    config.limits.queue_entries_max = total;
    config.limits.batch_entries_max = 512;
    let (log, _, mut committed) = open(&config);
    let log = Arc::new(log);
    let start = Arc::new(Barrier::new(APPENDERS));
    let appenders: Vec<_> = (0..APPENDERS)
        .map(|appender| {
            let (log, start) = (Arc::clone(&log), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for i in 0..PER_APPENDER {
                    log.append(payload(&format!("appender{appender}"), i), 0)
                        .expect("queue has room");
                }
            })
        })
        .collect();
    for appender in appenders {
        appender.join().unwrap();
    }
    let entries = receive(&mut committed, total);
    let stats = log.stats();
    assert_eq!(stats.entries_committed, total as u64);
    assert!(
        stats.fsync.count < total as u64 / 10,
        "{total} appends took {stats:?}"
    );

    for appender in 0..APPENDERS {
        let tag = format!("appender{appender}-");
        let own: Vec<&Bytes> = entries
            .iter()
            .map(|(_, entry)| entry)
            .filter(|entry| entry.starts_with(tag.as_bytes()))
            .collect();
        let expected: Vec<Bytes> = (0..PER_APPENDER)
            .map(|i| payload(&format!("appender{appender}"), i))
            .collect();
        assert_eq!(
            own,
            expected.iter().collect::<Vec<_>>(),
            "each appender's entries keep their order"
        );
    }
}

#[test]
fn full_queue_refuses_appends_and_everything_accepted_commits() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.committed_batches_max = 1;
    config.limits.queue_entries_max = 8;
    config.limits.batch_entries_max = 4;
    let (log, _, mut committed) = open(&config);
    let mut accepted = Vec::new();
    // The writer can hold at most two batches of four before it stalls on the full
    // committed channel, and the queue holds eight more, so this ends well within the bound.
    for i in 0..1_000 {
        let entry = payload("full", i);
        match log.append(entry.clone(), 0) {
            Ok(()) => accepted.push(entry),
            Err(AppendError::Full) => break,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert!(accepted.len() < 1_000, "the queue never filled");
    assert!(accepted.len() >= 8, "the queue holds at least its capacity");
    assert_eq!(
        receive(&mut committed, accepted.len()),
        numbered(&accepted, 1)
    );
}

#[test]
fn queue_byte_budget_and_entry_size_are_enforced() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.entry_bytes_max = 100;
    config.limits.queue_bytes_max = 250;
    config.committed_batches_max = 1;
    config.limits.batch_entries_max = 1;
    let (log, _, mut committed) = open(&config);
    assert_eq!(
        log.append(Bytes::from(vec![0u8; 101]), 0),
        Err(AppendError::TooLarge {
            entry_bytes: 101,
            entry_bytes_max: 100
        })
    );
    // The writer stalls after two single-entry batches, so the 250-byte budget fills after
    // at most four more 100-byte entries.
    let mut accepted = 0;
    loop {
        match log.append(Bytes::from(vec![7u8; 100]), 0) {
            Ok(()) => accepted += 1,
            Err(error) => {
                assert_eq!(error, AppendError::Full);
                break;
            }
        }
        assert!(accepted < 100, "the byte budget never filled");
    }
    receive(&mut committed, accepted);
}

#[test]
fn closed_log_refuses_appends_and_flushes_what_was_queued() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let payloads: Vec<Bytes> = (0..100).map(|i| payload("close", i)).collect();
    let (log, _, mut committed) = open(&config);
    for entry in &payloads {
        log.append(entry.clone(), 0).unwrap();
    }
    log.close().unwrap();
    assert_eq!(log.append(payload("late", 0), 0), Err(AppendError::Closed));
    assert_eq!(log.committed_position(), 100);
    assert_eq!(receive(&mut committed, 100), numbered(&payloads, 1));
    assert!(
        committed.blocking_recv().is_none(),
        "the channel ends when the writer stops"
    );
    drop(log);
    let (_log, recovered, _) = open(&config);
    assert_eq!(recovered.tail, numbered(&payloads, 1));
}

#[test]
fn a_write_error_stops_the_log_and_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 100;
    let payloads: Vec<Bytes> = (0..4).map(|i| payload("fail", i)).collect();
    let (log, _, mut committed) = open(&config);
    append_all(&log, &mut committed, &payloads[..3]);
    // Three 27-byte records fill the first segment, so the fourth needs a new segment file,
    // and a directory already sits where that file must be created.
    let blocker = config.wal_dir.join("segment-0000000000000004.wal");
    fs::create_dir(&blocker).unwrap();

    log.append(payloads[3].clone(), 0).unwrap();
    assert!(
        committed.blocking_recv().is_none(),
        "the committed channel ends with the writer"
    );
    assert_eq!(
        log.committed_position(),
        3,
        "nothing is committed after the failure"
    );
    assert_eq!(log.append(payload("late", 0), 0), Err(AppendError::Failed));
    match log.close() {
        Err(LogError::WriterFailed(message)) => {
            assert!(
                message.contains("segment-0000000000000004.wal"),
                "{message}"
            )
        }
        other => panic!("expected WriterFailed, got {other:?}"),
    }
}

#[test]
fn a_second_open_of_the_same_directory_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let _first = open(&config);
    match SingleLog::open(config) {
        Err(LogError::Locked { .. }) => {}
        other => panic!("expected Locked, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn invalid_configuration_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.snapshots_retained = 2;
    assert!(matches!(
        SingleLog::open(config.clone()),
        Err(LogError::InvalidConfig(_))
    ));
    config.limits.snapshots_retained = 3;
    config.limits.batch_entries_max = 0;
    assert!(matches!(
        SingleLog::open(config),
        Err(LogError::InvalidConfig(_))
    ));
}

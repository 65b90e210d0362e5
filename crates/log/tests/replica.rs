//! ReplicaLog: a Zab member's storage. Round trips, truncation, installed snapshots, epochs,
//! torn tails, and a property test against an in-memory model. The real SIGKILL is in
//! `replica_crash.rs`.

mod common;

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use common::replica::*;
use common::{recycled_files, segment_files};
use proptest::prelude::*;
use tokio::sync::mpsc::Receiver;
use zoolog_log::{
    AppendError, Durable, LogError, Position, ReplicaEntry, ReplicaEpochs, ReplicaLog,
    ReplicaLogConfig, ReplicaRecovered,
};

#[test]
fn appends_complete_in_order_and_recover() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 512;
    let (log, recovered, mut durable) = open(&config);
    assert_eq!(recovered.entries, vec![]);
    assert_eq!(recovered.snapshot, None);
    assert_eq!(recovered.epochs, ReplicaEpochs::default());
    let mut written = Vec::new();
    for round in 0..20u64 {
        let batch = entries(round * 5 + 1, 5, 3);
        written.extend(batch.clone());
        log.append(batch).unwrap();
    }
    let completions = wait_durable(&mut durable, 100);
    assert!(completions.iter().all(|done| done.epoch == 3));
    assert_eq!(log.last_position(), 100);
    let stats = log.stats();
    assert_eq!(stats.entries_committed, 100);
    assert!(stats.fsync.count >= stats.batches_committed, "{stats:?}");
    assert!(segment_files(&config.wal_dir).len() > 1, "segments rolled");
    drop(log);

    let (log, recovered, mut durable) = open(&config);
    assert_eq!(recovered.entries, written);
    assert_eq!(recovered.last_position(), 100);
    log.append(entries(101, 1, 4)).unwrap();
    assert_eq!(
        wait_durable(&mut durable, 101),
        vec![Durable {
            position: 101,
            epoch: 4
        }]
    );
}

#[test]
fn appends_that_do_not_continue_the_log_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let (log, _, mut durable) = open(&config(root.path()));
    assert_eq!(
        log.append(entries(2, 1, 1)),
        Err(AppendError::NotConsecutive {
            expected: 1,
            found: 2
        })
    );
    let mut gappy = entries(1, 2, 1);
    gappy[1].position = 3;
    assert_eq!(
        log.append(gappy),
        Err(AppendError::NotConsecutive {
            expected: 2,
            found: 3
        })
    );
    log.append(entries(1, 3, 1)).unwrap();
    assert_eq!(
        log.append(entries(3, 1, 1)),
        Err(AppendError::NotConsecutive {
            expected: 4,
            found: 3
        })
    );
    wait_durable(&mut durable, 3);
    assert_eq!(log.append(vec![]), Ok(()));
}

/// A log whose queue takes at most 4 entries (each of at most 64 bytes) and `queue_bytes_max`
/// bytes at once.
fn open_with_small_queue(
    root: &Path,
    queue_bytes_max: usize,
) -> (ReplicaLog, ReplicaRecovered, Receiver<Durable>) {
    let mut config = config(root);
    config.limits.queue_entries_max = 4;
    config.limits.entry_bytes_max = 64;
    config.limits.queue_bytes_max = queue_bytes_max;
    open(&config)
}

#[test]
fn full_queue_and_oversized_appends_are_refused_not_blocked() {
    let root = tempfile::tempdir().unwrap();
    let (log, _, mut durable) = open_with_small_queue(root.path(), 256);
    let big = vec![ReplicaEntry {
        position: 1,
        epoch: 1,
        payload: Bytes::from(vec![0u8; 65]),
    }];
    assert!(matches!(
        log.append(big),
        Err(AppendError::TooLarge {
            entry_bytes: 65,
            ..
        })
    ));
    assert!(matches!(
        log.append(entries(1, 5, 1)),
        Err(AppendError::BatchTooLarge { entries: 5, .. })
    ));
    // Nobody drains completions, so the writer stalls and the queue fills up.
    let mut next = 1;
    let mut refused = false;
    for _ in 0..100_000 {
        match log.append(entries(next, 1, 1)) {
            Ok(()) => next += 1,
            Err(AppendError::Full) => {
                refused = true;
                break;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(refused, "a bounded queue refuses eventually");
    wait_durable(&mut durable, next - 1);
}

#[test]
fn an_append_larger_than_the_queue_goes_in_as_parts_that_each_fit() {
    let root = tempfile::tempdir().unwrap();
    let (log, _, mut durable) = open_with_small_queue(root.path(), 100);
    let drained = std::thread::spawn(move || wait_durable(&mut durable, 30));
    let all = entries(1, 30, 1);
    assert_eq!(
        log.append(all.clone()),
        Err(AppendError::BatchTooLarge {
            entries: 30,
            bytes: all.iter().map(|entry| entry.payload.len()).sum(),
            queue_entries_max: 4,
            queue_bytes_max: 100,
        })
    );
    let parts = log.split_to_fit(all.clone());
    assert!(parts.len() > 1);
    assert_eq!(parts.concat(), all, "the parts are the entries, in order");
    for part in parts {
        let bytes: usize = part.iter().map(|entry| entry.payload.len()).sum();
        assert!(
            !part.is_empty() && part.len() <= 4 && bytes <= 100,
            "a part of {} entries and {bytes} bytes",
            part.len()
        );
        // As a learner's long sync goes in: each part once the queue has room for it.
        loop {
            match log.append(part.clone()) {
                Ok(()) => break,
                Err(AppendError::Full) => std::thread::yield_now(),
                Err(other) => panic!("{other}"),
            }
        }
    }
    drained.join().unwrap();
}

/// A sync delay far longer than any test: whatever ends a delay here is not its expiry.
const LONG_DELAY: std::time::Duration = std::time::Duration::from_secs(600);

/// The next completion, or `None` if none comes within 20 s (the delay did not end).
fn next_durable(durable: &mut Receiver<Durable>) -> Option<Durable> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if let Ok(done) = durable.try_recv() {
            return Some(done);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    None
}

#[test]
fn a_sync_delay_takes_later_appends_into_the_same_fdatasync() {
    let root = tempfile::tempdir().unwrap();
    let (log, _, mut durable) = open(&config(root.path()));
    log.set_sync_delay(LONG_DELAY);
    let syncs_before = log.stats().fsync.count;
    log.append(entries(1, 1, 1)).unwrap();
    // Time for the writer to take the first append alone, so that the others come during
    // its delay (without a delay, it would be synced and reported by itself).
    std::thread::sleep(std::time::Duration::from_millis(100));
    for position in 2..=10 {
        log.append(entries(position, 1, 1)).unwrap();
    }
    log.sync_now();
    assert_eq!(
        next_durable(&mut durable),
        Some(Durable {
            position: 10,
            epoch: 1
        }),
        "one completion for all ten appends, once asked to sync"
    );
    let stats = log.stats();
    assert_eq!(stats.fsync.count - syncs_before, 1);
    assert_eq!(stats.batches_committed, 1);
    assert_eq!(stats.entries_committed, 10);

    log.append(entries(11, 1, 1)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    log.sync_now();
    assert_eq!(
        next_durable(&mut durable).map(|done| done.position),
        Some(11),
        "asked to sync while it waits"
    );

    log.set_sync_delay(std::time::Duration::ZERO);
    log.append(entries(12, 1, 1)).unwrap();
    assert_eq!(
        next_durable(&mut durable).map(|done| done.position),
        Some(12),
        "without a delay an append is synced at once"
    );
}

#[test]
fn a_full_batch_or_another_operation_ends_a_sync_delay() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.batch_entries_max = 4;
    let (log, _, mut durable) = open(&config);
    log.set_sync_delay(LONG_DELAY);
    for position in 1..=5 {
        log.append(entries(position, 1, 1)).unwrap();
    }
    assert_eq!(
        next_durable(&mut durable).map(|done| done.position),
        Some(4),
        "a full batch is synced"
    );
    assert_eq!(
        next_durable(&mut durable).map(|done| done.position),
        Some(5),
        "and what is left behind it without a delay"
    );
    log.append(entries(6, 2, 1)).unwrap();
    log.persist_epochs(ReplicaEpochs {
        accepted: 1,
        current: 1,
    })
    .unwrap();
    assert_eq!(
        durable.try_recv().map(|done| done.position),
        Ok(7),
        "reported before the epochs were written"
    );
    drop(log);
    let (_, recovered, _) = open(&config);
    assert_eq!(recovered.entries, entries(1, 7, 1));
}

#[test]
fn truncated_entries_never_come_back() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 400;
    let (log, _, mut durable) = open(&config);
    log.append(entries(1, 40, 1)).unwrap();
    wait_durable(&mut durable, 40);
    let segments_before = segment_files(&config.wal_dir).len();
    log.truncate_after(12).unwrap();
    assert!(segment_files(&config.wal_dir).len() < segments_before);
    assert_eq!(log.last_position(), 12);
    log.append(entries(13, 5, 2)).unwrap();
    wait_durable(&mut durable, 17);
    // Truncating at or after the end changes nothing.
    log.truncate_after(17).unwrap();
    log.truncate_after(30).unwrap();
    assert_eq!(log.last_position(), 17);
    drop(log);

    let (log, recovered, mut durable) = open(&config);
    let mut expected = entries(1, 12, 1);
    expected.extend(entries(13, 5, 2));
    assert_eq!(recovered.entries, expected);

    // Truncate everything, then again after reopening.
    log.truncate_after(0).unwrap();
    log.append(entries(1, 2, 3)).unwrap();
    wait_durable(&mut durable, 2);
    drop(log);
    let (_, recovered, _) = open(&config);
    assert_eq!(recovered.entries, entries(1, 2, 3));
}

#[test]
fn truncation_waits_for_appends_queued_before_it() {
    let root = tempfile::tempdir().unwrap();
    let (log, _, mut durable) = open(&config(root.path()));
    for position in 1..=50 {
        log.append(entries(position, 1, 1)).unwrap();
    }
    log.truncate_after(20).unwrap();
    log.append(entries(21, 1, 2)).unwrap();
    // Completions for the overtaken appends were sent before the truncation ran, so they
    // all come first, in order, and reach the end of what was appended before it.
    let mut completions = Vec::new();
    while completions.last()
        != Some(&Durable {
            position: 21,
            epoch: 2,
        })
    {
        completions.push(durable.blocking_recv().expect("writer running"));
    }
    let (after, before) = completions.split_last().unwrap();
    assert!(before.windows(2).all(|w| w[0].position < w[1].position));
    assert!(before.iter().all(|done| done.epoch == 1), "{completions:?}");
    assert_eq!(before.last().map(|done| done.position), Some(50));
    assert_eq!(
        *after,
        Durable {
            position: 21,
            epoch: 2
        }
    );
    drop(log);
    let (_, recovered, _) = open(&config(root.path()));
    let mut expected = entries(1, 20, 1);
    expected.extend(entries(21, 1, 2));
    assert_eq!(recovered.entries, expected);
}

#[test]
fn installed_snapshot_replaces_the_log() {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 300;
    let (log, _, mut durable) = open(&config);
    log.append(entries(1, 30, 1)).unwrap();
    wait_durable(&mut durable, 30);
    let error = log.install_snapshot(20, b"state@20").unwrap_err();
    assert!(matches!(error, LogError::InvalidRequest(_)), "{error}");
    log.truncate_after(10).unwrap();
    log.install_snapshot(100, b"state@100").unwrap();
    assert_eq!(log.last_position(), 100);
    assert_eq!(segment_files(&config.wal_dir).len(), 1);
    drop(log);

    let (log, recovered, mut durable) = open(&config);
    assert_eq!(
        recovered.snapshot,
        Some((100, Bytes::from_static(b"state@100")))
    );
    assert_eq!(recovered.entries, vec![]);
    assert_eq!(recovered.last_position(), 100);
    assert_eq!(
        log.append(entries(1, 1, 2)),
        Err(AppendError::NotConsecutive {
            expected: 101,
            found: 1
        })
    );
    log.append(entries(101, 3, 2)).unwrap();
    wait_durable(&mut durable, 103);
    let error = log.truncate_after(99).unwrap_err();
    assert!(matches!(error, LogError::InvalidRequest(_)), "{error}");
    log.truncate_after(100).unwrap();
    log.append(entries(101, 1, 3)).unwrap();
    wait_durable(&mut durable, 101);
    drop(log);

    let (_, recovered, _) = open(&config);
    assert_eq!(recovered.snapshot.map(|(position, _)| position), Some(100));
    assert_eq!(recovered.entries, entries(101, 1, 3));
}

#[test]
fn an_install_interrupted_after_its_snapshot_recovers_to_the_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let (log, _, mut durable) = open(&config);
    log.append(entries(1, 10, 1)).unwrap();
    wait_durable(&mut durable, 10);
    // The crash point: the snapshot is saved, the segments (all below it) are not yet gone.
    log.snapshot_store().save(50, b"state@50").unwrap();
    drop(log);
    let (log, recovered, mut durable) = open(&config);
    assert_eq!(
        recovered.snapshot,
        Some((50, Bytes::from_static(b"state@50")))
    );
    assert_eq!(recovered.entries, vec![]);
    log.append(entries(51, 2, 2)).unwrap();
    wait_durable(&mut durable, 52);
    drop(log);
    let (_, recovered, _) = open(&config);
    assert_eq!(recovered.entries, entries(51, 2, 2));
}

/// A log of 60 entries in 300-byte segments, durable.
fn sixty_entries_in_small_segments(
    root: &Path,
) -> (ReplicaLogConfig, ReplicaLog, Receiver<Durable>) {
    let mut config = config(root);
    config.limits.segment_bytes_max = 300;
    let (log, _, mut durable) = open(&config);
    log.append(entries(1, 60, 1)).unwrap();
    wait_durable(&mut durable, 60);
    (config, log, durable)
}

fn save_snapshots(log: &ReplicaLog, positions: &[Position]) {
    for position in positions {
        log.save_snapshot(*position, format!("state@{position}").as_bytes())
            .unwrap();
    }
}

#[test]
fn saved_snapshots_purge_old_segments() {
    let root = tempfile::tempdir().unwrap();
    let (config, log, _durable) = sixty_entries_in_small_segments(root.path());
    let error = log.save_snapshot(61, b"beyond").unwrap_err();
    assert!(matches!(error, LogError::InvalidRequest(_)), "{error}");
    let segments_before = segment_files(&config.wal_dir).len();
    save_snapshots(&log, &[20, 40, 55]);
    assert!(segment_files(&config.wal_dir).len() < segments_before);
    assert_eq!(
        recycled_files(&config.wal_dir).len(),
        2,
        "purged segments are kept for reuse, two at most"
    );
    assert_eq!(log.snapshot_store().positions().unwrap(), vec![20, 40, 55]);
    drop(log);
    let (_, recovered, _) = open(&config);
    assert_eq!(recovered.snapshot.map(|(position, _)| position), Some(55));
    assert_eq!(recovered.entries, entries(56, 5, 1));
}

#[test]
fn new_segments_reuse_purged_ones_and_recover_without_their_old_records() {
    let root = tempfile::tempdir().unwrap();
    let (config, log, mut durable) = sixty_entries_in_small_segments(root.path());
    save_snapshots(&log, &[20, 40, 60]);
    let recycled = recycled_files(&config.wal_dir);
    assert_eq!(recycled.len(), 2);
    // Shorter records than the recycled files held: each new segment overwrites only the
    // start of a recycled file, and its stale end must never be read as entries.
    log.append(entries(61, 24, 2)).unwrap();
    wait_durable(&mut durable, 84);
    assert_eq!(
        recycled_files(&config.wal_dir),
        Vec::<std::path::PathBuf>::new(),
        "new segments took both recycled files"
    );
    drop(log);
    let (log, recovered, mut durable) = open(&config);
    assert_eq!(recovered.snapshot.map(|(position, _)| position), Some(60));
    assert_eq!(recovered.entries, entries(61, 24, 2));
    log.append(entries(85, 3, 2)).unwrap();
    wait_durable(&mut durable, 87);
    drop(log);
    let (_, recovered, _) = open(&config);
    let mut expected = entries(61, 24, 2);
    expected.extend(entries(85, 3, 2));
    assert_eq!(recovered.entries, expected);
}

#[test]
fn epochs_persist_and_damage_refuses_to_start() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let (log, recovered, _durable) = open(&config);
    assert_eq!(
        recovered.epochs,
        ReplicaEpochs {
            accepted: 0,
            current: 0
        }
    );
    log.persist_epochs(ReplicaEpochs {
        accepted: 3,
        current: 2,
    })
    .unwrap();
    log.persist_epochs(ReplicaEpochs {
        accepted: 4,
        current: 2,
    })
    .unwrap();
    for backwards in [
        ReplicaEpochs {
            accepted: 3,
            current: 2,
        },
        ReplicaEpochs {
            accepted: 4,
            current: 1,
        },
        ReplicaEpochs {
            accepted: 4,
            current: 5,
        },
    ] {
        let error = log.persist_epochs(backwards).unwrap_err();
        assert!(matches!(error, LogError::InvalidRequest(_)), "{error}");
    }
    drop(log);
    let (log, recovered, _durable) = open(&config);
    assert_eq!(
        recovered.epochs,
        ReplicaEpochs {
            accepted: 4,
            current: 2
        }
    );
    drop(log);

    let epochs_file = config.wal_dir.join("epochs");
    let mut bytes = fs::read(&epochs_file).unwrap();
    bytes[9] ^= 1;
    fs::write(&epochs_file, &bytes).unwrap();
    let error = ReplicaLog::open(config.clone()).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, LogError::Corrupt(_)), "{message}");
    assert!(
        message.contains("epochs") && message.contains("checksum"),
        "{message}"
    );
}

#[test]
fn torn_tail_is_cut_and_the_log_continues() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let (log, _, mut durable) = open(&config);
    log.append(entries(1, 10, 1)).unwrap();
    wait_durable(&mut durable, 10);
    drop(log);
    let segment = segment_files(&config.wal_dir).pop().unwrap();
    // The zeros after the last record fill its page; the record ends at or after its last
    // byte that is not zero, so cutting that byte tears it.
    let bytes = fs::read(&segment).unwrap();
    let last_record_byte = bytes.iter().rposition(|byte| *byte != 0).unwrap();
    OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(last_record_byte as u64)
        .unwrap();
    let (log, recovered, mut durable) = open(&config);
    assert_eq!(recovered.entries, entries(1, 9, 1));
    log.append(entries(10, 1, 2)).unwrap();
    wait_durable(&mut durable, 10);
    drop(log);
    OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap()
        .write_all(b"scribble")
        .unwrap();
    let (_, recovered, _) = open(&config);
    let mut expected = entries(1, 9, 1);
    expected.extend(entries(10, 1, 2));
    assert_eq!(recovered.entries, expected);
}

#[test]
fn a_second_open_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    let _open = open(&config);
    assert!(matches!(
        ReplicaLog::open(config),
        Err(LogError::Locked { .. })
    ));
}

// --- Property test against a model ---------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Append(u64),
    /// Truncate this far below the end (never below the newest snapshot).
    Truncate(u64),
    /// Install a snapshot this far beyond the end.
    Install(u64),
    /// Save a snapshot this far below the end.
    Save(u64),
    Epochs(u64, u64),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u64..10).prop_map(Op::Append),
        2 => (0u64..15).prop_map(Op::Truncate),
        1 => (0u64..5).prop_map(Op::Install),
        1 => (0u64..5).prop_map(Op::Save),
        1 => (0u64..3, 0u64..3).prop_map(|(a, c)| Op::Epochs(a, c)),
        2 => Just(Op::Reopen),
    ]
}

struct Model {
    /// The whole log, positions 1.. (entries below an installed snapshot are placeholders).
    log: Vec<ReplicaEntry>,
    snapshots: BTreeMap<Position, Bytes>,
    epochs: ReplicaEpochs,
    epoch: u64,
}

impl Model {
    fn last(&self) -> Position {
        self.log.len() as Position
    }

    fn floor(&self) -> Position {
        self.snapshots.keys().next_back().copied().unwrap_or(0)
    }

    fn check(&self, recovered: ReplicaRecovered) {
        assert_eq!(recovered.epochs, self.epochs);
        let newest = self
            .snapshots
            .iter()
            .next_back()
            .map(|(position, payload)| (*position, payload.clone()));
        let floor = self.floor();
        assert_eq!(recovered.snapshot, newest);
        assert_eq!(recovered.entries, self.log[floor as usize..].to_vec());
    }
}

fn run_model(ops: Vec<Op>) {
    let root = tempfile::tempdir().unwrap();
    let mut config = config(root.path());
    config.limits.segment_bytes_max = 200;
    let (log, recovered, durable) = open(&config);
    let mut open_log = Some((log, durable));
    let mut model = Model {
        log: Vec::new(),
        snapshots: BTreeMap::new(),
        epochs: ReplicaEpochs::default(),
        epoch: 1,
    };
    model.check(recovered);
    for op in ops {
        let (log, durable) = open_log.as_mut().unwrap();
        assert_eq!(log.last_position(), model.last());
        match op {
            Op::Append(count) => {
                let batch = entries(model.last() + 1, count, model.epoch);
                model.log.extend(batch.clone());
                log.append(batch).unwrap();
                for done in wait_durable(durable, model.last()) {
                    assert_eq!(done.epoch, model.log[done.position as usize - 1].epoch);
                }
            }
            Op::Truncate(back) => {
                let after = model.last().saturating_sub(back).max(model.floor());
                log.truncate_after(after).unwrap();
                model.log.truncate(after as usize);
                model.epoch += 1;
                if model.floor() > 0 {
                    let error = log.truncate_after(model.floor() - 1).unwrap_err();
                    assert!(matches!(error, LogError::InvalidRequest(_)), "{error}");
                }
            }
            Op::Install(beyond) => {
                let position = model.last() + beyond;
                let state = Bytes::from(format!("installed@{position}"));
                log.install_snapshot(position, &state).unwrap();
                while model.last() < position {
                    let position = model.last() + 1;
                    model.log.push(ReplicaEntry {
                        position,
                        epoch: 0,
                        payload: Bytes::new(),
                    });
                }
                model.snapshots.insert(position, state);
                model.epoch += 1;
            }
            Op::Save(below) => {
                let position = model.last().saturating_sub(below).max(model.floor());
                let state = Bytes::from(format!("saved@{position}"));
                log.save_snapshot(position, &state).unwrap();
                model.snapshots.insert(position, state);
            }
            Op::Epochs(accepted, current) => {
                let accepted = model.epochs.accepted + accepted;
                let current = (model.epochs.current + current).min(accepted);
                model.epochs = ReplicaEpochs { accepted, current };
                log.persist_epochs(model.epochs).unwrap();
            }
            Op::Reopen => {
                drop(open_log.take());
                let (log, recovered, durable) = open(&config);
                model.check(recovered);
                open_log = Some((log, durable));
            }
        }
    }
    drop(open_log.take());
    let (_, recovered, _) = open(&config);
    model.check(recovered);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_replica_log_behaves_like_its_model(ops in proptest::collection::vec(op(), 1..40)) {
        run_model(ops);
    }
}

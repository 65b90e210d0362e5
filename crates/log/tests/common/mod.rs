//! Helpers shared by the integration tests: every test works on real files in a tempdir.
#![allow(dead_code)] // each test binary uses its own subset

pub mod replica;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use bytes::Bytes;
use tokio::sync::mpsc::Receiver;
use zoolog_log::{CommittedBatch, OrderingLayer, Position, Recovered, SingleLog, SingleLogConfig};

/// Bytes a record adds to its payload on disk (checksum, length, position).
pub const RECORD_HEADER_BYTES: usize = 16;

pub fn config(root: &Path) -> SingleLogConfig {
    SingleLogConfig::new(root.join("wal"), root.join("snap"))
}

pub fn open(config: &SingleLogConfig) -> (SingleLog, Recovered, Receiver<CommittedBatch>) {
    SingleLog::open(config.clone()).expect("log opens")
}

pub fn payload(tag: &str, index: usize) -> Bytes {
    Bytes::from(format!("{tag}-{index:05}"))
}

/// Appends every payload (from this thread, so in this order) and waits until all of them
/// came back committed; returns what came back.
pub fn append_all(
    log: &SingleLog,
    committed: &mut Receiver<CommittedBatch>,
    payloads: &[Bytes],
) -> Vec<(Position, Bytes)> {
    for payload in payloads {
        log.append(payload.clone(), 0).expect("append accepted");
    }
    receive(committed, payloads.len())
}

/// Receives committed batches until `count` entries arrived, checking they are consecutive.
pub fn receive(committed: &mut Receiver<CommittedBatch>, count: usize) -> Vec<(Position, Bytes)> {
    let mut entries: Vec<(Position, Bytes)> = Vec::new();
    while entries.len() < count {
        let batch = committed.blocking_recv().expect("log still publishing");
        if let Some((last, _)) = entries.last() {
            assert_eq!(
                batch.first_position(),
                last + 1,
                "batches must follow each other"
            );
        }
        entries.extend(batch.into_entries());
    }
    assert_eq!(entries.len(), count, "no more entries than appended");
    entries
}

pub fn segment_files(wal_dir: &Path) -> Vec<PathBuf> {
    wal_files(wal_dir, "segment-")
}

/// Retired segments kept for reuse.
pub fn recycled_files(wal_dir: &Path) -> Vec<PathBuf> {
    wal_files(wal_dir, "recycled-")
}

fn wal_files(wal_dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(wal_dir)
        .expect("wal dir readable")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| {
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            name.starts_with(prefix) && name.ends_with(".wal")
        })
        .collect();
    files.sort();
    files
}

pub fn snapshot_files(snapshot_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(snapshot_dir)
        .expect("snapshot dir readable")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.to_string_lossy().contains("snapshot-"))
        .collect();
    files.sort();
    files
}

pub fn last_segment(wal_dir: &Path) -> PathBuf {
    segment_files(wal_dir).pop().expect("at least one segment")
}

pub fn numbered(entries: &[Bytes], first_position: Position) -> Vec<(Position, Bytes)> {
    entries
        .iter()
        .cloned()
        .zip(first_position..)
        .map(|(entry, position)| (position, entry))
        .collect()
}

pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create copy");
    for entry in fs::read_dir(from).expect("readable") {
        let path = entry.expect("dir entry").path();
        if path.is_file() {
            fs::copy(&path, to.join(path.file_name().expect("file name"))).expect("copy");
        }
    }
}

/// Starts this test binary again, running only the test `entry_point`, with the environment
/// variable `dir_var` naming `dir`: the child of a crash test, which reads the variable to
/// know it is the child. Its stdout is piped to the caller; its stderr is dropped.
pub fn spawn_child_test(entry_point: &str, dir_var: &str, dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", entry_point, "--nocapture", "--test-threads=1"])
        .env(dir_var, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("child starts")
}

//! Helpers for the tests of the replica log (a Zab member's storage).

use std::path::Path;

use bytes::Bytes;
use tokio::sync::mpsc::Receiver;
use zoolog_log::{Durable, Position, ReplicaEntry, ReplicaLog, ReplicaLogConfig, ReplicaRecovered};

pub fn config(root: &Path) -> ReplicaLogConfig {
    ReplicaLogConfig::new(root.join("wal"), root.join("snap"))
}

pub fn open(config: &ReplicaLogConfig) -> (ReplicaLog, ReplicaRecovered, Receiver<Durable>) {
    ReplicaLog::open(config.clone()).expect("replica log opens")
}

pub fn payload(position: Position, epoch: u64) -> Bytes {
    let mut bytes = format!("{position}-{epoch}-").into_bytes();
    bytes.resize(bytes.len() + (position % 61) as usize, b'p');
    Bytes::from(bytes)
}

pub fn entries(first: Position, count: u64, epoch: u64) -> Vec<ReplicaEntry> {
    (first..first + count)
        .map(|position| ReplicaEntry {
            position,
            epoch,
            payload: payload(position, epoch),
        })
        .collect()
}

/// Receives completions until one reaches `position`; checks they only move forward.
pub fn wait_durable(durable: &mut Receiver<Durable>, position: Position) -> Vec<Durable> {
    let mut seen: Vec<Durable> = Vec::new();
    loop {
        let next = durable.blocking_recv().expect("writer still running");
        if let Some(previous) = seen.last() {
            assert!(next.position > previous.position, "{seen:?} then {next:?}");
        }
        seen.push(next);
        if next.position >= position {
            assert_eq!(
                next.position, position,
                "no completion beyond what was appended"
            );
            return seen;
        }
    }
}

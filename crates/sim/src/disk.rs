//! A simulated disk, as a real write-ahead log behaves: epochs, truncations and snapshot
//! installations are durable at once; appended entries sit in an unsynced buffer until an
//! fsync, and a crash keeps only a random prefix of that buffer (a torn write may lose the
//! last entry that had reached the platter too).

use std::collections::VecDeque;

use bytes::Bytes;
use zoolog_zab::{Entry, Epoch, Epochs, Position, Recovered};

use crate::rng::Rng;

#[derive(Debug, Clone)]
pub struct SavedSnapshot {
    pub position: Position,
    pub epoch: Epoch,
    pub payload: Bytes,
}

#[derive(Debug, Default)]
pub struct Disk {
    pub epochs: Epochs,
    pub snapshot: Option<SavedSnapshot>,
    /// Consecutive entries ending at `log_end`; the front may have been purged.
    log: VecDeque<Entry>,
    /// The last position of the log (also when the log is empty: it continues after it).
    log_end: Position,
    /// Entries through here are durable.
    synced_through: Position,
    /// Appends waiting for their fsync completion: (last position, its epoch).
    pub pending: VecDeque<(Position, Epoch)>,
}

impl Disk {
    pub fn log_end(&self) -> Position {
        self.log_end
    }

    pub fn append(&mut self, entries: &[Entry]) -> Result<(), String> {
        for entry in entries {
            if entry.position != self.log_end + 1 {
                return Err(format!(
                    "Append of position {} does not continue the log ending at {}",
                    entry.position, self.log_end
                ));
            }
            self.log.push_back(entry.clone());
            self.log_end = entry.position;
        }
        if let Some(last) = entries.last() {
            self.pending.push_back((last.position, last.epoch));
        }
        Ok(())
    }

    /// fsync: everything written so far is durable.
    pub fn sync(&mut self) {
        self.synced_through = self.log_end;
    }

    pub fn truncate(&mut self, after: Position) {
        while self.log.back().is_some_and(|e| e.position > after) {
            self.log.pop_back();
        }
        self.log_end = self.log_end.min(after);
        self.synced_through = self.synced_through.min(after);
    }

    pub fn install(&mut self, position: Position, epoch: Epoch, payload: Bytes) {
        self.snapshot = Some(SavedSnapshot {
            position,
            epoch,
            payload,
        });
        self.log.clear();
        self.log_end = position;
        self.synced_through = position;
    }

    /// The state machine saved a snapshot; optionally purge the log entries it covers (a
    /// real server purges old segments now and then, keeping some).
    pub fn save_snapshot(&mut self, snapshot: SavedSnapshot, purge_through: Option<Position>) {
        if let Some(through) = purge_through {
            while self.log.front().is_some_and(|e| e.position <= through) {
                self.log.pop_front();
            }
        }
        self.snapshot = Some(snapshot);
    }

    /// At restart: a log that ends before the snapshot (its tail was lost) continues after
    /// the snapshot instead.
    pub fn continue_after(&mut self, position: Position) {
        if self.log_end < position {
            self.log.clear();
            self.log_end = position;
            self.synced_through = position;
        }
    }

    pub fn snapshot_position(&self) -> Position {
        self.snapshot.as_ref().map_or(0, |s| s.position)
    }

    /// The process died: unsynced writes are partly lost, fsyncs in flight never complete.
    /// Returns how many unsynced entries were lost.
    pub fn crash(&mut self, rng: &mut Rng) -> usize {
        self.pending.clear();
        let unsynced: Vec<Position> = self
            .log
            .iter()
            .map(|e| e.position)
            .filter(|p| *p > self.synced_through)
            .collect();
        if unsynced.is_empty() {
            return 0;
        }
        let mut keep = rng.below(unsynced.len() as u64 + 1) as usize;
        if keep > 0 && rng.chance(0.3) {
            keep -= 1; // torn: the last surviving entry fails its checksum
        }
        let new_end = if keep == 0 {
            self.synced_through.min(self.log_end)
        } else {
            unsynced[keep - 1]
        };
        let lost = unsynced.len() - keep;
        self.truncate(new_end);
        self.synced_through = self.log_end;
        lost
    }

    /// What a restarting server reads back.
    pub fn recover(&self) -> Recovered {
        let (snapshot_position, snapshot_epoch) = self
            .snapshot
            .as_ref()
            .map_or((0, 0), |s| (s.position, s.epoch));
        Recovered {
            epochs: self.epochs,
            snapshot_position,
            snapshot_epoch,
            entries: self
                .log
                .iter()
                .filter(|e| e.position >= snapshot_position)
                .cloned()
                .collect(),
        }
    }
}

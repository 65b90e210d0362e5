//! The log as this server holds it in memory: every entry after the newest snapshot.
//!
//! Entries at or below `base` live only in the snapshot; the epoch of the entry at `base` is
//! kept so that a learner's log can still be matched against it.
//!
//! A saved snapshot lets the entries it covers go, but not all at once: dropping a whole
//! snapCount of payloads in one step stalled the protocol task for milliseconds, which every
//! request in flight saw as tail latency. They are dropped a bounded number per input instead.

use std::collections::VecDeque;

use crate::{Entry, Epoch, Position};

#[derive(Debug, Clone)]
pub(crate) struct History {
    base: Position,
    base_epoch: Epoch,
    entries: VecDeque<Entry>,
    /// Where a saved snapshot allows `base` to move; `trim_step` gets it there.
    trim_target: Position,
}

impl History {
    pub fn new(base: Position, base_epoch: Epoch) -> History {
        History {
            base,
            base_epoch,
            entries: VecDeque::new(),
            trim_target: base,
        }
    }

    pub fn base(&self) -> Position {
        self.base
    }

    pub fn last_position(&self) -> Position {
        self.base + self.entries.len() as Position
    }

    pub fn last_epoch(&self) -> Epoch {
        self.entries
            .back()
            .map_or(self.base_epoch, |entry| entry.epoch)
    }

    /// The epoch of the entry at `position`, if this server still knows it.
    pub fn epoch_at(&self, position: Position) -> Option<Epoch> {
        if position == self.base {
            return Some(self.base_epoch);
        }
        self.get(position).map(|entry| entry.epoch)
    }

    pub fn get(&self, position: Position) -> Option<&Entry> {
        if position <= self.base {
            return None;
        }
        self.entries.get((position - self.base - 1) as usize)
    }

    /// Entries `from..=to`, clipped to what is held; cheap (payloads are shared).
    pub fn range(&self, from: Position, to: Position) -> Vec<Entry> {
        let from = from.max(self.base + 1);
        let to = to.min(self.last_position());
        if from > to {
            return Vec::new();
        }
        let start = (from - self.base - 1) as usize;
        let end = (to - self.base) as usize;
        self.entries.range(start..end).cloned().collect()
    }

    pub fn append(&mut self, entry: Entry) {
        assert_eq!(
            entry.position,
            self.last_position() + 1,
            "log entries are appended at the next position"
        );
        assert!(
            entry.epoch >= self.last_epoch(),
            "epochs never decrease along a log"
        );
        self.entries.push_back(entry);
    }

    pub fn truncate_after(&mut self, position: Position) {
        assert!(
            position >= self.base,
            "never truncate into the snapshot (position {position}, snapshot {})",
            self.base
        );
        self.entries.truncate((position - self.base) as usize);
    }

    /// Forgets everything: the state is now the snapshot at `base`.
    pub fn reset(&mut self, base: Position, base_epoch: Epoch) {
        *self = History::new(base, base_epoch);
    }

    /// Lets the entries a snapshot at `position` covers go, by later [`History::trim_step`]s.
    pub fn trim_to(&mut self, position: Position) {
        if position <= self.last_position() {
            self.trim_target = self.trim_target.max(position);
        }
    }

    /// Drops at most `entries_max` of the entries a saved snapshot covers.
    pub fn trim_step(&mut self, entries_max: usize) {
        let target = self.trim_target.min(self.last_position());
        if target <= self.base {
            return;
        }
        let count = ((target - self.base) as usize).min(entries_max);
        let new_base = self.base + count as Position;
        let epoch = self.epoch_at(new_base).expect("held position");
        self.entries.drain(..count);
        self.base = new_base;
        self.base_epoch = epoch;
    }

    /// The log after `after` as runs of (epoch, first position), for a learner's report.
    pub fn runs_after(&self, after: Position) -> Vec<(Epoch, Position)> {
        let mut runs: Vec<(Epoch, Position)> = Vec::new();
        for entry in self.entries.iter().filter(|e| e.position > after) {
            if runs.last().is_none_or(|(epoch, _)| *epoch != entry.epoch) {
                runs.push((entry.epoch, entry.position));
            }
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn entry(position: Position, epoch: Epoch) -> Entry {
        Entry {
            position,
            epoch,
            payload: Bytes::from(vec![position as u8]),
        }
    }

    #[test]
    fn trimming_keeps_the_epoch_of_the_new_base() {
        let mut history = History::new(0, 0);
        for position in 1..=5 {
            history.append(entry(position, if position < 4 { 1 } else { 2 }));
        }
        history.trim_to(3);
        history.trim_step(2);
        assert_eq!(history.base(), 2, "a step drops no more than asked");
        history.trim_step(2);
        assert_eq!(history.base(), 3, "and never beyond the snapshot");
        history.trim_step(2);
        assert_eq!(history.base(), 3);
        assert_eq!(history.epoch_at(3), Some(1));
        assert_eq!(history.epoch_at(2), None);
        assert_eq!(history.range(1, 9).len(), 2);
        assert_eq!(history.runs_after(3), vec![(2, 4)]);
        history.truncate_after(4);
        assert_eq!(history.last_position(), 4);
    }
}

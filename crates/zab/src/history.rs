//! The log as this server holds it in memory: every entry after the newest snapshot.
//!
//! Entries at or below `base` live only in the snapshot; the epoch of the entry at `base` is
//! kept so that a learner's log can still be matched against it.
//!
//! A saved snapshot lets the entries it covers go, but not all at once: dropping a whole
//! snapCount of payloads in one step stalled the protocol task for milliseconds, which every
//! request in flight saw as tail latency. They are dropped a bounded number per input instead.
//!
//! Growing cost as much: a queue that doubles moves every entry into new memory (fresh huge
//! pages, for which the kernel may compact memory on the spot), and on fresh members commits
//! stalled 3–34 ms at the power-of-two positions, on both followers at once, until the queues
//! were made with room for the entries (bench/README, thirtieth session). So
//! they start with room for the entries a snapshot interval brings (`reserved`): address space
//! more than memory until used (2 MB more resident with room for 2^20 entries).

use std::collections::VecDeque;

use crate::{Entry, Epoch, Position};

#[derive(Debug, Clone)]
pub(crate) struct History {
    /// Entries the queues have room for from the start (and after a reset).
    reserved: usize,
    base: Position,
    base_epoch: Epoch,
    entries: VecDeque<Entry>,
    /// The running payload total through each entry of `entries`, counted from any origin.
    bytes_through: VecDeque<u64>,
    /// The running total at `base`.
    base_bytes: u64,
    /// Where a saved snapshot allows `base` to move; `trim_step` gets it there.
    trim_target: Position,
}

impl History {
    pub fn new(base: Position, base_epoch: Epoch, reserved: usize) -> History {
        History {
            reserved,
            base,
            base_epoch,
            entries: VecDeque::with_capacity(reserved),
            bytes_through: VecDeque::with_capacity(reserved),
            base_bytes: 0,
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

    /// Payload bytes of the entries `after + 1..=through`, clipped to what is held.
    pub fn bytes_between(&self, after: Position, through: Position) -> u64 {
        self.bytes_through_position(through)
            .saturating_sub(self.bytes_through_position(after))
    }

    /// The furthest position up to `through` such that the held entries after `after`
    /// through it carry at most `bytes_max` payload bytes: `after` itself when the next entry
    /// alone is larger (or nothing after it is held).
    pub fn reach_within(&self, after: Position, through: Position, bytes_max: u64) -> Position {
        let after = after.max(self.base);
        let through = through.min(self.last_position());
        if after >= through {
            return after;
        }
        let limit = self.bytes_through_position(after).saturating_add(bytes_max);
        // The running totals never decrease along the log.
        let within = self.bytes_through.partition_point(|&total| total <= limit);
        (self.base + within as Position).clamp(after, through)
    }

    fn bytes_through_position(&self, position: Position) -> u64 {
        let position = position.clamp(self.base, self.last_position());
        if position == self.base {
            return self.base_bytes;
        }
        self.bytes_through[(position - self.base - 1) as usize]
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
        let total = self.bytes_through_position(entry.position - 1) + entry.payload.len() as u64;
        self.bytes_through.push_back(total);
        self.entries.push_back(entry);
    }

    pub fn truncate_after(&mut self, position: Position) {
        assert!(
            position >= self.base,
            "never truncate into the snapshot (position {position}, snapshot {})",
            self.base
        );
        let kept = (position - self.base) as usize;
        self.entries.truncate(kept);
        self.bytes_through.truncate(kept);
    }

    /// Forgets everything: the state is now the snapshot at `base`.
    pub fn reset(&mut self, base: Position, base_epoch: Epoch) {
        *self = History::new(base, base_epoch, self.reserved);
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
        self.base_bytes = self.bytes_through_position(new_base);
        self.entries.drain(..count);
        self.bytes_through.drain(..count);
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
    fn the_reserved_entries_fit_without_growing_before_and_after_a_reset() {
        let mut history = History::new(0, 0, 1000);
        let fits = |history: &History| {
            history.entries.capacity() >= 1000 && history.bytes_through.capacity() >= 1000
        };
        assert!(fits(&history));
        for position in 1..=1000 {
            history.append(entry(position, 1));
        }
        assert!(fits(&history));
        history.reset(5000, 2);
        assert!(fits(&history), "a snapshot install keeps the room");
    }

    #[test]
    fn trimming_keeps_the_epoch_of_the_new_base() {
        let mut history = History::new(0, 0, 0);
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

    #[test]
    fn byte_counts_follow_appends_trims_and_truncations() {
        let mut history = History::new(0, 0, 0);
        for (position, bytes) in [(1, 10), (2, 20), (3, 30), (4, 40)] {
            history.append(Entry {
                position,
                epoch: 1,
                payload: Bytes::from(vec![0; bytes]),
            });
        }
        assert_eq!(history.bytes_between(0, 4), 100);
        assert_eq!(history.bytes_between(1, 3), 50);
        assert_eq!(history.reach_within(1, 4, 49), 2);
        assert_eq!(history.reach_within(1, 4, 50), 3);
        assert_eq!(
            history.reach_within(1, 3, 1000),
            3,
            "never beyond `through`"
        );
        assert_eq!(
            history.reach_within(1, 4, 19),
            1,
            "the next entry alone is larger"
        );
        history.trim_to(2);
        history.trim_step(8);
        assert_eq!(
            history.bytes_between(0, 4),
            70,
            "trimmed entries are not held"
        );
        assert_eq!(history.reach_within(2, 4, 30), 3);
        history.truncate_after(3);
        assert_eq!(history.bytes_between(2, 9), 30);
        history.append(Entry {
            position: 4,
            epoch: 2,
            payload: Bytes::from(vec![0; 5]),
        });
        assert_eq!(history.bytes_between(2, 4), 35);
    }
}

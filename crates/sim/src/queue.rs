//! The event queue: events ordered by (simulated time, insertion sequence), so that events at
//! the same instant run in the order they were scheduled and a run is exactly reproducible.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Item<E> {
    time: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Item<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl<E> Eq for Item<E> {}
impl<E> PartialOrd for Item<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Item<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse, so the earliest (time, seq) comes out first.
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

pub struct EventQueue<E> {
    heap: BinaryHeap<Item<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn push(&mut self, time: u64, event: E) {
        self.seq += 1;
        self.heap.push(Item {
            time,
            seq: self.seq,
            event,
        });
    }

    /// The earliest event: (time, sequence number, event).
    pub fn pop(&mut self) -> Option<(u64, u64, E)> {
        self.heap
            .pop()
            .map(|item| (item.time, item.seq, item.event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo() {
        let mut queue = EventQueue::default();
        queue.push(5, "b");
        queue.push(3, "a");
        queue.push(5, "c");
        let order: Vec<&str> = std::iter::from_fn(|| queue.pop().map(|(_, _, e)| e)).collect();
        assert_eq!(order, vec!["a", "b", "c"]);
    }
}

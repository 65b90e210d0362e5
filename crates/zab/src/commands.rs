//! Client commands waiting on their way to being proposed, and how many more a server takes.
//!
//! Commands are counted in bytes as well as in number: with values near jute.maxbuffer, a
//! bound of a few thousand commands alone lets a queue hold gigabytes.

use std::collections::VecDeque;

use bytes::Bytes;

/// Commands in order, with their total payload bytes.
#[derive(Debug, Default)]
pub(crate) struct CommandQueue {
    commands: VecDeque<Bytes>,
    bytes: u64,
}

impl CommandQueue {
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn front(&self) -> Option<&Bytes> {
        self.commands.front()
    }

    pub fn push_back(&mut self, command: Bytes) {
        self.bytes += command.len() as u64;
        self.commands.push_back(command);
    }

    pub fn pop_front(&mut self) -> Option<Bytes> {
        let command = self.commands.pop_front()?;
        self.bytes -= command.len() as u64;
        Some(command)
    }

    /// Forgets the first `count` commands (all, if there are fewer).
    pub fn drop_front(&mut self, count: usize) {
        for _ in 0..count.min(self.len()) {
            self.pop_front();
        }
    }

    /// The commands from index `from` on.
    pub fn from(&self, from: usize) -> impl Iterator<Item = &Bytes> {
        self.commands.range(from.min(self.len())..)
    }

    /// The commands from index `from` on, in messages of at most `count_max` commands and
    /// `bytes_max` payload bytes each (a command larger than that alone).
    pub fn batches_from(&self, from: usize, count_max: usize, bytes_max: u64) -> Vec<Vec<Bytes>> {
        let mut batches: Vec<Vec<Bytes>> = Vec::new();
        let mut batch_bytes = 0;
        for command in self.from(from) {
            let size = command.len() as u64;
            let fits = batches
                .last()
                .is_some_and(|batch| batch.len() < count_max && batch_bytes + size <= bytes_max);
            if !fits {
                batches.push(Vec::new());
                batch_bytes = 0;
            }
            batch_bytes += size;
            batches
                .last_mut()
                .expect("a batch was just made")
                .push(command.clone());
        }
        batches
    }

    /// How many more commands this queue takes within the given bounds.
    pub fn room(&self, commands_max: u64, bytes_max: u64) -> AppendCapacity {
        AppendCapacity {
            commands: commands_max.saturating_sub(self.len() as u64),
            bytes: bytes_max.saturating_sub(self.bytes),
        }
    }
}

/// How many commands a server takes now: at most `commands`, added while those taken hold
/// fewer than `bytes` payload bytes, so that the last one may go beyond (a queue never
/// refuses a command for its size alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendCapacity {
    pub commands: u64,
    pub bytes: u64,
}

impl AppendCapacity {
    pub const NONE: AppendCapacity = AppendCapacity {
        commands: 0,
        bytes: 0,
    };

    pub fn is_none(&self) -> bool {
        self.commands == 0 || self.bytes == 0
    }

    /// Takes commands from `next` while there is room, in order.
    pub fn fill(&self, mut next: impl FnMut() -> Option<Bytes>) -> Vec<Bytes> {
        let mut taken = Vec::new();
        let mut bytes = 0;
        while (taken.len() as u64) < self.commands && bytes < self.bytes {
            let Some(command) = next() else {
                break;
            };
            bytes += command.len() as u64;
            taken.push(command);
        }
        taken
    }

    /// Whether `commands` is a batch [`AppendCapacity::fill`] could have taken.
    pub fn admits(&self, commands: &[Bytes]) -> bool {
        let before_last = commands.len().saturating_sub(1);
        let bytes_before_last: u64 = commands[..before_last]
            .iter()
            .map(|command| command.len() as u64)
            .sum();
        commands.len() as u64 <= self.commands
            && (commands.is_empty() || bytes_before_last < self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(bytes: usize) -> Bytes {
        Bytes::from(vec![0; bytes])
    }

    #[test]
    fn a_queue_counts_its_bytes_and_its_room() {
        let mut queue = CommandQueue::default();
        queue.push_back(command(3));
        queue.push_back(command(5));
        assert_eq!(queue.len(), 2);
        assert_eq!(
            queue.room(3, 10),
            AppendCapacity {
                commands: 1,
                bytes: 2
            }
        );
        queue.drop_front(1);
        assert_eq!(queue.room(3, 10).bytes, 5);
        assert_eq!(queue.from(0).count(), 1);
        assert_eq!(queue.from(4).count(), 0);
        assert!(queue.room(1, 100).is_none());
    }

    #[test]
    fn batches_hold_at_most_their_count_and_bytes_and_a_large_command_alone() {
        let mut queue = CommandQueue::default();
        for bytes in [1, 2, 3, 10, 1, 1, 1] {
            queue.push_back(command(bytes));
        }
        let sizes = |batches: Vec<Vec<Bytes>>| -> Vec<Vec<usize>> {
            batches
                .iter()
                .map(|batch| batch.iter().map(Bytes::len).collect())
                .collect()
        };
        assert_eq!(
            sizes(queue.batches_from(0, 2, 5)),
            vec![vec![1, 2], vec![3], vec![10], vec![1, 1], vec![1]]
        );
        assert_eq!(sizes(queue.batches_from(4, 10, 100)), vec![vec![1, 1, 1]]);
        assert!(queue.batches_from(7, 10, 100).is_empty());
    }

    #[test]
    fn a_fill_stops_at_either_bound_and_the_last_command_may_overshoot_the_bytes() {
        let capacity = AppendCapacity {
            commands: 3,
            bytes: 10,
        };
        let mut source = vec![command(4), command(4), command(4), command(1)].into_iter();
        let taken = capacity.fill(|| source.next());
        assert_eq!(taken.len(), 3, "8 bytes are under 10: the third goes too");
        assert!(capacity.admits(&taken));
        let mut source = vec![command(6), command(6), command(1)].into_iter();
        assert_eq!(capacity.fill(|| source.next()).len(), 2);
        assert!(!capacity.admits(&[command(6), command(6), command(1)]));
        assert!(!capacity.admits(&vec![command(1); 4]));
        assert!(capacity.admits(&[]));
    }
}

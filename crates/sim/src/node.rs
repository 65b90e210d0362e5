//! One simulated server: a [`Zab`] machine (absent while crashed), its disk, and a tiny
//! replicated state machine (the position applied and a hash of everything applied).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use zoolog_log::{AppendError, OrderingLayer, QueuedEntry};
use zoolog_server::core::Core;
use zoolog_zab::{Config, Lane, OwnSync, Position, Status, Zab};

use crate::checker::mix;
use crate::disk::Disk;

pub struct StateMachine {
    pub applied: Position,
    pub hash: u64,
}

impl StateMachine {
    pub fn snapshot_payload(&self) -> Bytes {
        let mut bytes = Vec::with_capacity(16);
        bytes.extend_from_slice(&self.applied.to_be_bytes());
        bytes.extend_from_slice(&self.hash.to_be_bytes());
        Bytes::from(bytes)
    }

    /// The header of a snapshot payload; in core mode the data tree's bytes follow it.
    pub fn from_snapshot(payload: &[u8]) -> Option<StateMachine> {
        if payload.len() < 16 {
            return None;
        }
        Some(StateMachine {
            applied: u64::from_be_bytes(payload[..8].try_into().ok()?),
            hash: u64::from_be_bytes(payload[8..16].try_into().ok()?),
        })
    }

    pub fn apply(&mut self, position: Position, payload: &[u8]) -> Result<(), String> {
        if position != self.applied + 1 {
            return Err(format!(
                "Deliver of position {position} does not follow the applied position {}",
                self.applied
            ));
        }
        self.applied = position;
        self.hash = mix(self.hash, payload);
        Ok(())
    }
}

pub struct Node {
    pub id: u64,
    pub observer: bool,
    pub config: Config,
    pub zab: Option<Zab>,
    /// Bumped at every crash: events scheduled for an earlier life are ignored.
    pub life: u64,
    pub disk: Disk,
    pub machine: StateMachine,
    /// Position of the last snapshot the state machine saved (or restored from).
    pub last_snapshot: Position,
    /// Changed only through [`Node::set_status`], which keeps `serving_since_us` with it.
    pub status: Status,
    /// Since when the server has been serving without a break (none while it is not).
    pub serving_since_us: Option<u64>,
    /// When the last scheduled fsync completes (completions stay in append order).
    pub fsync_at: u64,
    /// When a leader syncs its own log, followed as the real driver follows it.
    pub leader_sync: LeaderSync,
    pub restart_at: Option<u64>,
    /// Core mode: the real front end over this server's Zab (absent while crashed).
    pub front: Option<Front>,
}

/// A leader's delayed fsyncs, as the real replica log's writer holds them: with a sync delay,
/// a write waits up to the delay for more before its fsync starts, unless told to sync now.
pub struct LeaderSync {
    pub own_sync: OwnSync,
    /// The log's sync delay now (0: none).
    pub delay_us: u64,
    /// Appends whose fsync has not started: it waits out the delay.
    pub held: usize,
    /// When the held appends' delay ends.
    pub delay_ends_at: Option<u64>,
    /// A sync was asked for while nothing was held: the next append does not wait.
    pub sync_now_pending: bool,
}

impl LeaderSync {
    /// For a (re)starting server, which leads nothing yet: its first follow as leader takes
    /// up the commit position.
    pub fn new(now_us: u64) -> LeaderSync {
        LeaderSync {
            own_sync: OwnSync::new(0, now_us),
            delay_us: 0,
            held: 0,
            delay_ends_at: None,
            sync_now_pending: false,
        }
    }
}

/// The real `zoolog_server::core::Core` of a server, and the ordering layer it appends to.
pub struct Front {
    pub core: Core,
    pub layer: Arc<SimLayer>,
}

/// The ordering layer a simulated server's Core appends to: Core's commands waiting for Zab,
/// each with the stint of serving it was appended for, in two lanes of `capacity` each as the
/// real ensemble layer keeps them. The simulator hands them to Zab as `Input::Append` while Zab
/// takes appends (`append_capacity`), urgent ones (liveness reports) first, into Zab's urgent
/// lane, and drops those appended for another stint than Zab's, as the real driver does.
/// What is queued while Zab does not serve waits: the real driver's queue may hold commands
/// through a leader change too, when it takes them later than they come.
pub struct SimLayer {
    pub urgent: Mutex<VecDeque<QueuedEntry>>,
    pub queue: Mutex<VecDeque<QueuedEntry>>,
    pub capacity: usize,
    pub committed: AtomicU64,
}

impl SimLayer {
    pub fn new(capacity: usize, committed: Position) -> SimLayer {
        SimLayer {
            urgent: Mutex::new(VecDeque::new()),
            queue: Mutex::new(VecDeque::new()),
            capacity,
            committed: AtomicU64::new(committed),
        }
    }

    /// The next command of `lane` appended for `stint`, dropping any appended for another
    /// (see [`QueuedEntry::next_of_stint`]).
    pub fn pop_front(&self, lane: Lane, stint: u64) -> Option<Bytes> {
        let waiting = match lane {
            Lane::Urgent => &self.urgent,
            Lane::Commands => &self.queue,
        };
        let mut waiting = waiting.lock().unwrap();
        QueuedEntry::next_of_stint(std::iter::from_fn(|| waiting.pop_front()), stint)
    }

    pub fn queued(&self) -> usize {
        self.urgent.lock().unwrap().len() + self.queue.lock().unwrap().len()
    }

    fn push(
        &self,
        lane: &Mutex<VecDeque<QueuedEntry>>,
        entry: Bytes,
        stint: u64,
    ) -> Result<(), AppendError> {
        let mut lane = lane.lock().unwrap();
        if lane.len() >= self.capacity {
            return Err(AppendError::Full);
        }
        lane.push_back(QueuedEntry { stint, entry });
        Ok(())
    }
}

impl OrderingLayer for SimLayer {
    fn append(&self, entry: Bytes, stint: u64) -> Result<(), AppendError> {
        self.push(&self.queue, entry, stint)
    }

    fn append_urgent(&self, entry: Bytes, stint: u64) -> Result<(), AppendError> {
        self.push(&self.urgent, entry, stint)
    }

    fn committed_position(&self) -> Position {
        self.committed.load(Ordering::Acquire)
    }
}

impl Node {
    pub fn is_up(&self) -> bool {
        self.zab.is_some()
    }

    pub fn set_status(&mut self, status: Status, now_us: u64) {
        // The same stint reported again is no break; a new stint's service begins anew.
        self.serving_since_us = match status {
            Status::Looking => None,
            Status::Serving { .. } if status == self.status => self.serving_since_us,
            Status::Serving { .. } => Some(now_us),
        };
        self.status = status;
    }
}

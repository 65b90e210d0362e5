//! One simulated server: a [`Zab`] machine (absent while crashed), its disk, and a tiny
//! replicated state machine (the position applied and a hash of everything applied).

use bytes::Bytes;
use zoolog_zab::{Config, Position, Status, Zab};

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

    pub fn from_snapshot(payload: &[u8]) -> Option<StateMachine> {
        if payload.len() != 16 {
            return None;
        }
        Some(StateMachine {
            applied: u64::from_be_bytes(payload[..8].try_into().ok()?),
            hash: u64::from_be_bytes(payload[8..].try_into().ok()?),
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
    pub status: Status,
    /// When the last scheduled fsync completes (completions stay in append order).
    pub fsync_at: u64,
    pub restart_at: Option<u64>,
}

impl Node {
    pub fn is_up(&self) -> bool {
        self.zab.is_some()
    }
}

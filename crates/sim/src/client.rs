//! Simulated clients: each is connected to one server at a time and submits commands
//! (unique payloads: client id and sequence number) while that server takes appends.

use std::collections::VecDeque;

use zoolog_zab::{Lane, Status};

#[derive(Debug, Clone)]
pub struct Connection {
    pub id: u64,
    pub node: usize,
    /// The server's status when the connection was made; it ends when that changes.
    pub status: Status,
}

#[derive(Debug)]
pub struct Client {
    pub id: u64,
    pub connection: Option<Connection>,
    pub next_seq: u64,
    /// Sequence numbers submitted on the current connection and not yet acknowledged.
    pub in_flight: VecDeque<u64>,
    pub max_in_flight: usize,
    /// The lane its commands take: urgent for some clients, so that the urgent lane's
    /// numbering, resends and priority meet the faults too (FIFO holds within a lane).
    pub lane: Lane,
    pub step_us: (u64, u64),
    pub reconnect_at: u64,
}

//! The checkers: what every run must satisfy, checked as the run goes and at its end.
//!
//! - Agreement: every server's deliveries are a prefix of one common sequence (checked at
//!   each delivery against the sequence built from all deliveries so far).
//! - Integrity: a delivered payload is a command some client submitted, delivered once.
//! - Snapshots: an installed snapshot is the state of the common sequence at its position.
//! - No lost acknowledgement: an acknowledged command is in the common sequence, at the
//!   position that acknowledged it, and every server converges past it.
//! - Linearizable writes: a command submitted after another was acknowledged is ordered
//!   after it.
//! - FIFO per connection: a connection's commands are acknowledged in submission order and
//!   appear in the sequence in submission order (unknown ones may be missing).

use std::collections::BTreeMap;

use bytes::Bytes;
use zoolog_zab::Position;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandState {
    InFlight,
    Acked,
    /// The connection it was sent on ended before it was acknowledged.
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Command {
    pub connection: u64,
    /// The highest position acknowledged to any client when this command was submitted.
    pub watermark: Position,
    pub submitted_us: u64,
    pub state: CommandState,
    pub position: Option<Position>,
}

pub fn encode_payload(client: u64, seq: u64) -> Bytes {
    let mut bytes = Vec::with_capacity(16);
    bytes.extend_from_slice(&client.to_be_bytes());
    bytes.extend_from_slice(&seq.to_be_bytes());
    Bytes::from(bytes)
}

pub fn decode_payload(payload: &[u8]) -> Option<(u64, u64)> {
    if payload.len() != 16 {
        return None;
    }
    let client = u64::from_be_bytes(payload[..8].try_into().ok()?);
    let seq = u64::from_be_bytes(payload[8..].try_into().ok()?);
    Some((client, seq))
}

pub fn mix(hash: u64, payload: &[u8]) -> u64 {
    let mut h = hash ^ 0xCBF2_9CE4_8422_2325;
    for byte in payload {
        h ^= *byte as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h ^ (h >> 29)
}

#[derive(Default)]
pub struct Checker {
    /// The common sequence: position p is `sequence[p - 1]`.
    pub sequence: Vec<Bytes>,
    /// The state hash after each prefix: `hashes[p]` is the hash after position p.
    pub hashes: Vec<u64>,
    /// Commands by (client, seq).
    pub commands: BTreeMap<(u64, u64), Command>,
    pub max_acked: Position,
    pub acked: u64,
    /// Core mode: payloads are Core's log entries, not client commands; only agreement
    /// is checked here (the rest in [`crate::zkcheck`]).
    pub opaque: bool,
}

impl Checker {
    pub fn new() -> Checker {
        Checker {
            hashes: vec![0],
            ..Checker::default()
        }
    }

    pub fn submitted(&mut self, client: u64, seq: u64, connection: u64, now_us: u64) {
        self.commands.insert(
            (client, seq),
            Command {
                connection,
                watermark: self.max_acked,
                submitted_us: now_us,
                state: CommandState::InFlight,
                position: None,
            },
        );
    }

    /// A server delivered `payload` at `position`; true when it extends the common sequence.
    pub fn delivered(
        &mut self,
        server: u64,
        position: Position,
        payload: &Bytes,
    ) -> Result<bool, String> {
        let len = self.sequence.len() as Position;
        if position <= len {
            let agreed = &self.sequence[(position - 1) as usize];
            if agreed != payload {
                return Err(format!(
                    "agreement: server {server} delivered {:?} at position {position}, where {:?} was delivered before",
                    decode_payload(payload),
                    decode_payload(agreed)
                ));
            }
            return Ok(false);
        }
        if position != len + 1 {
            return Err(format!(
                "server {server} delivered position {position}, beyond the common sequence ending at {len}"
            ));
        }
        if self.opaque {
            let hash = mix(self.hashes[len as usize], payload);
            self.sequence.push(payload.clone());
            self.hashes.push(hash);
            return Ok(true);
        }
        let Some(key) = decode_payload(payload) else {
            return Err(format!(
                "integrity: server {server} delivered a payload no client sent: {payload:?}"
            ));
        };
        let Some(command) = self.commands.get_mut(&key) else {
            return Err(format!(
                "integrity: server {server} delivered {key:?}, which no client submitted"
            ));
        };
        if let Some(earlier) = command.position {
            return Err(format!(
                "duplicate: command {key:?} delivered at position {position} and at {earlier}"
            ));
        }
        command.position = Some(position);
        let hash = mix(self.hashes[len as usize], payload);
        self.sequence.push(payload.clone());
        self.hashes.push(hash);
        Ok(true)
    }

    pub fn acknowledged(
        &mut self,
        client: u64,
        seq: u64,
        position: Position,
    ) -> Result<(), String> {
        let command = self.commands.get_mut(&(client, seq)).expect("submitted");
        if command.position != Some(position) {
            return Err(format!(
                "command {:?} acknowledged at {position} but the common sequence has it at {:?}",
                (client, seq),
                command.position
            ));
        }
        command.state = CommandState::Acked;
        self.max_acked = self.max_acked.max(position);
        self.acked += 1;
        Ok(())
    }

    pub fn unknown(&mut self, client: u64, seq: u64) {
        if let Some(command) = self.commands.get_mut(&(client, seq)) {
            command.state = CommandState::Unknown;
        }
    }

    /// The checks over the whole history, at the end of a run.
    pub fn finish(&self) -> Result<(), String> {
        let mut last_on_connection: BTreeMap<u64, (u64, Position)> = BTreeMap::new();
        for (&(client, seq), command) in &self.commands {
            if command.state == CommandState::Acked && command.position.is_none() {
                return Err(format!(
                    "lost: acknowledged command {:?} is not in the sequence",
                    (client, seq)
                ));
            }
            let Some(position) = command.position else {
                continue;
            };
            if position <= command.watermark {
                return Err(format!(
                    "linearizability: command {:?} is at position {position}, but position {} was acknowledged before it was submitted",
                    (client, seq),
                    command.watermark
                ));
            }
            // Commands are iterated in (client, seq) order; a connection belongs to one client.
            if let Some((prev_seq, prev_position)) = last_on_connection.get(&command.connection) {
                if *prev_position > position {
                    return Err(format!(
                        "FIFO: on connection {}, command {:?} is at position {position} but the earlier command {:?} is at {prev_position}",
                        command.connection,
                        (client, seq),
                        (client, *prev_seq)
                    ));
                }
            }
            last_on_connection.insert(command.connection, (seq, position));
        }
        Ok(())
    }

    pub fn unknown_committed(&self) -> u64 {
        self.commands
            .values()
            .filter(|c| c.state == CommandState::Unknown && c.position.is_some())
            .count() as u64
    }

    pub fn unknown_total(&self) -> u64 {
        self.commands
            .values()
            .filter(|c| c.state == CommandState::Unknown)
            .count() as u64
    }
}

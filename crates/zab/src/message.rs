//! The messages servers exchange, and their byte encoding for real transports.
//!
//! Every message after election names the epoch it belongs to, so a receiver can drop what a
//! deposed leader (or a stale copy of its own leader's traffic) sends.

use bytes::{Buf, Bytes};

use crate::{Entry, Epoch, Position, ServerId};

/// A vote in an election, ordered by (epoch, position, leader): the server with the newest
/// history wins, and server id breaks ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Vote {
    /// The candidate's current epoch.
    pub epoch: Epoch,
    /// The candidate's last logged position.
    pub position: Position,
    pub leader: ServerId,
}

/// What the sender of a vote is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    Looking,
    /// Following or observing `Vote::leader` in `epoch`.
    Following {
        epoch: Epoch,
    },
    Leading {
        epoch: Epoch,
    },
}

/// A snapshot sent to a learner: the state exact at `position`, whose entry has `epoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotImage {
    pub position: Position,
    pub epoch: Epoch,
    pub payload: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Election: the sender's vote in its `round`, and its state. A server that is not
    /// looking answers a looking one with the leader it follows.
    Vote {
        round: u64,
        vote: Vote,
        state: PeerState,
        observer: bool,
    },
    /// Discovery, learner → prospective leader: "I want to follow you". `attempt` differs
    /// each time the learner starts over, so a leader tells a retransmission (same attempt)
    /// from a learner that restarted or looked again (new attempt: forget its progress).
    FollowerInfo {
        accepted_epoch: Epoch,
        observer: bool,
        attempt: u64,
    },
    /// Discovery, leader → learner: "promise me this epoch".
    NewEpoch { epoch: Epoch },
    /// Discovery, learner → leader: the promise (`counted` is false when the learner had
    /// already promised this epoch, which must not count twice), with the learner's history:
    /// its current epoch, the position of its newest snapshot, and its log as runs of
    /// (epoch, first position) after the snapshot, ending at `last_position`.
    AckEpoch {
        epoch: Epoch,
        counted: bool,
        current_epoch: Epoch,
        snapshot_position: Position,
        runs: Vec<(Epoch, Position)>,
        last_position: Position,
    },
    /// Synchronization, leader → learner: drop entries after `truncate_after` (or replace
    /// everything by `snapshot`), then append `entries`; commit through `commit`.
    NewLeader {
        epoch: Epoch,
        truncate_after: Position,
        snapshot: Option<SnapshotImage>,
        entries: Vec<Entry>,
        commit: Position,
    },
    /// Synchronization, learner → leader: the history is durable and `epoch` is current.
    AckNewLeader {
        epoch: Epoch,
        last_position: Position,
    },
    /// Broadcast, leader → learner: entries to append (maybe none: then a heartbeat), the
    /// commit position, and how many of the learner's forwards the leader has taken.
    Propose {
        epoch: Epoch,
        entries: Vec<Entry>,
        commit: Position,
        forwards_taken: u64,
    },
    /// Broadcast, learner → leader: durable through `position`.
    Ack { epoch: Epoch, position: Position },
    /// Follower → leader: client commands numbered from `first_sequence` (per follower and
    /// epoch, from 1), so that a retransmission is taken once.
    Forward {
        epoch: Epoch,
        first_sequence: u64,
        payloads: Vec<Bytes>,
    },
}

impl Message {
    /// The epoch a post-election message belongs to.
    pub fn epoch(&self) -> Option<Epoch> {
        match self {
            Message::Vote { .. } | Message::FollowerInfo { .. } => None,
            Message::NewEpoch { epoch }
            | Message::AckEpoch { epoch, .. }
            | Message::NewLeader { epoch, .. }
            | Message::AckNewLeader { epoch, .. }
            | Message::Propose { epoch, .. }
            | Message::Ack { epoch, .. }
            | Message::Forward { epoch, .. } => Some(*epoch),
        }
    }

    /// Bytes of payload carried, for a transport's queue limits.
    pub fn payload_bytes(&self) -> usize {
        match self {
            Message::NewLeader {
                snapshot, entries, ..
            } => {
                snapshot.as_ref().map_or(0, |image| image.payload.len())
                    + entries.iter().map(|e| e.payload.len()).sum::<usize>()
            }
            Message::Propose { entries, .. } => entries.iter().map(|e| e.payload.len()).sum(),
            Message::Forward { payloads, .. } => payloads.iter().map(Bytes::len).sum(),
            _ => 0,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Message::Vote {
                round,
                vote,
                state,
                observer,
            } => {
                out.push(1);
                put_u64(out, *round);
                put_vote(out, vote);
                match state {
                    PeerState::Looking => out.push(0),
                    PeerState::Following { epoch } => {
                        out.push(1);
                        put_u64(out, *epoch);
                    }
                    PeerState::Leading { epoch } => {
                        out.push(2);
                        put_u64(out, *epoch);
                    }
                }
                out.push(*observer as u8);
            }
            Message::FollowerInfo {
                accepted_epoch,
                observer,
                attempt,
            } => {
                out.push(2);
                put_u64(out, *accepted_epoch);
                out.push(*observer as u8);
                put_u64(out, *attempt);
            }
            Message::NewEpoch { epoch } => {
                out.push(3);
                put_u64(out, *epoch);
            }
            Message::AckEpoch {
                epoch,
                counted,
                current_epoch,
                snapshot_position,
                runs,
                last_position,
            } => {
                out.push(4);
                put_u64(out, *epoch);
                out.push(*counted as u8);
                put_u64(out, *current_epoch);
                put_u64(out, *snapshot_position);
                put_u64(out, runs.len() as u64);
                for (run_epoch, first) in runs {
                    put_u64(out, *run_epoch);
                    put_u64(out, *first);
                }
                put_u64(out, *last_position);
            }
            Message::NewLeader {
                epoch,
                truncate_after,
                snapshot,
                entries,
                commit,
            } => {
                out.push(5);
                put_u64(out, *epoch);
                put_u64(out, *truncate_after);
                match snapshot {
                    None => out.push(0),
                    Some(image) => {
                        out.push(1);
                        put_u64(out, image.position);
                        put_u64(out, image.epoch);
                        put_bytes(out, &image.payload);
                    }
                }
                put_entries(out, entries);
                put_u64(out, *commit);
            }
            Message::AckNewLeader {
                epoch,
                last_position,
            } => {
                out.push(6);
                put_u64(out, *epoch);
                put_u64(out, *last_position);
            }
            Message::Propose {
                epoch,
                entries,
                commit,
                forwards_taken,
            } => {
                out.push(7);
                put_u64(out, *epoch);
                put_entries(out, entries);
                put_u64(out, *commit);
                put_u64(out, *forwards_taken);
            }
            Message::Ack { epoch, position } => {
                out.push(8);
                put_u64(out, *epoch);
                put_u64(out, *position);
            }
            Message::Forward {
                epoch,
                first_sequence,
                payloads,
            } => {
                out.push(9);
                put_u64(out, *epoch);
                put_u64(out, *first_sequence);
                put_u64(out, payloads.len() as u64);
                for payload in payloads {
                    put_bytes(out, payload);
                }
            }
        }
    }

    /// Decodes one message that `encode` wrote; `bytes` is one whole frame. Counts and
    /// lengths are checked against what is left, so a hostile frame cannot make it allocate
    /// more than the frame's own size.
    pub fn decode(bytes: Bytes) -> Result<Message, DecodeError> {
        let mut reader = Reader { bytes };
        let message = match reader.u8()? {
            1 => Message::Vote {
                round: reader.u64()?,
                vote: reader.vote()?,
                state: match reader.u8()? {
                    0 => PeerState::Looking,
                    1 => PeerState::Following {
                        epoch: reader.u64()?,
                    },
                    2 => PeerState::Leading {
                        epoch: reader.u64()?,
                    },
                    other => return Err(DecodeError::BadTag(other)),
                },
                observer: reader.bool()?,
            },
            2 => Message::FollowerInfo {
                accepted_epoch: reader.u64()?,
                observer: reader.bool()?,
                attempt: reader.u64()?,
            },
            3 => Message::NewEpoch {
                epoch: reader.u64()?,
            },
            4 => {
                let epoch = reader.u64()?;
                let counted = reader.bool()?;
                let current_epoch = reader.u64()?;
                let snapshot_position = reader.u64()?;
                let count = reader.count(16)?;
                let mut runs = Vec::with_capacity(count);
                for _ in 0..count {
                    runs.push((reader.u64()?, reader.u64()?));
                }
                Message::AckEpoch {
                    epoch,
                    counted,
                    current_epoch,
                    snapshot_position,
                    runs,
                    last_position: reader.u64()?,
                }
            }
            5 => Message::NewLeader {
                epoch: reader.u64()?,
                truncate_after: reader.u64()?,
                snapshot: match reader.u8()? {
                    0 => None,
                    1 => Some(SnapshotImage {
                        position: reader.u64()?,
                        epoch: reader.u64()?,
                        payload: reader.bytes()?,
                    }),
                    other => return Err(DecodeError::BadTag(other)),
                },
                entries: reader.entries()?,
                commit: reader.u64()?,
            },
            6 => Message::AckNewLeader {
                epoch: reader.u64()?,
                last_position: reader.u64()?,
            },
            7 => Message::Propose {
                epoch: reader.u64()?,
                entries: reader.entries()?,
                commit: reader.u64()?,
                forwards_taken: reader.u64()?,
            },
            8 => Message::Ack {
                epoch: reader.u64()?,
                position: reader.u64()?,
            },
            9 => {
                let epoch = reader.u64()?;
                let first_sequence = reader.u64()?;
                let count = reader.count(4)?;
                let mut payloads = Vec::with_capacity(count);
                for _ in 0..count {
                    payloads.push(reader.bytes()?);
                }
                Message::Forward {
                    epoch,
                    first_sequence,
                    payloads,
                }
            }
            other => return Err(DecodeError::BadTag(other)),
        };
        if reader.bytes.has_remaining() {
            return Err(DecodeError::TrailingBytes(reader.bytes.remaining()));
        }
        Ok(message)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    Truncated,
    BadTag(u8),
    TrailingBytes(usize),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "peer message ends early"),
            DecodeError::BadTag(tag) => write!(f, "peer message has unknown tag {tag}"),
            DecodeError::TrailingBytes(n) => write!(f, "peer message has {n} trailing bytes"),
        }
    }
}

impl std::error::Error for DecodeError {}

fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_be_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u64(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_vote(out: &mut Vec<u8>, vote: &Vote) {
    put_u64(out, vote.epoch);
    put_u64(out, vote.position);
    put_u64(out, vote.leader);
}

fn put_entries(out: &mut Vec<u8>, entries: &[Entry]) {
    put_u64(out, entries.len() as u64);
    for entry in entries {
        put_u64(out, entry.position);
        put_u64(out, entry.epoch);
        put_bytes(out, &entry.payload);
    }
}

struct Reader {
    bytes: Bytes,
}

impl Reader {
    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.bytes.remaining() < n {
            return Err(DecodeError::Truncated);
        }
        Ok(())
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.bytes.get_u8())
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(DecodeError::BadTag(other)),
        }
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.need(8)?;
        Ok(self.bytes.get_u64())
    }

    /// A count of items that each take at least `item_bytes_min`, checked against the rest.
    fn count(&mut self, item_bytes_min: usize) -> Result<usize, DecodeError> {
        let count = self.u64()?;
        if count > (self.bytes.remaining() / item_bytes_min) as u64 {
            return Err(DecodeError::Truncated);
        }
        Ok(count as usize)
    }

    fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let len = self.u64()?;
        if len > self.bytes.remaining() as u64 {
            return Err(DecodeError::Truncated);
        }
        Ok(self.bytes.split_to(len as usize))
    }

    fn vote(&mut self) -> Result<Vote, DecodeError> {
        Ok(Vote {
            epoch: self.u64()?,
            position: self.u64()?,
            leader: self.u64()?,
        })
    }

    fn entries(&mut self) -> Result<Vec<Entry>, DecodeError> {
        let count = self.count(24)?;
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            entries.push(Entry {
                position: self.u64()?,
                epoch: self.u64()?,
                payload: self.bytes()?,
            });
        }
        Ok(entries)
    }
}

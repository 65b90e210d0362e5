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

/// One start-over of a learner: a new process (`incarnation`, which grows with every start)
/// or a new election round within one. Ordered, so that a leader can tell a learner's current
/// attempt from the delayed traffic of an earlier one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Attempt {
    pub incarnation: u64,
    pub round: u64,
}

/// Which leader epoch and which learner attempt a message between them belongs to. Each side
/// drops what belongs to another: without this, a delayed message from a learner's earlier
/// attempt (a forwarded command, say) would be taken as part of its current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub epoch: Epoch,
    pub attempt: Attempt,
}

/// How far the leader has a learner's forwarded commands, counted from the first of the
/// link: `received` it holds or has proposed (in the learner's order, without a gap), and
/// `taken` of those it has proposed. The learner keeps a command until it is taken (they
/// bound how many it may have outstanding) but resends only what was not received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardsHeard {
    pub taken: u64,
    pub received: u64,
}

/// The two ways a server's commands travel to be ordered. Urgent ones (its reports that
/// sessions are alive) are numbered apart from client commands and proposed before any client
/// command waiting, so that they never queue behind a backlog of writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Commands,
    Urgent,
}

impl Lane {
    /// In the order the leader proposes what waits in them.
    pub const BY_PRIORITY: [Lane; 2] = [Lane::Urgent, Lane::Commands];

    fn code(self) -> u8 {
        match self {
            Lane::Commands => 0,
            Lane::Urgent => 1,
        }
    }
}

/// One of a thing for each lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerLane<T> {
    pub commands: T,
    pub urgent: T,
}

impl<T> PerLane<T> {
    pub fn get(&self, lane: Lane) -> &T {
        match lane {
            Lane::Commands => &self.commands,
            Lane::Urgent => &self.urgent,
        }
    }

    pub fn get_mut(&mut self, lane: Lane) -> &mut T {
        match lane {
            Lane::Commands => &mut self.commands,
            Lane::Urgent => &mut self.urgent,
        }
    }

    pub fn map<U>(&self, f: impl Fn(&T) -> U) -> PerLane<U> {
        PerLane {
            commands: f(&self.commands),
            urgent: f(&self.urgent),
        }
    }
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
    /// Discovery, learner → prospective leader: "I want to follow you", in `attempt`.
    FollowerInfo {
        accepted_epoch: Epoch,
        observer: bool,
        attempt: Attempt,
    },
    /// Discovery, leader → learner: "promise me this epoch".
    NewEpoch { link: Link },
    /// Discovery, learner → leader: the promise (`counted` is false when the learner had
    /// already promised this epoch, which must not count twice), with the learner's history:
    /// its current epoch, the position of its newest snapshot, and its log as runs of
    /// (epoch, first position) after the snapshot, ending at `last_position`.
    AckEpoch {
        link: Link,
        counted: bool,
        current_epoch: Epoch,
        snapshot_position: Position,
        runs: Vec<(Epoch, Position)>,
        last_position: Position,
    },
    /// Synchronization, leader → learner: drop entries after `truncate_after` (or replace
    /// everything by `snapshot`), then append `entries`; commit through `commit`.
    /// `history_end` is the leader's last position as it sends this (`entries` may stop
    /// short of it): every command it took from the learner's earlier attempts is at or
    /// before it.
    NewLeader {
        link: Link,
        truncate_after: Position,
        snapshot: Option<SnapshotImage>,
        entries: Vec<Entry>,
        commit: Position,
        history_end: Position,
    },
    /// Synchronization, learner → leader: the history is durable and the epoch is current.
    AckNewLeader { link: Link, last_position: Position },
    /// Broadcast, leader → learner: entries to append (maybe none: then a heartbeat), the
    /// commit position, how far the leader's own log is durable, and how far it has the
    /// learner's forwards in each lane.
    Propose {
        link: Link,
        entries: Vec<Entry>,
        commit: Position,
        leader_durable: Position,
        forwards: PerLane<ForwardsHeard>,
    },
    /// Broadcast, learner → leader: durable through `position`.
    Ack { link: Link, position: Position },
    /// Learner → leader: commands of one lane numbered from `first_sequence` (from 1 in each
    /// lane of each link), so that a retransmission is taken once.
    Forward {
        link: Link,
        lane: Lane,
        first_sequence: u64,
        payloads: Vec<Bytes>,
    },
}

/// The positions and epochs a run of entries spans, for logs and traces.
#[derive(Debug, Clone, Copy)]
pub struct EntryRange<'a>(pub &'a [Entry]);

impl std::fmt::Display for EntryRange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.0.first(), self.0.last()) {
            (Some(first), Some(last)) => write!(
                f,
                "[{}..={} epochs {}..{}]",
                first.position, last.position, first.epoch, last.epoch
            ),
            _ => f.write_str("[]"),
        }
    }
}

/// One line per message, for logs and traces: what it says, without its payloads.
impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Vote {
                round,
                vote,
                state,
                observer,
            } => write!(
                f,
                "Vote {{ round {round}, leader {} (epoch {}, position {}), {state:?}{} }}",
                vote.leader,
                vote.epoch,
                vote.position,
                if *observer { ", observer" } else { "" }
            ),
            Message::FollowerInfo {
                accepted_epoch,
                observer,
                attempt,
            } => write!(
                f,
                "FollowerInfo {{ {attempt:?}, accepted_epoch {accepted_epoch}{} }}",
                if *observer { ", observer" } else { "" }
            ),
            Message::NewEpoch { link } => write!(f, "NewEpoch {{ {link:?} }}"),
            Message::AckEpoch {
                link,
                counted,
                current_epoch,
                snapshot_position,
                runs,
                last_position,
            } => write!(
                f,
                "AckEpoch {{ {link:?}, counted {counted}, current_epoch {current_epoch}, \
                 snapshot {snapshot_position}, runs {runs:?}, last {last_position} }}"
            ),
            Message::NewLeader {
                link,
                truncate_after,
                snapshot,
                entries,
                commit,
                history_end,
            } => write!(
                f,
                "NewLeader {{ {link:?}, truncate_after {truncate_after}, snapshot {:?}, \
                 entries {}, commit {commit}, history_end {history_end} }}",
                snapshot.as_ref().map(|image| (image.position, image.epoch)),
                EntryRange(entries)
            ),
            Message::AckNewLeader {
                link,
                last_position,
            } => write!(f, "AckNewLeader {{ {link:?}, last {last_position} }}"),
            Message::Propose {
                link,
                entries,
                commit,
                leader_durable,
                forwards,
            } => write!(
                f,
                "Propose {{ {link:?}, entries {}, commit {commit}, leader_durable \
                 {leader_durable}, forwards taken {} received {}, urgent taken {} received {} }}",
                EntryRange(entries),
                forwards.commands.taken,
                forwards.commands.received,
                forwards.urgent.taken,
                forwards.urgent.received
            ),
            Message::Ack { link, position } => write!(f, "Ack {{ {link:?}, {position} }}"),
            Message::Forward {
                link,
                lane,
                first_sequence,
                payloads,
            } => write!(
                f,
                "Forward {{ {link:?}, {lane:?}, first_sequence {first_sequence}, {} commands }}",
                payloads.len()
            ),
        }
    }
}

impl Message {
    /// The leader epoch and learner attempt a post-election message belongs to.
    pub fn link(&self) -> Option<Link> {
        match self {
            Message::Vote { .. } | Message::FollowerInfo { .. } => None,
            Message::NewEpoch { link }
            | Message::AckEpoch { link, .. }
            | Message::NewLeader { link, .. }
            | Message::AckNewLeader { link, .. }
            | Message::Propose { link, .. }
            | Message::Ack { link, .. }
            | Message::Forward { link, .. } => Some(*link),
        }
    }

    /// Sent by a leader to one learner (the others go from a learner to its leader).
    pub fn is_to_learner(&self) -> bool {
        matches!(
            self,
            Message::NewEpoch { .. } | Message::NewLeader { .. } | Message::Propose { .. }
        )
    }

    /// The encoding, as consecutive parts to be sent one after the other. A payload of at least
    /// `SHARED_PAYLOAD_BYTES_MIN` is its own part, sharing the message's buffer rather than
    /// copied: a snapshot to a learner, or a large value proposed to every follower.
    pub fn encode_parts(&self) -> Vec<Bytes> {
        let mut out = Encoder::default();
        self.encode_into(&mut out);
        out.finish()
    }

    /// The encoding in one buffer (copying every payload).
    pub fn encode(&self, out: &mut Vec<u8>) {
        for part in self.encode_parts() {
            out.extend_from_slice(&part);
        }
    }

    fn encode_into(&self, out: &mut Encoder) {
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
                put_attempt(out, attempt);
            }
            Message::NewEpoch { link } => {
                out.push(3);
                put_link(out, link);
            }
            Message::AckEpoch {
                link,
                counted,
                current_epoch,
                snapshot_position,
                runs,
                last_position,
            } => {
                out.push(4);
                put_link(out, link);
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
                link,
                truncate_after,
                snapshot,
                entries,
                commit,
                history_end,
            } => {
                out.push(5);
                put_link(out, link);
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
                put_u64(out, *history_end);
            }
            Message::AckNewLeader {
                link,
                last_position,
            } => {
                out.push(6);
                put_link(out, link);
                put_u64(out, *last_position);
            }
            Message::Propose {
                link,
                entries,
                commit,
                leader_durable,
                forwards,
            } => {
                out.push(7);
                put_link(out, link);
                put_entries(out, entries);
                put_u64(out, *commit);
                put_u64(out, *leader_durable);
                for lane in Lane::BY_PRIORITY {
                    put_u64(out, forwards.get(lane).taken);
                    put_u64(out, forwards.get(lane).received);
                }
            }
            Message::Ack { link, position } => {
                out.push(8);
                put_link(out, link);
                put_u64(out, *position);
            }
            Message::Forward {
                link,
                lane,
                first_sequence,
                payloads,
            } => {
                out.push(9);
                put_link(out, link);
                out.push(lane.code());
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
                attempt: reader.attempt()?,
            },
            3 => Message::NewEpoch {
                link: reader.link()?,
            },
            4 => {
                let link = reader.link()?;
                let counted = reader.bool()?;
                let current_epoch = reader.u64()?;
                let snapshot_position = reader.u64()?;
                let count = reader.count(16)?;
                let mut runs = Vec::with_capacity(count);
                for _ in 0..count {
                    runs.push((reader.u64()?, reader.u64()?));
                }
                Message::AckEpoch {
                    link,
                    counted,
                    current_epoch,
                    snapshot_position,
                    runs,
                    last_position: reader.u64()?,
                }
            }
            5 => Message::NewLeader {
                link: reader.link()?,
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
                history_end: reader.u64()?,
            },
            6 => Message::AckNewLeader {
                link: reader.link()?,
                last_position: reader.u64()?,
            },
            7 => Message::Propose {
                link: reader.link()?,
                entries: reader.entries()?,
                commit: reader.u64()?,
                leader_durable: reader.u64()?,
                forwards: reader.forwards_heard()?,
            },
            8 => Message::Ack {
                link: reader.link()?,
                position: reader.u64()?,
            },
            9 => {
                let link = reader.link()?;
                let lane = reader.lane()?;
                let first_sequence = reader.u64()?;
                let count = reader.count(8)?;
                let mut payloads = Vec::with_capacity(count);
                for _ in 0..count {
                    payloads.push(reader.bytes()?);
                }
                Message::Forward {
                    link,
                    lane,
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

fn put_attempt(out: &mut Encoder, attempt: &Attempt) {
    put_u64(out, attempt.incarnation);
    put_u64(out, attempt.round);
}

fn put_link(out: &mut Encoder, link: &Link) {
    put_u64(out, link.epoch);
    put_attempt(out, &link.attempt);
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

fn put_u64(out: &mut Encoder, value: u64) {
    out.extend_from_slice(&value.to_be_bytes());
}

fn put_bytes(out: &mut Encoder, bytes: &Bytes) {
    put_u64(out, bytes.len() as u64);
    out.share(bytes);
}

fn put_vote(out: &mut Encoder, vote: &Vote) {
    put_u64(out, vote.epoch);
    put_u64(out, vote.position);
    put_u64(out, vote.leader);
}

fn put_entries(out: &mut Encoder, entries: &[Entry]) {
    put_u64(out, entries.len() as u64);
    for entry in entries {
        put_u64(out, entry.position);
        put_u64(out, entry.epoch);
        put_bytes(out, &entry.payload);
    }
}

/// A payload at least this long is sent from its own buffer instead of being copied into the
/// message's: below it, copying is cheaper than another part.
pub const SHARED_PAYLOAD_BYTES_MIN: usize = 16 << 10;

/// Builds a message's parts: small fields go into an owned buffer, large payloads are shared.
#[derive(Default)]
struct Encoder {
    parts: Vec<Bytes>,
    current: Vec<u8>,
}

impl Encoder {
    fn push(&mut self, byte: u8) {
        self.current.push(byte);
    }

    fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.current.extend_from_slice(bytes);
    }

    fn share(&mut self, bytes: &Bytes) {
        if bytes.len() < SHARED_PAYLOAD_BYTES_MIN {
            self.current.extend_from_slice(bytes);
            return;
        }
        self.end_current_part();
        self.parts.push(bytes.clone());
    }

    fn end_current_part(&mut self) {
        if !self.current.is_empty() {
            self.parts
                .push(Bytes::from(std::mem::take(&mut self.current)));
        }
    }

    fn finish(mut self) -> Vec<Bytes> {
        self.end_current_part();
        self.parts
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

    fn attempt(&mut self) -> Result<Attempt, DecodeError> {
        Ok(Attempt {
            incarnation: self.u64()?,
            round: self.u64()?,
        })
    }

    fn link(&mut self) -> Result<Link, DecodeError> {
        Ok(Link {
            epoch: self.u64()?,
            attempt: self.attempt()?,
        })
    }

    fn lane(&mut self) -> Result<Lane, DecodeError> {
        match self.u8()? {
            0 => Ok(Lane::Commands),
            1 => Ok(Lane::Urgent),
            other => Err(DecodeError::BadTag(other)),
        }
    }

    /// In the order `encode` writes them: the lanes by priority.
    fn forwards_heard(&mut self) -> Result<PerLane<ForwardsHeard>, DecodeError> {
        let mut heard = PerLane::<ForwardsHeard>::default();
        for lane in Lane::BY_PRIORITY {
            *heard.get_mut(lane) = ForwardsHeard {
                taken: self.u64()?,
                received: self.u64()?,
            };
        }
        Ok(heard)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            epoch: 3,
            attempt: Attempt {
                incarnation: 9,
                round: 2,
            },
        }
    }

    #[test]
    fn a_messages_line_names_its_entries_but_leaves_payloads_out() {
        let payload = Bytes::from(vec![b'x'; 1 << 20]);
        let message = Message::NewLeader {
            link: link(),
            truncate_after: 4,
            snapshot: Some(SnapshotImage {
                position: 4,
                epoch: 2,
                payload: payload.clone(),
            }),
            entries: vec![
                Entry {
                    position: 5,
                    epoch: 2,
                    payload: payload.clone(),
                },
                Entry {
                    position: 6,
                    epoch: 3,
                    payload,
                },
            ],
            commit: 5,
            history_end: 6,
        };
        let line = message.to_string();
        assert!(line.contains("entries [5..=6 epochs 2..3]"), "{line}");
        assert!(line.contains("snapshot Some((4, 2))"), "{line}");
        assert!(line.len() < 200, "{line}");
    }

    fn entry(position: Position, payload: Bytes) -> Entry {
        Entry {
            position,
            epoch: 3,
            payload,
        }
    }

    fn round_trip(message: &Message) -> Vec<Bytes> {
        let parts = message.encode_parts();
        let mut whole = Vec::new();
        message.encode(&mut whole);
        assert_eq!(parts.concat(), whole, "the parts are the encoding");
        assert_eq!(&Message::decode(Bytes::from(whole)).unwrap(), message);
        parts
    }

    fn shares(parts: &[Bytes], payload: &Bytes) -> bool {
        parts.iter().any(|part| part.as_ptr() == payload.as_ptr())
    }

    #[test]
    fn large_payloads_are_shared_and_small_ones_copied_and_every_message_decodes_back() {
        let large = Bytes::from(vec![7u8; SHARED_PAYLOAD_BYTES_MIN]);
        let small = Bytes::from(vec![1u8; SHARED_PAYLOAD_BYTES_MIN - 1]);
        let snapshot = Bytes::from(vec![5u8; 3 * SHARED_PAYLOAD_BYTES_MIN]);
        let propose = Message::Propose {
            link: link(),
            entries: vec![
                entry(10, small.clone()),
                entry(11, large.clone()),
                entry(12, small.clone()),
            ],
            commit: 9,
            leader_durable: 10,
            forwards: PerLane {
                commands: ForwardsHeard {
                    taken: 4,
                    received: 6,
                },
                urgent: ForwardsHeard {
                    taken: 1,
                    received: 2,
                },
            },
        };
        let parts = round_trip(&propose);
        assert!(
            shares(&parts, &large) && !shares(&parts, &small),
            "{} parts",
            parts.len()
        );
        assert_eq!(parts.len(), 3, "before, the large payload, after");

        let new_leader = Message::NewLeader {
            link: link(),
            truncate_after: 2,
            snapshot: Some(SnapshotImage {
                position: 8,
                epoch: 2,
                payload: snapshot.clone(),
            }),
            entries: vec![entry(9, large.clone())],
            commit: 9,
            history_end: 9,
        };
        let parts = round_trip(&new_leader);
        assert!(shares(&parts, &snapshot) && shares(&parts, &large));

        for lane in Lane::BY_PRIORITY {
            let forward = Message::Forward {
                link: link(),
                lane,
                first_sequence: 40,
                payloads: vec![large.clone(), small.clone()],
            };
            assert!(shares(&round_trip(&forward), &large));
        }

        let heartbeat = Message::Propose {
            link: link(),
            entries: Vec::new(),
            commit: 9,
            leader_durable: 9,
            forwards: PerLane::default(),
        };
        assert_eq!(round_trip(&heartbeat).len(), 1);
    }
}

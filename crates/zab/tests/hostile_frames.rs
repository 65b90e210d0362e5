//! A peer frame is input from the network: whatever its bytes, decoding gives a message or an
//! error, never a panic, and a message it gives encodes back to bytes that decode to it again
//! (so what a server relays or logs is what it read).

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use zoolog_zab::{
    Attempt, Entry, ForwardsHeard, Lane, Link, Message, PeerState, PerLane, SnapshotImage, Vote,
};

fn link() -> Link {
    Link {
        epoch: 3,
        attempt: Attempt {
            incarnation: 1,
            round: 2,
        },
    }
}

fn entry(position: u64, payload_bytes: usize) -> Entry {
    Entry {
        position,
        epoch: 3,
        payload: Bytes::from(vec![position as u8; payload_bytes]),
    }
}

/// One message of every kind, with the counts and lengths a mutation can corrupt.
fn samples() -> Vec<Message> {
    let vote = Vote {
        epoch: 2,
        position: 40,
        leader: 3,
    };
    vec![
        Message::Vote {
            round: 7,
            vote,
            state: PeerState::Following { epoch: 2 },
            observer: false,
        },
        Message::FollowerInfo {
            accepted_epoch: 2,
            observer: true,
            attempt: link().attempt,
        },
        Message::NewEpoch { link: link() },
        Message::AckEpoch {
            link: link(),
            counted: true,
            current_epoch: 2,
            snapshot_position: 10,
            runs: vec![(1, 11), (2, 30)],
            last_position: 40,
        },
        Message::NewLeader {
            link: link(),
            truncate_after: 38,
            snapshot: Some(SnapshotImage {
                position: 10,
                epoch: 1,
                payload: Bytes::from_static(b"tree"),
            }),
            entries: vec![entry(39, 5), entry(40, 0)],
            commit: 39,
            history_end: 40,
        },
        Message::AckNewLeader {
            link: link(),
            last_position: 40,
        },
        Message::Propose {
            link: link(),
            entries: vec![entry(41, 3), entry(42, 70)],
            commit: 40,
            leader_durable: 41,
            forwards: PerLane {
                commands: ForwardsHeard {
                    taken: 4,
                    received: 6,
                },
                urgent: ForwardsHeard {
                    taken: 1,
                    received: 1,
                },
            },
        },
        Message::Ack {
            link: link(),
            position: 42,
        },
        Message::Forward {
            link: link(),
            lane: Lane::Urgent,
            first_sequence: 5,
            payloads: vec![Bytes::from_static(b"touch"), Bytes::new()],
        },
    ]
}

fn encoded(message: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    message.encode(&mut out);
    out
}

/// Decodes `bytes`; a message that comes out must survive its own round trip.
fn decode_checked(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    if let Ok(message) = Message::decode(Bytes::from(bytes)) {
        let again = Message::decode(Bytes::from(encoded(&message)));
        prop_assert_eq!(again.as_ref(), Ok(&message));
    }
    Ok(())
}

#[test]
fn every_sample_decodes_back_unchanged() {
    for message in samples() {
        assert_eq!(Message::decode(Bytes::from(encoded(&message))), Ok(message));
    }
}

#[test]
fn an_empty_frame_fails_cleanly() {
    assert!(Message::decode(Bytes::new()).is_err());
}

proptest! {
    /// Mostly one of the kinds' tags first, so that the bytes after it reach that kind's fields.
    #[test]
    fn arbitrary_bytes_decode_or_fail_cleanly(
        tag in 0u8..=10,
        rest in vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = vec![tag];
        bytes.extend_from_slice(&rest);
        decode_checked(bytes)?;
    }

    #[test]
    fn a_frame_with_bytes_changed_decodes_or_fails_cleanly(
        which in 0..samples().len(),
        changes in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = encoded(&samples()[which]);
        for (at, value) in changes {
            let index = at.index(bytes.len());
            bytes[index] = value;
        }
        decode_checked(bytes)?;
    }

    #[test]
    fn a_frame_cut_short_or_lengthened_fails_cleanly(
        which in 0..samples().len(),
        keep in any::<prop::sample::Index>(),
        extra in vec(any::<u8>(), 1..16),
    ) {
        let whole = encoded(&samples()[which]);
        let cut = whole[..keep.index(whole.len())].to_vec();
        prop_assert!(Message::decode(Bytes::from(cut)).is_err());
        let mut longer = whole;
        longer.extend_from_slice(&extra);
        prop_assert!(Message::decode(Bytes::from(longer)).is_err());
    }
}

//! A log entry's command comes from whichever server appended it, through the network and the
//! disk: whatever its bytes, decoding gives a command or an error, never a panic, and a
//! command it gives encodes to bytes that decode to it again.

use proptest::collection::vec;
use proptest::prelude::*;
use zoolog_proto::{
    Acl, CheckVersionRequest, CreateRequest, DeleteRequest, Id, Request, SetDataRequest,
};
use zoolog_tree::{Command, CommandOp, SessionSeen};

/// Decodes `bytes`; a command that comes out must survive its own round trip.
fn decode_checked(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(command) = Command::decode(bytes) {
        prop_assert_eq!(Command::decode(&command.encode()), Ok(command));
    }
    Ok(())
}

/// The fixed fields every command starts with: encoding version, session id, cxid, time, owner.
fn header(version: u8) -> Vec<u8> {
    let mut bytes = vec![version];
    bytes.extend_from_slice(&0x0100_0000_0000_0007_i64.to_be_bytes());
    bytes.extend_from_slice(&3_i32.to_be_bytes());
    bytes.extend_from_slice(&1_700_000_000_000_i64.to_be_bytes());
    if version >= 2 {
        bytes.extend_from_slice(&42_i64.to_be_bytes());
    }
    bytes
}

fn command(op: CommandOp) -> Command {
    Command {
        session_id: 0x0100_0000_0000_0007,
        cxid: 3,
        time_ms: 1_700_000_000_000,
        owner: 42,
        op,
    }
}

/// One command of every kind, writes of several requests among them, with the counts and
/// lengths a mutation can corrupt.
fn samples() -> Vec<Command> {
    let digest = Id {
        scheme: "digest".into(),
        id: "user:hash".into(),
    };
    let create = Request::Create(CreateRequest {
        path: "/locks/lock-".into(),
        data: Some(b"holder".to_vec()),
        acl: Some(vec![Acl {
            perms: 31,
            id: digest.clone(),
        }]),
        flags: 3,
    });
    let multi = Request::Multi(vec![
        Request::Check(CheckVersionRequest {
            path: "/config".into(),
            version: 4,
        }),
        Request::SetData(SetDataRequest {
            path: "/config".into(),
            data: None,
            version: 4,
        }),
        Request::Delete(DeleteRequest {
            path: "/old".into(),
            version: -1,
        }),
    ]);
    let write = |request| CommandOp::Write {
        request,
        identities: vec![digest.clone()],
    };
    vec![
        command(CommandOp::CreateSession {
            timeout_ms: 6_000,
            password: vec![9; 16],
        }),
        command(CommandOp::CloseSession),
        command(write(create)),
        command(write(multi)),
        command(CommandOp::Reap {
            path: "/queue".into(),
            unchanged_since: Some(77),
        }),
        command(CommandOp::Touch {
            sessions: vec![
                SessionSeen {
                    session_id: 5,
                    idle_ms: 120,
                },
                SessionSeen {
                    session_id: 6,
                    idle_ms: 0,
                },
            ],
        }),
        command(CommandOp::Expire {
            unless_touched_after: 70,
        }),
        command(CommandOp::Attach {
            owner: 43,
            password: vec![9; 16],
        }),
    ]
}

#[test]
fn every_sample_decodes_back_unchanged() {
    for sample in samples() {
        assert_eq!(Command::decode(&sample.encode()), Ok(sample));
    }
}

#[test]
fn an_empty_entry_fails_cleanly() {
    assert!(Command::decode(&[]).is_err());
}

proptest! {
    #[test]
    fn arbitrary_bytes_decode_or_fail_cleanly(bytes in vec(any::<u8>(), 0..300)) {
        decode_checked(&bytes)?;
    }

    #[test]
    fn an_entry_with_bytes_changed_decodes_or_fails_cleanly(
        which in 0..samples().len(),
        changes in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = samples()[which].encode();
        for (at, value) in changes {
            let index = at.index(bytes.len());
            bytes[index] = value;
        }
        decode_checked(&bytes)?;
    }

    #[test]
    fn an_entry_cut_short_decodes_or_fails_cleanly(
        which in 0..samples().len(),
        keep in any::<prop::sample::Index>(),
    ) {
        let whole = samples()[which].encode();
        decode_checked(&whole[..keep.index(whole.len())])?;
    }

    /// A well-formed header and one of the kinds' tags (or a few past them), so that the
    /// bytes after it reach that kind's fields, a write's request body among them.
    #[test]
    fn arbitrary_bodies_decode_or_fail_cleanly(
        version in 0u8..=3,
        tag in 0u8..=11,
        opcode in prop_oneof![-12i32..=25, 100i32..=108],
        rest in vec(any::<u8>(), 0..300),
    ) {
        let mut bytes = header(version);
        bytes.push(tag);
        if tag == 3 {
            bytes.extend_from_slice(&0_i32.to_be_bytes()); // no identities
            bytes.extend_from_slice(&opcode.to_be_bytes());
        }
        bytes.extend_from_slice(&rest);
        decode_checked(&bytes)?;
    }
}

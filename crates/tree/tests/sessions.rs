//! Sessions across a replicated log: touches, conditional expiry, ownership (SESSIONMOVED),
//! sync ordered through the log, and the session fields snapshots carry.

mod common;

use common::*;
use zoolog_proto::*;
use zoolog_tree::*;

fn seen(sessions: &[i64]) -> Vec<SessionSeen> {
    sessions
        .iter()
        .copied()
        .map(SessionSeen::just_now)
        .collect()
}

fn touched_at(h: &Harness, session: i64) -> Zxid {
    h.tree.session(session).expect("live session").touched_at
}

fn sync(path: &str) -> Request {
    Request::Sync(PathRequest { path: path.into() })
}

fn set_data(path: &str) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(b"x".to_vec()),
        version: -1,
    })
}

fn expire(h: &mut Harness, session: i64, unless_touched_after: Zxid) -> Applied {
    h.apply_op(
        session,
        CommandOp::Expire {
            unless_touched_after,
        },
    )
}

fn triggers(applied: &Applied) -> Vec<(Table, String, EventType)> {
    applied
        .triggers
        .iter()
        .map(|t| (t.table, t.path.clone(), t.event))
        .collect()
}

#[test]
fn create_writes_touches_and_attach_record_touched_at() {
    let mut h = Harness::new();
    let session = h.session;
    assert_eq!(touched_at(&h, session), 1, "created at zxid 1");
    let other = h.new_session();
    assert_eq!(touched_at(&h, other), 2);

    h.must_create("/a");
    assert_eq!(touched_at(&h, session), 3);
    // A failing write is activity too.
    assert_eq!(h.create("/a", 0), Err(ErrorCode::NodeExists));
    assert_eq!(touched_at(&h, session), 4);
    // Reads are not logged and touch nothing.
    h.read(Request::Exists(PathWatchRequest {
        path: "/a".into(),
        watch: false,
    }));
    assert_eq!(touched_at(&h, session), 4);
    assert_eq!(touched_at(&h, other), 2);

    // One batched touch: live sessions touched, unknown and closed ids ignored.
    let closed = h.new_session();
    h.apply_op(closed, CommandOp::CloseSession);
    let applied = h.apply_op(
        0,
        CommandOp::Touch {
            sessions: seen(&[other, 424242, closed, session]),
        },
    );
    assert_eq!(applied.outcome, Outcome::Touched { live: 2 });
    assert!(applied.triggers.is_empty());
    assert_eq!(touched_at(&h, session), h.zxid);
    assert_eq!(touched_at(&h, other), h.zxid);
    assert!(h.tree.session(closed).is_none());

    let applied = h.apply_op(
        other,
        CommandOp::Attach {
            owner: 9,
            password: vec![7; 16],
        },
    );
    assert_eq!(
        applied.outcome,
        Outcome::Attached {
            session_exists: true
        }
    );
    let info = h.tree.session(other).unwrap();
    assert_eq!((info.touched_at, info.owner), (h.zxid, 9));

    // sessions() shows both fields, in id order.
    let seen: Vec<(i64, Zxid, u64)> = h
        .tree
        .sessions()
        .map(|(id, info)| (id, info.touched_at, info.owner))
        .collect();
    assert_eq!(
        seen,
        vec![(session, h.zxid - 1, 0), (other, h.zxid, 9)],
        "sessions() in id order"
    );
}

#[test]
fn expire_closes_only_an_untouched_session() {
    let mut h = Harness::new();
    let session = h.session;
    h.create("/eph", 1).unwrap();
    let observed = h.zxid; // an appender saw the log up to here, then silence for a timeout

    // Touched after the observed position: the expiry is a no-op, the ephemeral stays.
    h.apply_op(
        0,
        CommandOp::Touch {
            sessions: seen(&[session]),
        },
    );
    let applied = expire(&mut h, session, observed);
    assert_eq!(
        applied.outcome,
        Outcome::ExpireSkipped {
            session_exists: true
        }
    );
    assert!(applied.triggers.is_empty());
    assert!(h.tree.session(session).is_some());
    assert!(h.tree.stat("/eph").is_some());

    // Untouched since the new position (touched_at == P counts as untouched): it expires, with
    // exactly the effects of a close.
    let observed = touched_at(&h, session);
    let mut twin = Harness::new();
    twin.create("/eph", 1).unwrap();
    let closed = twin.apply_op(twin.session, CommandOp::CloseSession);
    let applied = expire(&mut h, session, observed);
    assert_eq!(applied.outcome, Outcome::SessionClosed);
    assert_eq!(triggers(&applied), triggers(&closed));
    assert!(h.tree.session(session).is_none());
    assert!(h.tree.stat("/eph").is_none());
    assert_eq!(h.tree.ephemeral_count(), 0);

    // Expiring again (another server raced) or expiring an unknown id: no-op.
    let applied = expire(&mut h, session, i64::MAX);
    assert_eq!(
        applied.outcome,
        Outcome::ExpireSkipped {
            session_exists: false
        }
    );
    // A touch ordered after the expiry finds no session.
    let applied = h.apply_op(
        0,
        CommandOp::Touch {
            sessions: seen(&[session]),
        },
    );
    assert_eq!(applied.outcome, Outcome::Touched { live: 0 });
}

#[test]
fn racing_expiries_are_cancelled_by_any_touch_between() {
    // Two servers both saw no activity after P and append Expire; meanwhile the client's own
    // server appended a touch. Whatever the order, a touch after P before an expiry cancels it.
    let mut h = Harness::new();
    let session = h.session;
    let p = h.zxid;
    let applied = expire(&mut h, session, p - 1); // a stale view: touched at P > P-1
    assert!(matches!(applied.outcome, Outcome::ExpireSkipped { .. }));
    h.write(sync("/")).unwrap(); // the client is alive: a write touches
    for _ in 0..2 {
        let applied = expire(&mut h, session, p);
        assert_eq!(
            applied.outcome,
            Outcome::ExpireSkipped {
                session_exists: true
            }
        );
    }
    assert!(h.tree.session(session).is_some());
}

#[test]
fn expire_ignores_ownership_and_writes_from_other_owners_do_not_touch() {
    let mut h = Harness::new();
    let session = h.session;
    let created = h.zxid;
    h.owner = 5;
    assert_eq!(h.write(set_data("/")), Err(ErrorCode::SessionMoved));
    assert_eq!(touched_at(&h, session), created);
    let applied = expire(&mut h, session, created);
    assert_eq!(applied.outcome, Outcome::SessionClosed);
}

#[test]
fn writes_and_closes_from_another_owner_get_session_moved() {
    let mut h = Harness::new();
    h.owner = 1;
    let a = h.new_session();
    assert_eq!(h.tree.session(a).unwrap().owner, 1);
    h.session = a;
    h.must_create("/x");

    // A wrong password takes nothing over.
    let applied = h.apply_op(
        a,
        CommandOp::Attach {
            owner: 5,
            password: vec![8; 16],
        },
    );
    assert_eq!(
        applied.outcome,
        Outcome::Attached {
            session_exists: false
        }
    );
    assert_eq!(h.tree.session(a).unwrap().owner, 1);

    // The client moves to connection 2; requests still in flight from connection 1 fail.
    let applied = h.apply_op(
        a,
        CommandOp::Attach {
            owner: 2,
            password: vec![7; 16],
        },
    );
    assert_eq!(
        applied.outcome,
        Outcome::Attached {
            session_exists: true
        }
    );
    let before = {
        let mut bytes = Vec::new();
        h.tree.encode_snapshot(&mut bytes);
        bytes
    };
    let stat_before = h.stat("/x");
    for request in [
        create_request("/y", b"", 0),
        set_data("/x"),
        Request::Delete(DeleteRequest {
            path: "/x".into(),
            version: -1,
        }),
        Request::SetAcl(SetAclRequest {
            path: "/x".into(),
            acl: Some(open()),
            version: -1,
        }),
        sync("/x"),
    ] {
        assert_eq!(
            h.write(request.clone()),
            Err(ErrorCode::SessionMoved),
            "{request:?}"
        );
    }
    // A multi fails at its first op, as ZooKeeper's per-op checkSession does.
    assert_eq!(
        h.write(Request::Multi(vec![
            create_request("/y", b"", 0),
            set_data("/x")
        ])),
        Ok(Response::Multi(vec![
            MultiResult::Error(ErrorCode::SessionMoved),
            MultiResult::Error(ErrorCode::RuntimeInconsistency),
        ]))
    );
    let applied = h.apply_op(a, CommandOp::CloseSession);
    assert_eq!(
        applied.outcome,
        Outcome::Reply(Err(ErrorCode::SessionMoved))
    );
    assert!(applied.triggers.is_empty());
    assert_eq!(h.stat("/x"), stat_before);
    assert!(h.tree.stat("/y").is_none());
    assert!(h.tree.session(a).is_some());
    // Nothing changed but the position.
    let after = {
        let mut bytes = Vec::new();
        h.tree.encode_snapshot(&mut bytes);
        bytes
    };
    assert_eq!(before[16..], after[16..]);

    // The new owner works, and may close.
    h.owner = 2;
    h.must_create("/y");
    assert_eq!(
        h.apply_op(a, CommandOp::CloseSession).outcome,
        Outcome::SessionClosed
    );
    // A session that is gone: SESSIONEXPIRED, whatever the owner; attach says it is gone.
    assert_eq!(h.write(set_data("/x")), Err(ErrorCode::SessionExpired));
    assert_eq!(
        h.apply_op(
            a,
            CommandOp::Attach {
                owner: 3,
                password: vec![7; 16],
            }
        )
        .outcome,
        Outcome::Attached {
            session_exists: false
        }
    );
    assert!(h.tree.session(a).is_none());
}

#[test]
fn sync_through_the_log_answers_its_path_and_changes_nothing() {
    let mut h = Harness::new();
    h.must_create("/a");
    let stat = h.stat("/a");
    let root = h.stat("/");
    for path in ["/a", "/missing", "/"] {
        let applied = h.write_full(sync(path));
        assert_eq!(
            applied.outcome,
            Outcome::Reply(Ok(Response::Sync(PathRequest { path: path.into() })))
        );
        assert!(applied.triggers.is_empty());
    }
    assert_eq!((h.stat("/a"), h.stat("/")), (stat, root));
    // An expired session gets SESSIONEXPIRED, as from ZooKeeper's checkSession.
    let session = h.session;
    h.apply_op(session, CommandOp::CloseSession);
    assert_eq!(h.write(sync("/a")), Err(ErrorCode::SessionExpired));
}

fn snapshot(tree: &DataTree) -> Vec<u8> {
    let mut bytes = Vec::new();
    tree.encode_snapshot(&mut bytes);
    bytes
}

/// The version-1 layout of the same state: magic ending in 1, sessions without touched_at
/// and owner.
fn as_version_1(v2: &[u8]) -> Vec<u8> {
    assert_eq!(&v2[..8], b"ZLTREE\0\x02");
    let mut out = b"ZLTREE\0\x01".to_vec();
    out.extend_from_slice(&v2[8..24]); // zxid, session count
    let count = i64::from_be_bytes(v2[16..24].try_into().unwrap());
    let mut at = 24;
    for _ in 0..count {
        let password_len = i32::from_be_bytes(v2[at + 12..at + 16].try_into().unwrap());
        let end = at + 16 + password_len.max(0) as usize;
        out.extend_from_slice(&v2[at..end]);
        at = end + 16;
    }
    out.extend_from_slice(&v2[at..]);
    out
}

#[test]
fn snapshots_carry_touched_at_and_owner_and_read_version_1() {
    let mut h = Harness::new();
    h.owner = u64::MAX - 1;
    let s2 = h.new_session();
    h.session = s2;
    h.create("/eph", 1).unwrap();
    h.apply_op(
        0,
        CommandOp::Touch {
            sessions: seen(&[s2]),
        },
    );
    let bytes = snapshot(&h.tree);
    let decoded = DataTree::decode_snapshot(&bytes, TreeConfig::default()).unwrap();
    assert_eq!(snapshot(&decoded), bytes);
    let info = decoded.session(s2).unwrap();
    assert_eq!((info.touched_at, info.owner), (h.zxid, u64::MAX - 1));
    assert_eq!(decoded.session(s2), h.tree.session(s2));

    let old = as_version_1(&bytes);
    let decoded = DataTree::decode_snapshot(&old, TreeConfig::default()).unwrap();
    assert_eq!(decoded.last_applied_zxid(), h.zxid);
    for (id, info) in decoded.sessions() {
        let now = h.tree.session(id).unwrap();
        assert_eq!((info.touched_at, info.owner), (0, 0));
        assert_eq!(
            (&info.password, info.timeout_ms, &info.ephemerals),
            (&now.password, now.timeout_ms, &now.ephemerals)
        );
    }
    assert_eq!(decoded.sessions().count(), 2);
    assert_eq!(decoded.ephemeral_count(), 1);
    // Re-encoding writes the current version.
    assert_eq!(&snapshot(&decoded)[..8], b"ZLTREE\0\x02");
    for cut in 0..old.len() {
        assert!(DataTree::decode_snapshot(&old[..cut], TreeConfig::default()).is_err());
    }
}

#[test]
fn a_touched_at_beyond_the_snapshot_is_refused() {
    let h = Harness::new();
    let mut bytes = snapshot(&h.tree);
    // Session record: id(8) timeout(4) password(4+16) touched_at(8) owner(8), after 24 bytes.
    let touched = 24 + 8 + 4 + 4 + 16;
    bytes[touched..touched + 8].copy_from_slice(&99i64.to_be_bytes());
    assert!(matches!(
        DataTree::decode_snapshot(&bytes, TreeConfig::default()),
        Err(SnapshotError::Inconsistent(_))
    ));
}

#[test]
fn version_1_commands_still_decode_with_owner_0() {
    let command = Command {
        session_id: 0x0100_0000_0000_0001,
        cxid: 4,
        time_ms: 99,
        owner: 0,
        op: CommandOp::Write {
            request: set_data("/a"),
            identities: vec![Id::new("ip", "1.2.3.4")],
        },
    };
    let v2 = command.encode();
    assert_eq!(v2[0], 2);
    // Version 1: the same bytes without the owner after session, cxid and time.
    let mut v1 = vec![1];
    v1.extend_from_slice(&v2[1..21]);
    v1.extend_from_slice(&v2[29..]);
    assert_eq!(Command::decode(&v1), Ok(command));
}

#[test]
fn server_id_255_gives_negative_session_ids_that_work() {
    let mut h = Harness::with(TreeConfig {
        server_id: 255,
        ..TreeConfig::default()
    });
    assert!(h.session < 0, "{:#x}", h.session);
    assert_eq!(h.session as u64 >> 56, 0xff);
    h.create("/eph", 1).unwrap();
    assert_eq!(h.stat("/eph").ephemeral_owner, h.session);
    let bytes = snapshot(&h.tree);
    let decoded = DataTree::decode_snapshot(&bytes, h.tree.config().clone()).unwrap();
    assert_eq!(decoded.session(h.session), h.tree.session(h.session));
    let (session, now) = (h.session, h.zxid);
    let applied = expire(&mut h, session, now);
    assert_eq!(applied.outcome, Outcome::SessionClosed);
    assert!(h.tree.stat("/eph").is_none());
}

#[test]
fn a_tree_tells_an_ended_session_from_one_created_after_its_last_entry() {
    let mut h = Harness::with(TreeConfig {
        server_id: 255,
        ..TreeConfig::default()
    });
    let session = h.session;
    assert!(h.tree.has_applied_creation_of(session));
    let (zxid_bits, server_bits) = (session as u64 & ((1 << 56) - 1), session as u64 >> 56);
    let next_zxid = h.tree.last_applied_zxid() as u64 + 1;
    let created_later = ((server_bits << 56) | next_zxid) as i64;
    assert!(!h.tree.has_applied_creation_of(created_later));
    let of_another_server = ((1u64 << 56) | zxid_bits) as i64;
    assert!(!h.tree.has_applied_creation_of(of_another_server));
    let now = h.zxid;
    expire(&mut h, session, now);
    assert!(h.tree.session(session).is_none());
    assert!(
        h.tree.has_applied_creation_of(session),
        "ended, not unknown"
    );
}

#[test]
fn signs_of_life_are_the_commands_that_moved_touched_at() {
    let mut h = Harness::new();
    let session = h.session;
    let signs = |h: &mut Harness, session_id: i64, op: CommandOp| {
        h.apply_op(session_id, op.clone());
        let command = Command {
            session_id,
            cxid: 1,
            time_ms: 0,
            owner: h.owner,
            op,
        };
        h.tree.signs_of_life(h.zxid, &command).collect::<Vec<_>>()
    };
    let reported = SessionSeen {
        session_id: session,
        idle_ms: 40,
    };
    let touch = CommandOp::Touch {
        sessions: vec![reported, SessionSeen::just_now(999)],
    };
    assert_eq!(
        signs(&mut h, 0, touch),
        [reported],
        "a Touch: its live sessions, idle times kept"
    );
    let write = || CommandOp::Write {
        request: set_data("/"),
        identities: vec![],
    };
    assert_eq!(signs(&mut h, session, write()), seen(&[session]));
    let attach = |password: u8| CommandOp::Attach {
        owner: 8,
        password: vec![password; 16],
    };
    assert_eq!(signs(&mut h, session, attach(0)), [], "a wrong password");
    assert_eq!(signs(&mut h, session, attach(7)), seen(&[session]));
    assert_eq!(
        signs(&mut h, session, write()),
        [],
        "a write from the connection the client left"
    );
    let close = CommandOp::Expire {
        unless_touched_after: 0,
    };
    assert_eq!(signs(&mut h, session, close), [], "an expiry, skipped");
}

//! Apply and read rules of the protocol sheet, one test per rule.

mod common;

use bytes::Bytes;
use common::*;
use std::sync::Arc;
use zoolog_proto::*;
use zoolog_tree::*;

fn delete(path: &str, version: i32) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version,
    })
}

fn set_data(path: &str, data: &[u8], version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        version,
    })
}

fn set_acl(path: &str, acl: Vec<Acl>, version: i32) -> Request {
    Request::SetAcl(SetAclRequest {
        path: path.into(),
        acl: Some(acl),
        version,
    })
}

fn create_ttl(path: &str, flags: i32, ttl: i64) -> Request {
    Request::CreateTtl(CreateTtlRequest {
        path: path.into(),
        data: Some(vec![]),
        acl: Some(open()),
        flags,
        ttl,
    })
}

fn check(path: &str, version: i32) -> Request {
    Request::Check(CheckVersionRequest {
        path: path.into(),
        version,
    })
}

fn extended() -> TreeConfig {
    TreeConfig {
        extended_types_enabled: true,
        ..TreeConfig::default()
    }
}

#[test]
fn fresh_tree_has_the_built_in_nodes_with_their_quirks() {
    let h = Harness::new();
    let root = h.stat("/");
    assert_eq!(
        (
            root.cversion,
            root.num_children,
            root.czxid,
            root.version,
            root.aversion
        ),
        (-1, 1, 0, 0, 0)
    );
    assert_eq!(h.stat("/zookeeper").cversion, -2);
    assert_eq!(h.stat("/zookeeper/quota"), Stat::default());
    assert_eq!(
        h.stat("/zookeeper/config"),
        Stat {
            aversion: -1,
            ..Stat::default()
        }
    );
    let config_acl = h
        .read(Request::GetAcl(PathRequest {
            path: "/zookeeper/config".into(),
        }))
        .result;
    assert_eq!(
        config_acl,
        Ok(Response::GetAcl(GetAclResponse {
            acl: acl::read_acl_unsafe(),
            stat: h.stat("/zookeeper/config")
        }))
    );
    let data = h
        .read(Request::GetData(PathWatchRequest {
            path: "/zookeeper".into(),
            watch: false,
        }))
        .result;
    assert_eq!(
        data,
        Ok(Response::GetData(GetDataResponse {
            data: Some(Bytes::new()),
            stat: Stat {
                cversion: -2,
                num_children: 2,
                ..Stat::default()
            }
        }))
    );
    assert_eq!(h.tree.node_count(), 4);
}

#[test]
fn cversion_and_sequence_quirk_table() {
    let mut h = Harness::new();
    assert_eq!(h.create("/s", 2), Ok("/s0000000000".into()));
    assert_eq!(h.stat("/").cversion, 0);
    h.must_create("/n");
    h.must_create("/n/a");
    h.write(delete("/n/a", -1)).unwrap();
    assert_eq!(h.create("/n/s", 2), Ok("/n/s0000000001".into()));
    assert_eq!(h.stat("/n").cversion, 3);
    assert_eq!(h.create("/n/", 2), Ok("/n/0000000002".into()));
    assert_eq!(h.stat("/n").num_children, 2);
}

#[test]
fn stat_follows_each_operation() {
    let mut h = Harness::new();
    h.must_create("/a");
    let created = h.zxid;
    let t0 = h.time_ms;
    let stat = h.stat("/a");
    assert_eq!(
        stat,
        Stat {
            czxid: created,
            mzxid: created,
            pzxid: created,
            ctime: t0,
            mtime: t0,
            ..Stat::default()
        }
    );
    h.write(set_data("/a", b"hello", 0)).unwrap();
    let stat = h.stat("/a");
    assert_eq!(
        (
            stat.version,
            stat.mzxid,
            stat.mtime,
            stat.ctime,
            stat.data_length,
            stat.pzxid
        ),
        (1, h.zxid, h.time_ms, t0, 5, created)
    );
    let set_zxid = h.zxid;
    h.write(set_acl("/a", open(), 0)).unwrap();
    let stat = h.stat("/a");
    assert_eq!((stat.aversion, stat.version, stat.mzxid), (1, 1, set_zxid));
    h.must_create("/a/b");
    let stat = h.stat("/a");
    assert_eq!(
        (stat.cversion, stat.num_children, stat.pzxid, stat.mzxid),
        (1, 1, h.zxid, set_zxid)
    );
    h.write(set_data("/a/b", b"x", -1)).unwrap();
    assert_eq!(h.stat("/a").pzxid, h.zxid - 1, "child setData leaves pzxid");
    h.write(delete("/a/b", 1)).unwrap();
    let stat = h.stat("/a");
    assert_eq!(
        (stat.cversion, stat.num_children, stat.pzxid),
        (2, 0, h.zxid)
    );
}

#[test]
fn null_and_empty_data_are_kept_apart() {
    let mut h = Harness::new();
    h.write(Request::Create(CreateRequest {
        path: "/null".into(),
        data: None,
        acl: Some(open()),
        flags: 0,
    }))
    .unwrap();
    h.must_create("/empty");
    let get = |h: &Harness, path: &str| match h
        .read(Request::GetData(PathWatchRequest {
            path: path.into(),
            watch: false,
        }))
        .result
    {
        Ok(Response::GetData(response)) => (response.data, response.stat.data_length),
        other => panic!("{other:?}"),
    };
    assert_eq!(get(&h, "/null"), (None, 0));
    assert_eq!(get(&h, "/empty"), (Some(Bytes::new()), 0));
    h.write(Request::SetData(SetDataRequest {
        path: "/empty".into(),
        data: None,
        version: -1,
    }))
    .unwrap();
    assert_eq!(get(&h, "/empty"), (None, 0));
}

#[test]
fn create_checks_run_in_zookeeper_order() {
    let mut h = Harness::with(TreeConfig {
        enforce_quota: true,
        ..extended()
    });
    let bob = vec![Id::new("digest", "bob:h")];
    h.must_create("/p");
    h.write(set_acl("/p", vec![acl_of(ALL & !4, "world", "anyone")], -1))
        .unwrap();
    h.must_create("/e");
    // 0: bad flags beat everything, even a TTL problem and a missing parent.
    assert_eq!(
        h.write(create_ttl("nope", 9, -5)),
        Err(ErrorCode::BadArguments)
    );
    // 1/2 with extended types off: UNIMPLEMENTED, even via opcode 1.
    let mut off = Harness::new();
    assert_eq!(
        off.write(create_request("nope", b"", 5)),
        Err(ErrorCode::Unimplemented)
    );
    assert_eq!(
        off.write(create_ttl("/t", 6, 1000)),
        Err(ErrorCode::Unimplemented)
    );
    // 2: TTL validation before the session check.
    let dead = 12345;
    for (flags, ttl) in [(5, 0), (5, 1 << 40), (0, 100), (5, -1)] {
        let result = h
            .write_as(dead, vec![], create_ttl("/t", flags, ttl))
            .outcome;
        assert_eq!(
            result,
            Outcome::Reply(Err(ErrorCode::BadArguments)),
            "{flags} {ttl}"
        );
    }
    assert_eq!(
        h.write(create_request("/t", b"", 5)),
        Err(ErrorCode::BadArguments),
        "TTL mode via opcode 1 has ttl −1"
    );
    // 3: session before path syntax.
    let result = h
        .write_as(dead, vec![], create_request("nope", b"", 1))
        .outcome;
    assert_eq!(result, Outcome::Reply(Err(ErrorCode::SessionExpired)));
    // 4: no slash / NUL before ACL validity.
    let bad_acl = Request::Create(CreateRequest {
        path: "nope".into(),
        data: None,
        acl: Some(vec![]),
        flags: 0,
    });
    assert_eq!(h.write(bad_acl), Err(ErrorCode::BadArguments));
    assert_eq!(
        h.write(create_request("/a\0b", b"", 0)),
        Err(ErrorCode::BadArguments)
    );
    // 5: invalid ACL before the parent's existence.
    let no_parent = Request::Create(CreateRequest {
        path: "/x/y".into(),
        data: None,
        acl: None,
        flags: 0,
    });
    assert_eq!(h.write(no_parent), Err(ErrorCode::InvalidAcl));
    let auth_without_ids = Request::Create(CreateRequest {
        path: "/x".into(),
        data: None,
        acl: Some(vec![acl_of(ALL, "auth", "")]),
        flags: 0,
    });
    assert_eq!(h.write(auth_without_ids), Err(ErrorCode::InvalidAcl));
    // 6: parent missing before the ACL check.
    assert_eq!(
        h.write(create_request("/x/y", b"", 0)),
        Err(ErrorCode::NoNode)
    );
    // 7: CREATE on the parent before path syntax of the final name.
    assert_eq!(
        h.write(create_request("/p/", b"", 0)),
        Err(ErrorCode::NoAuth)
    );
    assert_eq!(
        h.write_as(h.session, bob.clone(), create_request("/p/c", b"", 0))
            .outcome,
        Outcome::Reply(Err(ErrorCode::NoAuth))
    );
    let superuser = vec![Id::new("super", "")];
    assert!(matches!(
        h.write_as(h.session, superuser, create_request("/p/c", b"", 0))
            .outcome,
        Outcome::Reply(Ok(_))
    ));
    // 9: syntax of the final name; a sequential suffix can make a trailing '/' valid.
    assert_eq!(
        h.write(create_request("/e/", b"", 0)),
        Err(ErrorCode::BadArguments)
    );
    assert_eq!(
        h.write(create_request("/e/😀", b"", 0)),
        Err(ErrorCode::BadArguments)
    );
    assert_eq!(h.create("/e/", 2), Ok("/e/0000000000".into()));
    // 10: exists before the ephemeral-parent check.
    assert_eq!(h.create("/e", 1), Err(ErrorCode::NodeExists));
    assert_eq!(h.create("/eph", 1), Ok("/eph".into()));
    assert_eq!(h.create("/eph", 0), Err(ErrorCode::NodeExists));
    // 11: no children under session ephemerals; containers and TTL parents are fine.
    assert_eq!(
        h.create("/eph/c", 0),
        Err(ErrorCode::NoChildrenForEphemerals)
    );
    assert!(matches!(
        h.write(Request::CreateContainer(CreateRequest {
            path: "/box".into(),
            data: None,
            acl: Some(open()),
            flags: 4
        })),
        Ok(Response::Create2(_))
    ));
    h.must_create("/box/c");
    assert!(h.write(create_ttl("/ttl", 5, 1000)).is_ok());
    h.must_create("/ttl/c");
    assert_eq!(h.stat("/box").ephemeral_owner, 0);
    assert_eq!(h.stat("/ttl").ephemeral_owner, 0);
    assert_eq!(h.stat("/eph").ephemeral_owner, h.session);
    // 12: hard quota.
    h.must_create("/q");
    h.write(create_request("/zookeeper/quota/q", b"", 0))
        .unwrap();
    h.write(create_request(
        "/zookeeper/quota/q/zookeeper_limits",
        b"count=-1,bytes=-1=;countHardLimit=2",
        0,
    ))
    .unwrap();
    h.write(create_request("/zookeeper/quota/q/zookeeper_stats", b"", 0))
        .unwrap();
    h.must_create("/q/one");
    assert_eq!(h.create("/q/two", 0), Err(ErrorCode::QuotaExceeded));
}

#[test]
fn delete_checks_run_in_order() {
    let mut h = Harness::new();
    for protected in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
        assert_eq!(
            h.write(delete(protected, -1)),
            Err(ErrorCode::BadArguments),
            "{protected}"
        );
    }
    assert_eq!(h.write(delete("nope", -1)), Err(ErrorCode::BadArguments));
    assert_eq!(h.write(delete("/x/y", 5)), Err(ErrorCode::NoNode));
    h.must_create("/p");
    h.must_create("/p/c");
    h.must_create("/p/c/d");
    h.write(set_acl("/p", vec![acl_of(ALL & !8, "world", "anyone")], -1))
        .unwrap();
    assert_eq!(
        h.write(delete("/p/missing", 5)),
        Err(ErrorCode::NoAuth),
        "ACL on parent before existence"
    );
    h.write(set_acl("/p", open(), -1)).unwrap();
    assert_eq!(h.write(delete("/p/missing", 5)), Err(ErrorCode::NoNode));
    assert_eq!(
        h.write(delete("/p/c", 5)),
        Err(ErrorCode::BadVersion),
        "version before emptiness"
    );
    assert_eq!(h.write(delete("/p/c", 0)), Err(ErrorCode::NotEmpty));
    assert_eq!(
        h.write_as(777, vec![], delete("/p/c/d", 0)).outcome,
        Outcome::Reply(Err(ErrorCode::SessionExpired))
    );
    assert_eq!(h.write(delete("/p/c/d", 0)), Ok(Response::Empty));
}

#[test]
fn set_data_set_acl_and_check_errors() {
    let mut h = Harness::new();
    h.must_create("/a");
    assert_eq!(
        h.write(set_data("a", b"", -1)),
        Err(ErrorCode::BadArguments)
    );
    assert_eq!(h.write(set_data("/b", b"", -1)), Err(ErrorCode::NoNode));
    assert_eq!(h.write(set_data("/a", b"", 3)), Err(ErrorCode::BadVersion));
    h.write(set_acl("/a", vec![acl_of(1, "world", "anyone")], 0))
        .unwrap();
    assert_eq!(
        h.write(set_data("/a", b"", 3)),
        Err(ErrorCode::NoAuth),
        "WRITE before version"
    );
    assert_eq!(
        h.write(set_acl("/a", vec![], 9)),
        Err(ErrorCode::InvalidAcl),
        "ACL validity before existence"
    );
    assert_eq!(h.write(set_acl("/nope", open(), 9)), Err(ErrorCode::NoNode));
    assert_eq!(
        h.write(set_acl("/a", open(), 9)),
        Err(ErrorCode::NoAuth),
        "ADMIN before aversion"
    );
    assert_eq!(
        h.write(check("/a", 0)),
        Err(ErrorCode::Unimplemented),
        "check only inside multi"
    );
    let applied = h.write_full(set_acl("/zookeeper", open(), 0));
    assert!(applied.triggers.is_empty(), "setACL fires nothing");
    assert_eq!(h.stat("/zookeeper").aversion, 1);
    assert_eq!(
        h.write(set_acl("/zookeeper", open(), 0)),
        Err(ErrorCode::BadVersion)
    );
}

#[test]
fn multi_is_all_or_nothing() {
    let mut h = Harness::with(extended());
    h.must_create("/m");
    let before = h.tree.clone();
    let ops = vec![
        create_request("/m/a", b"1", 0),
        delete("/m/missing", -1),
        set_data("/m", b"x", -1),
    ];
    let applied = h.write_full(Request::Multi(ops));
    let expected = vec![
        MultiResult::Error(ErrorCode::Ok),
        MultiResult::Error(ErrorCode::NoNode),
        MultiResult::Error(ErrorCode::RuntimeInconsistency),
    ];
    assert_eq!(
        applied.outcome,
        Outcome::Reply(Ok(Response::Multi(expected)))
    );
    assert!(applied.triggers.is_empty());
    assert_eq!(h.tree.node("/m"), before.node("/m"));
    assert_eq!(h.tree.node("/m/a"), None);
    assert_eq!(
        h.tree.last_applied_zxid(),
        h.zxid,
        "a failed multi still consumes its zxid"
    );

    let ops = vec![
        create_request("/m/a", b"1", 2),
        Request::Create2(CreateRequest {
            path: "/m/b".into(),
            data: None,
            acl: Some(open()),
            flags: 0,
        }),
        set_data("/m/b", b"new", 0),
        check("/m/b", 1),
        create_ttl("/m/t", 5, 100),
        delete("/m/b", 1),
    ];
    let applied = h.write_full(Request::Multi(ops));
    let zxid = h.zxid;
    let Outcome::Reply(Ok(Response::Multi(results))) = applied.outcome else {
        panic!()
    };
    assert_eq!(
        results[0],
        MultiResult::Create(CreateResponse {
            path: "/m/a0000000000".into()
        })
    );
    // Apache ZooKeeper rebuilds multi creates from their flags: create2 answers as a plain create.
    assert_eq!(
        results[1],
        MultiResult::Create(CreateResponse {
            path: "/m/b".into()
        })
    );
    assert_eq!(h.stat("/m/t").czxid, zxid);
    assert!(
        matches!(&results[2], MultiResult::SetData(StatResponse { stat }) if stat.version == 1)
    );
    assert_eq!(results[3], MultiResult::Check);
    assert!(matches!(&results[4], MultiResult::Create2(_)));
    assert_eq!(results[5], MultiResult::Delete);
    let parent = h.stat("/m");
    assert_eq!(
        (parent.cversion, parent.num_children, parent.pzxid),
        (4, 2, zxid)
    );
    assert_eq!(h.stat("/m/t").ctime, h.stat("/m/a0000000000").ctime);
    assert_eq!(h.write(Request::Multi(vec![])), Ok(Response::Multi(vec![])));
    let ttl_dropped = CreateTtlRequest {
        path: "/m/plain".into(),
        data: None,
        acl: Some(open()),
        flags: 0,
        ttl: 100,
    };
    let applied = h.write(Request::Multi(vec![Request::CreateTtl(ttl_dropped)]));
    assert_eq!(
        applied,
        Ok(Response::Multi(vec![MultiResult::Create(CreateResponse {
            path: "/m/plain".into()
        })])),
        "a createTTL op with non-TTL flags runs as a plain create"
    );
    assert_eq!(
        h.write(Request::Multi(vec![set_acl("/m", open(), -1)])),
        Err(ErrorCode::MarshallingError)
    );
}

fn trigger_list(applied: &Applied) -> Vec<(Table, &str, EventType)> {
    applied
        .triggers
        .iter()
        .map(|t| (t.table, t.path.as_str(), t.event))
        .collect()
}

#[test]
fn triggers_come_in_the_documented_order() {
    let mut h = Harness::new();
    let applied = h.write_full(create_request("/a", b"", 0));
    assert_eq!(
        trigger_list(&applied),
        [
            (Table::Data, "/a", EventType::NodeCreated),
            (Table::Child, "/", EventType::NodeChildrenChanged)
        ]
    );
    let applied = h.write_full(set_data("/a", b"x", -1));
    assert_eq!(
        trigger_list(&applied),
        [(Table::Data, "/a", EventType::NodeDataChanged)]
    );
    let applied = h.write_full(delete("/a", -1));
    assert_eq!(
        trigger_list(&applied),
        [
            (Table::Data, "/a", EventType::NodeDeleted),
            (Table::Child, "/a", EventType::NodeDeleted),
            (Table::Child, "/", EventType::NodeChildrenChanged)
        ]
    );
    h.create("/e1", 1).unwrap();
    h.create("/e2", 1).unwrap();
    let session = h.session;
    let applied = h.apply_op(session, CommandOp::CloseSession);
    assert_eq!(applied.outcome, Outcome::SessionClosed);
    assert_eq!(applied.triggers.len(), 6);
    assert_eq!(
        trigger_list(&applied)[3],
        (Table::Data, "/e2", EventType::NodeDeleted)
    );
    assert_eq!(h.stat("/").pzxid, h.zxid);
    assert!(h.tree.session(session).is_none());
    assert_eq!(h.tree.ephemeral_count(), 0);
    assert_eq!(
        h.apply_op(session, CommandOp::CloseSession).triggers,
        vec![],
        "closing an unknown session is a no-op"
    );
}

#[test]
fn sessions_and_ephemerals() {
    let mut h = Harness::with(TreeConfig {
        server_id: 3,
        ..TreeConfig::default()
    });
    assert_eq!(h.session, (3 << 56) | 1);
    let other = h.new_session();
    assert_eq!(other, (3 << 56) | h.zxid);
    let info = h.tree.session(other).unwrap();
    assert_eq!(
        (info.timeout_ms, info.password.clone()),
        (10_000, vec![7; 16])
    );
    h.create("/ab", 1).unwrap();
    h.create("/a", 3).unwrap();
    h.must_create("/p");
    let get = |h: &Harness, prefix: Option<&str>| match h
        .read(Request::GetEphemerals(GetEphemeralsRequest {
            prefix_path: prefix.map(str::to_owned),
        }))
        .result
    {
        Ok(Response::GetEphemerals(r)) => r.ephemerals,
        other => panic!("{other:?}"),
    };
    assert_eq!(get(&h, None), ["/a0000000001", "/ab"]);
    assert_eq!(get(&h, Some(" / ")), ["/a0000000001", "/ab"]);
    assert_eq!(get(&h, Some("/ab")), ["/ab"]);
    assert_eq!(get(&h, Some("/p")), Vec::<String>::new());
    assert_eq!(h.tree.sessions().count(), 2);
    assert_eq!(h.tree.ephemeral_count(), 2);
}

/// The reaper's harness: a used and a never-used container and a TTL node.
fn reaper_harness() -> Harness {
    let mut h = Harness::with(TreeConfig {
        container_never_used_ms: 1_000,
        ..extended()
    });
    let container = |path: &str| {
        Request::CreateContainer(CreateRequest {
            path: path.into(),
            data: None,
            acl: Some(open()),
            flags: 4,
        })
    };
    h.write(container("/used")).unwrap();
    h.write(container("/never")).unwrap();
    h.write(create_ttl("/ttl", 5, 500)).unwrap();
    h.must_create("/used/c");
    h
}

fn reap(h: &mut Harness, path: &str, unchanged_since: Option<i64>) -> bool {
    let applied = h.apply_op(
        0,
        CommandOp::Reap {
            path: path.into(),
            unchanged_since,
        },
    );
    assert_eq!(applied.outcome, Outcome::Reaped);
    !applied.triggers.is_empty()
}

#[test]
fn reap_candidates_say_what_each_node_waits_for() {
    let mut h = reaper_harness();
    let candidates = |h: &Harness| -> Vec<(String, i64, ReapAfter, bool)> {
        h.tree
            .reap_candidates()
            .map(|c| (c.path.to_owned(), c.last_change, c.after, c.childless))
            .collect()
    };
    // The used container is left out while it has a child: it is due the moment it empties.
    assert_eq!(
        candidates(&h),
        [
            ("/never".into(), 3, ReapAfter::IdleMs(1_000), true),
            ("/ttl".into(), 4, ReapAfter::IdleMs(500), true),
        ]
    );
    h.must_create("/ttl/child");
    h.write(delete("/used/c", -1)).unwrap();
    assert_eq!(
        candidates(&h),
        [
            ("/never".into(), 3, ReapAfter::IdleMs(1_000), true),
            ("/ttl".into(), 4, ReapAfter::IdleMs(500), false),
            ("/used".into(), 2, ReapAfter::Emptied, true),
        ]
    );
    assert!(ReapAfter::Emptied.is_due(0));
    assert!(!ReapAfter::IdleMs(500).is_due(500));
    assert!(ReapAfter::IdleMs(500).is_due(501));
}

#[test]
fn a_reap_deletes_only_an_unchanged_childless_container_or_ttl_node() {
    let mut h = reaper_harness();
    assert!(!reap(&mut h, "/used", Some(2)), "it has a child");
    h.write(delete("/used/c", -1)).unwrap();
    assert!(!reap(&mut h, "/ttl", Some(3)), "not its last change");
    h.write(set_data("/ttl", b"new", -1)).unwrap();
    let ttl_changed = h.zxid;
    assert!(!reap(&mut h, "/ttl", Some(4)), "changed after the judgment");
    assert!(reap(&mut h, "/ttl", Some(ttl_changed)));
    assert!(h.tree.stat("/ttl").is_none());
    // The judge's clock decided it was due; this replica's time and settings play no part.
    assert!(reap(&mut h, "/never", Some(3)));
    assert!(reap(&mut h, "/used", Some(2)));
    assert!(!reap(&mut h, "/missing", Some(1)));
    h.must_create("/plain");
    let created = h.zxid;
    assert!(
        !reap(&mut h, "/plain", Some(created)),
        "neither a container nor TTL"
    );
}

#[test]
fn a_legacy_reap_is_judged_by_its_own_time() {
    let mut h = reaper_harness();
    h.write(delete("/used/c", -1)).unwrap();
    assert!(
        !reap(&mut h, "/ttl", None),
        "TTL not yet expired at command time"
    );
    h.time_ms += 600;
    assert!(!reap(&mut h, "/never", None), "not unused for long enough");
    assert!(reap(&mut h, "/ttl", None));
    h.must_create("/used/again");
    assert!(!reap(&mut h, "/used", None), "no longer empty");
    h.time_ms += 1_000;
    assert!(reap(&mut h, "/never", None));
    assert!(!reap(&mut h, "/missing", None));
}

#[test]
fn quota_stats_are_rewritten_in_place() {
    let mut h = Harness::new();
    h.must_create("/q");
    h.write(create_request("/q/a", b"abc", 0)).unwrap();
    h.write(create_request("/zookeeper/quota/q", b"", 0))
        .unwrap();
    h.write(create_request(
        "/zookeeper/quota/q/zookeeper_limits",
        b"count=1,bytes=-1",
        0,
    ))
    .unwrap();
    h.write(create_request(
        "/zookeeper/quota/q/zookeeper_stats",
        b"junk",
        0,
    ))
    .unwrap();
    let stats = |h: &Harness| h.tree.node("/zookeeper/quota/q/zookeeper_stats").unwrap();
    assert_eq!(stats(&h).0, Some(b"count=2,bytes=3".to_vec()));
    h.write(create_request("/q/a/b", b"12345", 0)).unwrap();
    assert_eq!(
        h.create("/q/c", 0),
        Ok("/q/c".into()),
        "soft limits never fail"
    );
    h.write(set_data("/q/a", b"", -1)).unwrap();
    h.write(delete("/q/a/b", -1)).unwrap();
    let (data, stat, _) = stats(&h);
    assert_eq!(data, Some(b"count=3,bytes=0".to_vec()));
    assert_eq!((stat.version, stat.data_length), (0, 15));
    h.write(delete("/zookeeper/quota/q/zookeeper_limits", -1))
        .unwrap();
    h.must_create("/q/d");
    assert_eq!(
        stats(&h).0,
        Some(b"count=3,bytes=0".to_vec()),
        "untracked after the limits node goes"
    );
}

#[test]
fn reads_follow_their_rules() {
    let mut h = Harness::new();
    let exists = |h: &Harness, path: &str| {
        h.read(Request::Exists(PathWatchRequest {
            path: path.into(),
            watch: true,
        }))
    };
    assert_eq!(
        exists(&h, "/x"),
        Read {
            result: Err(ErrorCode::NoNode),
            watch: Some(("/x".into(), WatchKind::Data))
        }
    );
    assert_eq!(exists(&h, "/x\0").watch, None);
    let get_data = |h: &Harness, path: &str| {
        h.read(Request::GetData(PathWatchRequest {
            path: path.into(),
            watch: true,
        }))
    };
    assert_eq!(
        get_data(&h, "/x"),
        Read {
            result: Err(ErrorCode::NoNode),
            watch: None
        }
    );
    let digest = acl::digest_id("bob:pw");
    h.write(Request::Create(CreateRequest {
        path: "/secret".into(),
        data: Some(b"s".to_vec()),
        acl: Some(vec![
            acl_of(ALL, "digest", &digest),
            acl_of(1, "ip", "127.0.0.0/8"),
        ]),
        flags: 0,
    }))
    .unwrap();
    h.write_as(
        h.session,
        vec![Id::new("super", "")],
        create_request("/secret/c", b"", 0),
    );
    assert!(h.tree.stat("/secret/c").is_some());
    let stranger = vec![Id::new("ip", "10.0.0.1")];
    let as_stranger = h.tree.read(
        1,
        &stranger,
        &Request::Exists(PathWatchRequest {
            path: "/secret".into(),
            watch: true,
        }),
    );
    assert_eq!(
        as_stranger,
        Read {
            result: Err(ErrorCode::NoAuth),
            watch: None
        }
    );
    let children = h.read(Request::GetChildren2(PathWatchRequest {
        path: "/secret".into(),
        watch: true,
    }));
    assert!(matches!(children.result, Ok(Response::GetChildren2(ref r)) if r.children == ["c"]));
    assert_eq!(children.watch, Some(("/secret".into(), WatchKind::Child)));
    let get_acl = h.read(Request::GetAcl(PathRequest {
        path: "/secret".into(),
    }));
    let Ok(Response::GetAcl(response)) = get_acl.result else {
        panic!()
    };
    assert_eq!(response.acl[0].id.id, "bob:x", "redacted without ADMIN");
    let bob = vec![Id::new("digest", &digest)];
    let Ok(Response::GetAcl(response)) = h
        .tree
        .read(
            1,
            &bob,
            &Request::GetAcl(PathRequest {
                path: "/secret".into(),
            }),
        )
        .result
    else {
        panic!()
    };
    assert_eq!(response.acl[0].id.id, digest);
    let count = |path: &str| {
        h.read(Request::GetAllChildrenNumber(PathRequest {
            path: path.into(),
        }))
        .result
    };
    assert_eq!(
        count("/"),
        Ok(Response::GetAllChildrenNumber(
            GetAllChildrenNumberResponse { total_number: 5 }
        ))
    );
    assert_eq!(
        count("/secret"),
        Ok(Response::GetAllChildrenNumber(
            GetAllChildrenNumberResponse { total_number: 1 }
        ))
    );
    let multi = h.read(Request::MultiRead(vec![
        Request::GetData(PathWatchRequest {
            path: "/secret".into(),
            watch: false,
        }),
        Request::GetChildren(PathWatchRequest {
            path: "/nope".into(),
            watch: false,
        }),
    ]));
    let Ok(Response::Multi(results)) = multi.result else {
        panic!()
    };
    assert!(
        matches!(&results[0], MultiResult::GetData(r) if r.data.as_deref() == Some(b"s".as_slice()))
    );
    assert_eq!(results[1], MultiResult::Error(ErrorCode::NoNode));
}

#[test]
fn skip_acl_admits_everyone_and_triggers_carry_no_acl() {
    let mut h = Harness::with(TreeConfig {
        skip_acl: true,
        ..TreeConfig::default()
    });
    h.write(Request::Create(CreateRequest {
        path: "/a".into(),
        data: None,
        acl: Some(vec![acl_of(0, "digest", "x:y")]),
        flags: 0,
    }))
    .unwrap();
    let applied = h.write_full(set_data("/a", b"", -1));
    assert_eq!(applied.triggers[0].acl, Arc::new(vec![]));
}

#[test]
fn a_snapshot_in_pieces_is_the_snapshot_whole_and_each_piece_stays_near_its_size() {
    let mut h = Harness::with(extended());
    h.create("/eph", 1).unwrap();
    for i in 0..200 {
        h.write(create_request(&format!("/n{i:03}"), &[i as u8; 1000], 0))
            .unwrap();
    }
    h.write(create_request("/big", &[7; 50_000], 0)).unwrap();
    let mut whole = Vec::new();
    h.tree.encode_snapshot(&mut whole);
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    h.tree
        .encode_snapshot_in_pieces(4096, |piece| {
            pieces.push(piece.to_vec());
            Ok::<(), ()>(())
        })
        .unwrap();
    assert!(pieces.len() > 40, "{} pieces", pieces.len());
    assert_eq!(pieces.concat(), whole);
    let largest_node_bytes = 50_000 + 200;
    assert!(
        pieces
            .iter()
            .all(|piece| piece.len() < 4096 + largest_node_bytes),
        "a piece overshoots its size by at most one node"
    );
    let mut calls = 0;
    let refused = h.tree.encode_snapshot_in_pieces(4096, |_| {
        calls += 1;
        Err("disk full")
    });
    assert_eq!(
        (refused, calls),
        (Err("disk full"), 1),
        "the first error stops encoding"
    );
}

#[test]
fn snapshots_round_trip_and_reject_garbage() {
    let mut h = Harness::with(extended());
    h.must_create("/a");
    h.write(Request::Create(CreateRequest {
        path: "/a/null".into(),
        data: None,
        acl: Some(vec![acl_of(31, "ip", "1.2.3.4")]),
        flags: 2,
    }))
    .unwrap();
    h.create("/eph", 1).unwrap();
    h.write(create_ttl("/ttl", 5, 99)).unwrap();
    let mut bytes = Vec::new();
    h.tree.encode_snapshot(&mut bytes);
    let decoded = DataTree::decode_snapshot(&bytes, extended()).unwrap();
    let mut again = Vec::new();
    decoded.encode_snapshot(&mut again);
    assert_eq!(bytes, again);
    assert_eq!(decoded.last_applied_zxid(), h.zxid);
    assert_eq!(
        (
            decoded.node_count(),
            decoded.ephemeral_count(),
            decoded.approximate_data_bytes()
        ),
        (h.tree.node_count(), 1, h.tree.approximate_data_bytes())
    );
    assert_eq!(decoded.session(h.session), h.tree.session(h.session));
    let candidates: Vec<&str> = decoded.reap_candidates().map(|c| c.path).collect();
    assert_eq!(candidates, ["/ttl"]);
    for cut in 0..bytes.len() {
        assert!(
            DataTree::decode_snapshot(&bytes[..cut], extended()).is_err(),
            "truncated at {cut}"
        );
    }
    for index in 0..bytes.len() {
        let mut corrupt = bytes.clone();
        corrupt[index] ^= 0x5a;
        let _ = DataTree::decode_snapshot(&corrupt, extended());
    }
    let mut extra = bytes.clone();
    extra.push(0);
    assert!(DataTree::decode_snapshot(&extra, extended()).is_err());
}

/// Gives at most `piece_bytes` per read, as a file or socket may.
struct Trickle<'a> {
    bytes: &'a [u8],
    piece_bytes: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let count = buffer.len().min(self.piece_bytes).min(self.bytes.len());
        buffer[..count].copy_from_slice(&self.bytes[..count]);
        self.bytes = &self.bytes[count..];
        Ok(count)
    }
}

#[test]
fn a_snapshot_streamed_in_small_reads_decodes_as_it_does_whole() {
    let mut h = Harness::with(extended());
    // Several decode windows of small nodes, and a node larger than a window.
    for index in 0..3000 {
        h.write(create_request(&format!("/n{index:04}"), &[b'v'; 1000], 0))
            .unwrap();
    }
    h.write(create_request("/large", &vec![b'L'; 2_500_000], 0))
        .unwrap();
    let mut bytes = Vec::new();
    h.tree.encode_snapshot(&mut bytes);
    let stream = |bytes: &[u8], snapshot_bytes: u64| {
        let source = Trickle {
            bytes,
            piece_bytes: 4093,
        };
        DataTree::decode_snapshot_from(source, snapshot_bytes, extended())
    };
    let decoded = stream(&bytes, bytes.len() as u64).unwrap();
    let mut again = Vec::new();
    decoded.encode_snapshot(&mut again);
    assert!(again == bytes, "the streamed tree encodes as the original");
    let cut = bytes.len() - 1;
    assert!(matches!(
        stream(&bytes[..cut], bytes.len() as u64),
        Err(SnapshotError::Read(_))
    ));
    assert!(stream(&bytes[..cut], cut as u64).is_err());
}

#[test]
fn commands_round_trip_and_reject_garbage() {
    let commands = [
        CommandOp::CreateSession {
            timeout_ms: 30_000,
            password: vec![1; 16],
        },
        CommandOp::CloseSession,
        CommandOp::Reap {
            path: "/c".into(),
            unchanged_since: None,
        },
        CommandOp::Reap {
            path: "/c".into(),
            unchanged_since: Some(-3),
        },
        CommandOp::Write {
            request: Request::Multi(vec![
                create_request("/a", b"x", 3),
                Request::Delete(DeleteRequest {
                    path: "/b".into(),
                    version: 2,
                }),
            ]),
            identities: vec![Id::new("ip", "::1"), Id::new("super", "")],
        },
        CommandOp::Write {
            request: Request::Sync(PathRequest { path: "/s".into() }),
            identities: vec![],
        },
        CommandOp::Touch {
            sessions: vec![
                SessionSeen::just_now(1),
                SessionSeen {
                    session_id: -2,
                    idle_ms: 7_000,
                },
                SessionSeen {
                    session_id: i64::MAX,
                    idle_ms: i32::MAX as u32,
                },
            ],
        },
        CommandOp::Touch { sessions: vec![] },
        CommandOp::Expire {
            unless_touched_after: 77,
        },
        CommandOp::Attach {
            owner: u64::MAX,
            password: vec![1, 2],
        },
    ];
    for (index, op) in commands.into_iter().enumerate() {
        let command = Command {
            session_id: -5,
            cxid: 9,
            time_ms: 123,
            owner: [0, 1, u64::MAX - 3][index % 3],
            op,
        };
        let bytes = command.encode();
        assert_eq!(Command::decode(&bytes), Ok(command));
        for cut in 0..bytes.len() {
            let _ = Command::decode(&bytes[..cut]);
        }
    }
    assert!(Command::decode(&[9, 9, 9]).is_err());
}

#[test]
fn an_idle_time_beyond_what_jute_holds_is_logged_as_the_longest_it_holds() {
    let command = Command {
        session_id: 0,
        cxid: 0,
        time_ms: 0,
        owner: 0,
        op: CommandOp::Touch {
            sessions: vec![SessionSeen {
                session_id: 3,
                idle_ms: u32::MAX,
            }],
        },
    };
    let decoded = Command::decode(&command.encode()).unwrap();
    let CommandOp::Touch { sessions } = decoded.op else {
        panic!("{decoded:?}");
    };
    assert_eq!(sessions[0].idle_ms, i32::MAX as u32);
}

#[test]
fn a_touch_logged_before_sessions_carried_idle_times_decodes_as_heard_from_when_appended() {
    let mut entry = vec![2u8]; // encoding version 2
    entry.extend_from_slice(&(-5i64).to_be_bytes()); // session
    entry.extend_from_slice(&0i32.to_be_bytes()); // cxid
    entry.extend_from_slice(&123i64.to_be_bytes()); // time
    entry.extend_from_slice(&0i64.to_be_bytes()); // owner
    entry.push(5); // the old Touch tag: ids only
    entry.extend_from_slice(&2i32.to_be_bytes());
    entry.extend_from_slice(&7i64.to_be_bytes());
    entry.extend_from_slice(&(-8i64).to_be_bytes());
    let command = Command::decode(&entry).unwrap();
    assert_eq!(
        command.op,
        CommandOp::Touch {
            sessions: vec![SessionSeen::just_now(7), SessionSeen::just_now(-8)],
        }
    );
}

#[test]
fn a_clone_is_a_frozen_snapshot_that_can_cross_threads() {
    fn send_and_sync<T: Send + Sync>(_: &T) {}
    let mut h = Harness::new();
    for index in 0..2_000 {
        h.must_create(&format!("/n{index}"));
    }
    let frozen = h.tree.clone();
    send_and_sync(&frozen);
    let mut expected = Vec::new();
    frozen.encode_snapshot(&mut expected);
    let writer = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        frozen.encode_snapshot(&mut bytes);
        bytes
    });
    h.write(set_data("/n1", b"changed", -1)).unwrap();
    h.write(delete("/n2", -1)).unwrap();
    h.must_create("/later");
    assert_eq!(
        writer.join().unwrap(),
        expected,
        "later applies do not leak into the frozen clone"
    );
    assert_eq!(h.tree.node_count(), 4 + 2_000);
}

#[test]
fn reads_of_the_empty_path_find_the_root_as_in_java() {
    let h = Harness::new();
    let read = |request| h.read(request).result;
    let root_stat = h.stat("/");
    let exists = read(Request::Exists(PathWatchRequest {
        path: String::new(),
        watch: false,
    }));
    assert_eq!(
        exists,
        Ok(Response::Stat(StatResponse {
            stat: root_stat.clone()
        }))
    );
    let children = read(Request::GetChildren(PathWatchRequest {
        path: String::new(),
        watch: false,
    }));
    assert_eq!(
        children,
        Ok(Response::GetChildren(GetChildrenResponse {
            children: vec!["zookeeper".into()]
        }))
    );
    let watched = h.read(Request::GetData(PathWatchRequest {
        path: String::new(),
        watch: true,
    }));
    assert_eq!(
        watched.watch,
        Some((String::new(), WatchKind::Data)),
        "the watch stays on \"\" as Java keeps it"
    );
}

//! Every request and reply survives encode → decode unchanged, for arbitrary field values.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use zoolog_proto::*;

fn text() -> impl Strategy<Value = String> {
    "[a-z/0-9é_.-]{0,12}"
}

fn data() -> impl Strategy<Value = Data> {
    option::of(vec(any::<u8>(), 0..40))
}

fn acl() -> impl Strategy<Value = Acl> {
    (any::<i32>(), text(), text()).prop_map(|(perms, scheme, id)| Acl {
        perms,
        id: Id { scheme, id },
    })
}

fn acls() -> impl Strategy<Value = Option<Vec<Acl>>> {
    option::of(vec(acl(), 0..4))
}

fn stat() -> impl Strategy<Value = Stat> {
    (
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i32>(), any::<i32>(), any::<i32>(), any::<i64>()),
        (any::<i32>(), any::<i32>(), any::<i64>()),
    )
        .prop_map(
            |(
                (czxid, mzxid, ctime, mtime),
                (version, cversion, aversion, owner),
                (len, children, pzxid),
            )| Stat {
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                ephemeral_owner: owner,
                data_length: len,
                num_children: children,
                pzxid,
            },
        )
}

fn create() -> impl Strategy<Value = CreateRequest> {
    (text(), data(), acls(), any::<i32>()).prop_map(|(path, data, acl, flags)| CreateRequest {
        path,
        data,
        acl,
        flags,
    })
}

fn path_watch() -> impl Strategy<Value = PathWatchRequest> {
    (text(), any::<bool>()).prop_map(|(path, watch)| PathWatchRequest { path, watch })
}

fn path() -> impl Strategy<Value = PathRequest> {
    text().prop_map(|path| PathRequest { path })
}

fn write_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        create().prop_map(Request::Create),
        create().prop_map(Request::Create2),
        create().prop_map(Request::CreateContainer),
        (create(), any::<i64>()).prop_map(|(c, ttl)| Request::CreateTtl(CreateTtlRequest {
            path: c.path,
            data: c.data,
            acl: c.acl,
            flags: c.flags,
            ttl
        })),
        (text(), any::<i32>())
            .prop_map(|(path, version)| Request::Delete(DeleteRequest { path, version })),
        (text(), data(), any::<i32>()).prop_map(|(path, data, version)| Request::SetData(
            SetDataRequest {
                path,
                data,
                version
            }
        )),
        (text(), any::<i32>())
            .prop_map(|(path, version)| Request::Check(CheckVersionRequest { path, version })),
    ]
}

fn read_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        path_watch().prop_map(Request::GetData),
        path_watch().prop_map(Request::GetChildren)
    ]
}

fn strings() -> impl Strategy<Value = Vec<String>> {
    vec(text(), 0..4)
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        write_op(),
        vec(write_op(), 0..5).prop_map(Request::Multi),
        vec(read_op(), 0..5).prop_map(Request::MultiRead),
        path().prop_map(Request::DeleteContainer),
        path_watch().prop_map(Request::Exists),
        path_watch().prop_map(Request::GetData),
        path().prop_map(Request::GetAcl),
        (text(), acls(), any::<i32>())
            .prop_map(|(path, acl, version)| Request::SetAcl(SetAclRequest { path, acl, version })),
        path_watch().prop_map(Request::GetChildren),
        path_watch().prop_map(Request::GetChildren2),
        path().prop_map(Request::Sync),
        Just(Request::Ping),
        (
            option::of(text()),
            option::of(text()),
            option::of(text()),
            any::<i64>()
        )
            .prop_map(|(j, l, n, id)| {
                Request::Reconfig(ReconfigRequest {
                    joining_servers: j,
                    leaving_servers: l,
                    new_members: n,
                    cur_config_id: id,
                })
            }),
        (text(), any::<i32>()).prop_map(|(path, t)| Request::CheckWatches(WatchesRequest {
            path,
            watcher_type: t
        })),
        (text(), any::<i32>()).prop_map(|(path, t)| Request::RemoveWatches(WatchesRequest {
            path,
            watcher_type: t
        })),
        (any::<i32>(), text(), data()).prop_map(|(auth_type, scheme, auth)| Request::Auth(
            AuthPacket {
                auth_type,
                scheme,
                auth
            }
        )),
        (any::<i64>(), strings(), strings(), strings()).prop_map(|(z, d, e, c)| {
            Request::SetWatches(SetWatches {
                relative_zxid: z,
                data_watches: d,
                exist_watches: e,
                child_watches: c,
            })
        }),
        (
            any::<i64>(),
            strings(),
            strings(),
            strings(),
            strings(),
            strings()
        )
            .prop_map(|(z, d, e, c, p, r)| {
                Request::SetWatches2(SetWatches2 {
                    relative_zxid: z,
                    data_watches: d,
                    exist_watches: e,
                    child_watches: c,
                    persistent_watches: p,
                    persistent_recursive_watches: r,
                })
            }),
        data().prop_map(|token| Request::Sasl(SaslToken { token })),
        option::of(text())
            .prop_map(|prefix_path| Request::GetEphemerals(GetEphemeralsRequest { prefix_path })),
        path().prop_map(Request::GetAllChildrenNumber),
        (text(), any::<i32>())
            .prop_map(|(path, mode)| Request::AddWatch(AddWatchRequest { path, mode })),
        Just(Request::WhoAmI),
        Just(Request::CloseSession),
    ]
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    proptest::sample::select(ErrorCode::ALL)
}

fn multi_result() -> impl Strategy<Value = MultiResult> {
    prop_oneof![
        text().prop_map(|path| MultiResult::Create(CreateResponse { path })),
        (text(), stat())
            .prop_map(|(path, stat)| MultiResult::Create2(Create2Response { path, stat })),
        Just(MultiResult::Delete),
        stat().prop_map(|stat| MultiResult::SetData(StatResponse { stat })),
        Just(MultiResult::Check),
        strings().prop_map(|children| MultiResult::GetChildren(GetChildrenResponse { children })),
        (data(), stat()).prop_map(|(data, stat)| MultiResult::GetData(GetDataResponse {
            data: data.map(Into::into),
            stat
        })),
        error_code().prop_map(MultiResult::Error),
    ]
}

/// Each reply paired with the opcode whose reply it is.
fn response() -> impl Strategy<Value = (OpCode, Response)> {
    prop_oneof![
        text().prop_map(|path| (OpCode::Create, Response::Create(CreateResponse { path }))),
        (text(), stat()).prop_map(|(path, stat)| (
            OpCode::Create2,
            Response::Create2(Create2Response { path, stat })
        )),
        stat().prop_map(|stat| (OpCode::Exists, Response::Stat(StatResponse { stat }))),
        (data(), stat()).prop_map(|(data, stat)| (
            OpCode::GetData,
            Response::GetData(GetDataResponse {
                data: data.map(Into::into),
                stat
            })
        )),
        (vec(acl(), 0..4), stat()).prop_map(|(acl, stat)| (
            OpCode::GetAcl,
            Response::GetAcl(GetAclResponse { acl, stat })
        )),
        strings().prop_map(|children| (
            OpCode::GetChildren,
            Response::GetChildren(GetChildrenResponse { children })
        )),
        (strings(), stat()).prop_map(|(children, stat)| {
            (
                OpCode::GetChildren2,
                Response::GetChildren2(GetChildren2Response { children, stat }),
            )
        }),
        text().prop_map(|path| (OpCode::Sync, Response::Sync(PathRequest { path }))),
        vec(multi_result(), 0..5).prop_map(|results| (OpCode::Multi, Response::Multi(results))),
        any::<i32>().prop_map(|total_number| {
            (
                OpCode::GetAllChildrenNumber,
                Response::GetAllChildrenNumber(GetAllChildrenNumberResponse { total_number }),
            )
        }),
        strings().prop_map(|ephemerals| (
            OpCode::GetEphemerals,
            Response::GetEphemerals(GetEphemeralsResponse { ephemerals })
        )),
        vec((text(), text()), 0..3).prop_map(|infos| {
            let client_info = infos
                .into_iter()
                .map(|(auth_scheme, user)| ClientInfo { auth_scheme, user })
                .collect();
            (
                OpCode::WhoAmI,
                Response::WhoAmI(WhoAmIResponse { client_info }),
            )
        }),
        Just((
            OpCode::AddWatch,
            Response::AddWatch(ErrorResponse { err: 0 })
        )),
        Just((OpCode::Delete, Response::Empty)),
    ]
}

proptest! {
    #[test]
    fn requests_round_trip(request in request(), xid in any::<i32>()) {
        let frame = request.encode(xid);
        let header = RequestHeader::read_from(&mut Reader::new(&frame[..8])).unwrap();
        prop_assert_eq!(header.xid, xid);
        let decoded = Request::decode(header.opcode, &frame[8..]).unwrap();
        prop_assert_eq!(decoded, request);
    }

    #[test]
    fn responses_round_trip((opcode, response) in response()) {
        let mut body = Vec::new();
        response.write_to(&mut body);
        prop_assert_eq!(Response::decode(opcode, &body).unwrap(), response);
    }

    #[test]
    fn connect_records_round_trip(
        zxid in any::<i64>(), timeout_ms in any::<i32>(), session_id in any::<i64>(),
        password in vec(any::<u8>(), 0..20), read_only in option::of(any::<bool>()),
    ) {
        let request = ConnectRequest { protocol_version: 0, last_zxid_seen: zxid, timeout_ms, session_id, password: password.clone(), read_only };
        prop_assert_eq!(ConnectRequest::decode(&request.encode()).unwrap(), request);
        let response = ConnectResponse { protocol_version: 0, timeout_ms, session_id, password, read_only };
        prop_assert_eq!(ConnectResponse::decode(&response.encode()).unwrap(), response);
    }
}

#[test]
fn handshake_sizes_match_the_two_wire_forms() {
    let mut request = ConnectRequest {
        password: vec![0; 16],
        read_only: Some(false),
        ..Default::default()
    };
    assert_eq!(request.encode().len(), 45);
    request.read_only = None;
    assert_eq!(request.encode().len(), 44);
    assert_eq!(ConnectResponse::expired(Some(false)).encode().len(), 37);
    assert_eq!(ConnectResponse::expired(None).encode().len(), 36);
}

#[test]
fn stat_is_68_bytes_with_pzxid_last() {
    let stat = Stat {
        pzxid: 0x0102030405060708,
        ..Default::default()
    };
    let bytes = stat.to_bytes();
    assert_eq!(bytes.len(), Stat::BYTES);
    assert_eq!(&bytes[60..], &[1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn null_and_empty_data_stay_distinct() {
    assert_eq!(Some(Vec::<u8>::new()).to_bytes(), vec![0, 0, 0, 0]);
    assert_eq!(
        Option::<Vec<u8>>::None.to_bytes(),
        vec![0xff, 0xff, 0xff, 0xff]
    );
}

#[test]
fn failed_multi_reply_has_the_reference_layout() {
    // [create ok, delete missing, setData] as observed from ZooKeeper 3.9.3.
    let results = vec![
        MultiResult::Error(ErrorCode::Ok),
        MultiResult::Error(ErrorCode::NoNode),
        MultiResult::Error(ErrorCode::RuntimeInconsistency),
    ];
    let mut body = Vec::new();
    Response::Multi(results).write_to(&mut body);
    let expected: Vec<u8> = [
        &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0][..],
        &[0, 0, 0, 0],
        &[0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0x9b],
        &[0xff, 0xff, 0xff, 0x9b],
        &[0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xfe],
        &[0xff, 0xff, 0xff, 0xfe],
        &[0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff],
    ]
    .concat();
    assert_eq!(body, expected);
}

#[test]
fn multi_refuses_read_ops_and_multi_read_refuses_writes() {
    let mut body = Vec::new();
    MultiHeader {
        opcode: OpCode::GetData.code(),
        done: false,
        err: -1,
    }
    .write_to(&mut body);
    PathWatchRequest {
        path: "/a".into(),
        watch: false,
    }
    .write_to(&mut body);
    MultiHeader {
        opcode: -1,
        done: true,
        err: -1,
    }
    .write_to(&mut body);
    assert_eq!(
        Request::decode(OpCode::Multi.code(), &body),
        Err(DecodeError::BadMultiOp { opcode: 4 })
    );
    assert!(matches!(
        Request::decode(OpCode::MultiRead.code(), &body),
        Ok(Request::MultiRead(_))
    ));
}

#[test]
fn frame_lengths_outside_the_limit_are_refused() {
    assert_eq!(frame_length(100i32.to_be_bytes(), 1000), Ok(100));
    assert!(frame_length(1001i32.to_be_bytes(), 1000).is_err());
    assert!(frame_length((-1i32).to_be_bytes(), 1000).is_err());
}

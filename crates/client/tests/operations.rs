//! Every operation against a real server: results, Stats and error codes.

mod common;

use std::time::Duration;

use common::{connect, connect_with, within, ZkServer};
use zoolog_client::{
    creator_all_acl, open_acl_unsafe, read_acl_unsafe, ClientOptions, CreateMode, Error, ErrorCode,
    MultiFailure, Op, OpResult, ReadOp, ReadResult,
};

const TEST_TIMEOUT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn crud_with_stats() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        let acl = open_acl_unsafe();
        assert_eq!(
            client
                .create("/a", Some(b"one"), &acl, CreateMode::Persistent)
                .await
                .unwrap(),
            "/a"
        );
        let (data, stat) = client.get_data("/a").await.unwrap();
        assert_eq!(
            (
                data.as_deref(),
                stat.version,
                stat.data_length,
                stat.num_children
            ),
            (Some(&b"one"[..]), 0, 3, 0)
        );
        assert_eq!(stat.czxid, stat.mzxid);

        let set = client.set_data("/a", Some(b"two!"), Some(0)).await.unwrap();
        assert_eq!(
            (set.version, set.data_length, set.czxid),
            (1, 4, stat.czxid)
        );
        assert!(set.mzxid > stat.mzxid);
        assert_eq!(client.exists("/a").await.unwrap(), Some(set));

        let (path, child_stat) = client
            .create2("/a/b", Some(b""), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        assert_eq!(
            (
                path.as_str(),
                child_stat.version,
                child_stat.ephemeral_owner
            ),
            ("/a/b", 0, 0)
        );
        let (children, parent) = client.get_children2("/a").await.unwrap();
        assert_eq!(
            (children, parent.num_children, parent.cversion),
            (vec!["b".to_owned()], 1, 1)
        );
        assert_eq!(client.get_children("/a").await.unwrap(), ["b"]);
        assert_eq!(client.get_all_children_number("/a").await.unwrap(), 1);

        client.sync("/a").await.unwrap();
        client.delete("/a/b", Some(0)).await.unwrap();
        client.delete("/a", None).await.unwrap();
        assert_eq!(client.exists("/a").await.unwrap(), None);
    })
    .await;
}

/// ZooKeeper keeps null data (a −1 length) apart from empty data, and so must a round trip.
#[tokio::test]
async fn null_data_stays_apart_from_empty_data() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        let acl = open_acl_unsafe();
        let data = |path: &'static str| {
            let client = client.clone();
            async move { client.get_data(path).await.unwrap().0 }
        };
        client
            .create("/null", None, &acl, CreateMode::Persistent)
            .await
            .unwrap();
        client
            .create2("/empty", Some(&[]), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        assert_eq!(data("/null").await, None);
        assert_eq!(data("/empty").await, Some(vec![]));

        client.set_data("/empty", None, None).await.unwrap();
        assert_eq!(data("/empty").await, None);
        client.set_data("/null", Some(&[]), None).await.unwrap();
        assert_eq!(data("/null").await, Some(vec![]));

        client
            .multi(&[
                Op::Create {
                    path: "/multi".into(),
                    data: None,
                    acl: acl.clone(),
                    mode: CreateMode::Persistent,
                },
                Op::SetData {
                    path: "/null".into(),
                    data: None,
                    version: None,
                },
            ])
            .await
            .unwrap();
        let reads = client
            .multi_read(&[
                ReadOp::GetData {
                    path: "/multi".into(),
                },
                ReadOp::GetData {
                    path: "/null".into(),
                },
            ])
            .await
            .unwrap();
        for read in reads {
            assert!(matches!(read, Ok(ReadResult::Data { data: None, .. })));
        }
        let (watched, _, _) = client.get_data_w("/multi").await.unwrap();
        assert_eq!(watched, None);
    })
    .await;
}

#[tokio::test]
async fn server_errors_carry_their_codes() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        let acl = open_acl_unsafe();
        assert_eq!(code(client.get_data("/missing").await), ErrorCode::NoNode);
        assert_eq!(
            code(
                client
                    .create("/x/y", Some(b""), &acl, CreateMode::Persistent)
                    .await
            ),
            ErrorCode::NoNode
        );
        client
            .create("/x", Some(b""), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        assert_eq!(
            code(
                client
                    .create("/x", Some(b""), &acl, CreateMode::Persistent)
                    .await
            ),
            ErrorCode::NodeExists
        );
        assert_eq!(
            code(client.set_data("/x", Some(b""), Some(7)).await),
            ErrorCode::BadVersion
        );
        client
            .create("/x/y", Some(b""), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        assert_eq!(code(client.delete("/x", None).await), ErrorCode::NotEmpty);
        assert_eq!(
            client.delete("/x/y", Some(3)).await,
            Err(Error::Server(ErrorCode::BadVersion))
        );
        client
            .create("/e", Some(b""), &acl, CreateMode::Ephemeral)
            .await
            .unwrap();
        let under_ephemeral = client
            .create("/e/c", Some(b""), &acl, CreateMode::Persistent)
            .await;
        assert_eq!(code(under_ephemeral), ErrorCode::NoChildrenForEphemerals);
        assert_eq!(
            code(
                client
                    .create("/x/", Some(b""), &acl, CreateMode::Persistent)
                    .await
            ),
            ErrorCode::BadArguments
        );
        assert!(matches!(
            client
                .create("relative", Some(b""), &acl, CreateMode::Persistent)
                .await,
            Err(Error::InvalidArgument(_))
        ));
        let ttl_without_ttl = client
            .create("/t", Some(b""), &acl, CreateMode::PersistentWithTtl)
            .await;
        assert!(matches!(ttl_without_ttl, Err(Error::InvalidArgument(_))));
        // The client never sends a frame the server would refuse for its size.
        let too_big = vec![0u8; 0x100000];
        assert!(matches!(
            client.set_data("/x", Some(&too_big), None).await,
            Err(Error::RequestTooLarge { .. })
        ));
        // The session survives all of the above.
        assert!(client.exists("/x").await.unwrap().is_some());
    })
    .await;
}

#[tokio::test]
async fn create_modes_acls_auth_and_session_queries() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        let acl = open_acl_unsafe();
        client
            .create("/m", Some(b""), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        let first = client
            .create("/m/s-", Some(b""), &acl, CreateMode::PersistentSequential)
            .await
            .unwrap();
        let second = client
            .create("/m/s-", Some(b""), &acl, CreateMode::EphemeralSequential)
            .await
            .unwrap();
        assert_eq!(
            (first.as_str(), second.as_str()),
            ("/m/s-0000000000", "/m/s-0000000001")
        );
        let (_, ephemeral) = client
            .create2("/m/e", Some(b""), &acl, CreateMode::Ephemeral)
            .await
            .unwrap();
        assert_eq!(ephemeral.ephemeral_owner, client.session_id());
        let mut ephemerals = client.get_ephemerals("/m").await.unwrap();
        ephemerals.sort();
        assert_eq!(ephemerals, ["/m/e", "/m/s-0000000001"]);

        // Neither containers nor TTL nodes belong to a session.
        let (_, container) = client
            .create2("/m/c", Some(b""), &acl, CreateMode::Container)
            .await
            .unwrap();
        assert_eq!(container.ephemeral_owner, 0);
        let (ttl_path, ttl) = client
            .create_ttl(
                "/m/t",
                Some(b""),
                &acl,
                CreateMode::PersistentWithTtl,
                60_000,
            )
            .await
            .unwrap();
        assert_eq!((ttl_path.as_str(), ttl.ephemeral_owner), ("/m/t", 0));
        let (sequential_ttl, _) = client
            .create_ttl(
                "/m/t-",
                Some(b""),
                &acl,
                CreateMode::PersistentSequentialWithTtl,
                60_000,
            )
            .await
            .unwrap();
        assert!(sequential_ttl.starts_with("/m/t-0"), "{sequential_ttl}");

        client
            .set_acl("/m", &read_acl_unsafe(), None)
            .await
            .unwrap();
        let (read_only, acl_stat) = client.get_acl("/m").await.unwrap();
        assert_eq!((read_only, acl_stat.aversion), (read_acl_unsafe(), 1));
        let denied = client
            .create("/m/denied", Some(b""), &acl, CreateMode::Persistent)
            .await;
        assert_eq!(denied, Err(Error::Server(ErrorCode::NoAuth)));

        client.add_auth("digest", b"alice:secret").await.unwrap();
        client
            .create(
                "/mine",
                Some(b""),
                &creator_all_acl(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        let (mine, _) = client.get_acl("/mine").await.unwrap();
        assert_eq!(
            (
                mine[0].id.scheme.as_str(),
                mine[0].id.id.starts_with("alice:")
            ),
            ("digest", true)
        );
        let identities = client.who_am_i().await.unwrap();
        assert!(
            identities
                .iter()
                .any(|id| id.auth_scheme == "digest" && id.user == "alice"),
            "{identities:?}"
        );

        let stranger = connect(&server.hosts()).await;
        assert_eq!(
            stranger.get_data("/mine").await,
            Err(Error::Server(ErrorCode::NoAuth))
        );
        stranger.close().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn chroot_is_added_and_removed() {
    let server = ZkServer::start();
    let root = connect(&server.hosts()).await;
    root.create(
        "/app",
        Some(b""),
        &open_acl_unsafe(),
        CreateMode::Persistent,
    )
    .await
    .unwrap();
    let client = connect(&format!("{}/app", server.hosts())).await;
    within(TEST_TIMEOUT, async {
        let created = client
            .create(
                "/n-",
                Some(b"x"),
                &open_acl_unsafe(),
                CreateMode::PersistentSequential,
            )
            .await
            .unwrap();
        assert_eq!(created, "/n-0000000000");
        assert_eq!(
            root.get_data("/app/n-0000000000").await.unwrap().0.unwrap(),
            b"x"
        );
        assert_eq!(client.get_children("/").await.unwrap(), ["n-0000000000"]);
        let results = client
            .multi(&[Op::Create {
                path: "/m".into(),
                data: Some(vec![]),
                acl: open_acl_unsafe(),
                mode: CreateMode::Persistent,
            }])
            .await
            .unwrap();
        assert!(matches!(&results[..], [OpResult::Create { path, .. }] if path == "/m"));
    })
    .await;
}

#[tokio::test]
async fn multi_reports_every_op() {
    let server = ZkServer::start();
    let client = connect(&server.hosts()).await;
    within(TEST_TIMEOUT, async {
        let acl = open_acl_unsafe();
        let results = client
            .multi(&[
                Op::Create { path: "/t".into(), data: Some(b"a".to_vec()), acl: acl.clone(), mode: CreateMode::Persistent },
                Op::SetData { path: "/t".into(), data: Some(b"b".to_vec()), version: Some(0) },
                Op::Check { path: "/t".into(), version: Some(1) },
                Op::Create { path: "/t/gone".into(), data: Some(vec![]), acl: acl.clone(), mode: CreateMode::Persistent },
                Op::Delete { path: "/t/gone".into(), version: None },
            ])
            .await
            .unwrap();
        assert!(matches!(&results[0], OpResult::Create { path, stat } if path == "/t" && stat.as_ref().is_none_or(|stat| stat.version == 0)));
        assert!(matches!(&results[1], OpResult::SetData { stat } if stat.version == 1));
        assert_eq!(results[2], OpResult::Check);
        assert!(matches!(&results[3], OpResult::Create { path, .. } if path == "/t/gone"));
        assert_eq!(results[4], OpResult::Delete);

        let failed = client
            .multi(&[
                Op::Create { path: "/u".into(), data: Some(vec![]), acl: acl.clone(), mode: CreateMode::Persistent },
                Op::Delete { path: "/missing".into(), version: None },
                Op::SetData { path: "/t".into(), data: Some(vec![]), version: None },
            ])
            .await;
        let expected = MultiFailure {
            failed_op_index: 1,
            code: ErrorCode::NoNode,
            op_codes: vec![ErrorCode::Ok, ErrorCode::NoNode, ErrorCode::RuntimeInconsistency],
        };
        assert_eq!(failed, Err(Error::MultiFailed(Box::new(expected))));
        assert_eq!(client.exists("/u").await.unwrap(), None, "nothing of a failed multi is applied");

        let reads = client
            .multi_read(&[
                ReadOp::GetData { path: "/t".into() },
                ReadOp::GetChildren { path: "/missing".into() },
                ReadOp::GetChildren { path: "/t".into() },
            ])
            .await
            .unwrap();
        assert!(matches!(&reads[0], Ok(ReadResult::Data { data, stat }) if data.as_deref() == Some(b"b") && stat.version == 1));
        assert_eq!(reads[1], Err(ErrorCode::NoNode));
        assert_eq!(reads[2], Ok(ReadResult::Children { children: vec![] }));
    })
    .await;
}

/// 1000 creates in flight on one session: the server must answer in order, and the client must
/// match each reply to its caller. Sequential names make the order visible.
#[tokio::test]
async fn pipelined_requests_complete_in_order() {
    let server = ZkServer::start();
    for requests_outstanding_max in [1024, 8] {
        let options = ClientOptions {
            requests_outstanding_max,
            ..ClientOptions::default()
        };
        let client = connect_with(&server.hosts(), options).await;
        let parent = format!("/pipe{requests_outstanding_max}");
        client
            .create(
                &parent,
                Some(b""),
                &open_acl_unsafe(),
                CreateMode::Persistent,
            )
            .await
            .unwrap();
        // On the current-thread test runtime tasks first run in spawn order, so request i is
        // submitted i-th; with only 8 slots most callers also wait for a free one.
        let creates: Vec<_> = (0..1000)
            .map(|index| {
                let client = client.clone();
                let path = format!("{parent}/n-");
                tokio::spawn(async move {
                    let data = index.to_string().into_bytes();
                    client
                        .create(
                            &path,
                            Some(&data),
                            &open_acl_unsafe(),
                            CreateMode::PersistentSequential,
                        )
                        .await
                })
            })
            .collect();
        within(TEST_TIMEOUT, async {
            for (index, create) in creates.into_iter().enumerate() {
                let path = create.await.unwrap().unwrap();
                assert_eq!(path, format!("{parent}/n-{index:010}"));
            }
        })
        .await;
        assert_eq!(
            client
                .get_data(&format!("{parent}/n-{:010}", 999))
                .await
                .unwrap()
                .0
                .unwrap(),
            b"999"
        );
        client.close().await.unwrap();
    }
}

/// The code of a call that must have failed.
fn code<T: std::fmt::Debug>(result: Result<T, Error>) -> ErrorCode {
    result.unwrap_err().code()
}

//! Regressions found by the simulator's core mode, replayed on one `Core` by hand.

use std::collections::BTreeMap;
use std::sync::Arc;

use zoolog_proto::ConnectRequest;
use zoolog_server::config::{EnsembleConfig, PeerConfig};
use zoolog_server::core::{Core, Input, Now, Output, Role};
use zoolog_server::ServerConfig;
use zoolog_sim::node::SimLayer;
use zoolog_tree::{DataTree, TreeConfig};
use zoolog_zab::Lane;

fn now(ms: u64) -> Now {
    Now {
        wall_ms: 1_700_000_000_000 + ms as i64,
        monotonic_ms: ms,
        monotonic_us: ms * 1000,
    }
}

fn ensemble_core() -> (Core, Arc<SimLayer>) {
    let members: BTreeMap<u64, PeerConfig> = (1..=3)
        .map(|id| {
            (
                id,
                PeerConfig {
                    host: format!("s{id}"),
                    quorum_port: 2888,
                    election_port: 3888,
                    observer: false,
                    client_address: None,
                },
            )
        })
        .collect();
    let config = Arc::new(ServerConfig {
        tick_ms: 100,
        session_timeout_min_ms: 200,
        session_timeout_max_ms: 4000,
        server_id: 1,
        ensemble: Some(EnsembleConfig {
            members,
            init_limit: 10,
            sync_limit: 5,
            observer: false,
        }),
        ..ServerConfig::default()
    });
    let layer = Arc::new(SimLayer::new(100, 0));
    let tree = DataTree::new(TreeConfig {
        server_id: 0,
        ..TreeConfig::default()
    });
    let mut core = Core::new(config, layer.clone(), tree, 42, now(0));
    core.set_password_source(Box::new(|| vec![7; 16]));
    (core, layer)
}

/// Seed 7 (core mode): a client's handshake appended CreateSession, then the server lost its
/// leader and closed the connection; when the entry committed later, Core tried to bind the
/// session to the closed connection and panicked ("bound connections exist").
#[test]
fn session_created_for_a_connection_closed_by_a_role_change() {
    let (mut core, layer) = ensemble_core();
    core.handle(Input::Role(Role::Leader { epoch: 1, stint: 1 }), now(1));
    core.handle(
        Input::Opened {
            connection: 1,
            peer: "10.0.0.1:5000".parse().unwrap(),
        },
        now(2),
    );
    core.handle(
        Input::Handshake {
            connection: 1,
            request: ConnectRequest {
                timeout_ms: 1000,
                password: vec![0; 16],
                read_only: Some(false),
                ..ConnectRequest::default()
            },
            frame_bytes: 48,
        },
        now(3),
    );
    let create_session = layer
        .pop_front(Lane::Commands, 1)
        .expect("CreateSession appended");
    let outputs = core.handle(Input::Role(Role::Looking), now(4));
    assert!(outputs
        .iter()
        .any(|o| matches!(o, Output::Close { connection: 1 })));
    core.handle(Input::Closed { connection: 1 }, now(4));
    core.handle(Input::Role(Role::Leader { epoch: 2, stint: 2 }), now(5));
    let outputs = core.handle(
        Input::Committed {
            position: 1,
            entry: create_session,
        },
        now(6),
    );
    assert!(outputs.iter().all(|o| !matches!(o, Output::Write { .. })));
}

fn handshake(
    core: &mut Core,
    connection: u64,
    session_id: i64,
    password: Vec<u8>,
    at: u64,
) -> Vec<Output> {
    core.handle(
        Input::Opened {
            connection,
            peer: "10.0.0.1:5000".parse().unwrap(),
        },
        now(at),
    );
    core.handle(
        Input::Handshake {
            connection,
            request: ConnectRequest {
                timeout_ms: 1000,
                session_id,
                password,
                read_only: Some(false),
                ..ConnectRequest::default()
            },
            frame_bytes: 48,
        },
        now(at),
    )
}

/// The ConnectResponse among `outputs` (the first frame written on `connection`).
fn connect_response(outputs: &[Output], connection: u64) -> Option<zoolog_proto::ConnectResponse> {
    outputs.iter().find_map(|o| match o {
        Output::Write {
            connection: c,
            bytes,
            ..
        } if *c == connection => zoolog_proto::ConnectResponse::decode(&bytes[4..]).ok(),
        _ => None,
    })
}

/// Seed 152 (core mode): a closeSession appended just before the server lost its leader was
/// never ordered, but the session stayed marked closing on that server for good: every
/// reconnect through it was told "session expired" while the session (and its ephemerals)
/// lived on, and as leader it would never have expired the session.
#[test]
fn a_lost_close_does_not_leave_the_session_closing() {
    let (mut core, layer) = ensemble_core();
    core.handle(Input::Role(Role::Leader { epoch: 1, stint: 1 }), now(1));
    handshake(&mut core, 1, 0, vec![0; 16], 2);
    let entry = layer
        .pop_front(Lane::Commands, 1)
        .expect("CreateSession appended");
    let outputs = core.handle(Input::Committed { position: 1, entry }, now(3));
    let session = connect_response(&outputs, 1).expect("session created");
    assert_ne!(session.session_id, 0);
    core.handle(
        Input::Request {
            connection: 1,
            xid: 1,
            request: zoolog_proto::Request::CloseSession,
            frame_bytes: 12,
        },
        now(4),
    );
    assert!(
        layer.pop_front(Lane::Commands, 1).is_some()
            && layer.pop_front(Lane::Commands, 1).is_none(),
        "the close was appended (and is now lost)"
    );
    core.handle(Input::Role(Role::Looking), now(5));
    core.handle(Input::Closed { connection: 1 }, now(5));
    core.handle(
        Input::Role(Role::Follower {
            leader: 2,
            epoch: 2,
            stint: 2,
        }),
        now(6),
    );
    handshake(
        &mut core,
        2,
        session.session_id,
        session.password.clone(),
        7,
    );
    let entry = layer.pop_front(Lane::Commands, 2).expect("Attach appended");
    let outputs = core.handle(Input::Committed { position: 2, entry }, now(8));
    let reply = connect_response(&outputs, 2).expect("handshake answered");
    assert_eq!(
        reply.session_id, session.session_id,
        "the session lives: the client must not be told it expired"
    );
}

//! Wire-level behaviour checked against a scripted fake server: replies cut and packed in any
//! way reach their callers, and what a well-behaved server never does (a reply out of FIFO
//! order, a frame over the limit) makes the client drop the connection and resume the session
//! on a new one.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zoolog_client::{Client, ClientOptions, Error, SessionState};
use zoolog_proto::{
    encode_reply, framed, ConnectRequest, ConnectResponse, GetDataResponse, Jute, OpCode, Reader,
    ReplyHeader, Request, RequestHeader, Response, Stat,
};

const SESSION_ID: i64 = 0x0100_0000_0000_0005;

async fn read_frame(stream: &mut TcpStream) -> Vec<u8> {
    let length = stream.read_i32().await.expect("frame length");
    let mut frame = vec![0; usize::try_from(length).expect("non-negative length")];
    stream.read_exact(&mut frame).await.expect("frame body");
    frame
}

/// Accepts a connection and grants the session, returning the ConnectRequest it carried.
async fn accept_session(listener: &TcpListener) -> (TcpStream, ConnectRequest) {
    let (mut stream, _) = listener.accept().await.expect("accept");
    let request = ConnectRequest::decode(&read_frame(&mut stream).await).expect("ConnectRequest");
    let response = ConnectResponse {
        protocol_version: 0,
        timeout_ms: 10_000,
        session_id: SESSION_ID,
        password: vec![7; 16],
        read_only: Some(false),
    };
    stream
        .write_all(&framed(&response.encode()))
        .await
        .expect("ConnectResponse");
    (stream, request)
}

#[tokio::test]
async fn a_reply_out_of_order_drops_the_connection_and_the_session_resumes() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hosts = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (mut first, request) = accept_session(&listener).await;
        assert_eq!((request.session_id, request.read_only), (0, Some(false)));
        let xids: Vec<i32> = {
            let mut xids = Vec::new();
            for _ in 0..2 {
                let frame = read_frame(&mut first).await;
                xids.push(
                    RequestHeader::read_from(&mut Reader::new(&frame))
                        .unwrap()
                        .xid,
                );
            }
            xids
        };
        // Answer the newer request first: a FIFO violation.
        let mut reply = Vec::new();
        ReplyHeader {
            xid: xids[1],
            zxid: 9,
            err: 0,
        }
        .write_to(&mut reply);
        first.write_all(&framed(&reply)).await.unwrap();
        let (second, request) = accept_session(&listener).await;
        assert_eq!(
            (request.session_id, request.password),
            (SESSION_ID, vec![7; 16])
        );
        (first, second)
    });

    let client = Client::connect(&hosts, ClientOptions::default())
        .await
        .unwrap();
    let mut events = client.session_events();
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.sync("/").await })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(10), async {
        for call in calls {
            assert_eq!(call.await.unwrap(), Err(Error::ConnectionLoss));
        }
        expect_reconnect(&client, &mut events).await;
    })
    .await
    .expect("client reconnected in time");
    let _connections = server.await.unwrap();
}

/// Reads one request frame: its xid and the request.
async fn read_request(stream: &mut TcpStream) -> (i32, Request) {
    let frame = read_frame(stream).await;
    let reader = &mut Reader::new(&frame);
    let header = RequestHeader::read_from(reader).expect("RequestHeader");
    let request = Request::decode(header.opcode, &frame[8..]).expect("request body");
    (header.xid, request)
}

/// Waits for the client to lose its connection and come back with the same session.
async fn expect_reconnect(
    client: &Client,
    events: &mut tokio::sync::broadcast::Receiver<SessionState>,
) {
    assert_eq!(events.recv().await.unwrap(), SessionState::Disconnected);
    assert_eq!(events.recv().await.unwrap(), SessionState::Connected);
    assert_eq!(client.session_id(), SESSION_ID);
}

#[tokio::test]
async fn replies_cut_and_packed_any_way_reach_their_callers_in_order() {
    const CALLS: usize = 40;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hosts = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (mut stream, _) = accept_session(&listener).await;
        // Every reply carries the path asked for as its data, each a different length.
        let mut replies = Vec::new();
        for _ in 0..CALLS {
            let (xid, request) = read_request(&mut stream).await;
            let Request::GetData(get) = request else {
                panic!("expected getData, got {:?}", request.opcode())
            };
            let response = Response::GetData(GetDataResponse {
                data: Some(get.path.repeat(xid as usize).into_bytes().into()),
                stat: Stat::default(),
            });
            let mut reply = Vec::new();
            encode_reply(xid, 1, Ok(&response), &mut reply);
            replies.extend_from_slice(&framed(&reply));
        }
        // Written in pieces of 1 to 7 bytes, so frames straddle reads and reads hold several.
        let mut rest = replies.as_slice();
        for piece_bytes in (1..=7).cycle() {
            if rest.is_empty() {
                break;
            }
            let (piece, after) = rest.split_at(piece_bytes.min(rest.len()));
            stream.write_all(piece).await.unwrap();
            rest = after;
        }
        stream
    });

    let client = Client::connect(&hosts, ClientOptions::default())
        .await
        .unwrap();
    let calls: Vec<_> = (0..CALLS)
        .map(|index| {
            let client = client.clone();
            tokio::spawn(async move {
                let path = format!("/node-{index}");
                let (data, _) = client.get_data(&path).await.unwrap();
                (path, data.unwrap())
            })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(10), async {
        for call in calls {
            let (path, data) = call.await.unwrap();
            let data = String::from_utf8(data).unwrap();
            // Its own path, as many times as its xid: nobody else's reply.
            assert!(!data.is_empty(), "{path}: empty data");
            assert_eq!(data, path.repeat(data.len() / path.len()));
        }
    })
    .await
    .expect("every call answered in time");
    let _stream = server.await.unwrap();
}

#[tokio::test]
async fn a_frame_over_the_limit_drops_the_connection_and_the_session_resumes() {
    const PACKET_BYTES_MAX: usize = 4096;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hosts = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (mut first, _) = accept_session(&listener).await;
        let (xid, request) = read_request(&mut first).await;
        assert_eq!(request.opcode(), OpCode::GetData);
        // A well-formed reply one byte over the limit: a client that did not check the length
        // prefix would take it as an answer.
        let mut reply = Vec::new();
        let empty = Response::GetData(GetDataResponse {
            data: Some(Vec::new().into()),
            stat: Stat::default(),
        });
        encode_reply(xid, 1, Ok(&empty), &mut reply);
        let response = Response::GetData(GetDataResponse {
            data: Some(vec![b'x'; PACKET_BYTES_MAX + 1 - reply.len()].into()),
            stat: Stat::default(),
        });
        reply.clear();
        encode_reply(xid, 1, Ok(&response), &mut reply);
        assert_eq!(reply.len(), PACKET_BYTES_MAX + 1);
        first.write_all(&framed(&reply)).await.unwrap();
        let (second, request) = accept_session(&listener).await;
        assert_eq!(request.session_id, SESSION_ID);
        (first, second)
    });

    let options = ClientOptions {
        packet_bytes_max: PACKET_BYTES_MAX,
        ..ClientOptions::default()
    };
    let client = Client::connect(&hosts, options).await.unwrap();
    let mut events = client.session_events();
    tokio::time::timeout(Duration::from_secs(10), async {
        assert_eq!(client.get_data("/big").await, Err(Error::ConnectionLoss));
        expect_reconnect(&client, &mut events).await;
    })
    .await
    .expect("client reconnected in time");
    let _connections = server.await.unwrap();
}

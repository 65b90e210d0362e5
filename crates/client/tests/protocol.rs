//! Wire-level behaviour that a well-behaved server never provokes, checked against a scripted
//! fake server: a reply out of FIFO order makes the client drop the connection and resume the
//! session on a new one.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zoolog_client::{Client, ClientOptions, Error, SessionState};
use zoolog_proto::{
    framed, ConnectRequest, ConnectResponse, Jute, Reader, ReplyHeader, RequestHeader,
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
        assert_eq!(events.recv().await.unwrap(), SessionState::Disconnected);
        assert_eq!(events.recv().await.unwrap(), SessionState::Connected);
        assert_eq!(client.session_id(), SESSION_ID);
    })
    .await
    .expect("client reconnected in time");
    let _connections = server.await.unwrap();
}

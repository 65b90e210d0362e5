//! A bounded fuzz run of the request decoder inside the test suite: random frames, random
//! mutations of valid frames, and every truncation of them must decode or fail cleanly, never
//! panic, and never allocate more than the frame itself allows.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zoolog_proto::*;

const ITERATIONS: usize = 200_000;

fn seed_frames() -> Vec<Vec<u8>> {
    let create = CreateRequest {
        path: "/a/b".into(),
        data: Some(b"xy".to_vec()),
        acl: Some(vec![Acl {
            perms: 31,
            id: Id::new("world", "anyone"),
        }]),
        flags: 3,
    };
    let requests = [
        Request::Create(create.clone()),
        Request::Multi(vec![
            Request::Create2(create),
            Request::Delete(DeleteRequest {
                path: "/a".into(),
                version: -1,
            }),
        ]),
        Request::MultiRead(vec![Request::GetData(PathWatchRequest {
            path: "/a".into(),
            watch: true,
        })]),
        Request::SetWatches2(SetWatches2 {
            relative_zxid: 9,
            data_watches: vec!["/x".into()],
            ..Default::default()
        }),
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: Some(b"u:p".to_vec()),
        }),
        Request::Reconfig(ReconfigRequest {
            joining_servers: Some("server.1=a:1:2".into()),
            ..Default::default()
        }),
    ];
    requests.iter().map(|request| request.encode(7)).collect()
}

fn decode_frame(frame: &[u8]) {
    if frame.len() < 8 {
        let _ = ConnectRequest::decode(frame);
        return;
    }
    let header =
        RequestHeader::read_from(&mut Reader::new(&frame[..8])).expect("8 bytes hold a header");
    let _ = Request::decode(header.opcode, &frame[8..]);
    let _ = ConnectRequest::decode(frame);
    for opcode in OpCode::ALL {
        let _ = Response::decode(*opcode, &frame[8..]);
    }
}

#[test]
fn decoder_survives_random_and_mutated_frames() {
    let seed: u64 = std::env::var("ZOOLOG_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = StdRng::seed_from_u64(seed);
    let seeds = seed_frames();
    for frame in &seeds {
        for cut in 0..frame.len() {
            decode_frame(&frame[..cut]);
        }
    }
    for _ in 0..ITERATIONS {
        let mut frame = if rng.gen_bool(0.3) {
            (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect()
        } else {
            seeds[rng.gen_range(0..seeds.len())].clone()
        };
        for _ in 0..rng.gen_range(1..4) {
            if frame.is_empty() {
                break;
            }
            let at = rng.gen_range(0..frame.len());
            match rng.gen_range(0..3) {
                0 => frame[at] = rng.gen(),
                1 => frame[at] = [0x00, 0xff, 0x7f, 0x80][rng.gen_range(0..4)],
                _ => frame.truncate(at),
            }
        }
        decode_frame(&frame);
    }
}

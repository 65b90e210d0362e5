//! A real crash: a child process appends under load and reports what it saw committed; the
//! parent kills it with SIGKILL, reopens the files and checks every reported entry is there.
//!
//! The child is this test binary itself, re-run on `crash_child_process_entry_point` with an
//! environment variable naming the directory; without that variable that test does nothing.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;

use bytes::Bytes;
use common::*;
use zoolog_log::{AppendError, OrderingLayer};

const CHILD_DIR_VAR: &str = "ZOOLOG_LOG_CRASH_CHILD_DIR";
const APPENDERS: usize = 4;
/// Bounds the child should the parent never kill it.
const CHILD_APPENDS_MAX: usize = 1_000_000;
const KILL_AFTER_COMMITTED_ENTRIES: usize = 10_000;

fn crash_payload(appender: usize, sequence: usize) -> Bytes {
    let mut bytes = format!("appender{appender}-{sequence}-").into_bytes();
    bytes.resize(bytes.len() + sequence % 97, b'x');
    Bytes::from(bytes)
}

fn parse_payload(payload: &[u8]) -> (usize, usize) {
    let text = std::str::from_utf8(payload).expect("payload is text");
    let mut fields = text.trim_start_matches("appender").split('-');
    let appender = fields.next().unwrap().parse().unwrap();
    let sequence = fields.next().unwrap().parse().unwrap();
    assert_eq!(
        payload,
        &crash_payload(appender, sequence)[..],
        "payload intact"
    );
    (appender, sequence)
}

#[test]
fn crash_child_process_entry_point() {
    let Ok(dir) = std::env::var(CHILD_DIR_VAR) else {
        return;
    };
    let (log, _, mut committed) = open(&config(std::path::Path::new(&dir)));
    let log = Arc::new(log);
    for appender in 0..APPENDERS {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut sequence = 0;
            while sequence < CHILD_APPENDS_MAX / APPENDERS {
                match log.append(crash_payload(appender, sequence), 0) {
                    Ok(()) => sequence += 1,
                    Err(AppendError::Full) => std::thread::yield_now(),
                    Err(other) => panic!("append failed: {other}"),
                }
            }
        });
    }
    let mut stdout = std::io::stdout().lock();
    while let Some(batch) = committed.blocking_recv() {
        for (position, payload) in batch.entries() {
            let reported = writeln!(stdout, "committed {position} {}", crc32c::crc32c(payload));
            if reported.is_err() {
                std::process::exit(1);
            }
        }
        if stdout.flush().is_err() {
            std::process::exit(1);
        }
    }
}

#[test]
fn sigkill_under_load_loses_no_committed_entry() {
    let root = tempfile::tempdir().unwrap();
    let mut child = spawn_child_test(
        "crash_child_process_entry_point",
        CHILD_DIR_VAR,
        root.path(),
    );

    // A thread keeps draining the child's stdout so the child never stalls on a full pipe:
    // the kill lands while it is still appending, writing and fsyncing.
    let stdout = child.stdout.take().unwrap();
    let (reports_tx, reports) = std::sync::mpsc::channel::<(u64, u32)>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("readable");
            let Some(rest) = line.strip_prefix("committed ") else {
                continue;
            };
            let (position, crc) = rest.split_once(' ').expect("position and checksum");
            if reports_tx
                .send((position.parse().unwrap(), crc.parse().unwrap()))
                .is_err()
            {
                return;
            }
        }
    });
    let mut reported: HashMap<u64, u32> = HashMap::new();
    while reported.len() < KILL_AFTER_COMMITTED_ENTRIES {
        let (position, crc) = reports.recv().expect("child still running");
        reported.insert(position, crc);
    }
    child.kill().expect("SIGKILL delivered");
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the child died of the SIGKILL, mid-load: {status}"
    );
    reader.join().unwrap();
    reported.extend(reports.try_iter());

    let (log, recovered, mut committed) = open(&config(root.path()));
    assert_eq!(recovered.snapshot, None);
    eprintln!(
        "reported {} committed, recovered {}",
        reported.len(),
        recovered.tail.len()
    );
    let recovered_by_position: HashMap<u64, &Bytes> = recovered
        .tail
        .iter()
        .map(|(position, payload)| (*position, payload))
        .collect();
    for (position, crc) in &reported {
        let payload = recovered_by_position
            .get(position)
            .unwrap_or_else(|| panic!("committed position {position} lost in the crash"));
        assert_eq!(crc32c::crc32c(payload), *crc, "position {position} changed");
    }

    // Each appender's entries are a gap-free prefix of what it appended, in its order.
    let mut next_sequence = [0usize; APPENDERS];
    for (_, payload) in &recovered.tail {
        let (appender, sequence) = parse_payload(payload);
        assert_eq!(
            sequence, next_sequence[appender],
            "appender {appender} out of order"
        );
        next_sequence[appender] += 1;
    }

    let next = append_all(
        &log,
        &mut committed,
        &[Bytes::from_static(b"after the crash")],
    );
    assert_eq!(next[0].0, recovered.tail.len() as u64 + 1);
}

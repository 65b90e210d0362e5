//! A real crash of a replica log: a child process appends and truncates, and reports what
//! became durable and which truncations returned; the parent kills it with SIGKILL, reopens
//! the files and checks the log against the reports.
//!
//! The child is this test binary itself, re-run on `replica_crash_child_process_entry_point`
//! with an environment variable naming the directory; without that variable that test does
//! nothing. It lives in a test binary of its own: a child forked while another test's log is
//! open inherits that log's directory lock until it execs, and that test's reopen would then
//! find its own directory locked.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use common::replica::*;
use common::spawn_child_test;
use zoolog_log::{AppendError, Position};

const CHILD_DIR_VAR: &str = "ZOOLOG_REPLICA_CRASH_CHILD_DIR";
const KILL_AFTER_DURABLE_REPORTS: usize = 3_000;
const KILL_AFTER_TRUNCATIONS: usize = 8;
const CHILD_APPENDS_MAX: u64 = 2_000_000;

/// The child: one driver thread appends runs of entries in the current epoch and now and
/// then truncates a little below the end and moves to the next epoch (epoch = truncations
/// done + 1); the main thread reports completions. Lines: `durable P E`,
/// `truncating J A` before truncation J (1-based) and `truncated J A` once it returned.
#[test]
fn replica_crash_child_process_entry_point() {
    let Ok(dir) = std::env::var(CHILD_DIR_VAR) else {
        return;
    };
    let mut config = config(Path::new(&dir));
    config.limits.segment_bytes_max = 16 * 1024;
    let (log, _, mut durable) = open(&config);
    let log = std::sync::Arc::new(log);
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let driver_log = std::sync::Arc::clone(&log);
    let driver_out = std::sync::Arc::clone(&out);
    std::thread::spawn(move || {
        let log = driver_log;
        let say = |line: String| {
            let mut out = driver_out.lock().unwrap();
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                std::process::exit(1);
            }
        };
        let mut random = 0x9e37_79b9_7f4a_7c15u64;
        let mut next_random = move || {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            random
        };
        let mut epoch = 1;
        let mut appended = 0;
        while appended < CHILD_APPENDS_MAX {
            if next_random() % 40 == 0 {
                let last = log.last_position();
                let after = last.saturating_sub(next_random() % 60);
                say(format!("truncating {epoch} {after}"));
                log.truncate_after(after).expect("truncation");
                say(format!("truncated {epoch} {after}"));
                epoch += 1;
                continue;
            }
            let count = 1 + next_random() % 8;
            let batch = entries(log.last_position() + 1, count, epoch);
            match log.append(batch) {
                Ok(()) => appended += count,
                Err(AppendError::Full) => std::thread::yield_now(),
                Err(other) => panic!("append failed: {other}"),
            }
        }
    });
    while let Some(done) = durable.blocking_recv() {
        let mut out = out.lock().unwrap();
        let line = format!("durable {} {}", done.position, done.epoch);
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            std::process::exit(1);
        }
    }
}

#[test]
fn sigkill_during_appends_and_truncations_keeps_a_consistent_log() {
    let root = tempfile::tempdir().unwrap();
    let mut child = spawn_child_test(
        "replica_crash_child_process_entry_point",
        CHILD_DIR_VAR,
        root.path(),
    );
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_tx.send(line.expect("readable")).is_err() {
                return;
            }
        }
    });
    let mut durable_reports: Vec<(Position, u64)> = Vec::new();
    // Truncation J: (after, whether it returned).
    let mut truncations: BTreeMap<u64, (Position, bool)> = BTreeMap::new();
    let mut record = |line: String| {
        let fields: Vec<&str> = line.split(' ').collect();
        let (a, b) = match fields.as_slice() {
            ["durable" | "truncating" | "truncated", a, b] => {
                (a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap())
            }
            _ => return,
        };
        match fields[0] {
            "durable" => durable_reports.push((a, b)),
            "truncating" => {
                truncations.insert(a, (b, false));
            }
            "truncated" => {
                truncations.insert(a, (b, true));
            }
            _ => {}
        }
    };
    let mut durable_count = 0;
    let mut completed = 0;
    while durable_count < KILL_AFTER_DURABLE_REPORTS || completed < KILL_AFTER_TRUNCATIONS {
        let line = lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("child still running and reporting");
        durable_count += line.starts_with("durable ") as usize;
        completed += line.starts_with("truncated ") as usize;
        record(line);
    }
    child.kill().expect("SIGKILL delivered");
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the child died of the SIGKILL: {status}"
    );
    reader.join().unwrap();
    for line in lines.try_iter() {
        record(line);
    }

    let mut config = config(root.path());
    config.limits.segment_bytes_max = 16 * 1024;
    let (log, recovered, mut durable) = open(&config);
    eprintln!(
        "{} completions reported, {} truncations, {} entries recovered",
        durable_reports.len(),
        truncations.len(),
        recovered.entries.len()
    );
    assert_eq!(recovered.snapshot, None);
    for (index, entry) in recovered.entries.iter().enumerate() {
        assert_eq!(entry.position, index as u64 + 1, "consecutive from 1");
        assert_eq!(
            entry.payload,
            payload(entry.position, entry.epoch),
            "intact"
        );
    }
    assert!(
        recovered
            .entries
            .windows(2)
            .all(|w| w[0].epoch <= w[1].epoch),
        "epochs never decrease along the log"
    );
    // A finished truncation J removed everything after its point from epochs <= J.
    for (&j, &(after, returned)) in &truncations {
        if !returned {
            continue;
        }
        for entry in recovered
            .entries
            .iter()
            .filter(|entry| entry.position > after)
        {
            assert!(
                entry.epoch > j,
                "position {} of epoch {} came back after truncation {j} after {after}",
                entry.position,
                entry.epoch
            );
        }
    }
    // Everything reported durable is there, unless a truncation begun later in the run (in
    // epoch >= its epoch) may have cut it.
    for &(position, epoch) in &durable_reports {
        let maybe_cut = truncations
            .range(epoch..)
            .any(|(_, &(after, _))| after < position);
        if maybe_cut {
            continue;
        }
        let entry = recovered
            .entries
            .get(position as usize - 1)
            .unwrap_or_else(|| panic!("durable position {position} of epoch {epoch} lost"));
        assert_eq!(entry.epoch, epoch, "durable position {position} changed");
    }
    let next = recovered.last_position() + 1;
    log.append(entries(next, 1, truncations.len() as u64 + 2))
        .unwrap();
    wait_durable(&mut durable, next);
}

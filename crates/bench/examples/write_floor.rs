//! What a durable write costs this machine before any server code runs: a message hop between
//! two processes over loopback TCP (both processes on one CPU, then on two different CPUs, as
//! the scheduler may place them), and an fdatasync after overwriting a 4 KiB block. A write to
//! a standalone server needs two hops and one fdatasync in sequence; a write through a follower
//! of an ensemble needs four hops (client, follower, leader, follower, client) and one fdatasync
//! on each of two members, in parallel. bench/README.md uses this to explain the one-worker
//! create latencies. Members of an ensemble on one machine also share its disk: a write is durable
//! on a quorum of three when the second of three fdatasyncs started together is done.
//!
//! `cargo run --release -p zoolog-bench --example write_floor -- [ROUNDS] [DIR]`
//! (defaults: 100000 round trips, 10000 syncs, in the system's temporary directory).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use zoolog_bench::floor::{
    overwrite_syncs, percentile, quorum_syncs, sustained_syncs, Stalls, STALL_US,
};

/// Set in the child process: the port it connects to and echoes on.
const ECHO_PORT_ENV: &str = "ZOOLOG_WRITE_FLOOR_ECHO_PORT";
/// Set in the child process: the CPU it runs on.
const ECHO_CPU_ENV: &str = "ZOOLOG_WRITE_FLOOR_ECHO_CPU";
/// A small request, like a create of an empty node.
const MESSAGE_BYTES: usize = 64;

fn main() -> std::io::Result<()> {
    if let Ok(port) = std::env::var(ECHO_PORT_ENV) {
        let cpu = std::env::var(ECHO_CPU_ENV).expect("the parent passes a CPU");
        pin_to_cpu(cpu.parse().expect("the parent passes a CPU number"))?;
        return echo(port.parse().expect("the parent passes a port"));
    }
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(100_000, |rounds| {
        rounds.parse().expect("ROUNDS is a number of round trips")
    });
    let dir = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let cpus = std::thread::available_parallelism().map_or(1, |cpus| cpus.get());
    let placements: &[(&str, usize)] = if cpus > 1 {
        &[("one CPU", 0), ("two CPUs", 1)]
    } else {
        &[("one CPU", 0)]
    };
    let syncs = (rounds / 10).max(100);
    let syncs_us = overwrite_syncs(&dir, syncs)?;
    report("4 KiB overwrite + fdatasync", &syncs_us);
    let sync_us = percentile(&syncs_us, 0.5);
    let quorum_us = quorum_syncs(&dir, 3, syncs)?;
    report(
        "the second of three overwrites + fdatasyncs started together on this disk (a durable \
         write to a quorum of three members that share it, no hops)",
        &quorum_us,
    );
    let sustained_us = sustained_syncs(&dir, 3, std::time::Duration::from_secs(3))?;
    report(
        "three writers overwriting + fdatasyncing freely for 3 s",
        &sustained_us,
    );
    let stalls = Stalls::count(&sustained_us, STALL_US);
    println!(
        "  {} of those syncs took over {:.0} ms, the longest {:.1} ms",
        stalls.over_threshold,
        STALL_US / 1e3,
        stalls.longest_us / 1e3
    );
    for &(placement, echo_cpu) in placements {
        pin_to_cpu(0)?;
        let round_trips_us = round_trips(rounds, echo_cpu)?;
        report(
            &format!("loopback round trip (two hops), {placement}"),
            &round_trips_us,
        );
        let hop_us = percentile(&round_trips_us, 0.5) / 2.0;
        println!(
            "  p50 floor on {placement}, no server code: standalone write {:.1} us (2 hops + 1 \
             sync), ensemble write via a follower {:.1} us (4 hops + 1 sync)",
            2.0 * hop_us + sync_us,
            4.0 * hop_us + sync_us
        );
    }
    Ok(())
}

/// Keeps the calling process on `cpu`, so that a placement is measured rather than left to
/// the scheduler.
fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: the set is zeroed and then filled by libc's own macros before the call reads it.
    let result = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Round trips of a small message to a child process that echoes it, in microseconds.
fn round_trips(rounds: usize, echo_cpu: usize) -> std::io::Result<Vec<f64>> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let mut child = Command::new(std::env::current_exe()?)
        .env(ECHO_PORT_ENV, port.to_string())
        .env(ECHO_CPU_ENV, echo_cpu.to_string())
        .stdin(Stdio::null())
        .spawn()?;
    let (mut stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    let mut message = [7u8; MESSAGE_BYTES];
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        stream.write_all(&message)?;
        stream.read_exact(&mut message)?;
        samples.push(started.elapsed().as_secs_f64() * 1e6);
    }
    drop(stream);
    child.wait()?;
    Ok(samples)
}

fn echo(port: u16) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_nodelay(true)?;
    let mut message = [0u8; MESSAGE_BYTES];
    // The parent closing its end ends the loop.
    while stream.read_exact(&mut message).is_ok() {
        stream.write_all(&message)?;
    }
    Ok(())
}

fn report(what: &str, samples_us: &[f64]) {
    println!(
        "{what}: p50 {:.1} us, p90 {:.1}, p99 {:.1} ({} samples)",
        percentile(samples_us, 0.5),
        percentile(samples_us, 0.9),
        percentile(samples_us, 0.99),
        samples_us.len()
    );
}

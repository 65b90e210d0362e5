//! `zoolog-sim`: run seeds of the deterministic simulator.
//!
//! - `--seeds N [--from S]`: a soak over seeds S..S+N (default from 0), reporting failures.
//! - `--seed S [--trace]`: one seed, with every event printed when tracing.
//! - `--faults-ms MS`, `--liveness-ms MS`: override the phase lengths.
//! - `--mode zab|core`: force a mode (default: even seeds zab, odd seeds core).

use std::process::ExitCode;
use std::time::Instant;

use zoolog_sim::{run_seed, Mode, Options};

fn main() -> ExitCode {
    let mut options = Options::default();
    let mut seed = None;
    let mut seeds = None;
    let mut from = 0u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match arg.as_str() {
            "--seed" => seed = Some(value("--seed")),
            "--seeds" => seeds = Some(value("--seeds")),
            "--from" => from = value("--from"),
            "--faults-ms" => options.faults_ms = Some(value("--faults-ms")),
            "--liveness-ms" => options.liveness_ms = value("--liveness-ms"),
            "--trace" => options.trace = true,
            "--mode" => {
                options.mode = match args.next().as_deref() {
                    Some("zab") => Some(Mode::Zab),
                    Some("core") => Some(Mode::Core),
                    _ => {
                        eprintln!("--mode needs zab or core");
                        return ExitCode::from(2);
                    }
                }
            }
            other => {
                eprintln!("unknown argument {other}; usage: zoolog-sim (--seed S [--trace] | --seeds N [--from S]) [--mode zab|core] [--faults-ms MS] [--liveness-ms MS]");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(seed) = seed {
        return match run_seed(seed, &options) {
            Ok(report) => {
                println!("{report:?}");
                ExitCode::SUCCESS
            }
            Err(failure) => {
                println!("{failure}");
                ExitCode::FAILURE
            }
        };
    }
    let count = seeds.unwrap_or(1000);
    let started = Instant::now();
    let mut failures = 0u64;
    let (mut events, mut committed, mut crashes, mut pauses) = (0u64, 0u64, 0u64, 0u64);
    let (mut core_seeds, mut write_acks, mut reads, mut synced_reads) = (0u64, 0u64, 0u64, 0u64);
    let (mut expired, mut watches_set, mut watches_fired) = (0u64, 0u64, 0u64);
    let (mut read_only_sessions, mut writes_refused) = (0u64, 0u64);
    let (mut multis_applied, mut multis_failed, mut persistent_events) = (0u64, 0u64, 0u64);
    let (mut reaped, mut abandoned, mut knocks) = (0u64, 0u64, 0u64);
    for seed in from..from + count {
        match run_seed(seed, &options) {
            Ok(report) => {
                events += report.events;
                committed += report.committed;
                crashes += report.crashes;
                pauses += report.pauses;
                core_seeds += (report.mode == Mode::Core) as u64;
                write_acks += report.write_acks;
                reads += report.reads_checked;
                synced_reads += report.synced_reads;
                expired += report.sessions_expired;
                watches_set += report.watches_set;
                watches_fired += report.watches_fired;
                read_only_sessions += report.read_only_sessions;
                writes_refused += report.writes_refused;
                multis_applied += report.multis_applied;
                multis_failed += report.multis_failed;
                persistent_events += report.persistent_events;
                reaped += report.reaped;
                abandoned += report.sessions_abandoned;
                knocks += report.knocks_refused;
            }
            Err(failure) => {
                failures += 1;
                println!("{failure}\n");
            }
        }
    }
    println!(
        "{} seeds ({from}..{}) in {:.1} s: {failures} failed; {events} events, {committed} entries committed, {crashes} crashes, {pauses} pauses; {core_seeds} passing seeds in core mode: {write_acks} write replies, {reads} reads ({synced_reads} after a sync) checked, {expired} sessions expired, {watches_set} watches left, {watches_fired} fired ({persistent_events} of persistent watches), {read_only_sessions} read-only sessions ({writes_refused} writes refused), {multis_applied} multis done and {multis_failed} failed whole, {reaped} containers and TTL nodes reaped, {abandoned} sessions left by killed clients ended ({knocks} strangers' knocks on them refused)",
        count,
        from + count,
        started.elapsed().as_secs_f64()
    );
    if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

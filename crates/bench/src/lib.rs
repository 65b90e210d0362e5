//! # zoolog-bench
//!
//! `zoolog bench`: the experiments of the ZooKeeper paper (Figure 5 throughput by read ratio,
//! Table 2 creates, Table 3 barriers) and of the shared-log paper (Table 1 recipe latency), run
//! with the zoolog client against any ZooKeeper-compatible server list, or with `--compare`
//! against an Apache ZooKeeper and a zoolog that it starts itself, one after the other.
//!
//! Each point runs an unmeasured warm-up and then a measured window; every loop is bounded in
//! time and in count, and Ctrl-C ends the current point early and skips the rest, after which
//! the results so far are still written: CSV files, `summary.md` (the printed tables) and one
//! plot per workload (rate and p99 latency), into `./bench-results/<UTC timestamp>/` unless `--out` says otherwise.

mod bounded;
mod control;
pub mod floor;
mod options;
mod plot;
mod progress;
mod report;
pub mod servers;
mod stats;
mod workloads;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use control::Signal;
use options::{Command, Options};
use progress::Progress;
use servers::{Ensemble, ServerKind};
use stats::Measurement;

/// The servers `--compare` measures, in this order (never at the same time: the machine the
/// benchmark was written for has two cores).
const COMPARED: [ServerKind; 2] = [ServerKind::Zoolog, ServerKind::Apache];
/// The name of the `--servers` list in the results.
const TARGET_LABEL: &str = "target";
/// Exit code after Ctrl-C, as a shell reports SIGINT.
const INTERRUPTED_EXIT_CODE: u8 = 130;
/// In the results folder: every line the run printed (rounds, leader-kill trials, errors).
const CONSOLE_FILE: &str = "console.txt";
/// In the results folder: the end of each ensemble member's log, per server kind and round.
const LOGS_DIR: &str = "logs";

/// Runs `zoolog bench` with `args`, on a runtime from `runtime_builder` (given the number of
/// client threads: the binary's one builder serves its server and this client alike).
pub fn run(args: &[String], runtime_builder: fn(usize) -> tokio::runtime::Builder) -> ExitCode {
    let options = match options::parse(args) {
        Ok(Command::Bench(options)) => *options,
        Ok(Command::Help) => {
            println!("{}", options::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("zoolog bench: {error}\n\n{}", options::USAGE);
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime_builder(options.client_threads).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("zoolog bench: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(bench(options))
}

async fn bench(options: Options) -> ExitCode {
    let out_dir = options.out.clone().unwrap_or_else(default_out_dir);
    if let Err(error) = std::fs::create_dir_all(&out_dir) {
        eprintln!("zoolog bench: cannot create {}: {error}", out_dir.display());
        return ExitCode::FAILURE;
    }
    let interrupt = Signal::new();
    let ctrl_c = tokio::spawn(stop_on_ctrl_c(interrupt.clone()));
    let progress = Progress::new(planned_time(&options));
    let mut results = Vec::new();
    let mut settings = Vec::new();
    if options.ensemble.is_some() || options.compare {
        settings.push(disk_floor_note().await);
    }
    let mut failed = false;
    for round in 1..=options.rounds {
        if interrupt.is_set() {
            break;
        }
        if options.rounds > 1 {
            progress.println(format!("round {round} of {}", options.rounds));
        }
        let run = Run {
            round,
            out_dir: &out_dir,
            options: &options,
            interrupt: &interrupt,
            progress: &progress,
        };
        failed |= !run.measure_all(&mut settings, &mut results).await;
    }
    progress.finish();
    ctrl_c.abort();
    let written = write_results(&out_dir, &options, &settings, &results)
        .and_then(|()| std::fs::write(out_dir.join(CONSOLE_FILE), progress.printed()));
    if let Err(error) = written {
        eprintln!("zoolog bench: cannot write the results: {error}");
        return ExitCode::FAILURE;
    }
    if interrupt.is_set() {
        eprintln!(
            "zoolog bench: interrupted; partial results are in {}",
            out_dir.display()
        );
        return ExitCode::from(INTERRUPTED_EXIT_CODE);
    }
    eprintln!("results in {}", out_dir.display());
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What one series of measurements runs against.
struct Target<'a> {
    /// The name of the server list in the results.
    server: &'a str,
    hosts: &'a str,
    /// One server per entry, for sessions spread round-robin; empty: every session uses `hosts`.
    spread: &'a [String],
    ensemble: Option<&'a Ensemble>,
}

/// One of the `--rounds`: every server it measures, one after the other, each on fresh servers
/// when the benchmark starts them.
struct Run<'a> {
    round: usize,
    out_dir: &'a Path,
    options: &'a Options,
    interrupt: &'a Signal,
    progress: &'a Progress,
}

impl Run<'_> {
    /// Measures every server of the run; false if any part failed. Only the first round notes
    /// the servers' settings in `settings`: later rounds start the same servers again.
    async fn measure_all(
        &self,
        settings: &mut Vec<String>,
        results: &mut Vec<Measurement>,
    ) -> bool {
        let mut note = |line: String| {
            if self.round == 1 {
                settings.push(line);
            }
        };
        if let Some(servers) = self.options.ensemble {
            let kinds: &[ServerKind] = if self.options.compare {
                &COMPARED
            } else {
                &[ServerKind::Zoolog]
            };
            let mut succeeded = true;
            for &kind in kinds {
                if self.interrupt.is_set() {
                    break;
                }
                succeeded &= self
                    .measure_ensemble(kind, servers, &mut note, results)
                    .await;
            }
            succeeded
        } else if self.options.compare {
            let mut succeeded = true;
            for kind in COMPARED {
                if self.interrupt.is_set() {
                    break;
                }
                succeeded &= self.measure_standalone(kind, &mut note, results).await;
            }
            succeeded
        } else {
            note(format!("{TARGET_LABEL}: {}", self.options.servers));
            let target = Target {
                server: TARGET_LABEL,
                hosts: &self.options.servers,
                spread: &[],
                ensemble: None,
            };
            self.measure(target, results).await
        }
    }

    /// Starts a `servers`-server ensemble of `kind`, measures it and stops it.
    async fn measure_ensemble(
        &self,
        kind: ServerKind,
        servers: usize,
        note: &mut impl FnMut(String),
        results: &mut Vec<Measurement>,
    ) -> bool {
        self.progress.println(format!(
            "starting a {servers}-server {} ensemble…",
            kind.label()
        ));
        let started = async {
            let ensemble = Ensemble::create(kind, servers, 0, None)?;
            ensemble.up().await?;
            Ok::<_, String>(ensemble)
        };
        let ensemble = tokio::select! {
            started = started => started,
            () = self.interrupt.wait() => Err("interrupted while starting".into()),
        };
        let ensemble = match ensemble {
            Ok(ensemble) => ensemble,
            Err(error) => {
                self.progress
                    .println(format!("zoolog bench: {} ensemble: {error}", kind.label()));
                return false;
            }
        };
        note(format!("{}: {}", kind.label(), ensemble.settings()));
        let spread: Vec<String> = ensemble
            .members()
            .iter()
            .map(|member| member.hosts())
            .collect();
        let target = Target {
            server: kind.label(),
            hosts: &ensemble.connect_string(),
            spread: &spread,
            ensemble: Some(&ensemble),
        };
        let succeeded = self.measure(target, results).await;
        ensemble.stop_all();
        let prefix = format!("{}-round{}", kind.label(), self.round);
        if let Err(error) = ensemble.keep_logs(&self.out_dir.join(LOGS_DIR), &prefix) {
            self.progress.println(format!(
                "zoolog bench: cannot keep the {} servers' logs: {error}",
                kind.label()
            ));
        }
        succeeded
    }

    /// Starts a standalone server of `kind` and measures it (it stops when dropped).
    async fn measure_standalone(
        &self,
        kind: ServerKind,
        note: &mut impl FnMut(String),
        results: &mut Vec<Measurement>,
    ) -> bool {
        self.progress.println(format!("starting {}…", kind.label()));
        let server = match kind.launch().await {
            Ok(server) => server,
            Err(error) => {
                self.progress.println(format!("zoolog bench: {error}"));
                return false;
            }
        };
        note(format!(
            "{}: {}; data in {}",
            kind.label(),
            kind.settings(),
            server.data_dir().display()
        ));
        let target = Target {
            server: kind.label(),
            hosts: &server.hosts,
            spread: &[],
            ensemble: None,
        };
        self.measure(target, results).await
    }

    /// Runs every selected workload against one server list; false if any of them failed (the
    /// points measured before the failure are kept).
    async fn measure(&self, target: Target<'_>, results: &mut Vec<Measurement>) -> bool {
        let server = target.server;
        let context = workloads::Context {
            server,
            round: self.round,
            hosts: target.hosts,
            spread: target.spread,
            ensemble: target.ensemble,
            options: self.options,
            interrupt: self.interrupt,
            progress: self.progress,
        };
        let mut succeeded = true;
        for &workload in &self.options.workloads {
            if self.interrupt.is_set() {
                break;
            }
            if let Err(error) = workloads::run(workload, &context, results).await {
                self.progress.println(format!(
                    "zoolog bench: {server} {}: {error}",
                    workload.name()
                ));
                succeeded = false;
            }
        }
        succeeded
    }
}

/// The first Ctrl-C stops the run gracefully; a second one exits at once.
async fn stop_on_ctrl_c(interrupt: Signal) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    eprintln!("\nzoolog bench: stopping after the current point (Ctrl-C again to quit at once)");
    interrupt.set();
    if tokio::signal::ctrl_c().await.is_ok() {
        std::process::exit(INTERRUPTED_EXIT_CODE.into());
    }
}

/// The floor of the disk where the benchmark's servers keep their data, measured before
/// they start, as a line of the summary.
async fn disk_floor_note() -> String {
    let dir = std::env::temp_dir();
    let shown = dir.display().to_string();
    let measured = tokio::task::spawn_blocking(move || floor::DiskFloor::measure(&dir))
        .await
        .map_err(|error| error.to_string())
        .and_then(|floor| floor.map_err(|error| error.to_string()));
    match measured {
        Ok(floor) => format!("disk floor in {shown}, before any server starts: {floor}"),
        Err(error) => format!("disk floor in {shown}: not measured ({error})"),
    }
}

fn planned_time(options: &Options) -> std::time::Duration {
    let points: usize = options
        .workloads
        .iter()
        .map(|&workload| workloads::planned_points(workload, options))
        .sum();
    let servers = if options.compare { COMPARED.len() } else { 1 };
    (options.warmup + options.duration) * (points * servers * options.rounds) as u32
}

fn write_results(
    out_dir: &std::path::Path,
    options: &Options,
    settings: &[String],
    results: &[Measurement],
) -> std::io::Result<()> {
    report::write_csv_files(out_dir, results)?;
    let combined = stats::combine_rounds(results);
    let mut summary = describe_run(options, settings);
    summary.push_str(&report::results_tables(&combined));
    if options.compare {
        let ratios = report::ratios(&combined);
        std::fs::write(out_dir.join("comparison.csv"), report::ratios_csv(&ratios))?;
        let _ = write!(
            summary,
            "\n### zoolog / Apache ZooKeeper\n\n{}",
            report::ratios_table(&ratios)
        );
        if let Some(servers) = options.ensemble {
            let _ = write!(
                summary,
                "\n### Targets ({servers}-server ensembles)\n\n{}",
                report::ensemble_targets(results)
            );
        }
    }
    match plot::write_plots(out_dir, &combined) {
        Ok(paths) => {
            for path in paths {
                let _ = writeln!(summary, "\nPlot: {}", path.display());
            }
        }
        Err(error) => eprintln!("zoolog bench: no plot: {error}"),
    }
    println!("{summary}");
    std::fs::write(out_dir.join("summary.md"), summary)
}

/// The header of the summary: the command's parameters, the machine, and the servers' settings.
fn describe_run(options: &Options, settings: &[String]) -> String {
    let mut text = String::from("## zoolog bench\n\n");
    let _ = writeln!(text, "- machine: {}", report::machine_description());
    for line in settings {
        let _ = writeln!(text, "- {line}");
    }
    let _ = writeln!(
        text,
        "- per point: {:.1} s warm-up (not measured) + {:.1} s measured; throughput: {} sessions × {} outstanding, {}-byte values; \
         creates: workers {:?}; barrier: clients {:?}; recipes: {} contending clients",
        options.warmup.as_secs_f64(),
        options.duration.as_secs_f64(),
        options.sessions,
        options.outstanding,
        options.value_bytes,
        options.create_workers,
        options.barrier_clients,
        options.recipe_clients,
    );
    let _ = writeln!(
        text,
        "- the benchmark client ({} thread{}) runs on the same machine as the server and shares its cores",
        options.client_threads,
        if options.client_threads == 1 { "" } else { "s" },
    );
    if let Some(servers) = options.ensemble {
        let _ = writeln!(
            text,
            "- {servers}-server ensembles, measured one after the other; sessions spread \
             round-robin over the servers; leader-kill: {} trials",
            options.leader_kills
        );
    }
    if options.rounds > 1 {
        let _ = writeln!(
            text,
            "- {} rounds, each on fresh servers, the servers alternating; every row below combines \
             them: the rate over all rounds' measured time, each latency figure the median of \
             the rounds' (leader-kill max: the largest); results.csv has every round's rows",
            options.rounds
        );
    }
    text
}

fn default_out_dir() -> PathBuf {
    let now_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    PathBuf::from("bench-results").join(utc_timestamp(now_s))
}

/// `HH:MM:SS.ffffffZ`, the time of day of `at` in UTC as the servers' logs print it, so that
/// an event the benchmark reports can be found in them.
pub(crate) fn utc_time_of_day(at: SystemTime) -> String {
    let since_epoch = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (hour, minute, second) = clock_of_day(since_epoch.as_secs() % 86_400);
    format!(
        "{hour:02}:{minute:02}:{second:02}.{:06}Z",
        since_epoch.subsec_micros()
    )
}

/// Hours, minutes and seconds of a second of the day.
fn clock_of_day(second_of_day: u64) -> (u64, u64, u64) {
    (
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60,
    )
}

/// `YYYYMMDDTHHMMSSZ` for seconds since the Unix epoch.
fn utc_timestamp(unix_s: u64) -> String {
    let (year, month, day) = civil_date(unix_s / 86_400);
    let (hour, minute, second) = clock_of_day(unix_s % 86_400);
    format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}Z")
}

/// The proleptic Gregorian date of a day number counted from 1970-01-01, by walking whole
/// years and then months (at most a few thousand steps for any date a clock can give).
fn civil_date(mut days: u64) -> (u64, u64, u64) {
    let is_leap = |year: u64| {
        (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
    };
    let mut year = 1970;
    loop {
        let year_days = if is_leap(year) { 366 } else { 365 };
        if days < year_days {
            break;
        }
        days -= year_days;
        year += 1;
    }
    let february = if is_leap(year) { 29 } else { 28 };
    let month_days = [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut month = 1;
    for length in month_days {
        if days < length {
            break;
        }
        days -= length;
        month += 1;
    }
    (year, month, days + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc_timestamp(0), "19700101T000000Z");
        assert_eq!(utc_timestamp(951_782_400), "20000229T000000Z");
        assert_eq!(utc_timestamp(1_763_757_296), "20251121T203456Z");
        assert_eq!(utc_timestamp(1_767_225_599), "20251231T235959Z");
        let at = UNIX_EPOCH + std::time::Duration::from_micros(1_767_225_599_000_042);
        assert_eq!(utc_time_of_day(at), "23:59:59.000042Z");
    }

    #[test]
    fn planned_time_covers_every_point_on_every_server() {
        let options = Options {
            compare: true,
            ..Options::default()
        };
        // 5 read ratios + 3 worker counts + 2 barrier sizes + 4 recipes, 12 s each, twice.
        assert_eq!(planned_time(&options).as_secs(), 14 * 12 * 2);
        let rounds = Options {
            rounds: 3,
            ..options
        };
        assert_eq!(planned_time(&rounds).as_secs(), 14 * 12 * 2 * 3);
    }
}

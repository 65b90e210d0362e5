//! `zoolog ensemble up N [--observers M] [--dir DIR]`: a local N-server ensemble for
//! development, in the foreground until Ctrl-C or SIGTERM.
//!
//! The layout and the processes are those of the benchmark's ensembles
//! ([`zoolog_bench::servers::Ensemble`]): `DIR/s<ID>/{zoo.cfg, data/myid, server.log, pid}` and
//! `DIR/ensemble.json` (the format of tests/ensemble/ensemble.py), every server a `zoolog serve`
//! of this executable on free ports of 127.0.0.1. The data is kept: running `up` again with the
//! same sizes and directory restarts the same ensemble on new ports.

use std::path::PathBuf;
use std::process::ExitCode;

use zoolog_bench::servers::{Ensemble, ServerKind};

const USAGE: &str = "usage: zoolog ensemble up N [--observers M] [--dir DIR]

  N               participants (voting servers), 1 to 9
  --observers M   non-voting observers besides them (default 0)
  --dir DIR       where the servers keep configs, data and logs (default ./zoolog-ensemble)

Starts the servers, waits until one leads and the others follow, prints the connect string,
and runs until Ctrl-C or SIGTERM, which stop every server.";

const SERVERS_MAX: usize = 9;

struct Options {
    participants: usize,
    observers: usize,
    dir: PathBuf,
}

pub fn run(args: &[String]) -> ExitCode {
    let options = match parse(args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("zoolog ensemble: {error}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("zoolog ensemble: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(up(options))
}

fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut args = args.iter();
    match args.next().map(String::as_str) {
        Some("up") => {}
        Some("-h" | "--help" | "help") => return Ok(None),
        Some(other) => return Err(format!("unknown subcommand {other}")),
        None => return Err("missing subcommand".into()),
    }
    let mut options = Options {
        participants: 0,
        observers: 0,
        dir: PathBuf::from("zoolog-ensemble"),
    };
    let mut participants = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--observers" => options.observers = count(args.next(), "--observers", 0)?,
            "--dir" => {
                options.dir = PathBuf::from(args.next().ok_or("--dir needs a value")?);
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            number if participants.is_none() => {
                participants = Some(count(Some(&number.to_string()), "N", 1)?)
            }
            extra => return Err(format!("unexpected argument {extra}")),
        }
    }
    options.participants = participants.ok_or("missing N, the number of servers")?;
    if options.participants + options.observers > SERVERS_MAX {
        return Err(format!("at most {SERVERS_MAX} servers"));
    }
    Ok(Some(options))
}

fn count(value: Option<&String>, name: &str, min: usize) -> Result<usize, String> {
    let value = value.ok_or_else(|| format!("{name} needs a value"))?;
    match value.parse::<usize>() {
        Ok(count) if (min..=SERVERS_MAX).contains(&count) => Ok(count),
        _ => Err(format!(
            "{name}: {value} is not a whole number in {min}..={SERVERS_MAX}"
        )),
    }
}

async fn up(options: Options) -> ExitCode {
    let ensemble = match Ensemble::create(
        ServerKind::Zoolog,
        options.participants,
        options.observers,
        Some(&options.dir),
    ) {
        Ok(ensemble) => ensemble,
        Err(error) => {
            eprintln!("zoolog ensemble: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(terminate) => terminate,
            Err(error) => {
                eprintln!("zoolog ensemble: cannot watch SIGTERM: {error}");
                return ExitCode::FAILURE;
            }
        };
    let started = tokio::select! {
        started = ensemble.up() => started,
        _ = tokio::signal::ctrl_c() => Err("interrupted while starting".into()),
        _ = terminate.recv() => Err("terminated while starting".into()),
    };
    let leader = match started {
        Ok(leader) => leader,
        Err(error) => {
            eprintln!("zoolog ensemble: {error}");
            ensemble.stop_all();
            return ExitCode::FAILURE;
        }
    };
    let modes = ensemble.modes().await;
    println!(
        "zoolog ensemble: {} servers in {}",
        ensemble.members().len(),
        ensemble.dir().display()
    );
    for (member, (_, mode)) in ensemble.members().iter().zip(&modes) {
        println!(
            "  server.{} 127.0.0.1:{} {} (pid file, zoo.cfg, server.log in {})",
            member.id,
            member.client_port,
            mode.as_deref().unwrap_or("?"),
            member.dir.display()
        );
    }
    println!("leader: server.{leader}");
    println!("connect string: {}", ensemble.connect_string());
    println!(
        "try: zoolog shell -server {}\nstop: Ctrl-C here, or kill {} (SIGTERM)",
        ensemble.connect_string(),
        std::process::id()
    );
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    eprintln!("zoolog ensemble: stopping the servers");
    ensemble.stop_all();
    eprintln!(
        "zoolog ensemble: stopped; data kept in {}",
        ensemble.dir().display()
    );
    ExitCode::SUCCESS
}

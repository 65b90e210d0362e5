//! # zoolog
//!
//! The one binary. `zoolog serve [--config FILE] [-Dname=value ...]` runs a standalone server;
//! with no arguments it listens on 127.0.0.1:2181 and keeps its data in `./zoolog-data`.
//! It owns command-line parsing and process setup only; everything else lives in the crates.

use std::process::ExitCode;

use zoolog_server::ServerConfig;

const USAGE: &str = "usage: zoolog serve [--config FILE] [-Dname=value ...]
       zoolog shell [-server host:port[,host:port...]] [-c command]
       zoolog bench [--help]

  --config FILE   a zoo.cfg (Java properties) or a .toml file
  -Dname=value    a ZooKeeper system property (also read from SERVER_JVMFLAGS)
Logging: RUST_LOG=info (default), debug, warn…";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("shell") => zoolog_shell::run(&args[1..]),
        Some("bench") => zoolog_bench::run(&args[1..]),
        Some("--version" | "version") => {
            println!(
                "zoolog {} (ZooKeeper {} wire protocol)",
                env!("CARGO_PKG_VERSION"),
                zoolog_server::four_letter::ZOOKEEPER_VERSION
            );
            ExitCode::SUCCESS
        }
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn serve(args: &[String]) -> ExitCode {
    init_logging();
    let jvm_flags = std::env::var("SERVER_JVMFLAGS").ok();
    let config = match ServerConfig::from_args(args, jvm_flags.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("zoolog: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("zoolog: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(zoolog_server::shell::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("zoolog: {error}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .init();
}

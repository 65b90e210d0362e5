//! # zoolog
//!
//! The one binary. `zoolog serve [--config FILE] [-Dname=value ...]` runs a standalone server;
//! with no arguments it listens on 127.0.0.1:2181 and keeps its data in `./zoolog-data`.
//! `zoolog ensemble up N` runs a local N-server ensemble of such servers for development.
//! It owns command-line parsing and process setup only; everything else lives in the crates.

mod ensemble;

use std::ffi::{c_int, c_long};
use std::process::ExitCode;

use zoolog_server::ServerConfig;

const USAGE: &str = "usage: zoolog serve [--config FILE] [-Dname=value ...]
       zoolog shell [-server host:port[,host:port...]] [-c command]
       zoolog bench [--help]
       zoolog ensemble up N [--observers M] [--dir DIR]   (a local ensemble for development)

  --config FILE   a zoo.cfg (Java properties) or a .toml file
  -Dname=value    a ZooKeeper system property (also read from SERVER_JVMFLAGS)
Logging: RUST_LOG=info (default), debug, warn…; ZOOLOG_LOG_FORMAT=json for one JSON object
per line (timestamp, level, target, spans, message and fields), text (default) otherwise.";

/// A request allocates and frees many small buffers (frames, decoded fields, replies, log
/// records); glibc's malloc was a third of a server's CPU under load (see bench/README.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (`mimalloc.h`; the numbering of its options is kept
/// stable, and libmimalloc-sys's bindings leave this one out).
const MI_OPTION_PURGE_DELAY: c_int = 15;

extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}

/// Keeps freed memory in the process for reuse instead of handing it back to the kernel.
/// A server's memory cycles: an ensemble member holds every entry since its last snapshot,
/// so its heap fills to the same high-water mark between snapshots and empties at each one.
/// Memory returned in between (mimalloc does so a second after it is freed) was only faulted
/// in again, a 2 MiB transparent huge page at a time, each zeroed by the kernel inside
/// whatever thread touched it first, often the protocol thread: stalls of milliseconds.
/// Measured alternately against the default on this project's 2-vCPU host, the 10-worker
/// create p99 was lower in eight pairs of nine (bench/README.md, "Twenty-first session").
/// The resident size then stays at its high-water mark, as a JVM's heap does. Set for every
/// subcommand: the benchmark client shares the machine's cores with the servers it measures.
fn keep_freed_memory_for_reuse() {
    // SAFETY: mi_option_set only stores the value; mimalloc reads it at each purge decision.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

fn main() -> ExitCode {
    keep_freed_memory_for_reuse();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("shell") => zoolog_shell::run(&args[1..]),
        Some("bench") => zoolog_bench::run(&args[1..], runtime_builder),
        Some("ensemble") => ensemble::run(&args[1..]),
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
    let runtime = match runtime_builder(config.server_threads).enable_all().build() {
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

/// One thread runs everything on it; more make a work-stealing pool; 0 is one per CPU. One
/// thread is the default of the server and of the benchmark client, for processes sharing a
/// small machine: no hand-offs between threads (measured for the benchmark client: about 1.5×
/// the reads per second of a two-thread client against the same ensemble on two cores, with a
/// third of the p99).
fn runtime_builder(server_threads: usize) -> tokio::runtime::Builder {
    let threads = match server_threads {
        0 => std::thread::available_parallelism().map_or(1, |cpus| cpus.get()),
        threads => threads,
    };
    if threads == 1 {
        return tokio::runtime::Builder::new_current_thread();
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(threads);
    builder
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let format = std::env::var("ZOOLOG_LOG_FORMAT").unwrap_or_default();
    if format == "json" {
        builder.event_format(json_log::JsonLines).init();
        return;
    }
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    builder.with_ansi(colour).init();
    if !matches!(format.as_str(), "" | "text") {
        tracing::warn!("ZOOLOG_LOG_FORMAT={format:?}: expected json or text; using text");
    }
}

/// Log lines as JSON objects, one per line, for log shippers.
mod json_log {
    use std::fmt;

    use tracing::field::{Field, Visit};
    use tracing::{Event, Subscriber};
    use tracing_subscriber::fmt::format::Writer;
    use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
    use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
    use tracing_subscriber::registry::LookupSpan;
    use zoolog_server::json::Json;

    pub struct JsonLines;

    impl<S, N> FormatEvent<S, N> for JsonLines
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
        N: for<'a> FormatFields<'a> + 'static,
    {
        fn format_event(
            &self,
            context: &FmtContext<'_, S, N>,
            mut writer: Writer<'_>,
            event: &Event<'_>,
        ) -> fmt::Result {
            let mut timestamp = String::new();
            SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
            let metadata = event.metadata();
            let spans = context
                .event_scope()
                .into_iter()
                .flat_map(|scope| scope.from_root())
                .map(|span| Json::str(span.name()))
                .collect();
            let mut fields = vec![
                ("timestamp".to_owned(), Json::Str(timestamp)),
                ("level".to_owned(), Json::str(metadata.level().as_str())),
                ("target".to_owned(), Json::str(metadata.target())),
                ("spans".to_owned(), Json::Array(spans)),
            ];
            event.record(&mut FieldCollector(&mut fields));
            writeln!(writer, "{}", Json::Object(fields).to_json_string())
        }
    }

    /// Gathers an event's fields (its message included) as JSON values.
    struct FieldCollector<'a>(&'a mut Vec<(String, Json)>);

    impl FieldCollector<'_> {
        fn push(&mut self, field: &Field, value: Json) {
            self.0.push((field.name().to_owned(), value));
        }
    }

    impl Visit for FieldCollector<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.push(field, Json::Str(format!("{value:?}")));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.push(field, Json::str(value));
        }
        fn record_i64(&mut self, field: &Field, value: i64) {
            self.push(field, Json::Int(value));
        }
        fn record_u64(&mut self, field: &Field, value: u64) {
            self.push(field, Json::count(value));
        }
        fn record_bool(&mut self, field: &Field, value: bool) {
            self.push(field, Json::Bool(value));
        }
        fn record_f64(&mut self, field: &Field, value: f64) {
            self.push(field, Json::Float(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn mi_option_get(option: c_int) -> c_long;
    }

    /// The number names the purge delay: before it is set it holds the purge delay's default
    /// (1000 ms in mimalloc v3, which Cargo.lock pins) or the environment's override.
    #[test]
    fn the_option_kept_at_minus_one_is_mimallocs_purge_delay() {
        let expected_default = std::env::var("MIMALLOC_PURGE_DELAY")
            .ok()
            .and_then(|value| value.parse().ok())
            .unwrap_or(1000);
        // SAFETY: reading an option has no preconditions.
        let before = unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(before, expected_default);
        keep_freed_memory_for_reuse();
        let after = unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(after, -1);
    }
}

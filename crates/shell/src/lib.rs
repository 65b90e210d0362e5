//! # zoolog-shell
//!
//! `zoolog shell`: a command shell for ZooKeeper and zoolog that zkCli users already know: the
//! same commands with the same options (ls, get, set, create, stat, getAcl, setAcl, addWatch,
//! removewatches, setquota, reconfig, …), the same output and error sentences, the same prompt
//! (`[zk: host:port(CONNECTED) 0] `) and the same watch event lines (zkCli 3.9's, with zxid).
//!
//! It owns the shell's command line, the parsing of command lines, zkCli's output formats, the
//! interactive editor (history in `~/.zoolog_history`, Tab completion of commands and of znode
//! paths listed through the live session, events printed above the line being typed) and the
//! non-interactive forms (`-c "cmd"`, trailing words, or commands on stdin; see `batch` for
//! the exit status). It never speaks the wire protocol itself (zoolog-client does) and never
//! retries a command on its own.
//!
//! Known differences from zkCli: `create` without data stores empty data, not null, and `get`
//! prints null data as an empty line; `config` reads `/zookeeper/config` under the chroot;
//! `removewatches -l` removes through the server; the non-interactive forms print no banner;
//! `version` prints no build date; `reconfig -file` sends the file's `server.N`, `group.` and
//! `weight.` lines as they are, where zkCli first parses and checks them.

mod access_commands;
mod acl;
mod batch;
mod connection;
mod events;
mod format;
mod interactive;
mod invocation;
mod node_commands;
mod options;
mod quota_commands;
mod reconfig_command;
mod shell;
mod watch_commands;
mod words;

use std::io::IsTerminal;
use std::process::ExitCode;

use options::{Options, USAGE};

/// Runs `zoolog shell` with the arguments after `shell`; returns the exit status.
pub fn run(args: &[String]) -> ExitCode {
    let options = match Options::parse(args) {
        Ok(options) => options,
        Err(complaint) => {
            eprintln!("zoolog shell: {complaint}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // One worker: the shell's work is a few requests at a time and event printers.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("zoolog shell: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let status = match &options.command {
        Some(command) => batch::run_command(&runtime, &options, command),
        None if std::io::stdin().is_terminal() => interactive::run(&runtime, &options),
        None => batch::run_script(&runtime, &options, std::io::stdin().lock()),
    };
    // Event printers may still be waiting on watches; they end with the runtime.
    runtime.shutdown_background();
    ExitCode::from(status)
}

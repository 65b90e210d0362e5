//! The non-interactive shell: one command (`-c "…"` or trailing words), or a script of
//! commands on stdin, one a line, blank lines and `#` comments skipped.
//!
//! Output is each command's own, without the banner and the connection event an interactive
//! session starts with, so it can be compared or parsed. The exit status is zkCli's for a single
//! command (0, 1 when it failed, 127 when there is no such command); for a script it is that of
//! the last command that failed, or 0 if none did, where zkCli would report only the last
//! command's: a script that hits an error says so whatever comes after.

use std::io::BufRead;

use tokio::runtime::Runtime;

use crate::events::EventPrinter;
use crate::options::{Command, Options};
use crate::shell::{Outcome, Shell};

pub(crate) fn run_command(runtime: &Runtime, options: &Options, command: &Command) -> u8 {
    let Some(mut shell) = open(runtime, options) else {
        return 1;
    };
    let outcome = runtime.block_on(async {
        let outcome = match command {
            Command::Line(line) => shell.run_line(line).await,
            Command::Words(words) => shell.run_words(words).await,
        };
        shell.finish().await;
        outcome
    });
    outcome.exit_status()
}

pub(crate) fn run_script(runtime: &Runtime, options: &Options, input: impl BufRead) -> u8 {
    let Some(mut shell) = open(runtime, options) else {
        return 1;
    };
    let mut status = 0;
    for line in input.lines() {
        let Ok(line) = line else {
            eprintln!("zoolog shell: cannot read the commands from stdin");
            status = 1;
            break;
        };
        if line.trim_start().starts_with('#') {
            continue;
        }
        match runtime.block_on(shell.run_line(&line)) {
            Outcome::Quit => break,
            Outcome::Succeeded => {}
            failed => status = failed.exit_status(),
        }
    }
    runtime.block_on(shell.finish());
    status
}

fn open(runtime: &Runtime, options: &Options) -> Option<Shell> {
    let mut shell = Shell::new(options, EventPrinter::new());
    match runtime.block_on(shell.open(false)) {
        Ok(()) => Some(shell),
        Err(message) => {
            eprintln!("{message}");
            None
        }
    }
}

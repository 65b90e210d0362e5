//! The shell proper: runs one command line at a time against the current session, keeps the
//! numbered history that `history` and `redo` use, and reports how each command ended.

use zoolog_client::{Client, ClientOptions, Error};
use zoolog_proto::ZOOKEEPER_VERSION;

use crate::connection::{Connection, SessionCell};
use crate::events::EventPrinter;
use crate::format::{error_text, prompt_state_name};
use crate::invocation::{find_command, help_text, CommandSpec, Invocation};
use crate::options::Options;
use crate::words::split_words;

/// How a command ended, which decides the exit status of a non-interactive run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Succeeded,
    Failed,
    NotFound,
    Quit,
}

impl Outcome {
    /// zkCli's exit statuses: 1 for a failed command, 127 for an unknown one.
    pub fn exit_status(self) -> u8 {
        match self {
            Outcome::Succeeded | Outcome::Quit => 0,
            Outcome::Failed => 1,
            Outcome::NotFound => 127,
        }
    }
}

/// Why a command failed, and so what the user is told.
pub(crate) enum Failure {
    /// Malformed: the command's usage line.
    Usage,
    /// zkCli's own sentence for it.
    Message(String),
    /// The server or the session said no about this path.
    Client(Error, Option<String>),
    /// No live session; zkCli prints this on stdout.
    NotConnected,
}

impl Failure {
    /// Maps a client error about `path` (for `map_err`).
    pub fn on(path: &str) -> impl FnOnce(Error) -> Failure + '_ {
        move |error| Failure::Client(error, Some(path.to_owned()))
    }
}

pub(crate) type CommandResult = Result<(), Failure>;

pub(crate) struct Shell {
    pub(crate) connection: Connection,
    pub(crate) events: EventPrinter,
    /// Every command line run, numbered from 0 as `history` shows them.
    history: Vec<String>,
}

impl Shell {
    pub fn new(options: &Options, events: EventPrinter) -> Shell {
        let client_options = ClientOptions {
            session_timeout_ms: options.session_timeout_ms,
            connect_timeout_ms: u64::from(options.session_timeout_ms),
            read_only_allowed: options.read_only_allowed,
            ..ClientOptions::default()
        };
        Shell {
            connection: Connection::new(options.server.clone(), client_options),
            events,
            history: Vec::new(),
        }
    }

    pub fn session_cell(&self) -> SessionCell {
        self.connection.session_cell()
    }

    /// Opens the session; `announce` prints the connection event as zkCli does at start.
    pub async fn open(&mut self, announce: bool) -> Result<(), String> {
        let state =
            self.connection.open(&self.events).await.map_err(|error| {
                format!("Unable to connect to {}: {error}", self.connection.host)
            })?;
        if announce {
            self.events.print_session(state);
        }
        Ok(())
    }

    /// Ends the session, if any.
    pub async fn close(&mut self) {
        self.connection.close().await;
    }

    /// Ends the session on the way out, without the Closed event `close` prints.
    pub async fn finish(&mut self) {
        self.events.set_enabled(false);
        self.close().await;
    }

    /// zkCli's prompt: `[zk: host:port(CONNECTED) 3] `.
    pub fn prompt(&self) -> String {
        format!(
            "[zk: {}({}) {}] ",
            self.connection.host,
            prompt_state_name(self.connection.state()),
            self.history.len()
        )
    }

    /// Runs one typed line; blank lines do nothing and are not numbered.
    pub async fn run_line(&mut self, line: &str) -> Outcome {
        let words = split_words(line);
        if words.is_empty() {
            return Outcome::Succeeded;
        }
        self.history.push(line.trim().to_owned());
        if words[0] == "redo" {
            return self.redo(&words[1..]).await;
        }
        self.run_words(&words).await
    }

    /// Runs a command already split into words (zoolog shell's trailing arguments).
    pub async fn run_words(&mut self, words: &[String]) -> Outcome {
        let Some((name, arguments)) = words.split_first() else {
            return Outcome::Succeeded;
        };
        let Some(spec) = find_command(name) else {
            eprint!("{}", help_text());
            eprintln!("Command not found: Command not found {name}");
            return Outcome::NotFound;
        };
        let result = match Invocation::parse(spec, arguments) {
            Ok(invocation) => self.dispatch(spec, &invocation).await,
            Err(complaint) => Err(Failure::Message(complaint)),
        };
        match result {
            Ok(()) if spec.name == "quit" => Outcome::Quit,
            Ok(()) => Outcome::Succeeded,
            Err(failure) => {
                report(spec, failure);
                Outcome::Failed
            }
        }
    }

    async fn dispatch(&mut self, spec: &CommandSpec, invocation: &Invocation) -> CommandResult {
        match spec.name {
            "addWatch" => self.add_watch(invocation).await,
            "addauth" => self.add_auth(invocation).await,
            "close" => {
                self.close().await;
                Ok(())
            }
            // The caller ends the session on its way out.
            "quit" => Ok(()),
            "config" => self.config(invocation).await,
            "connect" => self.connect(invocation).await,
            "create" => self.create(invocation).await,
            "delete" => self.delete(invocation).await,
            "deleteall" => self.delete_all(invocation).await,
            "delquota" => self.delete_quota(invocation).await,
            "get" => self.get(invocation).await,
            "getAcl" => self.get_acl(invocation).await,
            "getAllChildrenNumber" => self.all_children_number(invocation).await,
            "getEphemerals" => self.ephemerals(invocation).await,
            "help" => {
                print!("{}", help_text());
                Ok(())
            }
            "history" => {
                self.print_history();
                Ok(())
            }
            "listquota" => self.list_quota(invocation).await,
            "ls" => self.ls(invocation).await,
            "printwatches" => self.print_watches(invocation),
            "reconfig" => self.reconfig(invocation).await,
            "removewatches" => self.remove_watches(invocation).await,
            "set" => self.set(invocation).await,
            "setAcl" => self.set_acl(invocation).await,
            "setquota" => self.set_quota(invocation).await,
            "stat" => self.stat(invocation).await,
            "sync" => self.sync(invocation).await,
            "version" => {
                println!("ZooKeeper CLI version: {ZOOKEEPER_VERSION}");
                Ok(())
            }
            "whoami" => self.who_am_i().await,
            // run_line takes `redo` apart; it is reached here only as the redo of a redo.
            "redo" => Err(Failure::Message("No redoing redos".into())),
            other => unreachable!("{other} is in the command table but not dispatched"),
        }
    }

    /// The live session, or the failure that prints `Not connected`.
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        self.connection.live_client().ok_or(Failure::NotConnected)
    }

    /// `connect [host:port]`: ends the current session and opens one to the host (the same
    /// one when none is given).
    async fn connect(&mut self, invocation: &Invocation) -> CommandResult {
        self.connection.close().await;
        if let Some(host) = invocation.argument(0) {
            self.connection.host = host.to_owned();
        }
        self.open(true).await.map_err(Failure::Message)
    }

    /// The last eleven lines, this `history` included, as zkCli shows them.
    fn print_history(&self) {
        let first = self.history.len().saturating_sub(11);
        for (number, line) in self.history.iter().enumerate().skip(first) {
            println!("{number} - {line}");
        }
    }

    /// `redo N` runs line N again, and takes its place in the history.
    async fn redo(&mut self, arguments: &[String]) -> Outcome {
        let spec = find_command("redo").expect("redo is in the table");
        let line = match arguments.first().map(|number| number.parse::<usize>()) {
            Some(Ok(number)) => self.history.get(number).cloned(),
            _ => {
                report(spec, Failure::Usage);
                return Outcome::Failed;
            }
        };
        let Some(line) = line else {
            report(spec, Failure::Message("Command index out of range".into()));
            return Outcome::Failed;
        };
        if let Some(last) = self.history.last_mut() {
            *last = line.clone();
        }
        self.run_words(&split_words(&line)).await
    }
}

/// Tells the user why `spec` failed, where zkCli does: stderr, except `Not connected`.
fn report(spec: &CommandSpec, failure: Failure) {
    match failure {
        Failure::Usage => eprintln!("{}", spec.usage()),
        Failure::Message(message) => eprintln!("{message}"),
        Failure::Client(error, path) => eprintln!("{}", error_text(&error, path.as_deref())),
        Failure::NotConnected => println!("Not connected"),
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    #[test]
    fn exit_statuses_are_zkclis() {
        assert_eq!(Outcome::Succeeded.exit_status(), 0);
        assert_eq!(Outcome::Quit.exit_status(), 0);
        assert_eq!(Outcome::Failed.exit_status(), 1);
        assert_eq!(Outcome::NotFound.exit_status(), 127);
    }
}

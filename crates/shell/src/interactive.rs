//! The interactive shell: line editing with a persistent history (~/.zoolog_history), Tab
//! completion of command names and of znode paths (listed through the live session), and events
//! printed above the line being typed.

use std::path::PathBuf;
use std::time::Duration;

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{CompletionType, Config, Context, Editor, ExternalPrinter, Helper};
use tokio::runtime::Runtime;

use crate::connection::SessionCell;
use crate::events::EventPrinter;
use crate::invocation::COMMANDS;
use crate::node_commands::child_path;
use crate::options::Options;
use crate::shell::{Outcome, Shell};

const HISTORY_FILE: &str = ".zoolog_history";
const HISTORY_LINES_MAX: usize = 1000;
/// A completion waits this long for the server's list of children, then offers nothing.
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) fn run(runtime: &Runtime, options: &Options) -> u8 {
    let events = EventPrinter::new();
    let mut shell = Shell::new(options, events.clone());
    let mut editor = match new_editor(&shell, runtime) {
        Ok(editor) => editor,
        Err(error) => {
            eprintln!("zoolog shell: cannot set up the terminal: {error}");
            return 1;
        }
    };
    if let Ok(mut printer) = editor.create_external_printer() {
        // A message that cannot be drawn has nowhere else to go.
        events.use_external(Box::new(move |text| drop(printer.print(text))));
    }
    let history = history_path();
    if let Some(path) = &history {
        // No history file yet is the usual first run.
        let _ = editor.load_history(path);
    }
    println!("Connecting to {}", options.server);
    println!("Welcome to ZooKeeper!");
    if let Err(message) = runtime.block_on(shell.open(true)) {
        eprintln!("{message}");
    }
    read_eval_print(&mut editor, &mut shell, runtime, history.as_ref());
    runtime.block_on(shell.finish());
    0
}

fn read_eval_print(
    editor: &mut Editor<ShellHelper, DefaultHistory>,
    shell: &mut Shell,
    runtime: &Runtime,
    history: Option<&PathBuf>,
) {
    loop {
        match editor.readline(&shell.prompt()) {
            Ok(line) => {
                remember(editor, &line, history);
                if runtime.block_on(shell.run_line(&line)) == Outcome::Quit {
                    return;
                }
            }
            // Ctrl-C drops the line being typed, as in a Unix shell.
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => return,
            Err(error) => {
                eprintln!("zoolog shell: {error}");
                return;
            }
        }
    }
}

/// Adds the line to the history and to the history file at once, so a killed shell loses none.
fn remember(
    editor: &mut Editor<ShellHelper, DefaultHistory>,
    line: &str,
    history: Option<&PathBuf>,
) {
    if line.trim().is_empty() {
        return;
    }
    let added = editor.add_history_entry(line).unwrap_or(false);
    if let (true, Some(path)) = (added, history) {
        if let Err(error) = editor.append_history(path) {
            eprintln!(
                "zoolog shell: cannot save the history to {}: {error}",
                path.display()
            );
        }
    }
}

fn new_editor(
    shell: &Shell,
    runtime: &Runtime,
) -> rustyline::Result<Editor<ShellHelper, DefaultHistory>> {
    let config = Config::builder()
        .completion_type(CompletionType::List)
        .max_history_size(HISTORY_LINES_MAX)?
        .build();
    let mut editor = Editor::with_config(config)?;
    editor.set_helper(Some(ShellHelper {
        session: shell.session_cell(),
        runtime: runtime.handle().clone(),
    }));
    Ok(editor)
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(HISTORY_FILE))
}

/// Completes the command name in first place, and znode paths anywhere after it.
struct ShellHelper {
    session: SessionCell,
    runtime: tokio::runtime::Handle,
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before
            .rfind(char::is_whitespace)
            .map_or(0, |blank| blank + 1);
        let word = &before[start..];
        let candidates = if before[..start].trim().is_empty() {
            command_candidates(word)
        } else if word.starts_with('/') {
            self.path_candidates(word)
        } else {
            Vec::new()
        };
        Ok((start, candidates))
    }
}

impl ShellHelper {
    /// The children of the word's parent whose names start with what follows its last `/`.
    fn path_candidates(&self, word: &str) -> Vec<Pair> {
        let slash = word.rfind('/').unwrap_or(0);
        let parent = if slash == 0 { "/" } else { &word[..slash] };
        let prefix = &word[slash + 1..];
        let mut children = self.children(parent);
        children.sort();
        children
            .into_iter()
            .filter(|child| child.starts_with(prefix))
            .map(|child| Pair {
                replacement: child_path(parent, &child),
                display: child,
            })
            .collect()
    }

    /// Nothing when there is no session, the parent does not exist or the server is slow:
    /// completion is a convenience and never an error.
    fn children(&self, parent: &str) -> Vec<String> {
        let client = self.session.lock().ok().and_then(|session| session.clone());
        let Some(client) = client else {
            return Vec::new();
        };
        // The timer must be made inside the runtime, hence the async block.
        let listed = self.runtime.block_on(async {
            tokio::time::timeout(COMPLETION_TIMEOUT, client.get_children(parent)).await
        });
        match listed {
            Ok(Ok(children)) => children,
            _ => Vec::new(),
        }
    }
}

fn command_candidates(prefix: &str) -> Vec<Pair> {
    COMMANDS
        .iter()
        .filter(|spec| spec.name.starts_with(prefix))
        .map(|spec| Pair {
            display: spec.name.to_owned(),
            replacement: format!("{} ", spec.name),
        })
        .collect()
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {}

impl Validator for ShellHelper {}

impl Helper for ShellHelper {}

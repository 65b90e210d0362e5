//! Prints watch events and session state changes as they arrive, from tasks of their own.
//!
//! Interactively the text goes through the line editor's external printer, which draws it above
//! the line being typed instead of through it; otherwise straight to stdout.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use zoolog_client::{Error, PersistentWatch, SessionState, Watch, WatchedEvent};

use crate::format::{session_event_text, watched_event_text};

/// Something that prints a block of text without garbling the line being edited.
pub(crate) type ExternalPrinter = Box<dyn FnMut(String) + Send>;

/// Notifications remembered to print each one once (see [`EventPrinter::print_watched`]).
const RECENT_NOTIFICATIONS_MAX: usize = 64;

/// Where events go, and whether they are printed at all (`printwatches on|off`). Cheap to clone;
/// clones share everything.
#[derive(Clone)]
pub(crate) struct EventPrinter {
    inner: Arc<Inner>,
}

struct Inner {
    external: Mutex<Option<ExternalPrinter>>,
    enabled: AtomicBool,
    recent: Mutex<VecDeque<(String, i32, i64)>>,
}

impl EventPrinter {
    pub fn new() -> EventPrinter {
        EventPrinter {
            inner: Arc::new(Inner {
                external: Mutex::new(None),
                enabled: AtomicBool::new(true),
                recent: Mutex::new(VecDeque::new()),
            }),
        }
    }

    /// From now on, print through the line editor.
    pub fn use_external(&self, printer: ExternalPrinter) {
        *lock(&self.inner.external) = Some(printer);
    }

    pub fn set_enabled(&self, enabled: bool) {
        self.inner.enabled.store(enabled, Ordering::SeqCst);
    }

    pub fn enabled(&self) -> bool {
        self.inner.enabled.load(Ordering::SeqCst)
    }

    /// Prints the event the watch resolves with, once it does (a watch ended by the session's
    /// end prints nothing: the session event says it).
    pub fn follow(&self, watch: Watch) {
        let printer = self.clone();
        tokio::spawn(async move {
            if let Ok(event) = watch.await {
                printer.print_watched(&event);
            }
        });
    }

    /// Prints every event of a persistent watch until it is removed or the session ends.
    pub fn follow_persistent(&self, mut watch: PersistentWatch) {
        let printer = self.clone();
        tokio::spawn(async move {
            loop {
                match watch.next().await {
                    Ok(event) => printer.print_watched(&event),
                    Err(Error::WatchLagged { .. }) => continue,
                    Err(_) => break,
                }
            }
        });
    }

    /// Prints each session state change until the session reaches a final state.
    pub fn follow_session(&self, mut states: tokio::sync::broadcast::Receiver<SessionState>) {
        let printer = self.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                match states.recv().await {
                    Ok(state) => {
                        printer.print_session(state);
                        if state.is_final() {
                            break;
                        }
                    }
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                }
            }
        });
    }

    pub fn print_session(&self, state: SessionState) {
        self.print(session_event_text(state));
    }

    /// zkCli routes every watch to one watcher object, so one notification prints once however
    /// many of its watches it fires (get -w and stat -w on one node, say). This client gives
    /// each watch its own event, so one notification is recognised by its path, type and zxid.
    /// Servers that send no zxid (−1) leave nothing to recognise it by: those all print.
    fn print_watched(&self, event: &WatchedEvent) {
        if event.zxid >= 0 {
            let key = (event.path.clone(), event.event_type.code(), event.zxid);
            let mut recent = lock(&self.inner.recent);
            if recent.contains(&key) {
                return;
            }
            if recent.len() == RECENT_NOTIFICATIONS_MAX {
                recent.pop_front();
            }
            recent.push_back(key);
        }
        self.print(watched_event_text(event));
    }

    fn print(&self, text: String) {
        if !self.enabled() {
            return;
        }
        match lock(&self.inner.external).as_mut() {
            Some(external) => external(text),
            None => {
                let mut stdout = std::io::stdout().lock();
                // A closed stdout leaves nowhere to report to.
                let _ = stdout
                    .write_all(text.as_bytes())
                    .and_then(|()| stdout.flush());
            }
        }
    }
}

/// A poisoned lock only means a printing task panicked; what it guards is still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

//! The shell's one session at a time: opened at start and by `connect`, ended by `close`.
//! The client sits in a shared cell so the line editor's completer can list children through it.

use std::sync::{Arc, Mutex};

use zoolog_client::{Client, ClientOptions, Error, SessionState};

use crate::events::EventPrinter;

/// The current session, if any, shared with the completer.
pub(crate) type SessionCell = Arc<Mutex<Option<Client>>>;

pub(crate) struct Connection {
    /// The connect string as typed: `connect` replaces it, the prompt shows it.
    pub host: String,
    options: ClientOptions,
    session: SessionCell,
}

impl Connection {
    pub fn new(host: String, options: ClientOptions) -> Connection {
        Connection {
            host,
            options,
            session: SessionCell::default(),
        }
    }

    pub fn session_cell(&self) -> SessionCell {
        self.session.clone()
    }

    /// Opens a session to `host` and has `events` print its state changes from then on.
    pub async fn open(&mut self, events: &EventPrinter) -> Result<SessionState, Error> {
        let client = Client::connect(&self.host, self.options.clone()).await?;
        events.follow_session(client.session_events());
        let state = client.state();
        *self.cell() = Some(client);
        Ok(state)
    }

    /// Ends the session on the server (its ephemerals go at once), if there is one.
    pub async fn close(&mut self) {
        // The closed client stays in the cell so that the prompt says CLOSED, as zkCli's does.
        let client = self.cell().clone();
        if let Some(client) = client {
            // The reply to the close comes before the client records the Closed state; waiting
            // for it keeps the next prompt from saying CONNECTED. A session that cannot be
            // closed politely is left to expire: nothing else to do.
            if client.close().await.is_ok() {
                client.wait_for_state(SessionState::is_final).await;
            }
        }
    }

    /// The session, unless there is none or it has ended (closed, expired, refused).
    pub fn live_client(&self) -> Option<Client> {
        self.cell()
            .as_ref()
            .filter(|client| !client.state().is_final())
            .cloned()
    }

    pub fn state(&self) -> Option<SessionState> {
        self.cell().as_ref().map(Client::state)
    }

    fn cell(&self) -> std::sync::MutexGuard<'_, Option<Client>> {
        self.session
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

//! zoolog's deterministic simulator: one seed drives a whole Zab ensemble.
//!
//! A run builds 3 to 7 participants and 0 to 2 observers, each a [`zoolog_zab::Zab`] driven
//! exactly as its crate docs prescribe, over a simulated network (delay, reordering, loss,
//! duplication, partitions that come and go), simulated disks (unsynced writes lost on crash,
//! torn writes, durable epochs, truncations and snapshots) and a simulated clock, with clients
//! submitting commands and servers crashing and restarting at any point, even halfway through
//! a batch of actions, or stopping for a while (as SIGSTOP or a long pause would: their
//! inputs wait, in order, until they resume). A leader delays its own fsyncs and ends the
//! delay when a commit stalls, as the real driver does ([`zoolog_zab::OwnSync`] decides for
//! both). A fault phase is followed by a liveness phase:
//! everything heals and restarts, and the ensemble must elect a leader, acknowledge new
//! commands and converge; in zab mode a quarter of the seeds leave one participant (the
//! leader, if there is one) down, and the others must converge without it.
//! The checkers are described in [`checker`].
//!
//! That is [`Mode::Zab`]. In [`Mode::Core`] each server also runs the real front end
//! (`zoolog_server::core::Core` with the real data tree) over its Zab, exactly as the
//! ensemble shell wires them, and the clients speak the ZooKeeper wire protocol to it:
//! sessions, creates, setData and deletes with and without versions, reads, syncs,
//! ephemerals, closeSession, reconnection with the same session to another server, clients
//! killed without a word, and strangers trying their sessions with the wrong password. Its
//! extra checkers are described in [`zkcheck`]. Without `--mode`, odd seeds run core mode.
//!
//! This crate owns the simulation and its checkers. It must never read the real clock, use
//! OS randomness or iterate a hash map: every choice comes from one [`rng::Rng`] seeded by the
//! run's seed, and events run in (simulated time, scheduling order), so the same seed always
//! gives the same run. A failure carries the one command that replays it.

pub mod checker;
pub mod client;
pub mod disk;
pub mod network;
pub mod node;
pub mod queue;
pub mod rng;
mod world;
pub mod zkcheck;

use std::panic::{catch_unwind, AssertUnwindSafe};

/// What the servers run and what the clients speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Clients submit opaque commands to each server's Zab directly.
    Zab,
    /// Each server runs the real front end (`zoolog_server::core::Core`, with the real data
    /// tree) over its Zab; clients speak the ZooKeeper wire protocol to it.
    Core,
}

impl Mode {
    /// Without `--mode`, even seeds run Zab mode and odd seeds core mode.
    pub fn for_seed(seed: u64) -> Mode {
        if seed.is_multiple_of(2) {
            Mode::Zab
        } else {
            Mode::Core
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Zab => "zab",
            Mode::Core => "core",
        }
    }
}

/// How to run a seed; the defaults are what CI runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Print every event and action.
    pub trace: bool,
    /// Length of the fault phase (default: random per seed, 1 to 3 simulated seconds).
    pub faults_ms: Option<u64>,
    /// How long after the faults stop the ensemble has to converge.
    pub liveness_ms: u64,
    /// Force a mode (default: [`Mode::for_seed`]).
    pub mode: Option<Mode>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            trace: false,
            faults_ms: None,
            liveness_ms: 10_000,
            mode: None,
        }
    }
}

impl Options {
    /// The command line that replays `seed` with these options.
    pub fn replay_command(&self, seed: u64) -> String {
        let mut command = format!("cargo run -p zoolog-sim --release -- --seed {seed}");
        if let Some(ms) = self.faults_ms {
            command.push_str(&format!(" --faults-ms {ms}"));
        }
        if let Some(mode) = self.mode {
            command.push_str(&format!(" --mode {}", mode.name()));
        }
        if self.liveness_ms != Options::default().liveness_ms {
            command.push_str(&format!(" --liveness-ms {}", self.liveness_ms));
        }
        command
    }
}

/// What a successful run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub mode: Mode,
    pub participants: usize,
    pub observers: usize,
    pub benign: bool,
    pub events: u64,
    pub end_ms: u64,
    pub committed: u64,
    pub acked: u64,
    pub unknown: u64,
    pub unknown_committed: u64,
    pub crashes: u64,
    pub pauses: u64,
    pub epoch: u64,
    /// A hash of every event's time, order and kind: equal for equal seeds.
    pub trace_hash: u64,
    /// Core mode: write replies checked against the common sequence, reads checked against
    /// the common state (of which after a sync), sessions created and seen expired, watches
    /// left and seen fire (of which events of persistent watches), read-only sessions taken
    /// and their writes refused, multis that took effect whole and that failed whole,
    /// containers and TTL nodes reaped, sessions left by clients killed (every one ended) and
    /// strangers' knocks on them with the wrong password (every one refused).
    pub write_acks: u64,
    pub reads_checked: u64,
    pub synced_reads: u64,
    pub sessions_created: u64,
    pub sessions_expired: u64,
    pub watches_set: u64,
    pub watches_fired: u64,
    pub read_only_sessions: u64,
    pub writes_refused: u64,
    pub persistent_events: u64,
    pub reaped: u64,
    pub multis_applied: u64,
    pub multis_failed: u64,
    pub sessions_abandoned: u64,
    pub knocks_refused: u64,
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub at_ms: u64,
    pub message: String,
    pub replay: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} failed at {} ms: {}\nreplay: {}",
            self.seed, self.at_ms, self.message, self.replay
        )
    }
}

/// Runs one seed to the end, checking everything.
pub fn run_seed(seed: u64, options: &Options) -> Result<Report, Failure> {
    quiet_panics();
    let mut world = world::World::new(seed, options);
    let outcome = catch_unwind(AssertUnwindSafe(|| world.run()));
    let message = match outcome {
        Ok(Ok(())) => return Ok(world.report()),
        Ok(Err(message)) => message,
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            let location = PANIC_LOCATION.with(|l| l.take()).unwrap_or_default();
            format!("panic at {location}: {text}\n{}", world.describe_state())
        }
    };
    Err(Failure {
        seed,
        at_ms: world.now_ms(),
        message,
        replay: options.replay_command(seed),
    })
}

thread_local! {
    static PANIC_LOCATION: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
}

/// A panic in a run becomes that seed's failure (with its location), not a backtrace on
/// stderr; panics elsewhere are reported as before.
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_sim = std::thread::current().name() != Some("main")
                || std::env::var_os("ZOOLOG_SIM_PANICS").is_none();
            if in_sim {
                PANIC_LOCATION.with(|l| l.set(info.location().map(|l| l.to_string())));
            } else {
                previous(info);
            }
        }));
    });
}

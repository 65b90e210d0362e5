//! The writer threads of a log, and the order in which what they write is reported.
//!
//! A log's writer state (its queue, its [`crate::segment::SegmentWriter`]) is one core that
//! its writer threads take turns at: a thread takes the next batch, writes it, lets go of the
//! core and fdatasyncs its batch on its own, so the next batch is written, and its sync
//! started, while the first sync runs. A batch that arrives during a sync no longer waits
//! for that sync to end before its own begins; on this project's disks two syncs in flight
//! lowered the latency of ten concurrent writers' creates (see bench/README). With one
//! thread this is the plain write-then-sync loop.
//!
//! [`Syncs`] delivers each batch's completion in the order the batches were written,
//! whichever sync returns first, and holds the log's failure. It must never deliver a
//! completion before every earlier one, nor any once a write or a sync has failed; a turn
//! that rewrites files (a segment roll, a truncation, an install) first settles the syncs
//! in flight.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::error::{IoContext, LogError};
use crate::segment::SegmentSync;

/// Writer threads a log may run, and so syncs it may have in flight, at most.
pub(crate) const WRITERS_MAX: usize = 8;

/// A written batch's fdatasync, which its writer thread runs after letting go of the core.
pub(crate) trait BatchSync: Send {
    fn run(self) -> Result<(), LogError>;
}

impl BatchSync for SegmentSync {
    fn run(self) -> Result<(), LogError> {
        SegmentSync::run(self)
    }
}

/// How one turn at a log's core ended.
pub(crate) enum Turn<T, S> {
    /// A batch was written; `done` is delivered once `sync` (if any) has run.
    Written { sync: Option<S>, done: T },
    /// An operation was carried out whole; nothing to deliver.
    Carried,
    /// The queue is closed and empty, or the operation failed (and said so): the thread
    /// ends.
    Stop,
}

/// A log's writer state, which its writer threads take turns at.
pub(crate) trait WriterCore: Send + 'static {
    /// What a written batch delivers once durable.
    type Done: Send + 'static;
    type Sync: BatchSync;

    /// Takes the next operation from the log's queue (waiting for one) and carries it out
    /// as far as its sync. `writer` is the calling thread's index, whose file description
    /// the sync uses; `syncs` is there to settle before rewriting files.
    fn take_turn(
        &mut self,
        writer: usize,
        syncs: &Syncs<Self::Done>,
    ) -> Result<Turn<Self::Done, Self::Sync>, LogError>;
}

/// The completions of written batches, delivered in write order, and the log's failure.
pub(crate) struct Syncs<T> {
    state: Mutex<SyncState<T>>,
    /// Signalled when nothing is in flight any more, or the log failed.
    settled: Condvar,
    /// Set (before the delivery channel closes) when the log fails, for appenders to check
    /// without a lock.
    failed: AtomicBool,
}

type Deliver<T> = Box<dyn FnMut(T) + Send>;

struct SyncState<T> {
    next_ticket: u64,
    /// Tickets `next_ticket - pending.len()..next_ticket`, oldest first: `None` while the
    /// batch's sync runs, then what it delivers, until every earlier one is delivered.
    pending: VecDeque<Option<T>>,
    /// Dropped when the log fails or its last writer thread ends, which closes the channel
    /// it sends into.
    deliver: Option<Deliver<T>>,
    failure: Option<String>,
    writers_running: usize,
}

impl<T> std::fmt::Debug for Syncs<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Syncs")
            .field("next_ticket", &state.next_ticket)
            .field("pending", &state.pending.len())
            .field("failure", &state.failure)
            .field("writers_running", &state.writers_running)
            .finish()
    }
}

/// A written batch's place in the delivery order.
#[must_use = "a ticket is finished once its sync has run"]
pub(crate) struct Ticket(u64);

impl<T> Syncs<T> {
    /// Completions for `writers` threads to deliver through `deliver`.
    pub fn new(writers: usize, deliver: impl FnMut(T) + Send + 'static) -> Self {
        assert!(
            (1..=WRITERS_MAX).contains(&writers),
            "writers are checked with the limits"
        );
        Syncs {
            state: Mutex::new(SyncState {
                next_ticket: 0,
                pending: VecDeque::new(),
                deliver: Some(Box::new(deliver)),
                failure: None,
                writers_running: writers,
            }),
            settled: Condvar::new(),
            failed: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, SyncState<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Gives a batch just written its place; called with the core held, so tickets follow
    /// write order. `None` once the log has failed.
    pub fn begin(&self) -> Option<Ticket> {
        let mut state = self.state();
        if state.failure.is_some() {
            return None;
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.pending.push_back(None);
        Some(Ticket(ticket))
    }

    /// Records how `ticket`'s sync ended and delivers every completion that no earlier one
    /// holds back. A failed sync fails the log.
    pub fn finish(&self, ticket: Ticket, synced: Result<T, LogError>) {
        let done = match synced {
            Ok(done) => done,
            Err(error) => return self.fail(&error),
        };
        let mut state = self.state();
        if state.failure.is_some() {
            return;
        }
        let oldest = state.next_ticket - state.pending.len() as u64;
        let slot = &mut state.pending[(ticket.0 - oldest) as usize];
        assert!(slot.is_none(), "a ticket is finished once");
        *slot = Some(done);
        while let Some(Some(_)) = state.pending.front() {
            let done = state
                .pending
                .pop_front()
                .flatten()
                .expect("the front is finished");
            // Delivering under the lock keeps deliveries in order; a full channel holds up
            // the other writer's next ticket, as it would hold up a single writer.
            let deliver = state.deliver.as_mut().expect("a live log delivers");
            deliver(done);
        }
        if state.pending.is_empty() {
            self.settled.notify_all();
        }
    }

    /// Fails the log: nothing more is delivered, the delivery channel closes, and waiters
    /// are told. The first failure is the one reported.
    pub fn fail(&self, error: &LogError) {
        let mut state = self.state();
        if state.failure.is_none() {
            tracing::error!(%error, "WAL write failed; the log stops");
            state.failure = Some(error.to_string());
        }
        self.failed.store(true, Ordering::Release);
        state.deliver = None;
        state.pending.clear();
        self.settled.notify_all();
    }

    /// Waits until every batch written so far is delivered; an error if the log failed.
    pub fn settle(&self) -> Result<(), LogError> {
        let mut state = self.state();
        while state.failure.is_none() && !state.pending.is_empty() {
            state = self
                .settled
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        match &state.failure {
            Some(failure) => Err(LogError::WriterFailed(failure.clone())),
            None => Ok(()),
        }
    }

    /// A writer thread ends (having finished its tickets, or panicking): the last one closes
    /// the delivery channel.
    fn writer_ended(&self) {
        let mut state = self.state();
        state.writers_running -= 1;
        if state.writers_running == 0 {
            state.deliver = None;
        }
    }

    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    pub fn failure(&self) -> Option<String> {
        self.state().failure.clone()
    }
}

/// Starts the threads `syncs` was made for, named `name`, taking turns at `core`. They end
/// once the core's queue is closed and drained (every completion delivered) or the log
/// fails.
pub(crate) fn spawn_writers<C: WriterCore>(
    name: &str,
    core: C,
    syncs: &Arc<Syncs<C::Done>>,
) -> Result<Vec<JoinHandle<()>>, LogError> {
    let writers = syncs.state().writers_running;
    let core = Arc::new(Mutex::new(core));
    (0..writers)
        .map(|writer| {
            let core = Arc::clone(&core);
            let syncs = Arc::clone(syncs);
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || take_turns(&core, &syncs, writer))
                .context(|| format!("spawn the {name} thread"))
        })
        .collect()
}

/// Tells `syncs` its thread ended, however it ends.
struct Running<'a, T>(&'a Syncs<T>);

impl<T> Drop for Running<'_, T> {
    fn drop(&mut self) {
        self.0.writer_ended();
    }
}

fn take_turns<C: WriterCore>(core: &Mutex<C>, syncs: &Syncs<C::Done>, writer: usize) {
    let _running = Running(syncs);
    loop {
        let mut held = core.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if syncs.failed() {
            return;
        }
        let (sync, done) = match held.take_turn(writer, syncs) {
            Ok(Turn::Written { sync, done }) => (sync, done),
            Ok(Turn::Carried) => continue,
            Ok(Turn::Stop) => return,
            Err(error) => return syncs.fail(&error),
        };
        let Some(ticket) = syncs.begin() else {
            return;
        };
        drop(held);
        let synced = sync.map_or(Ok(()), BatchSync::run);
        syncs.finish(ticket, synced.map(|()| done));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn delivering() -> (Syncs<u32>, mpsc::Receiver<u32>) {
        let (tx, rx) = mpsc::channel();
        let syncs = Syncs::new(2, move |done| tx.send(done).expect("the test receives"));
        (syncs, rx)
    }

    #[test]
    fn a_sync_that_returns_first_waits_for_the_earlier_ones() {
        let (syncs, delivered) = delivering();
        let first = syncs.begin().expect("live");
        let second = syncs.begin().expect("live");
        let third = syncs.begin().expect("live");
        syncs.finish(third, Ok(3));
        syncs.finish(second, Ok(2));
        assert_eq!(delivered.try_recv().ok(), None);
        syncs.finish(first, Ok(1));
        assert_eq!(delivered.try_iter().collect::<Vec<_>>(), [1, 2, 3]);
        syncs.settle().expect("settled");
    }

    #[test]
    fn settling_waits_for_the_syncs_in_flight() {
        let (syncs, delivered) = delivering();
        let syncs = Arc::new(syncs);
        let first = syncs.begin().expect("live");
        let second = syncs.begin().expect("live");
        let finisher = {
            let syncs = Arc::clone(&syncs);
            std::thread::spawn(move || {
                syncs.finish(second, Ok(2));
                std::thread::sleep(std::time::Duration::from_millis(20));
                syncs.finish(first, Ok(1));
            })
        };
        syncs.settle().expect("settled");
        assert_eq!(delivered.try_iter().collect::<Vec<_>>(), [1, 2]);
        finisher.join().expect("finisher");
    }

    /// Batches numbered from the queue, each synced when the test says so.
    struct HeldCore {
        queue: mpsc::Receiver<u32>,
        taken: mpsc::Sender<u32>,
        releases: Arc<Mutex<std::collections::HashMap<u32, mpsc::Receiver<()>>>>,
    }

    struct HeldSync(mpsc::Receiver<()>);

    impl BatchSync for HeldSync {
        fn run(self) -> Result<(), LogError> {
            self.0.recv().expect("the test releases every sync");
            Ok(())
        }
    }

    impl WriterCore for HeldCore {
        type Done = u32;
        type Sync = HeldSync;

        fn take_turn(
            &mut self,
            _writer: usize,
            _syncs: &Syncs<u32>,
        ) -> Result<Turn<u32, HeldSync>, LogError> {
            let Ok(batch) = self.queue.recv() else {
                return Ok(Turn::Stop);
            };
            let release = self.releases.lock().unwrap().remove(&batch).unwrap();
            self.taken.send(batch).unwrap();
            Ok(Turn::Written {
                sync: Some(HeldSync(release)),
                done: batch,
            })
        }
    }

    #[test]
    fn the_next_batch_is_written_while_a_sync_runs_and_delivered_after_it() {
        let (queue, queue_rx) = mpsc::channel();
        let (taken_tx, taken) = mpsc::channel();
        let releases = Arc::new(Mutex::new(std::collections::HashMap::new()));
        let mut release = Vec::new();
        for batch in [1, 2] {
            let (tx, rx) = mpsc::channel();
            releases.lock().unwrap().insert(batch, rx);
            release.push(tx);
        }
        let (syncs, delivered) = delivering();
        let syncs = Arc::new(syncs);
        let core = HeldCore {
            queue: queue_rx,
            taken: taken_tx,
            releases,
        };
        let writers = spawn_writers("test-writer", core, &syncs).expect("spawned");
        queue.send(1).unwrap();
        queue.send(2).unwrap();
        let wait = Duration::from_secs(10);
        assert_eq!(taken.recv_timeout(wait), Ok(1));
        assert_eq!(
            taken.recv_timeout(wait),
            Ok(2),
            "the second batch is taken while the first one's sync runs"
        );
        release[1].send(()).unwrap();
        assert_eq!(
            delivered.recv_timeout(Duration::from_millis(100)).ok(),
            None,
            "the second batch waits for the first"
        );
        release[0].send(()).unwrap();
        assert_eq!(delivered.recv_timeout(wait), Ok(1));
        assert_eq!(delivered.recv_timeout(wait), Ok(2));
        drop(queue);
        for writer in writers {
            writer.join().expect("writer ends");
        }
        assert_eq!(
            delivered.recv().ok(),
            None,
            "the last writer to end closes the delivery channel"
        );
    }

    #[test]
    fn after_a_failed_sync_nothing_is_delivered_and_the_channel_closes() {
        let (syncs, delivered) = delivering();
        let first = syncs.begin().expect("live");
        let second = syncs.begin().expect("live");
        syncs.finish(second, Ok(2));
        syncs.finish(
            first,
            Err(LogError::io(
                "fdatasync segment",
                std::io::Error::other("EIO"),
            )),
        );
        assert!(syncs.failed());
        assert_eq!(
            delivered.recv().ok(),
            None,
            "closed without delivering the later batch"
        );
        assert!(syncs.begin().is_none());
        let failure = syncs.settle().expect_err("failed");
        assert!(failure.to_string().contains("EIO"), "{failure}");
    }
}

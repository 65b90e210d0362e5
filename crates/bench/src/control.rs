//! When to stop: one-way signals (Ctrl-C for the whole run, "give up" inside a point), and the
//! measured window of a point.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// A flag that is set once and never cleared: Ctrl-C for the run, or a point's participants
/// telling each other to give up. Cheap to clone; any clone may set it, every loop and every
/// wait checks one.
#[derive(Clone)]
pub struct Signal {
    sender: Arc<watch::Sender<bool>>,
}

impl Signal {
    pub fn new() -> Signal {
        Signal {
            sender: Arc::new(watch::Sender::new(false)),
        }
    }

    pub fn set(&self) {
        self.sender.send_replace(true);
    }

    pub fn is_set(&self) -> bool {
        *self.sender.borrow()
    }

    /// Resolves once the signal is set.
    pub async fn wait(&self) {
        let mut set = self.sender.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = set.wait_for(|set| *set).await;
    }
}

/// One point's time: an unmeasured warm-up, then the measured window. Operations that start
/// during the warm-up run but are not counted, so JIT compilation and connection setup stay
/// out of the numbers.
#[derive(Clone)]
pub struct Window {
    measure_from: Instant,
    end: Instant,
    interrupt: Signal,
    /// Counted operations so far, for the progress bar.
    counted: Arc<AtomicU64>,
}

impl Window {
    pub fn start(warmup: Duration, duration: Duration, interrupt: &Signal) -> Window {
        let now = Instant::now();
        Window {
            measure_from: now + warmup,
            end: now + warmup + duration,
            interrupt: interrupt.clone(),
            counted: Arc::new(AtomicU64::new(0)),
        }
    }

    /// True while new operations may start.
    pub fn is_open(&self) -> bool {
        Instant::now() < self.end && !self.interrupt.is_set()
    }

    /// True if an operation that started at `started` falls in the measured window.
    pub fn is_measured(&self, started: Instant) -> bool {
        started >= self.measure_from
    }

    /// Counts one measured operation for the progress bar.
    pub fn count_one(&self) {
        self.counted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn counted_so_far(&self) -> Arc<AtomicU64> {
        self.counted.clone()
    }

    /// The run's Ctrl-C signal.
    pub fn interrupt(&self) -> &Signal {
        &self.interrupt
    }

    /// Measured seconds so far: from the end of the warm-up to now, or to the window's end.
    pub fn measured_s(&self) -> f64 {
        let until = Instant::now().min(self.end);
        until
            .saturating_duration_since(self.measure_from)
            .as_secs_f64()
    }

    /// Whether the window ran its full length (rather than being cut by Ctrl-C).
    pub fn ran_to_end(&self) -> bool {
        !self.interrupt.is_set()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn window_counts_only_after_the_warmup() {
        let interrupt = Signal::new();
        let window = Window::start(Duration::from_secs(1), Duration::from_secs(2), &interrupt);
        assert!(!window.is_measured(Instant::now()));
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert!(window.is_measured(Instant::now()));
        assert!(window.is_open());
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert!(!window.is_open());
        assert_eq!(window.measured_s(), 2.0);
        assert!(window.ran_to_end());
    }

    #[tokio::test(start_paused = true)]
    async fn interrupt_closes_the_window() {
        let interrupt = Signal::new();
        let window = Window::start(Duration::ZERO, Duration::from_secs(100), &interrupt);
        interrupt.clone().set();
        interrupt.wait().await;
        assert!(!window.is_open());
        assert!(!window.ran_to_end());
    }
}

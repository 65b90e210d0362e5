//! The servers' clocks in core mode. In half the core seeds each server's wall clock is off
//! the simulation's by up to five seconds either way (as an unsynchronized host's is), and
//! its monotonic clock counts from an origin of its own: nothing a server decides may
//! compare its clock with another's, or with the times another stamped into the log. The
//! checkers judge everything by the simulation's time.

use zoolog_server::core::Now;

use crate::rng::Rng;

/// The random stream of the clocks: seeds without skew keep every other choice.
const CLOCK_STREAM: u64 = 6;
/// The wall clock of every server at simulated time 0, before its skew.
pub(super) const WALL_EPOCH_MS: i64 = 1_700_000_000_000;
const WALL_SKEW_MAX_MS: u64 = 5_000;

/// One server's clocks against the simulation's time.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ServerClock {
    wall_offset_ms: i64,
    monotonic_offset_ms: u64,
}

impl ServerClock {
    /// One clock per server: all exact, or (in half the seeds) each skewed its own way.
    pub(super) fn draw(parent: &Rng, servers: usize) -> Vec<ServerClock> {
        let mut rng = parent.fork(CLOCK_STREAM);
        if !rng.chance(0.5) {
            return vec![ServerClock::default(); servers];
        }
        (0..servers)
            .map(|_| ServerClock {
                wall_offset_ms: rng.range(0, 2 * WALL_SKEW_MAX_MS) as i64 - WALL_SKEW_MAX_MS as i64,
                monotonic_offset_ms: rng.range(0, 1 << 40),
            })
            .collect()
    }

    /// What this server's clocks read at simulated time `now_us`.
    pub(super) fn now(&self, now_us: u64) -> Now {
        let monotonic_ms = now_us / 1000 + self.monotonic_offset_ms;
        Now {
            wall_ms: self.wall_epoch_ms() + (now_us / 1000) as i64,
            monotonic_ms,
            monotonic_us: now_us + self.monotonic_offset_ms * 1000,
        }
    }

    /// This server's wall clock at simulated time 0: what to take off the times it stamps.
    pub(super) fn wall_epoch_ms(&self) -> i64 {
        WALL_EPOCH_MS + self.wall_offset_ms
    }
}

//! The servers' clocks in core mode. In half the core seeds each server's wall clock is off
//! the simulation's by up to five seconds either way (as an unsynchronized host's is), half
//! of them are stepped once by up to five seconds either way (as NTP steps a clock it finds
//! far off), and each monotonic clock counts from an origin of its own: nothing a server
//! decides may compare its clock with another's, with the times another stamped into the
//! log, or with its own wall clock of another moment. The checkers judge everything by the
//! simulation's time.

use zoolog_server::core::Now;

use crate::rng::Rng;

/// The random stream of the clocks: seeds without skew keep every other choice.
const CLOCK_STREAM: u64 = 6;
/// The wall clock of every server at simulated time 0, before its skew.
const WALL_EPOCH_MS: i64 = 1_700_000_000_000;
const WALL_SKEW_MAX_MS: u64 = 5_000;
/// A stepped clock is stepped within this long of the simulation's start (or after its end).
const WALL_STEP_BY_MS: u64 = 30_000;

/// One server's clocks against the simulation's time.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ServerClock {
    wall_offset_ms: i64,
    /// When (simulated ms) the wall clock is stepped, and by how much.
    wall_step: Option<(u64, i64)>,
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
                wall_offset_ms: skew_ms(&mut rng),
                wall_step: rng
                    .chance(0.5)
                    .then(|| (rng.range(0, WALL_STEP_BY_MS), skew_ms(&mut rng))),
                monotonic_offset_ms: rng.range(0, 1 << 40),
            })
            .collect()
    }

    /// What this server's clocks read at simulated time `now_us`.
    pub(super) fn now(&self, now_us: u64) -> Now {
        let now_ms = now_us / 1000;
        Now {
            wall_ms: WALL_EPOCH_MS + self.wall_offset_at_ms(now_ms) + now_ms as i64,
            monotonic_ms: now_ms + self.monotonic_offset_ms,
            monotonic_us: now_us + self.monotonic_offset_ms * 1000,
        }
    }

    fn wall_offset_at_ms(&self, now_ms: u64) -> i64 {
        match self.wall_step {
            Some((at_ms, step_ms)) if now_ms >= at_ms => self.wall_offset_ms + step_ms,
            _ => self.wall_offset_ms,
        }
    }

    /// The simulated time (ms) at which this server's wall clock read `wall_ms`: the later one
    /// where a step back made it read that twice (so that a check of how soon something
    /// happened errs towards "later").
    pub(super) fn simulated_ms_of(&self, wall_ms: i64) -> i64 {
        let before_step = wall_ms - WALL_EPOCH_MS - self.wall_offset_ms;
        let Some((at_ms, step_ms)) = self.wall_step else {
            return before_step;
        };
        let after_step = before_step - step_ms;
        if after_step >= at_ms as i64 {
            after_step
        } else {
            before_step
        }
    }
}

fn skew_ms(rng: &mut Rng) -> i64 {
    rng.range(0, 2 * WALL_SKEW_MAX_MS) as i64 - WALL_SKEW_MAX_MS as i64
}

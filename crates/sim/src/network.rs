//! The simulated network: per-message delay (so messages overtake each other), loss,
//! duplication, and partitions that split the servers into groups.

use crate::rng::Rng;

#[derive(Debug, Clone)]
pub struct NetConfig {
    /// One-way delay bounds, microseconds.
    pub delay_min_us: u64,
    pub delay_max_us: u64,
    /// Probability that a message takes up to `tail_us` longer (a slow path).
    pub tail_p: f64,
    pub tail_us: u64,
    pub loss_p: f64,
    pub duplicate_p: f64,
    /// Tell both ends `PeerDisconnected` when a link is cut or a peer crashes.
    pub notify_disconnect: bool,
}

impl NetConfig {
    /// A network that delivers everything, fast, in (nearly) any order.
    pub fn benign(rng: &mut Rng) -> NetConfig {
        NetConfig {
            delay_min_us: 50,
            delay_max_us: rng.range(100, 1_000),
            tail_p: 0.0,
            tail_us: 0,
            loss_p: 0.0,
            duplicate_p: 0.0,
            notify_disconnect: rng.chance(0.5),
        }
    }

    pub fn random(rng: &mut Rng) -> NetConfig {
        NetConfig {
            delay_min_us: rng.range(20, 300),
            delay_max_us: rng.range(500, 5_000),
            tail_p: *rng.pick(&[0.0, 0.001, 0.01, 0.05]).unwrap(),
            tail_us: rng.range(5_000, 80_000),
            loss_p: *rng.pick(&[0.0, 0.001, 0.01, 0.05, 0.2]).unwrap(),
            duplicate_p: *rng.pick(&[0.0, 0.001, 0.01, 0.05]).unwrap(),
            notify_disconnect: rng.chance(0.5),
        }
    }
}

pub struct Network {
    pub config: NetConfig,
    /// Partition group of each server (by index); servers in different groups cannot talk.
    groups: Vec<u32>,
}

impl Network {
    pub fn new(config: NetConfig, servers: usize) -> Network {
        Network {
            config,
            groups: vec![0; servers],
        }
    }

    pub fn connected(&self, a: usize, b: usize) -> bool {
        self.groups[a] == self.groups[b]
    }

    pub fn is_partitioned(&self) -> bool {
        self.groups.iter().any(|g| *g != self.groups[0])
    }

    /// Splits the servers into `count` random groups; returns the links that were cut.
    pub fn partition(&mut self, rng: &mut Rng, count: u32) -> Vec<(usize, usize)> {
        let before = self.groups.clone();
        for group in self.groups.iter_mut() {
            *group = rng.below(count as u64) as u32;
        }
        self.cut_links(&before)
    }

    /// Cuts one server off from all the others.
    pub fn isolate(&mut self, server: usize) -> Vec<(usize, usize)> {
        let before = self.groups.clone();
        let lonely = self.groups.iter().max().unwrap() + 1;
        self.groups[server] = lonely;
        self.cut_links(&before)
    }

    pub fn heal(&mut self) {
        self.groups.iter_mut().for_each(|g| *g = 0);
    }

    fn cut_links(&self, before: &[u32]) -> Vec<(usize, usize)> {
        let mut cut = Vec::new();
        for a in 0..self.groups.len() {
            for b in a + 1..self.groups.len() {
                if before[a] == before[b] && self.groups[a] != self.groups[b] {
                    cut.push((a, b));
                }
            }
        }
        cut
    }

    /// Arrival delays (microseconds) of the copies of one message from `a` to `b`: none if
    /// it is lost, two if it is duplicated.
    pub fn delays(&self, rng: &mut Rng, a: usize, b: usize) -> Vec<u64> {
        if !self.connected(a, b) || rng.chance(self.config.loss_p) {
            return Vec::new();
        }
        let copies = if rng.chance(self.config.duplicate_p) {
            2
        } else {
            1
        };
        (0..copies)
            .map(|_| {
                let mut delay = rng.range(self.config.delay_min_us, self.config.delay_max_us);
                if rng.chance(self.config.tail_p) {
                    delay += rng.range(0, self.config.tail_us);
                }
                delay
            })
            .collect()
    }
}

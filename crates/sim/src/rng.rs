//! The simulator's only source of randomness: splitmix64, seeded once per run.

/// A small, fast, deterministic PRNG (splitmix64). Never seeded from the OS.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6A09_E667_F3BC_C909)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }

    /// A generator of its own for one more kind of choice, seeded from this one's state
    /// without drawing from it: what a seed already chose stays as it was.
    pub fn fork(&self, stream: u64) -> Rng {
        let mut copy = self.clone();
        Rng(copy.next_u64() ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        items.get(self.below(items.len() as u64) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (Rng::new(5), Rng::new(5));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut c = Rng::new(6);
        assert_ne!(Rng::new(5).next_u64(), c.next_u64());
        for _ in 0..1000 {
            let x = c.range(3, 7);
            assert!((3..=7).contains(&x));
        }
    }

    #[test]
    fn forks_are_reproducible_and_apart_from_their_parent_and_each_other() {
        let parent = Rng::new(5);
        let first = |stream| parent.fork(stream).next_u64();
        assert_eq!(first(1), first(1));
        assert_ne!(first(1), first(2));
        assert_ne!(first(1), parent.clone().next_u64());
    }
}

//! A seeded bijection of `0..n`, for loading generated rows out of order.
//!
//! Generated workloads make row `seq` on demand, so shuffling them must not
//! need an `n`-sized table in memory (a 50 M-row shuffle would cost 400 MB
//! per copy). A small Feistel network over the smallest even number of bits
//! that covers `n` is a bijection of that power-of-four domain; walking the
//! cycle until the value falls below `n` (at most four steps on average)
//! restricts it to a bijection of `0..n`. Any `seq` is mapped in O(1) and
//! the same seed gives the same order on every machine.

/// A permutation of `0..len`, keyed by a seed.
#[derive(Debug, Clone)]
pub struct Permutation {
    len: u64,
    /// Bits in each Feistel half; the domain is `4^half_bits`.
    half_bits: u32,
    keys: [u64; ROUNDS],
}

const ROUNDS: usize = 4;

impl Permutation {
    pub fn new(len: u64, seed: u64) -> Self {
        let bits = 64 - len.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut s = seed;
        let keys = std::array::from_fn(|_| {
            s = mix(s.wrapping_add(0x9E37_79B9_7F4A_7C15));
            s
        });
        Permutation { len, half_bits, keys }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The position `seq` moves to; `seq` must be below `len`.
    #[inline]
    pub fn apply(&self, seq: u64) -> u64 {
        debug_assert!(seq < self.len, "{seq} is outside 0..{}", self.len);
        let mut x = self.feistel(seq);
        // Cycle-walking: x stays in the cycle of `seq`, which holds at least
        // one value below `len` (seq itself), so this ends.
        while x >= self.len {
            x = self.feistel(x);
        }
        x
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for k in self.keys {
            let next = left ^ (mix(right ^ k) & mask);
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }
}

/// SplitMix64's finalizer: a fast, well-mixed round function.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(len: u64, seed: u64) -> Vec<u64> {
        let p = Permutation::new(len, seed);
        (0..len).map(|i| p.apply(i)).collect()
    }

    #[test]
    fn is_a_bijection_for_many_sizes() {
        for len in [1u64, 2, 3, 4, 5, 7, 8, 15, 16, 17, 100, 1000, 4096, 4097, 20_000, 65_537] {
            for seed in [0, 1, 42] {
                let mut seen = image(len, seed);
                seen.sort_unstable();
                assert!(seen.iter().copied().eq(0..len), "not a bijection of 0..{len} (seed {seed})");
            }
        }
    }

    #[test]
    fn empty_permutation_maps_nothing() {
        assert!(Permutation::new(0, 7).is_empty());
        assert!(image(0, 7).is_empty());
    }

    #[test]
    fn shuffles_and_depends_on_the_seed() {
        let a = image(10_000, 1);
        let fixed = a.iter().enumerate().filter(|(i, v)| *i as u64 == **v).count();
        assert!(fixed < 50, "{fixed} fixed points: hardly shuffled");
        // Neighbours in sequence order land far apart.
        let close = a.windows(2).filter(|w| w[0].abs_diff(w[1]) < 10).count();
        assert!(close < 100, "{close} neighbours stayed close");
        assert_ne!(a, image(10_000, 2));
        assert_eq!(a, image(10_000, 1), "the same seed gives the same order");
    }
}

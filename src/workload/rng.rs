//! Small deterministic pseudo-random numbers for the workload generators.
//!
//! Owns [`SplitMix64`], the only PRNG of the crate. The generators need speed and
//! bit-for-bit reproducibility from a seed on every platform, not cryptographic
//! quality, so a 64-bit SplitMix (Steele, Lea & Flood 2014; the seeder of the
//! xoshiro family) is enough and spares the build the `rand` crate tree.
//! Bounded draws use Lemire's multiply-shift instead of `%`: no division in the hot
//! loop, and the bias (< n / 2^32 for the 32-bit variant) is irrelevant for a
//! synthetic workload.

/// SplitMix64: a 64-bit state advanced by a Weyl increment and finalised by a mixer.
/// Every seed, including 0, gives a full-period, well-mixed stream.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose stream is fully determined by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0, at most `u32::MAX`) from one 64-bit draw.
    #[inline(always)]
    pub fn below(&mut self, n: u32) -> u32 {
        scale32(self.next_u64() as u32, n)
    }

    /// Two independent uniform draws, in `0..a` and `0..b`, from one 64-bit draw
    /// (its low and high halves): halves the PRNG work for pairs of small ranges.
    #[inline(always)]
    pub fn below2(&mut self, a: u32, b: u32) -> (u32, u32) {
        let r = self.next_u64();
        (scale32(r as u32, a), scale32((r >> 32) as u32, b))
    }
}

/// Maps 32 random bits onto `0..n` by multiply-shift (Lemire 2019).
#[inline(always)]
pub fn scale32(bits: u32, n: u32) -> u32 {
    ((u64::from(bits) * u64::from(n)) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_first_outputs_for_seed_zero() {
        // Reference values of SplitMix64 seeded with 0 (as published with the algorithm).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = SplitMix64::new(7);
        let mut seen = [0u32; 8];
        for _ in 0..10_000 {
            let v = r.below(8);
            assert!(v < 8);
            seen[v as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 1_000), "{seen:?}");
        let (a, b) = r.below2(3, 50);
        assert!(a < 3 && b < 50);
    }
}

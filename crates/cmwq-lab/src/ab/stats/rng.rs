//! Small, fast, reproducible pseudo-random generators for the bootstrap.
//!
//! The bootstrap needs a stream that is the same on every machine and every
//! build, so the lab carries its own generators rather than depending on a
//! crate whose stream may change between versions. Both are the published
//! algorithms of Steele, Lea and Flood (SplitMix64) and Blackman and Vigna
//! (xoshiro256**), written from their descriptions; neither is meant for
//! cryptography.

/// SplitMix64: a 64-bit state advanced by a Weyl sequence and scrambled.
/// Used to expand one `u64` seed into xoshiro's 256-bit state.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed` (any value, zero included).
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// xoshiro256**: 256 bits of state, period 2^256 - 1, good statistical
/// quality, a few nanoseconds per draw.
#[derive(Clone, Debug)]
pub struct Xoshiro256StarStar {
    s: [u64; 4],
}

impl Xoshiro256StarStar {
    /// A generator whose state is the first four outputs of
    /// [`SplitMix64::new`]`(seed)`, as the xoshiro authors recommend; this
    /// never yields the forbidden all-zero state.
    pub fn seed_from_u64(seed: u64) -> Xoshiro256StarStar {
        let mut sm = SplitMix64::new(seed);
        Xoshiro256StarStar {
            s: [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniformly distributed integer in `0..n`, without modulo bias
    /// (Lemire's multiply-and-reject method: the high half of a 64×64-bit
    /// product, redrawing in the rare case the low half lands in the biased
    /// zone). Returns 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        let mut low = m as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
                low = m as u64;
            }
        }
        (m >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = Xoshiro256StarStar::seed_from_u64(3);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            let v = rng.below(7);
            assert!(v < 7);
            seen[v as usize] += 1;
        }
        // Each bucket expects 1000; 800 is over six standard deviations off.
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.below(1), 0);
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let mut a = Xoshiro256StarStar::seed_from_u64(42);
        let mut b = Xoshiro256StarStar::seed_from_u64(42);
        let mut c = Xoshiro256StarStar::seed_from_u64(43);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }
}

//! SplitMix64: a tiny deterministic generator, so that every run and every
//! machine sees the same synthetic cluster. Its own file so that the
//! host's benches can include it too (with the Nova cluster,
//! `nova_cluster.rs`) without the rest of this folder.

/// SplitMix64's state.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn pick(&mut self, choices: &[f64]) -> f64 {
        choices[(self.next() % choices.len() as u64) as usize]
    }
}

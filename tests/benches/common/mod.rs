//! What the per-unit benchmarks share: each built-in unit's two builds, how
//! they are timed against each other, and the deterministic generator their
//! synthetic clusters come from.

use std::sync::Arc;
use std::time::Duration;

use sandpiper::builtin::UNITS;
use sandpiper::unit::{CallResult, Unit};
use sandpiper_guest::native::NativeUnit;

/// Every built-in unit whose package `keep` accepts, as its embedded
/// component loaded into the sandbox and its source built natively.
pub fn both_builds(keep: impl Fn(&str) -> bool) -> Vec<(Arc<dyn Unit>, NativeUnit)> {
    let runtime = sandpiper_tests::runtime();
    let mut builds = Vec::new();
    for builtin in UNITS.iter().filter(|b| keep(b.package)) {
        let wasm = match runtime.load(builtin.wasm) {
            Ok(unit) => unit,
            Err(error) => panic!("{} loads: {error}", builtin.package),
        };
        let wasm: Arc<dyn Unit> = wasm;
        builds.push((wasm, builtin.native()));
    }
    builds
}

/// Measured calls per build (the median is reported).
pub const RUNS: usize = 41;
/// Calls per build before measuring starts (first-touch page faults,
/// caches).
pub const WARMUP_RUNS: usize = 3;

/// The call's own time; a failed call stops the benchmark, naming why.
pub fn elapsed<T>(result: CallResult<T>) -> Duration {
    match result {
        Ok(called) => called.usage.elapsed,
        Err(failed) => panic!("a call failed: {}", failed.error),
    }
}

/// Times `call` on both builds (`[sandboxed, native]`), alternating which
/// goes first so that neither always runs on a warmer machine, and returns
/// the two medians in the same order.
pub fn medians(builds: &[&dyn Unit; 2], call: impl Fn(&dyn Unit) -> Duration) -> [Duration; 2] {
    let mut times = [Vec::with_capacity(RUNS), Vec::with_capacity(RUNS)];
    for run in 0..WARMUP_RUNS + RUNS {
        for turn in 0..2 {
            let build = if run % 2 == 0 { turn } else { 1 - turn };
            let took = call(builds[build]);
            if run >= WARMUP_RUNS {
                times[build].push(took);
            }
        }
    }
    times.map(|mut t| {
        t.sort_unstable();
        t[t.len() / 2]
    })
}

/// A duration in microseconds.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// SplitMix64: a tiny deterministic generator.
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

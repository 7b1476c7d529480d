//! What the per-unit benchmarks share: each built-in unit's two builds, how
//! they are timed against each other, the deterministic generator their
//! synthetic clusters come from (`splitmix.rs`), and the Nova-shaped
//! cluster (`nova_cluster.rs`, which the host's `nova_http` bench includes
//! too, so the in-process and HTTP figures are over the same hosts).

use std::sync::Arc;
use std::time::Duration;

use sandpiper::builtin::UNITS;
use sandpiper::unit::{CallResult, Unit};
use sandpiper_guest::native::NativeUnit;

// The catalog bench includes this folder too and has no use for it.
#[allow(dead_code, reason = "used by nova_units, not by catalog")]
pub mod nova_cluster;
mod splitmix;
pub use splitmix::SplitMix;

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

/// Measured calls per build (the median is reported): 41, or
/// `SANDPIPER_BENCH_RUNS` when set. More runs are for profiling one unit
/// (`nova_units compute` runs each of its two units 41 times, ~40 µs each:
/// too few samples under `perf record`).
pub fn runs() -> usize {
    static RUNS: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
        std::env::var("SANDPIPER_BENCH_RUNS")
            .ok()
            .and_then(|runs| runs.parse().ok())
            .filter(|&runs| runs > 0)
            .unwrap_or(41)
    });
    *RUNS
}
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
    let runs = runs();
    let mut times = [Vec::with_capacity(runs), Vec::with_capacity(runs)];
    for run in 0..WARMUP_RUNS + runs {
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

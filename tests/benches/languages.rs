//! What a policy unit costs in each language: the HeadroomAffinity example
//! (`policies/examples/`), written in Rust, Python, JavaScript and C, built
//! from source and run through the real sandbox. For each it prints the
//! component's size, its compile time, a fresh instance, filter and score
//! calls at 1,000 and 10,000 hosts, the fuel they burn per host, and the
//! linear memory they need at 10,000 hosts: the figures behind the
//! per-language limits in docs/authoring.md.
//!
//! Run with: `cargo bench -p sandpiper-tests --bench languages` (needs the
//! guest toolchains: `scripts/install-guest-toolchains.sh`).

#[path = "../tests/all/languages/cluster.rs"]
mod cluster;
#[path = "../tests/all/languages/examples.rs"]
mod examples;

use std::sync::Arc;
use std::time::{Duration, Instant};

use examples::Language;
use sandpiper::sandbox::{Limits, MAX_MEMORY_BYTES, Runtime, WasmUnit};
use sandpiper::unit::{Failed, Unit, Usage};
use sandpiper_guest::Inventory;

/// Cluster sizes measured.
const SIZES: [usize; 2] = [1_000, 10_000];
/// Timed runs per measurement; the median is printed. Interpreted units at
/// 10k hosts take ~0.1 s a call, so this keeps the whole run to minutes.
const RUNS: usize = 21;
/// Untimed runs first, so code, caches and the instance pool are warm.
const WARMUP_RUNS: usize = 3;
/// Resolution of the memory search.
const MEMORY_STEP_BYTES: u64 = 1 << 20;

/// Limits that never stop an honest call, so the figures are what the unit
/// needs rather than what it was allowed.
fn unmetered() -> Limits {
    Limits {
        fuel_base: u64::MAX / 4,
        fuel_per_host: 0,
        deadline_base: Duration::from_secs(60),
        deadline_per_host: Duration::ZERO,
        memory_bytes: MAX_MEMORY_BYTES,
    }
}

/// One call's input: a generated cluster and the example's first call over
/// it (a 4 GiB VM asking for rack r1, every host a candidate).
struct Workload {
    inventory: Arc<Inventory>,
    call: cluster::Call,
}

impl Workload {
    fn new(hosts: usize) -> Workload {
        Workload {
            inventory: cluster::inventory(hosts),
            call: cluster::calls(hosts).swap_remove(0),
        }
    }
}

/// Median time of `call`, and the fuel of its last run (fuel is
/// deterministic).
struct Measured {
    median: Duration,
    fuel: u64,
}

fn measure(mut call: impl FnMut() -> Result<Usage, Failed>) -> Measured {
    let mut run = || call().unwrap_or_else(|failed| panic!("the call failed: {failed}"));
    for _ in 0..WARMUP_RUNS {
        run();
    }
    let mut times = Vec::with_capacity(RUNS);
    let mut fuel = 0;
    for _ in 0..RUNS {
        let usage = run();
        times.push(usage.elapsed);
        fuel = usage.fuel.unwrap_or(0);
    }
    times.sort();
    Measured {
        median: times[RUNS / 2],
        fuel,
    }
}

fn filter(unit: &WasmUnit, w: &Workload) -> Result<Usage, Failed> {
    unit.filter(&w.inventory, &w.call.request, &w.call.candidates)
        .map(|called| called.usage)
}

fn score(unit: &WasmUnit, w: &Workload) -> Result<Usage, Failed> {
    unit.score(&w.inventory, &w.call.request, &w.call.candidates)
        .map(|called| called.usage)
}

/// The smallest memory limit (to [`MEMORY_STEP_BYTES`]) under which both
/// calls succeed: the unit's peak linear memory, all memories together.
fn memory_needed(unit: &WasmUnit, workload: &Workload) -> u64 {
    let fits = |steps: u64| {
        let limited = unit
            .with_limits(Limits {
                memory_bytes: steps * MEMORY_STEP_BYTES,
                ..unmetered()
            })
            .expect("valid limits");
        filter(&limited, workload).is_ok() && score(&limited, workload).is_ok()
    };
    let (mut low, mut high) = (0, MAX_MEMORY_BYTES / MEMORY_STEP_BYTES);
    assert!(fits(high), "needs more than the largest memory limit");
    while high - low > 1 {
        let middle = (low + high) / 2;
        if fits(middle) {
            high = middle;
        } else {
            low = middle;
        }
    }
    high * MEMORY_STEP_BYTES
}

fn time(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1.0 {
        format!("{:.0} µs", ms * 1e3)
    } else {
        format!("{ms:.1} ms")
    }
}

fn main() {
    let empty = Arc::new(Inventory::new(0, 0));
    let workloads: Vec<Workload> = SIZES.iter().map(|&hosts| Workload::new(hosts)).collect();
    let largest = &workloads[workloads.len() - 1];
    println!(
        "HeadroomAffinity, filter and score over every host: {}\n",
        largest.call.name
    );
    println!(
        "| language | component | compile | instantiate | filter 1k | filter 10k | score 1k | \
         score 10k | fuel/host filter | fuel/host score | memory at 10k |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for language in Language::ALL {
        let bytes = examples::example(language);
        // A fresh runtime each time, so the compile is not a cache hit.
        let runtime = Runtime::new(unmetered()).expect("the runtime starts");
        let started = Instant::now();
        let unit = runtime
            .load(&bytes)
            .unwrap_or_else(|e| panic!("loading the {} example: {e}", language.name()));
        let compile = started.elapsed();

        let instantiate = measure(|| unit.probe(&empty));
        let filters: Vec<Measured> = workloads
            .iter()
            .map(|w| measure(|| filter(&unit, w)))
            .collect();
        let scores: Vec<Measured> = workloads
            .iter()
            .map(|w| measure(|| score(&unit, w)))
            .collect();
        // Fuel per host at 10k hosts, without what a call costs anyway.
        let per_host = |m: &Measured| {
            m.fuel.saturating_sub(instantiate.fuel) / largest.inventory.host_count() as u64
        };
        println!(
            "| {} | {:.1} MB | {:.2} s | {} | {} | {} | {} | {} | {} | {} | {} MiB |",
            language.name(),
            bytes.len() as f64 / 1e6,
            compile.as_secs_f64(),
            time(instantiate.median),
            time(filters[0].median),
            time(filters[1].median),
            time(scores[0].median),
            time(scores[1].median),
            per_host(&filters[1]),
            per_host(&scores[1]),
            memory_needed(&unit, largest) >> 20,
        );
    }
}

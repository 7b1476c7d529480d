//! The scheduling pipeline's cost, sandboxed against native: the built-in
//! four-unit policy (Memory and CPU filters, even-memory and
//! cpu-even-distribution scores) over synthetic clusters of 1,000, 10,000 and
//! 50,000 hosts, once with every unit as a WebAssembly component run
//! through the real sandbox (fresh instance per call, fuel, deadline and
//! memory limits on) and once with the same units' source compiled
//! natively, interleaved in one process so both see the same machine state.
//! Then the default policy (`none`, policies/defaults/none.json: 12 filters
//! and 7 weights, 19 unit calls) the same way at 10,000 hosts, once calling
//! every unit (`skips=off`, as before units could declare which requests
//! concern them) and once skipping the units the request does not concern
//! (`skips=on`, 11 of the 19 for this plain request), with the ratio.
//!
//! Every unit's median call time is printed per size (`unit ... role=`):
//! that is each unit's cost at 10,000 hosts, sandboxed and native; and,
//! where some calls had nothing to do for the request, the mean of their
//! medians (`nothing_to_do`), what a sandboxed call costs before any work.
//!
//! The four-unit policy at each size and `none` with skips are also
//! decided with every core of the machine lent (`cores=N`,
//! `pipeline::schedule_with` with `EveryCore`): per-host filters worth
//! splitting run in chunks on both cores, and the weights side by side
//! (`pipeline::parallel`), sandboxed and native alike. Then the units'
//! times overlap, so `outside_units` there is what was left after taking
//! their sum from the decision's, not the pipeline's own work.
//!
//! Both policies at 10,000 hosts are then decided **incrementally**
//! (`mode=incremental`), as a held cluster decides a steady stream of
//! requests of one shape: per-host units' answers are kept between
//! decisions (`pipeline::schedule_reusing`) and before each decision
//! `CHANGED_PER_DECISION` hosts change (new stamps, as a report or a claim
//! gives them), so the units are asked about those hosts only.
//!
//! Run with: `cargo bench --bench pipeline` (figures in docs/performance.md).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sandpiper::builtin::{self, UNITS};
use sandpiper::pipeline::{
    Decision, EveryCore, Means, Policy, Reuse, ReuseCache, ScheduleError, ScheduleRequest, Stamp,
    Stamps, fresh_stamps, schedule, schedule_calling_every_unit, schedule_reusing, schedule_with,
};
use sandpiper::sandbox::{Limits, Runtime};
use sandpiper::unit::{ColumnsRead, Unit};
use sandpiper_model::Inventory;
use sandpiper_model::{HostFlag, HostMetric, HostText, Interned, Request, Vm};

mod support;

/// A unit call under this much fuel did nothing for the request (the
/// default policy's units with nothing to say about the benchmark's VM
/// burn 4,000 to 9,000): the mean of those calls' medians is what a
/// sandboxed call costs before any work (`nothing_to_do`), the figure
/// that changes to every call move.
const NOTHING_TO_DO_FUEL: u64 = 10_000;

/// Cluster sizes measured.
const SIZES: [usize; 3] = [1_000, 10_000, 50_000];
/// Host-runs per size: runs = this / hosts, so each size takes similar time.
const HOST_RUNS_PER_SIZE: usize = 2_000_000;
/// Fewest and most timed runs per size and mode: enough for a stable
/// median, few enough to finish in about a minute on two cores.
const MIN_RUNS: usize = 21;
const MAX_RUNS: usize = 201;
/// Untimed runs first, so that code, caches and the instance pool are warm.
const WARMUP_RUNS: usize = 5;
/// Hosts the default policy runs over.
const DEFAULT_POLICY_HOSTS: usize = 10_000;
/// Hosts that change between two incremental decisions.
const CHANGED_PER_DECISION: usize = 10;
/// Seed of the synthetic cluster generator: every run sees the same cluster.
const SEED: u64 = 0x5A4D_9195_0B1E_C7ED;

/// The policy's units, by package, in policy order; the first two filter.
const PACKAGES: [&str; 4] = [
    "sandpiper-policy-memory",
    "sandpiper-policy-cpu",
    "sandpiper-policy-even-memory",
    "sandpiper-policy-cpu-even-distribution",
];

fn main() -> anyhow::Result<()> {
    let runtime = Runtime::new(Limits::default()).context("starting the sandbox runtime")?;
    let mut wasm: Vec<Arc<dyn Unit>> = Vec::new();
    let mut native: Vec<Arc<dyn Unit>> = Vec::new();
    for package in PACKAGES {
        let Some(embedded) = builtin::unit(package) else {
            bail!("built-in unit {package} is not embedded");
        };
        let unit = runtime
            .load(embedded.wasm)
            .with_context(|| format!("loading {package}"))?;
        wasm.push(unit);
        native.push(Arc::new(embedded.native()));
    }
    let wasm_policy = policy(&wasm)?;
    let native_policy = policy(&native)?;
    let request = ScheduleRequest {
        vm: Vm {
            id: "bench".to_owned(),
            memory_mib: 8192.0,
            memory_guaranteed_mib: 8192.0,
            vcpus: 4,
            cpu_sockets: 4,
            ..Vm::default()
        },
        ..ScheduleRequest::default()
    };

    println!(
        "machine: {} logical CPUs; {} timed runs per mode at 10,000 hosts",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        runs_for(10_000)
    );
    for hosts in SIZES {
        let inventory = Arc::new(cluster(hosts)?);
        let label = format!("pipeline hosts={hosts} units={}", PACKAGES.len());
        let spread = format!("{label} cores={}", cores());
        let medians = measure(
            &[(&label, schedule), (&spread, on_every_core)],
            [&wasm_policy, &native_policy],
            &inventory,
            &request,
        )?;
        report_spread(&label, medians[0], medians[1]);
        if hosts == DEFAULT_POLICY_HOSTS {
            measure_incremental(&label, [&wasm_policy, &native_policy], &inventory, &request)?;
        }
        let instantiate = instantiate_median(wasm[0].as_ref(), &inventory, runs_for(hosts))?;
        println!(
            "  instantiate hosts={hosts} median_us={:.1}",
            instantiate.as_secs_f64() * 1e6
        );
    }

    // The default policy, every unit sandboxed against the same unit native.
    let spec = support::default_policy_spec()?;
    let mut wasm_by_name = std::collections::HashMap::new();
    for builtin in UNITS {
        let unit: Arc<dyn Unit> = runtime
            .load(builtin.wasm)
            .with_context(|| format!("loading {}", builtin.package))?;
        wasm_by_name.insert(unit.info().name.clone(), unit);
    }
    let native_by_name: std::collections::HashMap<String, Arc<dyn Unit>> = UNITS
        .iter()
        .map(|builtin| builtin.native())
        .map(|unit| (unit.info.name.clone(), Arc::new(unit) as Arc<dyn Unit>))
        .collect();
    let wasm_default = support::compose(&spec, &wasm_by_name)?;
    let native_default = support::compose(&spec, &native_by_name)?;
    let hosts = DEFAULT_POLICY_HOSTS;
    let inventory = Arc::new(cluster(hosts)?);
    let label = |skips: &str| {
        format!(
            "default_policy name={} hosts={hosts} filters={} weights={} skips={skips}",
            spec.name,
            spec.filters.len(),
            spec.weights.len()
        )
    };
    let policies = [&wasm_default, &native_default];
    let off = measure(
        &[(&label("off"), schedule_calling_every_unit)],
        policies,
        &inventory,
        &request,
    )?[0]
        .0;
    let spread = format!("{} cores={}", label("on"), cores());
    let medians = measure(
        &[(&label("on"), schedule), (&spread, on_every_core)],
        policies,
        &inventory,
        &request,
    )?;
    let on = medians[0].0;
    report_spread(&label("on"), medians[0], medians[1]);
    println!(
        "default_policy name={} hosts={hosts} wasm_skips_off_over_on={:.2}",
        spec.name,
        ratio(off, on)
    );
    measure_incremental(&label("on"), policies, &inventory, &request)?;
    Ok(())
}

/// Decides `policies` (`[sandboxed, native]`) interleaved as a held
/// cluster does a stream of one request shape: each keeps its per-host
/// units' answers, and before each decision `CHANGED_PER_DECISION` random
/// hosts get new stamps, so only they are asked about again. Prints the
/// medians, their ratio and the answers reused per decision.
fn measure_incremental(
    label: &str,
    policies: [&Policy; 2],
    inventory: &Arc<Inventory>,
    request: &ScheduleRequest,
) -> anyhow::Result<()> {
    let hosts = inventory.host_count();
    let runs = runs_for(hosts);
    let mut caches = [ReuseCache::default(), ReuseCache::default()];
    let mut stamps: Vec<Stamp> = fresh_stamps(hosts)
        .map(|reported| Stamp {
            reported,
            claimed: 0,
        })
        .collect();
    let mut rng = SplitMix(SEED);
    let mut samples: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut reused = 0;
    for i in 0..WARMUP_RUNS + runs {
        for _ in 0..CHANGED_PER_DECISION {
            let host = (rng.next() % hosts as u64) as usize;
            stamps[host].reported = fresh_stamps(1).start;
        }
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let reuse = Reuse {
                cache: &mut caches[k],
                view: (0, hosts),
                // Hosts change by report here, never by a claim.
                stamps: Stamps {
                    by_host: &stamps,
                    claimed_columns: ColumnsRead::ALL,
                    rows: None,
                },
            };
            let start = Instant::now();
            let decision = black_box(schedule_reusing(policies[k], inventory, request, reuse))
                .context("scheduling")?;
            let elapsed = start.elapsed();
            if i >= WARMUP_RUNS {
                samples[k].push(elapsed);
                let explain = &decision.explain;
                reused = explain.filters.iter().map(|f| f.reused).sum::<usize>()
                    + explain.scores.iter().map(|s| s.reused).sum::<usize>();
            }
        }
    }
    let [mut wasm, mut native] = samples;
    let (w, n) = (median(&mut wasm), median(&mut native));
    println!(
        "{label} mode=incremental changed_per_decision={CHANGED_PER_DECISION} runs={runs} wasm_median_us={} native_median_us={} ratio={:.2} wasm_min_us={} native_min_us={} reused_answers={reused}",
        w.as_micros(),
        n.as_micros(),
        ratio(w, n),
        fastest(&wasm).as_micros(),
        fastest(&native).as_micros(),
    );
    Ok(())
}

/// [`schedule`] with every core of the machine lent: per-host filters
/// over many candidates in chunks and weights side by side
/// (`pipeline::parallel`).
fn on_every_core(
    policy: &Policy,
    inventory: &Arc<Inventory>,
    request: &ScheduleRequest,
) -> Result<Decision, ScheduleError> {
    let means = Means {
        reuse: None,
        cores: Some(&EveryCore),
    };
    schedule_with(policy, inventory, request, means)
}

/// Logical CPUs of this machine.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A decision: [`schedule`], [`schedule_calling_every_unit`] or
/// [`on_every_core`].
type Decide = fn(&Policy, &Arc<Inventory>, &ScheduleRequest) -> Result<Decision, ScheduleError>;

/// Runs `policies` (`[sandboxed, native]`) interleaved over `inventory`,
/// each decided by every one of `modes` (a label and a way to decide) in
/// turn, and prints per mode the decision's medians, each unit call's and
/// the time outside the units; returns each mode's two medians. Modes are
/// interleaved run by run, so that they see the same machine: on a shared
/// machine, runs a few seconds apart differ more than the modes.
fn measure(
    modes: &[(&str, Decide)],
    policies: [&Policy; 2],
    inventory: &Arc<Inventory>,
    request: &ScheduleRequest,
) -> anyhow::Result<Vec<(Duration, Duration)>> {
    let [wasm_policy, native_policy] = policies;
    let hosts = inventory.host_count();
    let runs = runs_for(hosts);
    let mut all: Vec<[Runs; 2]> = modes
        .iter()
        .map(|&(_, decide)| {
            [
                Runs::new(wasm_policy, decide),
                Runs::new(native_policy, decide),
            ]
        })
        .collect();
    for i in 0..WARMUP_RUNS + runs {
        let timed = i >= WARMUP_RUNS;
        // Alternate which goes first, so that none always runs on caches
        // another just warmed.
        for m in 0..modes.len() {
            let [wasm_runs, native_runs] = &mut all[(m + i) % modes.len()];
            if i % 2 == 0 {
                wasm_runs.run(wasm_policy, inventory, request, timed)?;
                native_runs.run(native_policy, inventory, request, timed)?;
            } else {
                native_runs.run(native_policy, inventory, request, timed)?;
                wasm_runs.run(wasm_policy, inventory, request, timed)?;
            }
        }
    }
    let mut medians = Vec::with_capacity(modes.len());
    for (&(label, _), [wasm_runs, native_runs]) in modes.iter().zip(&mut all) {
        medians.push(report(label, hosts, runs, wasm_runs, native_runs));
    }
    Ok(medians)
}

/// Prints one mode's lines (see [`measure`]); its two medians.
fn report(
    label: &str,
    hosts: usize,
    runs: usize,
    wasm_runs: &mut Runs,
    native_runs: &mut Runs,
) -> (Duration, Duration) {
    let (w, n) = (median(&mut wasm_runs.total), median(&mut native_runs.total));
    // The fastest run too: on a shared machine the median moves with
    // other load, the minimum much less.
    let (w_min, n_min) = (fastest(&wasm_runs.total), fastest(&native_runs.total));
    println!(
        "{label} runs={runs} wasm_median_us={} native_median_us={} ratio={:.2} wasm_min_us={} native_min_us={}",
        w.as_micros(),
        n.as_micros(),
        ratio(w, n),
        w_min.as_micros(),
        n_min.as_micros(),
    );
    // Calls that did nothing for the request: their medians' sums.
    let (mut idle, mut idle_wasm, mut idle_native) = (0usize, 0.0, 0.0);
    for (u, (name, role)) in wasm_runs.names.iter().enumerate() {
        let (w, n) = (
            median(&mut wasm_runs.per_unit[u]),
            median(&mut native_runs.per_unit[u]),
        );
        let fuel = wasm_runs.fuel[u].unwrap_or(0);
        println!(
            "  unit hosts={hosts} name={name} role={role} wasm_median_us={:.1} native_median_us={:.1} ratio={:.2} wasm_fuel={fuel}",
            w.as_secs_f64() * 1e6,
            n.as_secs_f64() * 1e6,
            ratio(w, n),
        );
        if fuel > 0 && fuel < NOTHING_TO_DO_FUEL {
            idle += 1;
            idle_wasm += w.as_secs_f64() * 1e6;
            idle_native += n.as_secs_f64() * 1e6;
        }
    }
    if idle > 0 {
        println!(
            "  nothing_to_do hosts={hosts} units={idle} wasm_mean_of_medians_us={:.1} native_mean_of_medians_us={:.1}",
            idle_wasm / idle as f64,
            idle_native / idle as f64,
        );
    }
    println!(
        "  outside_units hosts={hosts} wasm_median_us={} native_median_us={} survivors_after_filters={} skipped_calls={}",
        median(&mut wasm_runs.outside_units).as_micros(),
        median(&mut native_runs.outside_units).as_micros(),
        wasm_runs.survivors,
        wasm_runs.skipped
    );
    (w, n)
}

/// Prints what lending every core gained: the medians of deciding alone
/// over those of the same runs spread over the cores.
fn report_spread(label: &str, alone: (Duration, Duration), spread: (Duration, Duration)) {
    println!(
        "{label} cores={} wasm_alone_over_spread={:.2} native_alone_over_spread={:.2}",
        cores(),
        ratio(alone.0, spread.0),
        ratio(alone.1, spread.1)
    );
}

fn runs_for(hosts: usize) -> usize {
    (HOST_RUNS_PER_SIZE / hosts).clamp(MIN_RUNS, MAX_RUNS)
}

fn policy(units: &[Arc<dyn Unit>]) -> anyhow::Result<Policy> {
    Policy::builder()
        .filter(Arc::clone(&units[0]))
        .filter(Arc::clone(&units[1]))
        .score(Arc::clone(&units[2]), 1)
        .score(Arc::clone(&units[3]), 2)
        .build()
        .context("building the benchmark policy")
}

/// Timings of one mode: whole decisions and each unit's calls (read from
/// the explain record, so they are the pipeline's own measurements).
struct Runs {
    decide: Decide,
    /// Each unit call's unit name and role, in pipeline order.
    names: Vec<(String, &'static str)>,
    total: Vec<Duration>,
    /// Each run's time outside the unit calls: the pipeline's own work
    /// (and, sandboxed, dropping each call's store).
    outside_units: Vec<Duration>,
    per_unit: Vec<Vec<Duration>>,
    /// Fuel each unit burnt in the last run (deterministic, so one run
    /// says it all); `None` natively.
    fuel: Vec<Option<u64>>,
    survivors: usize,
    /// Unit calls the last run skipped (the unit declared the request
    /// does not concern it).
    skipped: usize,
}

impl Runs {
    fn new(policy: &Policy, decide: Decide) -> Self {
        let names: Vec<(String, &'static str)> = policy
            .filters()
            .iter()
            .map(|f| (f.unit.info().name.clone(), "filter"))
            .chain(
                policy
                    .scores()
                    .iter()
                    .map(|s| (s.unit.info().name.clone(), "score")),
            )
            .collect();
        Runs {
            decide,
            per_unit: vec![Vec::new(); names.len()],
            fuel: vec![None; names.len()],
            names,
            total: Vec::new(),
            outside_units: Vec::new(),
            survivors: 0,
            skipped: 0,
        }
    }

    fn run(
        &mut self,
        policy: &Policy,
        inventory: &Arc<Inventory>,
        request: &ScheduleRequest,
        timed: bool,
    ) -> anyhow::Result<()> {
        let start = Instant::now();
        let decision: Decision =
            black_box((self.decide)(policy, inventory, request)).context("scheduling")?;
        let elapsed = start.elapsed();
        let explain = &decision.explain;
        if explain.filters.len() + explain.scores.len() != self.names.len() {
            bail!("not every unit ran: {:?}", explain.outcome);
        }
        if let Some(f) = explain.filters.iter().find_map(|f| f.failure.as_ref()) {
            bail!("a filter failed: {}", f.message);
        }
        if let Some(f) = explain.scores.iter().find_map(|s| s.failure.as_ref()) {
            bail!("a score unit failed: {}", f.message);
        }
        if timed {
            self.total.push(elapsed);
            let usages = explain.filters.iter().map(|f| f.usage.elapsed).chain(
                explain
                    .scores
                    .iter()
                    .map(|s| s.usage.map_or(Duration::ZERO, |u| u.elapsed)),
            );
            let mut in_units = Duration::ZERO;
            for (slot, usage) in self.per_unit.iter_mut().zip(usages) {
                slot.push(usage);
                in_units += usage;
            }
            self.outside_units.push(elapsed.saturating_sub(in_units));
            let fuel = explain
                .filters
                .iter()
                .map(|f| f.usage.fuel)
                .chain(explain.scores.iter().map(|s| s.usage.and_then(|u| u.fuel)));
            for (slot, fuel) in self.fuel.iter_mut().zip(fuel) {
                *slot = fuel;
            }
            self.survivors = explain.scored.len();
            self.skipped = explain
                .filters
                .iter()
                .filter(|f| f.skipped.is_some())
                .count()
                + explain
                    .scores
                    .iter()
                    .filter(|s| s.skipped.is_some())
                    .count();
        }
        Ok(())
    }
}

/// Median cost of a fresh instance plus one call that does nothing (a
/// filter over no candidates): what every sandboxed call pays up front.
fn instantiate_median(
    unit: &dyn Unit,
    inventory: &Arc<Inventory>,
    runs: usize,
) -> anyhow::Result<Duration> {
    let request = Request {
        vm: Vm::default(),
        params: Vec::new(),
        hints: Vec::new(),
    };
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..WARMUP_RUNS + runs {
        let called = unit
            .filter(inventory, &request, &[])
            .map_err(|f| anyhow::anyhow!("empty filter call failed: {}", f.error))?;
        samples.push(called.usage.elapsed);
    }
    Ok(median(&mut samples[WARMUP_RUNS..].to_vec()))
}

fn median(samples: &mut [Duration]) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn fastest(samples: &[Duration]) -> Duration {
    samples.iter().min().copied().unwrap_or(Duration::ZERO)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// SplitMix64: a tiny deterministic generator, so every run and every
/// machine sees the same cluster.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[(self.next() % choices.len() as u64) as usize]
    }
}

/// A synthetic cluster of `hosts` hosts shaped so that the filters reject
/// some (about one in six for memory, fewer for CPU) and the scores spread.
fn cluster(hosts: usize) -> anyhow::Result<Inventory> {
    let mut rng = SplitMix(SEED ^ hosts as u64);
    let mut inv = Inventory::new(hosts, 0);
    let mut columns: Vec<(HostMetric, Vec<f64>)> = [
        HostMetric::MemoryTotalMib,
        HostMetric::MemoryFreeMib,
        HostMetric::MemoryCommittedMib,
        HostMetric::MemoryReservedMib,
        HostMetric::SwapFreeMib,
        HostMetric::CpuCores,
        HostMetric::CpuThreads,
        HostMetric::CpuUsagePercent,
        HostMetric::CpuSockets,
    ]
    .into_iter()
    .map(|m| (m, Vec::with_capacity(hosts)))
    .collect();
    for _ in 0..hosts {
        let total = rng.pick(&[65_536.0, 131_072.0, 262_144.0, 524_288.0]);
        let used_share = rng.unit() * 0.99;
        let free = (total * (1.0 - used_share)).floor();
        let reserved = 1024.0;
        let committed = (total * used_share * (0.8 + 0.4 * rng.unit())).floor();
        let swap_free = rng.pick(&[0.0, 0.0, 4096.0]);
        let cores = rng.pick(&[2.0, 8.0, 16.0, 32.0, 64.0]);
        let usage = (rng.unit() * 100.0).floor();
        let values = [
            total,
            free,
            committed,
            reserved,
            swap_free,
            cores,
            cores * 2.0,
            usage,
            // Derived, not drawn, so the other columns stay as they were.
            if cores >= 16.0 { 2.0 } else { 1.0 },
        ];
        for ((_, column), value) in columns.iter_mut().zip(values) {
            column.push(value);
        }
    }
    for (metric, column) in columns {
        inv.set_host_metric(metric, column)?;
    }
    let mut spm = vec![false; hosts];
    spm[0] = true;
    inv.set_host_flag(HostFlag::Spm, spm)?;
    inv.set_host_text(
        HostText::Id,
        Interned::from_rows((0..hosts).map(|i| format!("host-{i:05}"))),
    )?;
    Ok(inv)
}

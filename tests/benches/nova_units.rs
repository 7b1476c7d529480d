//! What each built-in Nova unit costs at 10,000 hosts on Nova-shaped data,
//! sandboxed against its own source run natively.
//!
//! The catalog benchmark (`benches/catalog.rs`) calls every unit with one
//! plain request, which leaves most Nova units nothing to do (no extra
//! specs, no image properties, no hints). Here the cluster and the request
//! look like the reference notes' Nova benchmark (nova-scheduler.md §6.2):
//! `cpu_info` as a JSON text with a random vendor and feature subset,
//! `supported_instances`, hypervisor versions, 2% disabled services, and
//! the flavor's four capability extra specs; plus aggregates with metadata,
//! named metrics, running VMs, server groups, image properties and every
//! hint a Nova unit reads, so that each unit does its real work.
//!
//! Times are each call's own (`Usage::elapsed`), median of interleaved runs.
//!
//! Run with: `cargo bench -p sandpiper-tests --bench nova_units [name-filter]`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sandpiper::pipeline::{Combination, Decision, Policy, ScheduleRequest, schedule};
use sandpiper::snapshot::hint_pairs;
use sandpiper::unit::Unit;
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{KeyValue, Request};

mod common;
use common::nova_cluster::{NovaCluster, nova_cluster};
use common::{RUNS, WARMUP_RUNS, elapsed, micros};

/// Hosts in the cluster: the size the catalog's cost bar is stated at.
const HOSTS: usize = 10_000;
/// Package-name prefix of the Nova units.
const NOVA_PREFIX: &str = "sandpiper-policy-nova-";

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let (inventory, request) = match cluster(HOSTS) {
        Ok(built) => built,
        Err(error) => panic!("the synthetic cluster is valid: {error}"),
    };
    let candidates: Vec<u32> = (0..HOSTS as u32).collect();
    println!(
        "Nova units at {HOSTS} hosts on Nova-shaped data (median of {RUNS}; sandboxed vs native)"
    );
    println!(
        "{:<36} {:<7} {:>9} {:>10} {:>6} {:>9}",
        "unit", "role", "wasm_us", "native_us", "ratio", "ns/host"
    );
    let keep = |package: &str| {
        package.starts_with(NOVA_PREFIX) && filter.as_deref().is_none_or(|f| package.contains(f))
    };
    for (wasm, native) in common::both_builds(keep) {
        let params: Vec<KeyValue> = native
            .info
            .params
            .iter()
            .map(|p| {
                let value = overrides(&p.name).unwrap_or(&p.default_value);
                KeyValue::new(p.name.clone(), value.to_owned())
            })
            .collect();
        let request = Request {
            params,
            ..request.clone()
        };
        let builds: [&dyn Unit; 2] = [wasm.as_ref(), &native];
        let name = native.info.name.clone();
        if native.filter.is_some() {
            report(&name, "filter", &builds, |u| {
                elapsed(u.filter(&inventory, &request, &candidates))
            });
        }
        if native.score.is_some() {
            report(&name, "score", &builds, |u| {
                elapsed(u.score(&inventory, &request, &candidates))
            });
        }
    }
    if filter.is_none() {
        nova_policy();
    }
}

/// Nova's policy in the reference benchmark (nova-scheduler.md §6.2), in
/// policy order: three filters, then the RAM weigher, normalised.
const NOVA_POLICY: [&str; 4] = [
    "sandpiper-policy-nova-ram",
    "sandpiper-policy-nova-compute",
    "sandpiper-policy-nova-compute-capabilities",
    "sandpiper-policy-nova-ram-weigher",
];
/// Cluster sizes Nova's policy is measured at.
const POLICY_SIZES: [usize; 3] = [1_000, 10_000, 50_000];

/// Whole decisions of Nova's policy over Nova-shaped clusters, sandboxed
/// and native from the same source, interleaved in this process; the
/// median and fastest decision, each unit's median call (the explain
/// record's own timing) and the hosts left after the filters. Prints
/// `nova_policy hosts=... wasm_median_us=... native_median_us=... ratio=...`.
fn nova_policy() {
    // One package at a time, so the units come in policy order.
    let builds: Vec<_> = NOVA_POLICY
        .iter()
        .flat_map(|package| common::both_builds(|p| p == *package))
        .collect();
    let policy = |units: Vec<Arc<dyn Unit>>| -> Policy {
        let [ram, compute, capabilities, weigher] = <[Arc<dyn Unit>; 4]>::try_from(units)
            .unwrap_or_else(|_| panic!("Nova's four units are built in"));
        match Policy::builder()
            .combination(Combination::Normalised)
            .filter(ram)
            .filter(compute)
            .filter(capabilities)
            .score(weigher, 1)
            .build()
        {
            Ok(policy) => policy,
            Err(error) => panic!("Nova's policy builds: {error:?}"),
        }
    };
    let wasm = policy(builds.iter().map(|(w, _)| Arc::clone(w)).collect());
    let native = policy(
        builds
            .into_iter()
            .map(|(_, n)| Arc::new(n) as Arc<dyn Unit>)
            .collect(),
    );
    println!(
        "Nova's policy (RamFilter, ComputeFilter, ComputeCapabilitiesFilter, RAMWeigher; normalised)"
    );
    for hosts in POLICY_SIZES {
        let (inventory, request) = match cluster(hosts) {
            Ok(built) => built,
            Err(error) => panic!("the synthetic cluster is valid: {error}"),
        };
        let request = ScheduleRequest {
            vm: request.vm.clone(),
            hints: request.hints.clone(),
            ..ScheduleRequest::default()
        };
        let runs = (2_000_000 / hosts).clamp(11, RUNS);
        let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        let mut per_unit: [Vec<Vec<Duration>>; 2] = Default::default();
        let mut last: Option<Decision> = None;
        for i in 0..WARMUP_RUNS + runs {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for mode in order {
                let policy = if mode == 0 { &wasm } else { &native };
                let started = Instant::now();
                let decision = match schedule(policy, &inventory, &request) {
                    Ok(decision) => decision,
                    Err(error) => panic!("Nova's policy decides: {error:?}"),
                };
                let took = started.elapsed();
                if i < WARMUP_RUNS {
                    continue;
                }
                times[mode].push(took);
                let usages: Vec<Duration> = decision
                    .explain
                    .filters
                    .iter()
                    .map(|f| f.usage.elapsed)
                    .chain(
                        decision
                            .explain
                            .scores
                            .iter()
                            .map(|s| s.usage.map_or(Duration::ZERO, |u| u.elapsed)),
                    )
                    .collect();
                per_unit[mode].resize(usages.len(), Vec::new());
                for (slot, usage) in per_unit[mode].iter_mut().zip(usages) {
                    slot.push(usage);
                }
                if mode == 0 {
                    last = Some(decision);
                }
            }
        }
        let [w, n] = [median(&mut times[0]), median(&mut times[1])];
        let [w_min, n_min] = [min(&times[0]), min(&times[1])];
        let Some(decision) = last else { continue };
        println!(
            "nova_policy hosts={hosts} runs={runs} wasm_median_us={:.0} native_median_us={:.0} \
             ratio={:.2} wasm_min_us={:.0} native_min_us={:.0} survivors={}",
            micros(w),
            micros(n),
            micros(w) / micros(n).max(0.1),
            micros(w_min),
            micros(n_min),
            decision.explain.scored.len()
        );
        let names = decision
            .explain
            .filters
            .iter()
            .map(|f| (f.unit.clone(), "filter", f.usage.fuel))
            .chain(
                decision
                    .explain
                    .scores
                    .iter()
                    .map(|s| (s.unit.clone(), "score", s.usage.and_then(|u| u.fuel))),
            );
        for (u, (name, role, fuel)) in names.enumerate() {
            let [w, n] = [median(&mut per_unit[0][u]), median(&mut per_unit[1][u])];
            println!(
                "  unit hosts={hosts} name={name} role={role} wasm_median_us={:.1} \
                 native_median_us={:.1} ratio={:.2} wasm_fuel={}",
                micros(w),
                micros(n),
                micros(w) / micros(n).max(0.1),
                fuel.unwrap_or(0)
            );
        }
    }
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn min(samples: &[Duration]) -> Duration {
    samples.iter().copied().min().unwrap_or_default()
}

/// Parameter values that give a unit work to do where its default would
/// not (metrics to weigh, isolated images).
fn overrides(name: &str) -> Option<&'static str> {
    match name {
        "metrics_weight_setting" => Some("cpu.frequency=1, cpu.percent=-0.5"),
        "isolated_images" => Some("img-isolated"),
        "isolated_hosts" => Some("h7, h70, h700"),
        _ => None,
    }
}

/// Times `call` on both builds and prints the medians.
fn report(name: &str, role: &str, builds: &[&dyn Unit; 2], call: impl Fn(&dyn Unit) -> Duration) {
    let [wasm, native] = common::medians(builds, call);
    println!(
        "{name:<36} {role:<7} {:>9.1} {:>10.1} {:>6.2} {:>9.1}",
        micros(wasm),
        micros(native),
        micros(wasm) / micros(native).max(0.1),
        micros(wasm) * 1000.0 / HOSTS as f64
    );
}

/// `count` Nova-shaped hosts (`common/nova_cluster.rs`, shared with the
/// HTTP benchmark) built into columns, and the request to place.
fn cluster(count: usize) -> Result<(Arc<Inventory>, Request), sandpiper::snapshot::SnapshotError> {
    let NovaCluster {
        snapshot,
        vm,
        hints,
    } = nova_cluster(count);
    let cluster = snapshot.build()?;
    let vm = vm.to_vm(&cluster.hosts, "vm")?;
    let request = Request {
        vm,
        params: Vec::new(),
        hints: hint_pairs(&hints),
    };
    Ok((Arc::new(cluster.inventory), request))
}

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
//! The hardware table runs oVirt's NUMA, page, pinning and device units
//! over the same hosts too: their inputs are the same columns.
//!
//! Times are each call's own (`Usage::elapsed`), median of interleaved runs.
//!
//! Run with: `cargo bench -p sandpiper-tests --bench nova_units [name-filter]`.
//! A filter keeps the units whose package name contains it, in every
//! table (`pci-weigher` runs `PCIWeigher` alone: on Nova's data and on the
//! hardware hosts); the whole-policy tables run only without one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sandpiper::pipeline::{Combination, Decision, Policy, ScheduleRequest, schedule};
use sandpiper::snapshot::hint_pairs;
use sandpiper::unit::Unit;
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{KeyValue, Request};

mod common;
use common::nova_cluster::{NovaCluster, nova_cluster};
use common::{WARMUP_RUNS, elapsed, micros, runs};

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
        "Nova units at {HOSTS} hosts on Nova-shaped data (median of {}; sandboxed vs native)",
        runs()
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
        one_changed_host(&inventory, &request);
    }
    let hardware: Vec<&str> = HARDWARE_UNITS
        .into_iter()
        .filter(|package| filter.as_deref().is_none_or(|f| package.contains(f)))
        .collect();
    if !hardware.is_empty() {
        hardware_units(&hardware);
    }
}

/// Units of the hardware units' benchmark, in the order they are printed:
/// Nova's, then oVirt's that do work for its request (oVirt's `NUMA` and
/// `MDevice` have nothing to do for it), over the same hosts.
const HARDWARE_UNITS: [&str; 8] = [
    "sandpiper-policy-nova-numa-topology",
    "sandpiper-policy-nova-pci-passthrough",
    "sandpiper-policy-nova-pci-weigher",
    "sandpiper-policy-huge-pages",
    "sandpiper-policy-cpu-pinning",
    "sandpiper-policy-high-performance-cpu",
    "sandpiper-policy-cpu-topology",
    "sandpiper-policy-host-device",
];

/// The `packages` of [`HARDWARE_UNITS`] over [`HOSTS`] hosts of 2 to 8 NUMA cells each
/// (16 CPUs per cell, 8 cores of 2 threads, half of them dedicated and
/// some pinned; 4 KiB and 2 MiB pages; a few PCI pools on random cells)
/// with a NUMA-heavy request: two guest cells of 4 pinned vCPUs and 8 GiB
/// in large pages, isolated emulator threads, and one NUMA-local PCI
/// device. Prints `unit hosts=... name=... wasm_median_us=...
/// native_median_us=... ratio=... wasm_fuel=... rejected=...` per unit.
fn hardware_units(packages: &[&str]) {
    let (inventory, request) = hardware_cluster(HOSTS);
    println!(
        "Hardware units at {HOSTS} hosts of 2-8 NUMA cells, NUMA-heavy request (median of {})",
        runs()
    );
    for &package in packages {
        hardware_unit(package, "", &inventory, &request);
        if package == "sandpiper-policy-cpu-pinning" {
            // oVirt's manual pinning: vCPUs 0 and 1 on host CPUs 1-2 and
            // 17-18, which most hosts have unpinned.
            let mut manual = request.clone();
            manual.vm.hardware.cpu_policy = sandpiper_guest::model::CpuPolicy::Shared;
            manual
                .vm
                .extra_specs
                .push(KeyValue::new("ovirt:cpu_pinning", "0#1-2_1#17-18"));
            hardware_unit(package, " (manual pinning)", &inventory, &manual);
        }
    }
}

/// One of [`hardware_units`]' lines: `package` over every host for
/// `request`, `variant` after its name.
fn hardware_unit(package: &str, variant: &str, inventory: &Arc<Inventory>, request: &Request) {
    let candidates: Vec<u32> = (0..HOSTS as u32).collect();
    for (wasm, native) in common::both_builds(|p| p == package) {
        let request = Request {
            params: native
                .info
                .params
                .iter()
                .map(|p| KeyValue::new(p.name.clone(), p.default_value.clone()))
                .collect(),
            ..request.clone()
        };
        let builds: [&dyn Unit; 2] = [wasm.as_ref(), &native];
        let name = format!("{}{variant}", native.info.name);
        let (role, rejected, fuel) = if native.filter.is_some() {
            let rejected = match native.filter(inventory, &request, &candidates) {
                Ok(called) => called.value.iter().map(|r| r.hosts.len()).sum::<usize>(),
                Err(failed) => panic!("{name} filters: {}", failed.error),
            };
            let fuel = match wasm.filter(inventory, &request, &candidates) {
                Ok(called) => called.usage.fuel,
                Err(failed) => panic!("{name} filters sandboxed: {}", failed.error),
            };
            ("filter", rejected, fuel)
        } else {
            let fuel = match wasm.score(inventory, &request, &candidates) {
                Ok(called) => called.usage.fuel,
                Err(failed) => panic!("{name} scores sandboxed: {}", failed.error),
            };
            ("score", 0, fuel)
        };
        let [w, n] = common::medians(&builds, |u| {
            if role == "filter" {
                elapsed(u.filter(inventory, &request, &candidates))
            } else {
                elapsed(u.score(inventory, &request, &candidates))
            }
        });
        println!(
            "  unit hosts={HOSTS} name={name} role={role} wasm_median_us={:.1} \
             native_median_us={:.1} ratio={:.2} wasm_fuel={} rejected={rejected}",
            micros(w),
            micros(n),
            micros(w) / micros(n).max(0.1),
            fuel.unwrap_or(0),
        );
    }
}

/// `count` hosts with hardware columns and the NUMA-heavy request (see
/// [`hardware_units`]); deterministic.
fn hardware_cluster(count: usize) -> (Arc<Inventory>, Request) {
    use sandpiper_guest::model::hardware::NONE;
    use sandpiper_guest::model::{
        CellCpus, CellMetric, CellPages, CpuPolicy, DeviceKind, EmulatorThreads, Labels,
        MdevOffers, NumaTopology, PageSize, PciNumaPolicy, PciPools, PciRequest, PcpuFlag,
        VmHardware, VmNumaCell,
    };
    const CPUS_PER_CELL: u32 = 16;
    let mut rng = common::SplitMix(0x4E0A_C311);
    let mut topology = NumaTopology {
        offsets: vec![0],
        ..NumaTopology::default()
    };
    let mut metrics: [Vec<f64>; 6] = Default::default();
    let mut cpus = CellCpus {
        offsets: vec![0],
        ..CellCpus::default()
    };
    let (mut dedicated, mut pinned) = (Vec::new(), Vec::new());
    let mut pages = CellPages {
        offsets: vec![0],
        ..CellPages::default()
    };
    let mut pools = PciPools {
        offsets: vec![0],
        strings: vec![String::new(), "15b3".to_owned(), "101b".to_owned()],
        ..PciPools::default()
    };
    let mut core = 0u32;
    for _ in 0..count {
        let cells = 2 + (rng.next() % 7) as u32;
        let first = topology.node_ids.len() as u32;
        for node in 0..cells {
            topology.node_ids.push(node);
            topology.sockets.push(node / 2);
            let free_mib = (65_536.0 * (0.25 + 0.75 * rng.unit())).floor();
            let used_dedicated = (rng.next() % 9) as u32;
            metrics[0].push(65_536.0);
            metrics[1].push(free_mib);
            metrics[2].push(f64::from(CPUS_PER_CELL));
            metrics[3].push(f64::from(CPUS_PER_CELL / 2));
            metrics[4].push(f64::from(used_dedicated));
            metrics[5].push((rng.next() % 24) as f64);
            let base = node * CPUS_PER_CELL;
            for i in 0..CPUS_PER_CELL {
                cpus.cpus.push(base + i);
                cpus.cores.push(core + i / 2);
                let is_dedicated = i >= CPUS_PER_CELL / 2;
                dedicated.push(is_dedicated);
                pinned.push(is_dedicated && i - CPUS_PER_CELL / 2 < used_dedicated);
            }
            core += CPUS_PER_CELL / 2;
            cpus.offsets.push(cpus.cpus.len() as u32);
            let free_huge = (rng.next() % 16_385) as f64;
            pages.size_kib.extend([4, 2048]);
            pages.total.extend([8_388_608.0, 16_384.0]);
            pages.free.extend([4_194_304.0, free_huge]);
            pages.offsets.push(pages.size_kib.len() as u32);
        }
        topology.offsets.push(topology.node_ids.len() as u32);
        for product in [1u32, 2] {
            pools.vendors.push(product);
            pools.products.push(product);
            pools.addresses.push(0);
            pools.kinds.push(DeviceKind::Pci);
            pools
                .cells
                .push(first + (rng.next() % u64::from(cells)) as u32);
            pools.parents.push(NONE);
            pools.total.push(4);
            pools.free.push((rng.next() % 5) as u32);
        }
        pools.offsets.push(pools.kinds.len() as u32);
    }
    let pool_count = pools.kinds.len();
    let mut inventory = Inventory::new(count, 0);
    let built = (|| {
        inventory.set_numa_topology(topology)?;
        for (metric, column) in [
            CellMetric::MemoryTotalMib,
            CellMetric::MemoryFreeMib,
            CellMetric::Cpus,
            CellMetric::DedicatedCpus,
            CellMetric::PinnedCpus,
            CellMetric::SharedVcpusUsed,
        ]
        .into_iter()
        .zip(metrics)
        {
            inventory.set_cell_metric(metric, column)?;
        }
        inventory.set_cell_cpus(cpus)?;
        inventory.set_pcpu_flag(PcpuFlag::Dedicated, dedicated)?;
        inventory.set_pcpu_flag(PcpuFlag::Pinned, pinned)?;
        inventory.set_cell_pages(pages)?;
        inventory.set_pci_pools(pools)?;
        inventory.set_pci_pool_labels(Labels::from_rows(
            (0..pool_count).map(|_| Vec::<(&str, &str)>::new()),
        ))?;
        inventory.set_mdev_offers(MdevOffers::empty(count))
    })();
    if let Err(error) = built {
        panic!("the synthetic hardware columns fit: {error}");
    }
    let cell = |first: u32| VmNumaCell {
        dedicated_vcpus: (first..first + 4).collect(),
        memory_mib: 8192.0,
        ..VmNumaCell::default()
    };
    let vm = sandpiper_guest::model::Vm {
        vcpus: 8,
        memory_mib: 16_384.0,
        hardware: VmHardware {
            numa_cells: vec![cell(0), cell(4)],
            cpu_policy: CpuPolicy::Dedicated,
            emulator_threads: EmulatorThreads::Isolate,
            page_size: PageSize::Large,
            pci_requests: vec![PciRequest {
                alias: "nic".to_owned(),
                count: 1,
                specs: vec![vec![KeyValue::new("vendor_id", "15b3")]],
                numa_policy: PciNumaPolicy::Required,
            }],
            ..VmHardware::default()
        },
        ..sandpiper_guest::model::Vm::default()
    };
    let request = Request {
        vm,
        ..Request::default()
    };
    (Arc::new(inventory), request)
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
        let runs = (2_000_000 / hosts).clamp(11, runs());
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

/// What each unit of Nova's policy costs asked about one host of
/// [`HOSTS`]: the call a decision makes when every other host's answer is
/// reused (one host changed since the last decision of the same shape), so
/// what is left is the call's fixed cost, the columns it reads included.
/// Prints `one_host name=... role=... wasm_median_us=...
/// native_median_us=...`.
fn one_changed_host(inventory: &Arc<Inventory>, request: &Request) {
    println!(
        "Nova's policy units asked about one host of {HOSTS} (median of {})",
        runs()
    );
    let one = [(HOSTS / 2) as u32];
    for package in NOVA_POLICY {
        for (wasm, native) in common::both_builds(|p| p == package) {
            let builds: [&dyn Unit; 2] = [wasm.as_ref(), &native];
            let (role, [w, n]) = if native.filter.is_some() {
                let medians =
                    common::medians(&builds, |u| elapsed(u.filter(inventory, request, &one)));
                ("filter", medians)
            } else {
                let medians =
                    common::medians(&builds, |u| elapsed(u.score(inventory, request, &one)));
                ("score", medians)
            };
            println!(
                "  one_host name={} role={role} wasm_median_us={:.1} native_median_us={:.1}",
                native.info.name,
                micros(w),
                micros(n),
            );
        }
    }
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

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
use sandpiper::snapshot::{Group, Host, Instance, RunningVm, Scope, Snapshot, Status, VmSpec};
use sandpiper::unit::Unit;
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{KeyValue, Request};

mod common;
use common::{RUNS, SplitMix, WARMUP_RUNS, elapsed, micros};

/// Hosts in the cluster: the size the catalog's cost bar is stated at.
const HOSTS: usize = 10_000;
/// Running VMs per host (for DifferentHost/SameHost).
const VMS_PER_HOST: usize = 3;
/// Every this-many hosts has a disabled compute service (Nova's bench: 2%).
const DISABLED_EVERY: usize = 50;
/// Seed of the cluster generator: every run sees the same cluster.
const SEED: u64 = 0x0000_0000_4E0A_5EED;
/// Package-name prefix of the Nova units.
const NOVA_PREFIX: &str = "sandpiper-policy-nova-";
/// CPU features a host may report (a random subset each, as in the
/// reference notes' benchmark).
const FEATURES: [&str; 8] = [
    "aes", "avx", "avx2", "sse4_1", "sse4_2", "vmx", "pdpe1gb", "rdrand",
];

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

/// `count` Nova-shaped hosts and a request that exercises every Nova unit.
fn cluster(count: usize) -> Result<(Arc<Inventory>, Request), sandpiper::snapshot::SnapshotError> {
    let mut random = SplitMix(SEED);
    let mut hosts = Vec::with_capacity(count);
    let mut vms = Vec::with_capacity(count * VMS_PER_HOST);
    for i in 0..count {
        let memory = random.pick(&[131_072.0, 262_144.0, 524_288.0, 786_432.0]);
        let threads = random.pick(&[32.0, 64.0, 96.0, 128.0]);
        let vm_count = (random.next() % 40) as f64;
        let mut host = Host {
            id: format!("h{i}"),
            name: Some(format!("compute-{i}")),
            status: if i % DISABLED_EVERY == 0 {
                Status::Disabled
            } else {
                Status::Up
            },
            address: format!("10.{}.{}.{}", i / 65_536, (i / 256) % 256, i % 256),
            zone: format!("az{}", i % 3),
            ..Host::default()
        };
        for (metric, value) in [
            ("cpu_cores", threads / 2.0),
            ("cpu_threads", threads),
            ("vcpus_used", vm_count * 4.0),
            ("memory_total_mib", memory),
            ("memory_free_mib", memory * (1.5 * random.unit() - 0.5)),
            ("disk_total_gib", 2048.0),
            ("disk_free_gib", 2048.0 * random.unit()),
            ("vm_count", vm_count),
            ("io_ops", (random.next() % 10) as f64),
            ("build_failures", (random.next() % 20 / 19) as f64),
            (
                "hypervisor_version",
                random.pick(&[8_002_000.0, 9_000_000.0, 9_001_000.0]),
            ),
        ] {
            host.metrics.insert(metric.to_owned(), value);
        }
        let vendor = if random.next().is_multiple_of(2) {
            "Intel"
        } else {
            "AMD"
        };
        let features: Vec<String> = FEATURES
            .iter()
            .filter(|_| !random.next().is_multiple_of(3))
            .map(|f| format!("\"{f}\""))
            .collect();
        for (key, value) in [
            (
                "cpu_info",
                format!(
                    "{{\"vendor\": \"{vendor}\", \"arch\": \"x86_64\", \"features\": [{}], \
                     \"maxphysaddr\": {{\"bits\": 46}}}}",
                    features.join(", ")
                ),
            ),
            (
                "hypervisor_type",
                if i % 4 == 0 { "KVM" } else { "QEMU" }.to_owned(),
            ),
            (
                "supported_instances",
                "[[\"x86_64\", \"kvm\", \"hvm\"], [\"i686\", \"kvm\", \"hvm\"]]".to_owned(),
            ),
        ] {
            host.capabilities.insert(key.to_owned(), value);
        }
        let mut metadata: std::collections::BTreeMap<String, String> = [
            ("availability_zone", format!("az{}", i % 3)),
            ("ssd", (i % 2 == 0).to_string()),
            ("hw_vm_mode", "hvm".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if i % 10 == 0 {
            metadata.insert("filter_tenant_id".to_owned(), "t1, t2".to_owned());
            metadata.insert("instance_type".to_owned(), "m1.small, m1.large".to_owned());
            metadata.insert("cpu_allocation_ratio".to_owned(), "2.0".to_owned());
            metadata.insert("ram_allocation_ratio".to_owned(), "1.5".to_owned());
            metadata.insert("max_io_ops_per_host".to_owned(), "6".to_owned());
            metadata.insert("max_instances_per_host".to_owned(), "30".to_owned());
        }
        host.aggregates.insert(format!("agg{}", i % 20), metadata);
        if i % 100 != 0 {
            host.named_metrics
                .insert("cpu.frequency".to_owned(), 2000.0 + (i % 1000) as f64);
            host.named_metrics
                .insert("cpu.percent".to_owned(), random.unit() * 100.0);
        }
        host.instances.push(Instance {
            tenant: format!("t{}", i % 7),
            instance_type: "m1.small".to_owned(),
        });
        for j in 0..VMS_PER_HOST {
            vms.push(RunningVm {
                id: format!("v{i}-{j}"),
                name: None,
                host: host.id.clone(),
                memory_mib: 4096.0,
                memory_guaranteed_mib: None,
                vcpus: 2,
                cpu_usage_percent: random.unit() * 100.0,
                migratable: true,
                highly_available: false,
                hosted_engine: false,
                pending: false,
            });
        }
        hosts.push(host);
    }
    let cluster = Snapshot { hosts, vms }.build()?;
    // Groups name hosts by id; a smaller cluster keeps the ones it has.
    let ids = |range: std::ops::Range<usize>| {
        range
            .filter(|&i| i < count)
            .map(|i| format!("h{i}"))
            .collect::<Vec<_>>()
    };
    let group = |id: &str, positive, enforcing, hosts| Group {
        id: id.to_owned(),
        name: id.to_owned(),
        scope: Scope::Vms,
        positive,
        enforcing,
        priority: 1.0,
        hosts,
    };
    let pairs = |items: &[(&str, &str)]| {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let vm = VmSpec {
        id: "new".to_owned(),
        memory_mib: 8192.0,
        vcpus: 4,
        disk_gib: 40.0,
        tenant: "t1".to_owned(),
        instance_type: "m1.small".to_owned(),
        extra_specs: pairs(&[
            ("capabilities:cpu_info:vendor", "s== Intel"),
            ("capabilities:cpu_info:features", "<all-in> aes avx2"),
            ("capabilities:hypervisor_version", ">= 9000000"),
            ("capabilities:hypervisor_type", "<or> QEMU <or> KVM"),
            ("aggregate_instance_extra_specs:ssd", "true"),
            ("hw:cpu_policy", "shared"),
        ]),
        image_properties: pairs(&[
            ("hw_architecture", "x86_64"),
            ("img_hv_type", "kvm"),
            ("hw_vm_mode", "hvm"),
            ("img_hv_requested_version", ">=8.0"),
            ("image_id", "img-1"),
        ]),
        groups: vec![
            group("apart", false, true, ids(0..200)),
            group("together", true, true, ids(0..2_000)),
            group("near", true, false, ids(0..500)),
            group("spread", false, false, ids(500..600)),
        ],
        ..VmSpec::default()
    }
    .to_vm(&cluster.hosts, "vm")?;
    let hints = [
        (
            "query",
            "[\"and\", [\">=\", \"$free_ram_mb\", 1024], [\">=\", \"$free_disk_mb\", 204800], \
             [\"not\", \"$service.disabled\"]]",
        ),
        ("different_host", "v1-0"),
        ("different_host", "v2-0"),
        ("same_host", "v3-0"),
        ("build_near_host_ip", "10.0.1.1"),
        ("cidr", "/20"),
        ("availability_zone", "az1"),
        ("retry_hosts", "h1"),
        ("retry_hosts", "compute-2"),
        ("max_server_per_host", "1"),
    ]
    .iter()
    .map(|(k, v)| KeyValue::new(*k, *v))
    .collect();
    let request = Request {
        vm,
        params: Vec::new(),
        hints,
    };
    Ok((Arc::new(cluster.inventory), request))
}

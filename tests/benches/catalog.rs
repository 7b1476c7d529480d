//! What each built-in unit costs at 10,000 hosts, sandboxed against its own
//! source run natively: every role of every unit in `policies/`, called
//! alone over the same synthetic cluster, interleaved so both builds see the
//! same machine state. `docs/unit-costs.md` quotes these figures.
//!
//! The sandboxed figure includes what every call pays (a fresh instance,
//! the request and candidates copied in, the answer copied out) and each
//! column the unit pulls through the `inventory` import; the native one
//! reads columns already in memory. Times are the unit's own, as the
//! pipeline records them in `Usage::elapsed`.
//!
//! Run with: `cargo bench -p sandpiper-tests --bench catalog [name-filter]`.

use std::sync::Arc;
use std::time::Duration;

use sandpiper::hardware::{HostHardware, VmHardwareSpec};
use sandpiper::snapshot::{
    Cluster, Group, Host, Instance, RunningVm, Scope, Snapshot, SnapshotError, VmSpec,
};
use sandpiper::unit::Unit;
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{BalanceRequest, KeyValue, Request};

mod common;
use common::{SplitMix, elapsed, micros, runs};

/// Hosts in the cluster: the size the catalog's cost bar is stated at.
const HOSTS: usize = 10_000;
/// Running VMs per host, for balancers and VM-counting units.
const VMS_PER_HOST: usize = 3;
/// Share of hosts that are overloaded, so balancers and overload filters
/// have work to do.
const OVERLOADED_SHARE: f64 = 0.05;
/// Every this-many hosts is a hosted-engine host (and misses a network).
const SPECIAL_HOST_EVERY: usize = 50;
/// Seed of the cluster generator: every run sees the same cluster.
const SEED: u64 = 0x5EED_CA7A_1065;

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let (inventory, request) = match cluster() {
        Ok(built) => built,
        Err(error) => panic!("the synthetic cluster is valid: {error}"),
    };
    let candidates: Vec<u32> = (0..HOSTS as u32).collect();
    println!(
        "per-unit cost at {HOSTS} hosts, {} VMs (median of {}; wasmtime 48, sandboxed vs native)",
        HOSTS * VMS_PER_HOST,
        runs()
    );
    println!(
        "{:<40} {:<8} {:>10} {:>10} {:>7}",
        "unit", "role", "wasm_us", "native_us", "ratio"
    );
    let keep = |package: &str| filter.as_deref().is_none_or(|f| package.contains(f));
    for (wasm, native) in common::both_builds(keep) {
        let params: Vec<KeyValue> = native
            .info
            .params
            .iter()
            .map(|p| KeyValue::new(p.name.clone(), p.default_value.clone()))
            .collect();
        let request = Request {
            params: params.clone(),
            ..request.clone()
        };
        let balance = BalanceRequest {
            params,
            candidates: candidates.clone(),
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
        if native.balance.is_some() {
            report(&name, "balance", &builds, |u| {
                elapsed(u.balance(&inventory, &balance))
            });
        }
    }
    let hardware: Vec<&str> = HARDWARE_FILTERS
        .into_iter()
        .filter(|package| keep(package))
        .collect();
    if !hardware.is_empty() {
        hardware_filters(&hardware);
    }
}

/// oVirt's mandatory filters that read a host's CPU flags, cluster levels
/// and emulated machines, which the plain request above leaves nothing to
/// do (its VM names no CPU model, compatibility version or machine type,
/// as an oVirt VM always does).
const HARDWARE_FILTERS: [&str; 3] = [
    "sandpiper-policy-cpu-level",
    "sandpiper-policy-compatibility-version",
    "sandpiper-policy-emulated-machine",
];

/// The `packages` of [`HARDWARE_FILTERS`] over [`HOSTS`] hosts of three
/// CPU generations, each reporting its CPU model and flags (about 60,
/// oVirt's `model_*` flags included), cluster levels and emulated
/// machines, for a Skylake-Server VM with two resolved flags, a
/// compatibility version and a machine type that a third of the hosts
/// lack.
fn hardware_filters(packages: &[&str]) {
    let (inventory, request) = match hardware_cluster() {
        Ok(built) => built,
        Err(error) => panic!("the synthetic cluster is valid: {error}"),
    };
    let candidates: Vec<u32> = (0..HOSTS as u32).collect();
    println!(
        "Hardware filters: {HOSTS} hosts of three CPU generations, a Skylake-Server VM at level 4.7"
    );
    for (wasm, native) in common::both_builds(|package| packages.contains(&package)) {
        let builds: [&dyn Unit; 2] = [wasm.as_ref(), &native];
        report(&native.info.name, "filter", &builds, |u| {
            elapsed(u.filter(&inventory, &request, &candidates))
        });
    }
}

/// The hosts and VM of [`hardware_filters`]; deterministic.
fn hardware_cluster() -> Result<(Arc<Inventory>, Request), SnapshotError> {
    const COMMON: [&str; 48] = [
        "fpu",
        "vme",
        "de",
        "pse",
        "tsc",
        "msr",
        "pae",
        "mce",
        "cx8",
        "apic",
        "sep",
        "mtrr",
        "pge",
        "mca",
        "cmov",
        "pat",
        "pse36",
        "clflush",
        "mmx",
        "fxsr",
        "sse",
        "sse2",
        "ss",
        "ht",
        "syscall",
        "nx",
        "pdpe1gb",
        "rdtscp",
        "lm",
        "constant_tsc",
        "rep_good",
        "nopl",
        "xtopology",
        "pni",
        "pclmulqdq",
        "ssse3",
        "fma",
        "cx16",
        "pcid",
        "sse4_1",
        "sse4_2",
        "x2apic",
        "movbe",
        "popcnt",
        "aes",
        "xsave",
        "avx",
        "f16c",
    ];
    // Per generation: the cluster levels its hosts support, and their
    // emulated machines.
    const LEVELS: [&[&str]; 3] = [
        &["4.5", "4.6"],
        &["4.5", "4.6", "4.7"],
        &["4.6", "4.7", "4.8"],
    ];
    const MACHINES: [&[&str]; 3] = [
        &[
            "pc-i440fx-rhel7.6.0",
            "pc-q35-rhel8.2.0",
            "pc-q35-rhel8.6.0",
        ],
        &[
            "pc-i440fx-rhel7.6.0",
            "pc-q35-rhel8.6.0",
            "pc-q35-rhel9.2.0",
        ],
        &["pc-q35-rhel8.6.0", "pc-q35-rhel9.2.0", "pc-q35-rhel9.4.0"],
    ];
    const GENERATIONS: [(&str, &[&str]); 3] = [
        (
            "Haswell",
            &["avx2", "bmi1", "bmi2", "model_Haswell", "model_Westmere"],
        ),
        (
            "Skylake-Server",
            &[
                "avx2",
                "bmi1",
                "bmi2",
                "avx512f",
                "avx512dq",
                "avx512cd",
                "avx512bw",
                "clwb",
                "model_Haswell",
                "model_Westmere",
                "model_Skylake-Server",
            ],
        ),
        (
            "Cascadelake-Server",
            &[
                "avx2",
                "bmi1",
                "bmi2",
                "avx512f",
                "avx512dq",
                "avx512cd",
                "avx512bw",
                "clwb",
                "avx512vnni",
                "model_Haswell",
                "model_Westmere",
                "model_Skylake-Server",
                "model_Cascadelake-Server",
            ],
        ),
    ];
    let mut random = SplitMix(SEED);
    let hosts = (0..HOSTS)
        .map(|i| {
            let generation = (random.next() % 3) as usize;
            let (model, extra) = GENERATIONS[generation];
            let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
            Host {
                id: format!("h{i}"),
                hardware: Some(Box::new(HostHardware {
                    cpu_model: model.to_owned(),
                    cpu_flags: COMMON
                        .iter()
                        .chain(extra)
                        .map(|f| (*f).to_owned())
                        .collect(),
                    cluster_levels: owned(LEVELS[generation]),
                    emulated_machines: owned(MACHINES[generation]),
                    ..HostHardware::default()
                })),
                ..Host::default()
            }
        })
        .collect();
    let cluster = Snapshot {
        hosts,
        vms: Vec::new(),
    }
    .build()?;
    let vm = VmSpec {
        id: "new".to_owned(),
        memory_mib: 4096.0,
        vcpus: 2,
        hardware: Some(VmHardwareSpec {
            cpu_model: "Skylake-Server".to_owned(),
            required_cpu_flags: vec!["avx512f".to_owned(), "pdpe1gb".to_owned()],
            compatibility_version: "4.7".to_owned(),
            machine_type: "pc-q35-rhel9.2.0".to_owned(),
            ..VmHardwareSpec::default()
        }),
        ..VmSpec::default()
    };
    placing(cluster, vm)
}

/// Times `call` on both builds and prints the medians.
fn report(name: &str, role: &str, builds: &[&dyn Unit; 2], call: impl Fn(&dyn Unit) -> Duration) {
    let [wasm, native] = common::medians(builds, call);
    println!(
        "{name:<40} {role:<8} {:>10.1} {:>10.1} {:>7.2}",
        micros(wasm),
        micros(native),
        micros(wasm) / micros(native).max(0.1)
    );
}

/// The synthetic cluster and the VM to place: hosts of three sizes with
/// varied load, networks, aggregates, capabilities and instances; three
/// VMs per host; a VM with networks, preferred hosts and affinity groups.
fn cluster() -> Result<(Arc<Inventory>, Request), SnapshotError> {
    let mut random = SplitMix(SEED);
    let mut hosts = Vec::with_capacity(HOSTS);
    let mut vms = Vec::with_capacity(HOSTS * VMS_PER_HOST);
    for i in 0..HOSTS {
        let memory = random.pick(&[65_536.0, 131_072.0, 262_144.0]);
        let cores = random.pick(&[16.0, 32.0, 64.0]);
        let overloaded = random.unit() < OVERLOADED_SHARE;
        let usage = if overloaded {
            92.0
        } else {
            random.unit() * 70.0
        };
        let vm_count = (random.next() % 20) as f64;
        let special = i % SPECIAL_HOST_EVERY == 0;
        let mut host = Host {
            id: format!("h{i}"),
            address: format!("10.{}.{}.{}", i / 65_536, (i / 256) % 256, i % 256),
            zone: format!("az{}", i % 3),
            ..Host::default()
        };
        for (metric, value) in [
            ("cpu_sockets", 2.0),
            ("cpu_cores", cores),
            ("cpu_threads", cores * 2.0),
            ("cpu_usage_percent", usage),
            ("cpu_overloaded_minutes", if overloaded { 5.0 } else { 0.0 }),
            ("memory_total_mib", memory),
            ("memory_free_mib", memory * random.unit()),
            ("memory_committed_mib", memory * 0.6 * random.unit()),
            ("memory_reserved_mib", 1024.0),
            ("swap_total_mib", 8192.0),
            ("swap_free_mib", 8192.0 * random.unit()),
            ("vm_count", vm_count),
            ("vcpus_used", vm_count * 2.0),
            ("disk_total_gib", 2048.0),
            ("disk_free_gib", 2048.0 * random.unit()),
            ("io_ops", (random.next() % 10) as f64),
            ("ha_score", if special { 3400.0 } else { 0.0 }),
        ] {
            host.metrics.insert(metric.to_owned(), value);
        }
        if i == 0 {
            host.flags.push("spm".to_owned());
        }
        if special {
            host.flags.push("hosted_engine".to_owned());
            host.networks = vec!["ovirtmgmt".to_owned()];
        } else {
            host.networks = ["ovirtmgmt", "vlan10", "storage"]
                .map(str::to_owned)
                .to_vec();
        }
        host.capabilities
            .insert("numa_nodes".to_owned(), "2".to_owned());
        host.capabilities
            .insert("hypervisor_type".to_owned(), "QEMU".to_owned());
        host.aggregates.insert(
            format!("agg{}", i % 10),
            [("ratio".to_owned(), "1.5".to_owned())].into(),
        );
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
                migratable: j != 0,
                highly_available: j == 1,
                hosted_engine: i == 0 && j == 2,
                pending: false,
            });
        }
        hosts.push(host);
    }
    let cluster = Snapshot { hosts, vms }.build()?;
    let ids = |range: std::ops::Range<usize>| range.map(|i| format!("h{i}")).collect::<Vec<_>>();
    let group = |id: &str, scope, positive, enforcing, hosts| Group {
        id: id.to_owned(),
        name: id.to_owned(),
        scope,
        positive,
        enforcing,
        priority: 1.0,
        hosts,
    };
    let vm = VmSpec {
        id: "new".to_owned(),
        memory_mib: 8192.0,
        vcpus: 4,
        networks: vec!["ovirtmgmt".to_owned(), "vlan10".to_owned()],
        highly_available: true,
        dedicated_hosts: ids(0..100),
        groups: vec![
            group("near", Scope::Vms, true, false, ids(0..500)),
            group("apart", Scope::Vms, false, true, ids(500..600)),
            group("rack", Scope::Hosts, true, false, ids(0..5_000)),
            group("old", Scope::Hosts, false, true, ids(9_000..10_000)),
        ],
        ..VmSpec::default()
    };
    placing(cluster, vm)
}

/// `cluster`'s inventory and a request to place `vm` on it.
fn placing(cluster: Cluster, vm: VmSpec) -> Result<(Arc<Inventory>, Request), SnapshotError> {
    let vm = vm.to_vm(&cluster.hosts, "vm")?;
    let request = Request {
        vm,
        params: Vec::new(),
        hints: Vec::new(),
    };
    Ok((Arc::new(cluster.inventory), request))
}

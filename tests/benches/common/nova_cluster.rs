//! The Nova-shaped cluster and request of issue #17's benchmark, in the
//! snapshot format engines send (`sandpiper::snapshot`): one home for the
//! in-process benchmark (`tests/benches/nova_units.rs`, which builds it
//! into columns) and the HTTP one (`host/benches/nova_http.rs`, which puts
//! it into a cluster's inventory or posts it inline), so that both measure
//! exactly the same hosts.
//!
//! The cluster and request look like the reference notes' Nova benchmark
//! (nova-scheduler.md §6.2): `cpu_info` as a JSON text with a random vendor
//! and feature subset (512 distinct texts), `supported_instances`, three
//! hypervisor versions, 2 % disabled services, and the flavor's four
//! capability extra specs; plus aggregates with metadata, named metrics,
//! running VMs, server groups, image properties and every hint a Nova unit
//! reads, so that each Nova unit does its real work.

use std::collections::BTreeMap;

use sandpiper::snapshot::{
    Group, HintValue, Hints, Host, Instance, RunningVm, Scope, Snapshot, Status, VmSpec,
};

use super::SplitMix;

/// Running VMs per host (for DifferentHost/SameHost).
pub const VMS_PER_HOST: usize = 3;
/// Every this-many hosts has a disabled compute service (Nova's bench: 2%).
pub const DISABLED_EVERY: usize = 50;
/// Seed of the cluster generator: every run sees the same cluster.
pub const SEED: u64 = 0x0000_0000_4E0A_5EED;
/// CPU features a host may report (a random subset each, as in the
/// reference notes' benchmark).
pub const FEATURES: [&str; 8] = [
    "aes", "avx", "avx2", "sse4_1", "sse4_2", "vmx", "pdpe1gb", "rdrand",
];
/// Memory of the VM to place, MiB.
pub const VM_MEMORY_MIB: f64 = 8192.0;

/// The cluster and what to ask about it.
pub struct NovaCluster {
    pub snapshot: Snapshot,
    /// The VM to place (its id is `"new"`).
    pub vm: VmSpec,
    /// Every hint a Nova unit reads.
    pub hints: Hints,
}

/// `count` Nova-shaped hosts and a request that exercises every Nova unit.
pub fn nova_cluster(count: usize) -> NovaCluster {
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
        let mut metadata: BTreeMap<String, String> = [
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
        memory_mib: VM_MEMORY_MIB,
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
    };
    let one = |v: &str| HintValue::One(v.to_owned());
    let many = |vs: &[&str]| HintValue::Many(vs.iter().map(|v| (*v).to_owned()).collect());
    let hints = [
        (
            "query",
            one(
                "[\"and\", [\">=\", \"$free_ram_mb\", 1024], [\">=\", \"$free_disk_mb\", 204800], \
                 [\"not\", \"$service.disabled\"]]",
            ),
        ),
        ("different_host", many(&["v1-0", "v2-0"])),
        ("same_host", one("v3-0")),
        ("build_near_host_ip", one("10.0.1.1")),
        ("cidr", one("/20")),
        ("availability_zone", one("az1")),
        ("retry_hosts", many(&["h1", "compute-2"])),
        ("max_server_per_host", one("1")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    NovaCluster {
        snapshot: Snapshot { hosts, vms },
        vm,
        hints,
    }
}

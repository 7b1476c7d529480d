//! The hosts' hardware as the WIT's hardware columns: cells numbered across
//! the cluster in host order, CPUs and pages in compressed rows over cells,
//! pools and mdev types in compressed rows over hosts.
//!
//! References are resolved here: a device's `numa_node` becomes the
//! cluster-wide index of the host's cell with that node number, a
//! virtual function's `parent` and an mdev type's `parent` the index of the
//! pool with that address. A reference that resolves to nothing reads as
//! [`NONE`] instead of failing: `check` refuses such data from engines, and
//! a held inventory rebuilt from data an older version accepted must still
//! build.

use std::collections::HashMap;

use sandpiper_model::hardware::{
    CellCpus, CellDistances, CellMetric, CellPages, MdevOffers, NONE, NumaTopology, PciPools,
    PcpuFlag,
};
use sandpiper_model::inventory::ColumnLengthError;
use sandpiper_model::{Inventory, Labels};

use super::{HostHardware, NumaCell};

/// Interns strings for a column's `strings` vector.
#[derive(Default)]
struct Strings {
    values: Vec<String>,
    positions: HashMap<String, u32>,
}

impl Strings {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.positions.get(s) {
            return i;
        }
        let i = self.values.len() as u32;
        self.positions.insert(s.to_owned(), i);
        self.values.push(s.to_owned());
        i
    }
}

/// Each CPU's core number: the lowest CPU of its sibling group, or itself.
/// CPU numbers are unique on a host, so these are too.
pub fn core_of(cell: &NumaCell, cpu: u32) -> u32 {
    cell.siblings
        .iter()
        .find(|group| group.contains(&cpu))
        .and_then(|group| group.iter().min().copied())
        .unwrap_or(cpu)
}

/// Sets every hardware column of `inv` from its hosts' hardware, one item
/// per host in order (`None`: the host reports none).
pub fn fill<'a>(
    hosts: impl IntoIterator<Item = Option<&'a HostHardware>>,
    inv: &mut Inventory,
) -> Result<(), ColumnLengthError> {
    let empty = HostHardware::default();

    let mut topology = NumaTopology {
        offsets: vec![0],
        ..NumaTopology::default()
    };
    let mut metrics: [Vec<f64>; CellMetric::COUNT] = Default::default();
    let mut cpus = CellCpus {
        offsets: vec![0],
        ..CellCpus::default()
    };
    let mut pcpu: [Vec<bool>; PcpuFlag::COUNT] = Default::default();
    let mut pages = CellPages {
        offsets: vec![0],
        ..CellPages::default()
    };
    let mut distances = CellDistances {
        offsets: vec![0],
        ..CellDistances::default()
    };
    let mut pools = PciPools {
        offsets: vec![0],
        ..PciPools::default()
    };
    let mut pool_strings = Strings::default();
    let mut pool_tags: Vec<Vec<(&str, &str)>> = Vec::new();
    let mut mdevs = MdevOffers {
        offsets: vec![0],
        ..MdevOffers::default()
    };
    let mut mdev_strings = Strings::default();

    for hw in hosts {
        let hw = hw.unwrap_or(&empty);
        let first_cell = topology.node_ids.len() as u32;
        let mut cell_of_node: HashMap<u32, u32> = HashMap::new();
        for (k, cell) in hw.numa_cells.iter().enumerate() {
            cell_of_node
                .entry(cell.node)
                .or_insert(first_cell + k as u32);
            topology.node_ids.push(cell.node);
            topology.sockets.push(cell.socket.unwrap_or(NONE));
            for metric in CellMetric::ALL {
                metrics[*metric as usize].push(match metric {
                    CellMetric::MemoryTotalMib => cell.memory_mib,
                    CellMetric::MemoryFreeMib => cell.memory_free(),
                    CellMetric::Cpus => cell.cpus.len() as f64,
                    CellMetric::DedicatedCpus => cell.dedicated_cpus.len() as f64,
                    CellMetric::PinnedCpus => cell.pinned_cpus.len() as f64,
                    CellMetric::SharedVcpusUsed => f64::from(cell.shared_vcpus_used),
                });
            }
            for &cpu in &cell.cpus {
                cpus.cpus.push(cpu);
                cpus.cores.push(core_of(cell, cpu));
                pcpu[PcpuFlag::Dedicated as usize].push(cell.dedicated_cpus.contains(&cpu));
                pcpu[PcpuFlag::Pinned as usize].push(cell.pinned_cpus.contains(&cpu));
            }
            cpus.offsets.push(cpus.cpus.len() as u32);
            for p in &cell.pages {
                pages.size_kib.push(p.size_kib);
                pages.total.push(p.total as f64);
                pages.free.push(p.free as f64);
            }
            pages.offsets.push(pages.size_kib.len() as u32);
            distances.values.extend_from_slice(&cell.distances);
            distances.offsets.push(distances.values.len() as u32);
        }
        topology.offsets.push(topology.node_ids.len() as u32);

        let first_pool = pools.kinds.len() as u32;
        let mut pool_of_address: HashMap<&str, u32> = HashMap::new();
        for (k, device) in hw.pci_devices.iter().enumerate() {
            if let Some(address) = device.address.as_deref() {
                pool_of_address
                    .entry(address)
                    .or_insert(first_pool + k as u32);
            }
        }
        for device in &hw.pci_devices {
            pools.vendors.push(pool_strings.intern(&device.vendor_id));
            pools.products.push(pool_strings.intern(&device.product_id));
            pools
                .addresses
                .push(pool_strings.intern(device.address.as_deref().unwrap_or("")));
            pools.kinds.push(device.kind.into());
            pools.cells.push(
                device
                    .numa_node
                    .and_then(|node| cell_of_node.get(&node).copied())
                    .unwrap_or(NONE),
            );
            pools.parents.push(
                device
                    .parent
                    .as_deref()
                    .and_then(|a| pool_of_address.get(a).copied())
                    .unwrap_or(NONE),
            );
            pools.total.push(device.count);
            pools.free.push(device.free());
            pool_tags.push(
                device
                    .tags
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect(),
            );
        }
        pools.offsets.push(pools.kinds.len() as u32);

        for mdev in &hw.mdev_types {
            mdevs.names.push(mdev_strings.intern(&mdev.name));
            mdevs.free.push(mdev.free);
            mdevs.pools.push(
                mdev.parent
                    .as_deref()
                    .and_then(|a| pool_of_address.get(a).copied())
                    .unwrap_or(NONE),
            );
        }
        mdevs.offsets.push(mdevs.names.len() as u32);
    }
    pools.strings = pool_strings.values;
    mdevs.strings = mdev_strings.values;

    inv.set_numa_topology(topology)?;
    for (metric, column) in CellMetric::ALL.iter().zip(metrics) {
        inv.set_cell_metric(*metric, column)?;
    }
    inv.set_cell_cpus(cpus)?;
    for (flag, column) in PcpuFlag::ALL.iter().zip(pcpu) {
        inv.set_pcpu_flag(*flag, column)?;
    }
    inv.set_cell_pages(pages)?;
    inv.set_cell_distances(distances)?;
    inv.set_pci_pools(pools)?;
    inv.set_pci_pool_labels(Labels::from_rows(pool_tags))?;
    inv.set_mdev_offers(mdevs)?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use sandpiper_model::hardware::{CellMetric, DeviceKind, NONE, PcpuFlag};
    use sandpiper_model::{HostLabels, HostText};

    use crate::snapshot::{Snapshot, VmSpec};

    /// The brief's example host, behind a host with no hardware, so that
    /// cluster-wide indices differ from per-host ones.
    pub const EXAMPLE: &str = r#"{"hosts": [
      {"id": "plain"},
      {"id": "numa", "hardware": {
        "cpu_model": "Skylake-Server-IBRS",
        "cpu_flags": ["vmx", "avx512f", "model_Skylake-Server"],
        "emulated_machines": ["pc-q35-rhel9.2.0", "pc-i440fx-rhel7.6.0"],
        "cluster_levels": ["4.7", "4.8"],
        "numa_cells": [
          {"node": 0, "socket": 0,
           "memory_mib": 65536, "memory_free_mib": 61440,
           "cpus": [0, 1, 2, 3, 4, 5, 6, 7],
           "dedicated_cpus": [4, 5, 6, 7],
           "pinned_cpus": [4],
           "siblings": [[0, 1], [2, 3], [4, 5], [6, 7]],
           "shared_vcpus_used": 3,
           "pages": [{"size_kib": 4, "total": 16252928, "free": 15204352},
                     {"size_kib": 2048, "total": 1024, "free": 512}],
           "distances": [10, 21]},
          {"node": 1, "memory_mib": 1024, "cpus": [8, 9], "distances": [21, 10]}
        ],
        "pci_devices": [
          {"address": "0000:3b:00.0", "vendor_id": "10de", "product_id": "1eb8",
           "kind": "pci", "numa_node": 0, "count": 1, "free": 1,
           "tags": {"physical_network": "physnet1"}},
          {"address": "0000:5e:00.0", "vendor_id": "8086", "product_id": "1572",
           "kind": "physical_function", "numa_node": 1, "count": 1, "free": 1},
          {"vendor_id": "8086", "product_id": "154c", "kind": "virtual_function",
           "parent": "0000:5e:00.0", "numa_node": 1, "count": 8, "free": 6}
        ],
        "mdev_types": [{"name": "nvidia-35", "free": 4, "parent": "0000:3b:00.0"}]
      }}
    ]}"#;

    #[test]
    fn a_hosts_hardware_reaches_the_inventory_columns() {
        let snapshot = Snapshot::from_json(EXAMPLE).expect("the example parses");
        crate::inputs::check_snapshot(&snapshot).expect("the example is consistent");
        let cluster = snapshot.build().expect("the example builds");
        let inv = &cluster.inventory;

        let topology = inv.numa_topology();
        assert_eq!(topology.offsets, [0, 0, 2]);
        assert_eq!(topology.node_ids, [0, 1]);
        assert_eq!(topology.sockets, [0, NONE]);
        assert_eq!(
            inv.cell_metric(CellMetric::MemoryTotalMib),
            [65536.0, 1024.0]
        );
        assert_eq!(
            inv.cell_metric(CellMetric::MemoryFreeMib),
            [61440.0, 1024.0]
        );
        assert_eq!(inv.cell_metric(CellMetric::Cpus), [8.0, 2.0]);
        assert_eq!(inv.cell_metric(CellMetric::DedicatedCpus), [4.0, 0.0]);
        assert_eq!(inv.cell_metric(CellMetric::PinnedCpus), [1.0, 0.0]);
        assert_eq!(inv.cell_metric(CellMetric::SharedVcpusUsed), [3.0, 0.0]);

        let cpus = inv.cell_cpus();
        assert_eq!(cpus.offsets, [0, 8, 10]);
        assert_eq!(cpus.cpus, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(cpus.cores, [0, 0, 2, 2, 4, 4, 6, 6, 8, 9]);
        let dedicated = inv.pcpu_flag(PcpuFlag::Dedicated);
        assert_eq!(
            dedicated[..8],
            [false, false, false, false, true, true, true, true]
        );
        let pinned = inv.pcpu_flag(PcpuFlag::Pinned);
        assert_eq!(pinned.iter().filter(|&&p| p).count(), 1);
        assert!(pinned[4]);

        let pages = inv.cell_pages();
        assert_eq!(pages.offsets, [0, 2, 2]);
        assert_eq!(pages.size_kib, [4, 2048]);
        assert_eq!(pages.total, [16252928.0, 1024.0]);
        assert_eq!(pages.free, [15204352.0, 512.0]);
        assert_eq!(inv.cell_distances().row(1), [21, 10]);

        let pools = inv.pci_pools();
        assert_eq!(pools.offsets, [0, 0, 3]);
        assert_eq!(pools.pools(), 3);
        assert_eq!(pools.text(pools.vendors[0]), "10de");
        assert_eq!(pools.text(pools.products[2]), "154c");
        assert_eq!(pools.text(pools.addresses[1]), "0000:5e:00.0");
        assert_eq!(pools.text(pools.addresses[2]), "");
        assert_eq!(
            pools.kinds,
            [
                DeviceKind::Pci,
                DeviceKind::PhysicalFunction,
                DeviceKind::VirtualFunction
            ]
        );
        assert_eq!(pools.cells, [0, 1, 1]);
        assert_eq!(pools.parents, [NONE, NONE, 1]);
        assert_eq!(pools.total, [1, 1, 8]);
        assert_eq!(pools.free, [1, 1, 6]);
        let tags: Vec<_> = inv.pci_pool_labels().row(0).collect();
        assert_eq!(tags, [("physical_network", "physnet1")]);
        assert_eq!(inv.pci_pool_labels().row(2).count(), 0);

        let mdevs = inv.mdev_offers();
        assert_eq!(mdevs.offsets, [0, 0, 1]);
        assert_eq!(mdevs.text(mdevs.names[0]), "nvidia-35");
        assert_eq!((mdevs.free[0], mdevs.pools[0]), (4, 0));

        assert_eq!(
            inv.host_text(HostText::CpuModel).get(1),
            "Skylake-Server-IBRS"
        );
        assert_eq!(inv.host_text(HostText::CpuModel).get(0), "");
        let flags: Vec<_> = inv.host_labels(HostLabels::CpuFlags).row(1).collect();
        assert_eq!(flags[1], ("avx512f", ""));
        assert_eq!(
            inv.host_labels(HostLabels::EmulatedMachines).row(1).count(),
            2
        );
        let levels: Vec<_> = inv.host_labels(HostLabels::ClusterLevels).row(1).collect();
        assert_eq!(levels, [("4.7", ""), ("4.8", "")]);

        // The JSON form survives a round trip (the held inventory stores it).
        let again: Snapshot =
            serde_json::from_str(&serde_json::to_string(&snapshot).expect("serializes"))
                .expect("parses back");
        assert_eq!(again, snapshot);
    }

    #[test]
    fn the_vm_hardware_reaches_the_model() {
        use sandpiper_model::hardware::{
            CpuPolicy, EmulatorThreads, NumaTune, PageSize, PciNumaPolicy, ThreadPolicy,
        };
        let cluster = Snapshot::from_json(EXAMPLE)
            .and_then(|s| s.build())
            .expect("valid");
        let spec = VmSpec::from_json(
            r#"{"vcpus": 4, "memory_mib": 4096, "hardware": {
              "numa_cells": [{"shared_vcpus": [0, 1], "dedicated_vcpus": [2, 3],
                              "memory_mib": 4096, "host_nodes": [1]}],
              "numa_tune": "interleave", "cpu_policy": "mixed", "thread_policy": "isolate",
              "emulator_threads": "isolate", "page_size": 2048,
              "cpu_model": "Skylake-Server-IBRS",
              "required_cpu_flags": ["avx512f"], "forbidden_cpu_flags": ["vmx"],
              "pci_requests": [{"alias": "a1", "count": 1,
                                "specs": [{"vendor_id": "10de", "product_id": "1eb8"}],
                                "numa_policy": "socket"}],
              "mdev_types": ["nvidia-35"], "compatibility_version": "4.7",
              "machine_type": "pc-q35-rhel9.2.0", "keeps_tsc_frequency": true}}"#,
        )
        .expect("valid VM");
        crate::inputs::check_vm(&spec, "vm").expect("consistent");
        let hw = spec.to_vm(&cluster.hosts, "vm").expect("valid").hardware;
        assert_eq!(hw.numa_cells[0].dedicated_vcpus, [2, 3]);
        assert_eq!(hw.numa_cells[0].host_nodes, [1]);
        assert_eq!(hw.numa_cells[0].memory_mib, 4096.0);
        assert_eq!(hw.numa_tune, NumaTune::Interleave);
        assert_eq!(hw.cpu_policy, CpuPolicy::Mixed);
        assert_eq!(hw.thread_policy, ThreadPolicy::Isolate);
        assert_eq!(hw.emulator_threads, EmulatorThreads::Isolate);
        assert_eq!(hw.page_size, PageSize::Kib(2048));
        assert_eq!(hw.pci_requests[0].specs[0][1].key, "vendor_id");
        assert_eq!(hw.pci_requests[0].numa_policy, PciNumaPolicy::Socket);
        assert_eq!(hw.mdev_types, ["nvidia-35"]);
        assert!(hw.keeps_tsc_frequency);
        for (text, page_size) in [
            (r#"{"page_size": "large"}"#, PageSize::Large),
            (r#"{"page_size": "small"}"#, PageSize::Small),
            (r#"{"page_size": "any"}"#, PageSize::Any),
            (r#"{}"#, PageSize::Unspecified),
        ] {
            let spec = VmSpec::from_json(&format!(r#"{{"hardware": {text}}}"#)).expect(text);
            let vm = spec.to_vm(&cluster.hosts, "vm").expect("valid");
            assert_eq!(vm.hardware.page_size, page_size, "{text}");
        }
        let none = VmSpec::from_json("{}").expect("valid");
        assert_eq!(
            none.to_vm(&cluster.hosts, "vm").expect("valid").hardware,
            Default::default()
        );
    }
}

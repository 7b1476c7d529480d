//! The specific hardware a placement took on its host (issue #16): which
//! host cell each guest cell went to, which CPUs it pinned, how many pages
//! of which size, which device pools and mdev types it drew from.
//!
//! Taken from the fitting library's assignment (`sandpiper_hardware`) when
//! the placement service claims a host, kept in the claim (and stored with
//! it), and applied to every later decision's hardware columns, so that two
//! decisions cannot both take the last free GPU or the last free pinned
//! cores. It names cells by node number, CPUs by host CPU number and pools
//! and mdev entries by their position on the host with the address and
//! ids they had: host-local, so it survives the cluster-wide renumbering a
//! changed host causes, and an entry that no longer matches what the host
//! reports is skipped instead of taking someone else's device.

use sandpiper_hardware::Assignment;
use sandpiper_model::Inventory;
use sandpiper_model::hardware::{CellMetric, DeviceKind, NONE, PcpuFlag};
use serde::{Deserialize, Serialize};

/// What a placement took of its host's hardware.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HardwareClaim {
    /// One per guest cell, in guest cell order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<CellClaim>,
    /// The host CPU pinned for the emulator threads (`isolate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_cpu: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceClaim>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mdevs: Vec<MdevClaim>,
}

/// Where one guest cell went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CellClaim {
    pub guest_cell: u32,
    /// The host cell's node number.
    pub node: u32,
    /// Pinned vCPUs and their host CPUs, as `[vcpu, cpu]` pairs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinning: Vec<[u32; 2]>,
    /// Host CPUs taken: the pinned ones and, with `isolate`, their
    /// sibling threads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<u32>,
    /// vCPUs floating on the cell's shared CPUs.
    #[serde(default)]
    pub shared_vcpus: u32,
    pub memory_mib: f64,
    /// The page size taken, KiB; absent when the cell reports no pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size_kib: Option<u32>,
    #[serde(default)]
    pub pages: u64,
}

/// Devices taken from one pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceClaim {
    /// The VM's PCI request it serves (index into `pci_requests`).
    pub request: u32,
    /// The pool's position among the host's `pci_devices`.
    pub pool: u32,
    /// The pool's address; empty for a pool of several devices.
    #[serde(default)]
    pub address: String,
    pub vendor_id: String,
    pub product_id: String,
    pub count: u32,
}

/// One mediated device instance taken.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MdevClaim {
    /// The VM's mdev request it serves (index into `mdev_types`).
    pub request: u32,
    /// The entry's position among the host's `mdev_types`.
    pub entry: u32,
    pub name: String,
}

impl HardwareClaim {
    /// The claim of `assignment`, a fit of host `host` (a row of `inv`).
    pub fn from_assignment(inv: &Inventory, host: usize, assignment: &Assignment) -> Self {
        let pools = inv.pci_pools();
        let first_pool = pools.host_pools(host).start;
        let offers = inv.mdev_offers();
        let first_offer = offers.host_offers(host).start;
        HardwareClaim {
            cells: assignment
                .cells
                .iter()
                .enumerate()
                .map(|(i, cell)| CellClaim {
                    guest_cell: cell.guest_cell,
                    node: cell.node,
                    pinning: assignment
                        .cell_pinning(i)
                        .iter()
                        .map(|&(vcpu, cpu)| [vcpu, cpu])
                        .collect(),
                    cpus: assignment.cell_claimed_cpus(i).to_vec(),
                    shared_vcpus: cell.shared_vcpus,
                    memory_mib: cell.memory_mib,
                    page_size_kib: (cell.page_size_kib > 0).then_some(cell.page_size_kib),
                    pages: cell.pages,
                })
                .collect(),
            emulator_cpu: assignment.emulator_cpu,
            devices: assignment
                .pci
                .iter()
                .map(|take| {
                    let p = take.pool as usize;
                    let text = |column: &[u32]| {
                        column
                            .get(p)
                            .map_or_else(String::new, |&s| pools.text(s).to_owned())
                    };
                    DeviceClaim {
                        request: take.request,
                        pool: (p - first_pool.min(p)) as u32,
                        address: text(&pools.addresses),
                        vendor_id: text(&pools.vendors),
                        product_id: text(&pools.products),
                        count: take.count,
                    }
                })
                .collect(),
            mdevs: assignment
                .mdevs
                .iter()
                .map(|take| {
                    let e = take.entry as usize;
                    MdevClaim {
                        request: take.request,
                        entry: (e - first_offer.min(e)) as u32,
                        name: offers
                            .names
                            .get(e)
                            .map_or_else(String::new, |&s| offers.text(s).to_owned()),
                    }
                })
                .collect(),
        }
    }

    /// True when the claim takes nothing specific.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
            && self.emulator_cpu.is_none()
            && self.devices.is_empty()
            && self.mdevs.is_empty()
    }

    /// Every host CPU the claim pins.
    fn pinned_cpus(&self) -> impl Iterator<Item = u32> + '_ {
        self.cells
            .iter()
            .flat_map(|c| c.cpus.iter().copied())
            .chain(self.emulator_cpu)
    }
}

/// Applies `claims` (a host row of `inv` and what was claimed on it) to
/// `inv`'s hardware columns: cells' free memory, pinned CPUs and shared
/// vCPUs, free pages, free devices and mdev instances, as the WIT says
/// those columns count pending placements. Columns no claim touches stay
/// shared.
pub fn apply(inv: &mut Inventory, claims: &[(usize, &HardwareClaim)]) {
    if claims.iter().all(|(_, c)| c.is_empty()) {
        return;
    }
    let topology = inv.numa_topology().clone();
    let cpus = inv.cell_cpus().clone();
    let mut memory_free = inv.cell_metric(CellMetric::MemoryFreeMib).to_vec();
    let mut pinned_count = inv.cell_metric(CellMetric::PinnedCpus).to_vec();
    let mut shared_used = inv.cell_metric(CellMetric::SharedVcpusUsed).to_vec();
    let mut pinned = inv.pcpu_flag(PcpuFlag::Pinned).to_vec();
    let mut pages = inv.cell_pages().clone();
    let mut pools = inv.pci_pools().clone();
    let mut offers = inv.mdev_offers().clone();
    let (mut cells_changed, mut pools_changed, mut offers_changed) = (false, false, false);

    for &(host, claim) in claims {
        let host_cells = topology.host_cells(host);
        let cell_of = |node: u32| {
            host_cells
                .clone()
                .find(|&c| topology.node_ids.get(c) == Some(&node))
        };
        for cell in &claim.cells {
            let Some(c) = cell_of(cell.node) else {
                continue;
            };
            cells_changed = true;
            memory_free[c] -= cell.memory_mib;
            shared_used[c] += f64::from(cell.shared_vcpus);
            if let Some(size) = cell.page_size_kib
                && let Some(e) = pages.cell(c).find(|&e| pages.size_kib[e] == size)
            {
                pages.free[e] = (pages.free[e] - cell.pages as f64).max(0.0);
            }
        }
        for cpu in claim.pinned_cpus() {
            let entry = host_cells
                .clone()
                .find_map(|c| cpus.cell(c).find(|&e| cpus.cpus[e] == cpu).map(|e| (c, e)));
            if let Some((c, e)) = entry
                && !pinned[e]
            {
                pinned[e] = true;
                pinned_count[c] += 1.0;
                cells_changed = true;
            }
        }

        let host_pools = pools.host_pools(host);
        for device in &claim.devices {
            let p = host_pools.start + device.pool as usize;
            let same = host_pools.contains(&p)
                && pools.text(pools.addresses[p]) == device.address
                && pools.text(pools.vendors[p]) == device.vendor_id
                && pools.text(pools.products[p]) == device.product_id;
            if !same {
                continue;
            }
            pools_changed = true;
            pools.free[p] = pools.free[p].saturating_sub(device.count);
            // A physical function taken whole takes its virtual functions;
            // a virtual function taken makes its physical function
            // unavailable whole (the WIT's `parents`).
            match pools.kinds[p] {
                DeviceKind::PhysicalFunction => {
                    for child in host_pools.clone() {
                        if pools.parents[child] == p as u32 {
                            pools.free[child] = 0;
                        }
                    }
                }
                DeviceKind::VirtualFunction if pools.parents[p] != NONE => {
                    if let Some(free) = pools.free.get_mut(pools.parents[p] as usize) {
                        *free = 0;
                    }
                }
                _ => {}
            }
        }

        let host_offers = offers.host_offers(host);
        for mdev in &claim.mdevs {
            let e = host_offers.start + mdev.entry as usize;
            if host_offers.contains(&e) && offers.text(offers.names[e]) == mdev.name {
                offers.free[e] = offers.free[e].saturating_sub(1);
                offers_changed = true;
            }
        }
    }

    // The lengths are the inventory's own, so the setters cannot refuse.
    if cells_changed {
        let _ = inv.set_cell_metric(CellMetric::MemoryFreeMib, memory_free);
        let _ = inv.set_cell_metric(CellMetric::PinnedCpus, pinned_count);
        let _ = inv.set_cell_metric(CellMetric::SharedVcpusUsed, shared_used);
        let _ = inv.set_pcpu_flag(PcpuFlag::Pinned, pinned);
        let _ = inv.set_cell_pages(pages);
    }
    if pools_changed {
        let _ = inv.set_pci_pools(pools);
    }
    if offers_changed {
        let _ = inv.set_mdev_offers(offers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::columns::tests::EXAMPLE;
    use crate::snapshot::Snapshot;

    #[test]
    fn a_claim_takes_its_cpus_pages_and_devices_from_the_columns() {
        let mut inv = Snapshot::from_json(EXAMPLE)
            .and_then(|s| s.build())
            .expect("valid")
            .inventory;
        let claim = HardwareClaim {
            cells: vec![CellClaim {
                node: 0,
                cpus: vec![5, 6],
                shared_vcpus: 1,
                memory_mib: 1024.0,
                page_size_kib: Some(2048),
                pages: 512,
                ..CellClaim::default()
            }],
            emulator_cpu: Some(7),
            devices: vec![
                DeviceClaim {
                    pool: 0,
                    address: "0000:3b:00.0".to_owned(),
                    vendor_id: "10de".to_owned(),
                    product_id: "1eb8".to_owned(),
                    count: 1,
                    ..DeviceClaim::default()
                },
                // A virtual function: its physical function is no longer
                // free whole.
                DeviceClaim {
                    pool: 2,
                    vendor_id: "8086".to_owned(),
                    product_id: "154c".to_owned(),
                    count: 2,
                    ..DeviceClaim::default()
                },
                // No longer what the host reports at that position: skipped.
                DeviceClaim {
                    pool: 1,
                    vendor_id: "dead".to_owned(),
                    product_id: "beef".to_owned(),
                    count: 1,
                    ..DeviceClaim::default()
                },
            ],
            mdevs: vec![MdevClaim {
                entry: 0,
                name: "nvidia-35".to_owned(),
                ..MdevClaim::default()
            }],
        };
        let before = inv.share();
        apply(&mut inv, &[(1, &claim)]);
        assert_eq!(
            inv.cell_metric(CellMetric::MemoryFreeMib),
            [60416.0, 1024.0]
        );
        assert_eq!(inv.cell_metric(CellMetric::PinnedCpus), [4.0, 0.0]);
        assert_eq!(inv.cell_metric(CellMetric::SharedVcpusUsed), [4.0, 0.0]);
        let pinned: Vec<u32> = inv
            .pcpu_flag(PcpuFlag::Pinned)
            .iter()
            .zip(&inv.cell_cpus().cpus)
            .filter(|(p, _)| **p)
            .map(|(_, cpu)| *cpu)
            .collect();
        assert_eq!(pinned, [4, 5, 6, 7]);
        assert_eq!(inv.cell_pages().free, [15204352.0, 0.0]);
        assert_eq!(inv.pci_pools().free, [0, 0, 4]);
        assert_eq!(inv.mdev_offers().free, [3]);
        // The snapshot it was derived from is untouched.
        assert_eq!(before.pci_pools().free, [1, 1, 6]);
        assert_eq!(before.cell_metric(CellMetric::PinnedCpus), [1.0, 0.0]);
    }
}

//! `CPU and NUMA pinning compatibility`: prefers hosts where the VM's CPU
//! pinning agrees with its NUMA pinning.
//!
//! Behaviour from oVirt's `CpuAndNumaPinningWeightPolicyUnit` (reference
//! notes §2.2), a weight of every built-in oVirt policy (factor 5):
//! * a VM with no guest cell pinned to host nodes, or with tune mode
//!   `preferred`, weighs every host 1;
//! * a host without NUMA support (one node or none) weighs 1000;
//! * the host the VM runs on weighs 1;
//! * otherwise 1 when the pinned cells fit their host nodes
//!   (`NumaPinningHelper.findAssignment` with CPU pinning considered: each
//!   pinned vCPU of a cell must have one of its host CPUs in the node the
//!   cell goes to), else 1000. Not stretched, as in oVirt.
//!
//! Encodings: the VM's CPU pinning is the extra spec `ovirt:cpu_pinning`
//! (`sandpiper_ovirt::pinning`); a malformed one counts as none.
//!
//! Data: `numa-cells`, cell `memory-free-mib`, `numa-cell-pages`,
//! `numa-cell-cpus`; VM hardware `numa_cells`, `numa_tune`, `page_size`,
//! extra spec `ovirt:cpu_pinning`, `current-host`.

use sandpiper_guest::model::hardware::NumaTune;
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::MAX_SCHEDULER_WEIGHT;
use sandpiper_ovirt::numa::{
    any_cell_pinned, find_assignment, fit_page_kib, host_nodes, node_count,
};
use sandpiper_ovirt::pinning::manual_pinning;

/// The `CPU and NUMA pinning compatibility` weight.
pub struct CpuAndNumaPinning;

impl Unit for CpuAndNumaPinning {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CPU and NUMA pinning compatibility",
            "Weighs 1 the hosts where the VM's pinned NUMA cells fit their host nodes with \
             its CPU pinning, 1000 the others and hosts without NUMA.",
        )
        .applies_to([RequestProperty::NumaTopology])
        .per_host()
    }
}

impl Score for CpuAndNumaPinning {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let vm = cx.vm();
        let hardware = &vm.hardware;
        let cells = &hardware.numa_cells;
        if hardware.numa_tune == NumaTune::Preferred || !any_cell_pinned(cells) {
            return Scores::new(vec![1.0; candidates.len()]);
        }
        let pinning = manual_pinning(vm).unwrap_or_default();
        let page_kib = fit_page_kib(hardware.page_size);
        let inventory = cx.inventory();
        let values = candidates
            .iter()
            .map(|&host| {
                if node_count(inventory, host) <= 1 {
                    return MAX_SCHEDULER_WEIGHT;
                }
                if vm.current_host == Some(host) {
                    return 1.0;
                }
                let nodes = host_nodes(inventory, host, true);
                if find_assignment(cells, &nodes, page_kib, Some(&pinning)).is_some() {
                    1.0
                } else {
                    MAX_SCHEDULER_WEIGHT
                }
            })
            .collect();
        Scores::new(values)
    }
}

sandpiper_guest::export_unit!(CpuAndNumaPinning: score);

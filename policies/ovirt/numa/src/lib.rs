//! `NUMA`: rejects hosts that cannot hold the VM's pinned vNUMA cells.
//!
//! Behaviour from oVirt's `NumaPolicyUnit` (reference notes §2.1):
//! * only a VM with a guest cell pinned to host nodes, or with the
//!   `resize_and_pin_numa` pinning policy, is constrained; a VM with
//!   unpinned cells runs on any host;
//! * the host the VM runs on is never rejected;
//! * every other host must support NUMA (report more than one node,
//!   `VDS.isNumaSupport`), whatever the tune mode, `preferred` included;
//! * with tune mode `strict` or `interleave` (oVirt fits interleave as
//!   strict too, a TODO of theirs), the pinned cells must fit: each onto
//!   one of the host nodes it is pinned to, by free memory, or by free
//!   pages of the VM's page size when it has one
//!   (`NumaPinningHelper.findAssignment`, `sandpiper_ovirt::numa`); a cell
//!   pinned to a node the host lacks does not fit. `preferred` needs no
//!   fit; nor does a resize-and-pin VM without cells.
//!
//! Why not `sandpiper-hardware` (Nova's fitter): oVirt fits only pinned
//! cells, onto their pinned nodes, by memory alone; Nova's fitter places
//! every cell by CPUs, memory and pages and would reject hosts oVirt
//! accepts. `sandpiper_ovirt::numa` is that small check.
//!
//! Data: `numa-cells`, cell `memory-free-mib`, `numa-cell-pages`; VM
//! hardware `numa_cells`, `numa_tune`, `page_size`, `current-host`, extra
//! spec `ovirt:cpu_pinning_policy`.

use sandpiper_guest::float;
use sandpiper_guest::model::hardware::{NumaTune, VmNumaCell};
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::numa::{
    any_cell_pinned, find_assignment, fit_page_kib, host_nodes, node_count,
};
use sandpiper_ovirt::pinning::{PINNING_POLICY_SPEC, PinningPolicy};

/// The `NUMA` filter.
pub struct Numa;

impl Unit for Numa {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "NUMA",
            "Rejects hosts without NUMA support for a NUMA-pinned or resize-and-pin VM, and \
             hosts whose pinned NUMA nodes lack the free memory of the VM's cells pinned to \
             them.",
        )
        .applies_to([
            RequestProperty::NumaTopology,
            RequestProperty::ExtraSpec(PINNING_POLICY_SPEC.to_owned()),
        ])
        .per_host()
    }
}

impl Filter for Numa {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        let hardware = &vm.hardware;
        let cells = &hardware.numa_cells;
        let resize = PinningPolicy::of(vm) == Ok(PinningPolicy::ResizeAndPinNuma);
        if !any_cell_pinned(cells) && !resize {
            return rejections.into_vec();
        }
        let fit_cells = !cells.is_empty() && hardware.numa_tune != NumaTune::Preferred;
        let page_kib = fit_page_kib(hardware.page_size);
        let inventory = cx.inventory();
        let no_numa = "does not support NUMA ({} NUMA node(s)); the VM is NUMA-pinned";
        // What an unfit host lacks, written once per kind and VM cell.
        let mut unfit_templates: Sentences<Unfit> = Sentences::new();
        for &host in candidates {
            if vm.current_host == Some(host) {
                continue;
            }
            let nodes = node_count(inventory, host);
            if nodes <= 1 {
                rejections.reject_with(host, no_numa, &[nodes as f64]);
                continue;
            }
            if !fit_cells {
                continue;
            }
            let host_nodes = host_nodes(inventory, host, false);
            if find_assignment(cells, &host_nodes, page_kib, None).is_none() {
                let (unfit, best) = unfit(cells, &host_nodes, page_kib);
                let template = unfit_templates.get(&unfit, || unfit.template(cells, page_kib));
                match best {
                    Some(best) => rejections.reject_with(host, template, &[best]),
                    None => rejections.reject(host, template),
                };
            }
        }
        rejections.into_vec()
    }
}

/// What a host's pinned nodes lack.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Unfit {
    /// The host has no node `node`, which VM cell `cell` is pinned to.
    MissingNode { cell: usize, node: u32 },
    /// VM cell `cell` fits none of its nodes on its own; the figure is the
    /// most free memory (or pages) among them.
    Short { cell: usize },
    /// The cells fit one by one but not together.
    Together,
}

/// Finds what the host's pinned nodes lack: the first pinned cell that
/// cannot go to any of its nodes on its own (with the figure), else that
/// the cells do not fit together.
fn unfit(
    cells: &[VmNumaCell],
    nodes: &[sandpiper_ovirt::numa::HostNode],
    page_kib: Option<u32>,
) -> (Unfit, Option<f64>) {
    for (index, cell) in cells.iter().enumerate() {
        if cell.host_nodes.is_empty() {
            continue;
        }
        if let Some(&node) = cell
            .host_nodes
            .iter()
            .find(|node| !nodes.iter().any(|n| n.node == **node))
        {
            return (Unfit::MissingNode { cell: index, node }, None);
        }
        let alone = find_assignment(std::slice::from_ref(cell), nodes, page_kib, None).is_some();
        if !alone {
            let best = nodes
                .iter()
                .filter(|n| cell.host_nodes.contains(&n.node))
                .map(|n| match page_kib {
                    None => n.memory_free_mib,
                    Some(size) => n
                        .pages_free
                        .iter()
                        .find(|(s, _)| *s == size)
                        .map_or(0.0, |(_, free)| *free),
                })
                .fold(0.0, float::max);
            return (Unfit::Short { cell: index }, Some(best));
        }
    }
    (Unfit::Together, None)
}

impl Unfit {
    /// The sentence, or for [`Unfit::Short`] the template its figure goes in.
    fn template(self, cells: &[VmNumaCell], page_kib: Option<u32>) -> String {
        match self {
            Unfit::MissingNode { cell, node } => {
                format!("has no NUMA node {node}, which VM cell {cell} is pinned to")
            }
            Unfit::Short { cell: index } => {
                let cell = &cells[index];
                match page_kib {
                    None => format!(
                        "VM cell {index} needs {} MiB on NUMA node(s) {:?}, at most {{}} MiB free",
                        cell.memory_mib, cell.host_nodes
                    ),
                    Some(size) => format!(
                        "VM cell {index} needs {} MiB in {size} KiB pages on NUMA node(s) {:?}, \
                         at most {{}} such pages free",
                        cell.memory_mib, cell.host_nodes
                    ),
                }
            }
            Unfit::Together => {
                "the VM's pinned NUMA cells do not fit their host nodes together (free memory)"
                    .to_owned()
            }
        }
    }
}

sandpiper_guest::export_unit!(Numa: filter);

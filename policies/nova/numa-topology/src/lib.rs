//! `NUMATopologyFilter`: rejects hosts whose NUMA cells cannot hold the
//! VM's guest cells (Nova's NUMATopologyFilter).
//!
//! Behaviour from Nova's `nova/scheduler/filters/numa_topology_filter.py`:
//! a VM without a NUMA topology passes every host; one with a topology
//! (its `numa_cells`, or Nova's implicit single cell for a `dedicated` or
//! `mixed` CPU policy or a page size) is fitted with
//! `numa_fit_instance_to_host`, here `sandpiper_hardware::Fitter` (see
//! that crate for the exact rules and how our columns map onto Nova's
//! objects), with the host's `cpu_allocation_ratio` and
//! `ram_allocation_ratio` as limits for shared vCPUs, and with the VM's PCI
//! requests checked for each placement of the cells (PCI NUMA affinity).
//! A `dedicated` VM with the `require` thread policy fails on a host
//! without hyperthreads (`_satisfies_cpu_policy`).
//!
//! The ratios are the host's own (its named metrics of those names), else
//! the parameters, as for `RamFilter` and `CoreFilter`.
//!
//! Where we differ from Nova: the rejection says which guest cell did not
//! fit which host cell and what was short, with figures (Nova logs "does
//! not fit"); Nova's network NUMA affinity (`network_metadata`) and
//! Placement's candidate mappings have no counterpart.
//!
//! Per-host: the fitter starts with host 0's ratios only because it needs
//! some; every host is checked with its own.

use sandpiper_guest::prelude::*;
use sandpiper_hardware::{Fitter, Limits, Options, Wanted};
use sandpiper_nova_ops::capacity::host_ratio;
use sandpiper_nova_ops::params::{CPU_ALLOCATION_RATIO, RAM_ALLOCATION_RATIO};

/// The `NUMATopologyFilter` filter.
pub struct NumaTopologyFilter;

impl Unit for NumaTopologyFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "NUMATopologyFilter",
            "Rejects hosts whose NUMA cells cannot hold the VM's guest cells, pinned CPUs, \
             memory pages and NUMA-local PCI devices (Nova's NUMATopologyFilter).",
        )
        .with_param(CPU_ALLOCATION_RATIO.spec())
        .with_param(RAM_ALLOCATION_RATIO.spec())
        .applies_to([
            RequestProperty::NumaTopology,
            RequestProperty::CpuPinning,
            RequestProperty::PageSize,
        ])
        .per_host()
    }
}

impl Filter for NumaTopologyFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let wanted = Wanted::from_vm(cx.vm());
        if wanted.cells.is_empty() {
            return Vec::new();
        }
        let params = cx.params();
        let (cpu, ram) = match (
            params.f64(CPU_ALLOCATION_RATIO.name),
            params.f64(RAM_ALLOCATION_RATIO.name),
        ) {
            (Ok(cpu), Ok(ram)) => (cpu, ram),
            (Err(error), _) | (_, Err(error)) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let hosts = cx.hosts();
        let cpu_ratios = hosts.named_metric(CPU_ALLOCATION_RATIO.name);
        let ram_ratios = hosts.named_metric(RAM_ALLOCATION_RATIO.name);
        let limits = |row: usize| Limits {
            cpu_allocation_ratio: host_ratio(&cpu_ratios, row, cpu),
            ram_allocation_ratio: host_ratio(&ram_ratios, row, ram),
        };
        let mut fitter =
            Fitter::from_wanted(cx.inventory(), wanted, Options::nova_numa_filter(limits(0)));
        for &host in candidates {
            fitter.set_limits(Some(limits(host as usize)));
            if let Err(unfit) = fitter.check(host as usize) {
                let (template, figures) = unfit.template();
                if figures.as_slice().is_empty() {
                    rejections.reject(host, template);
                } else {
                    rejections.reject_with(host, template, figures.as_slice());
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(NumaTopologyFilter: filter);

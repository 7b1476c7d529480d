//! `Memory`: rejects hosts that cannot hold the VM's memory.
//!
//! Behaviour from oVirt's `MemoryPolicyUnit` and `SlaValidator`
//! (`bll/scheduling/policyunits/MemoryPolicyUnit.java`; our reference notes,
//! §2.1). Two checks per candidate, both skipped for the host the VM already
//! runs on (its memory is already there):
//!
//! * **physical**: the host's free memory after pending placements must
//!   not be negative, and the VM's memory must fit in that free memory plus
//!   free swap;
//! * **over-commit**: what the host has promised to VMs (committed memory,
//!   pending placements included) plus its own reservation plus the VM's
//!   guaranteed memory must stay within `MaxMemoryOverCommit` percent of its
//!   physical memory — oVirt's "max scheduling memory".
//!
//! Where we differ from oVirt, and why:
//! * oVirt adds a per-VM overhead estimate and huge pages; our inventory has
//!   neither, and already subtracts pending memory from free memory.
//! * oVirt's filter can ask the scheduler to wait once for pending memory to
//!   settle; a unit cannot delay the pipeline, so the reason names the
//!   pending memory instead.
//! * oVirt compares full memory sizes plus overhead in the over-commit check;
//!   our committed column holds guaranteed sizes, so the VM counts its
//!   guaranteed size too (its full size when it has none).
//! * oVirt reads the over-commit percentage from the cluster
//!   (`max_vds_memory_over_commit`); here it is the unit's parameter,
//!   default 100, oVirt's "no over-commit" setting.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::params::{self, MAX_MEMORY_OVER_COMMIT};

/// The `Memory` filter.
pub struct MemoryFilter;

impl Unit for MemoryFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Memory",
            "Rejects hosts whose free memory and swap cannot hold the VM, or whose \
             schedulable memory under the over-commit limit cannot guarantee it.",
        )
        .with_param(params::max_memory_over_commit())
    }
}

impl Filter for MemoryFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let over_commit_percent = match cx.params().f64(MAX_MEMORY_OVER_COMMIT) {
            Ok(percent) => percent,
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let vm = cx.vm();
        let need = Need {
            memory_mib: vm.memory_mib.max(0.0),
            guaranteed_mib: if vm.memory_guaranteed_mib > 0.0 {
                vm.memory_guaranteed_mib
            } else {
                vm.memory_mib.max(0.0)
            },
        };
        for host in cx.hosts().candidates(candidates) {
            if vm.current_host == Some(host.index()) {
                continue;
            }
            if let Some(reason) = shortfall(&host, &need, over_commit_percent) {
                rejections.reject(host.index(), reason);
            }
        }
        rejections.into_vec()
    }
}

/// What the VM asks of a host, MiB.
struct Need {
    memory_mib: f64,
    guaranteed_mib: f64,
}

/// True for a positive figure; false for zero, negative or missing (NaN).
fn reported(figure: f64) -> bool {
    figure > 0.0
}

/// True when `available` covers `need`; false when either is missing (NaN),
/// so that missing data rejects rather than admits.
fn covers(available: f64, need: f64) -> bool {
    available >= need
}

/// Why `host` cannot take the VM, or `None` when it can.
fn shortfall(host: &HostRef<'_>, need: &Need, over_commit_percent: f64) -> Option<String> {
    let total = host.memory_total_mib();
    if !reported(total) {
        return Some("reports no physical memory".to_owned());
    }

    let free = host.memory_free_mib();
    let pending = host.memory_pending_mib();
    // Pending placements explain a shortfall that the engine's figures do
    // not show yet, so every reason names them.
    let pending_note = if pending > 0.0 {
        format!(" ({pending:.0} MiB pending)")
    } else {
        String::new()
    };
    // oVirt fails only a negative figure (pending placements claimed more
    // than was free); with none free, swap may still hold the VM.
    if free.is_nan() || free < 0.0 {
        return Some(format!("no free memory{pending_note}"));
    }
    let swap_free = host.swap_free_mib().max(0.0);
    if !covers(free + swap_free, need.memory_mib) {
        let swap_note = if swap_free > 0.0 {
            format!(" and {swap_free:.0} MiB swap")
        } else {
            String::new()
        };
        return Some(format!(
            "needs {:.0} MiB, {free:.0} MiB free{swap_note}{pending_note}",
            need.memory_mib
        ));
    }

    let limit = total * over_commit_percent / 100.0;
    let schedulable = limit - host.memory_committed_mib() - host.memory_reserved_mib();
    if !covers(schedulable, need.guaranteed_mib) {
        return Some(format!(
            "needs {:.0} MiB guaranteed, {:.0} MiB schedulable at {over_commit_percent}% \
             over-commit{pending_note}",
            need.guaranteed_mib,
            schedulable.max(0.0)
        ));
    }
    None
}

sandpiper_guest::export_unit!(MemoryFilter: filter);

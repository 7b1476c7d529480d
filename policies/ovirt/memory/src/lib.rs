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
        .per_host()
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
        format!(" ({} MiB pending)", Whole(pending))
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
            format!(" and {} MiB swap", Whole(swap_free))
        } else {
            String::new()
        };
        return Some(format!(
            "needs {} MiB, {} MiB free{swap_note}{pending_note}",
            Whole(need.memory_mib),
            Whole(free)
        ));
    }

    let limit = total * over_commit_percent / 100.0;
    let schedulable = limit - host.memory_committed_mib() - host.memory_reserved_mib();
    if !covers(schedulable, need.guaranteed_mib) {
        return Some(format!(
            "needs {} MiB guaranteed, {} MiB schedulable at {over_commit_percent}% \
             over-commit{pending_note}",
            Whole(need.guaranteed_mib),
            Whole(schedulable.max(0.0))
        ));
    }
    None
}

/// A MiB figure written as `{:.0}` writes it (ties to even, `-0` kept), but
/// through integer formatting: exact float formatting was a third of this
/// filter's time when it rejected thousands of hosts, each with a reason.
struct Whole(f64);

impl std::fmt::Display for Whole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rounded = self.0.round_ties_even();
        // Every integer below 2^53 is exact as an f64 and as an i64.
        if rounded.abs() < 9_007_199_254_740_992.0 {
            if rounded == 0.0 && self.0.is_sign_negative() {
                return f.write_str("-0");
            }
            write!(f, "{}", rounded as i64)
        } else {
            write!(f, "{:.0}", self.0)
        }
    }
}

sandpiper_guest::export_unit!(MemoryFilter: filter);

#[cfg(test)]
mod tests {
    use super::Whole;

    #[test]
    fn whole_writes_what_exact_formatting_writes() {
        let figures = [
            0.0,
            -0.0,
            -0.3,
            0.5,
            1.5,
            2.5,
            -2.5,
            655.49,
            655.5,
            8192.0,
            1e15,
            9.1e15,
            1e300,
            -1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            4_503_599_627_370_495.5,
        ];
        for x in figures {
            assert_eq!(Whole(x).to_string(), format!("{x:.0}"), "{x}");
        }
    }
}

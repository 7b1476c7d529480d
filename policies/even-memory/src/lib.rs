//! `OptimalForMemoryEvenDistribution`: prefers hosts with more schedulable
//! memory, so memory spreads evenly.
//!
//! Behaviour from oVirt's `EvenDistributionMemoryWeightPolicyUnit`
//! (reference notes §2.2). A host's schedulable memory is its "max
//! scheduling memory": `MaxMemoryOverCommit` percent of its physical memory,
//! minus what it has committed to VMs (pending placements included) and its
//! own reservation, never below zero. The cost, lower is better, is
//!
//! ```text
//! cost = 1000 - round((schedulable - vm_memory - 1) * 999 / (max_schedulable - 1))
//! ```
//!
//! where `max_schedulable` is the largest schedulable memory among the
//! candidates and the VM's memory is not subtracted on the host it already
//! runs on. The best-provided host costs about 1 and a host the VM would
//! exactly fill about 1000; one the VM does not fit costs more (the
//! `Memory` filter normally removed it already).
//!
//! Where we differ from oVirt: oVirt adds a per-VM overhead estimate to the
//! VM's memory and reads the over-commit percentage from the cluster; here
//! there is no overhead and the percentage is the unit's parameter (shared
//! by name with the `Memory` filter). When no candidate has more than 1 MiB
//! schedulable, oVirt divides by zero or less; we give every candidate the
//! same cost, so the unit expresses no preference.

use sandpiper_guest::prelude::*;

/// Parameter: memory a host may promise to VMs, in percent of its physical
/// memory (as in the `Memory` filter).
pub const MAX_MEMORY_OVER_COMMIT: &str = "MaxMemoryOverCommit";

/// oVirt's `MaxSchedulerWeight`: costs run from 1 to this.
pub const MAX_COST: f64 = 1000.0;

/// The `OptimalForMemoryEvenDistribution` score.
pub struct EvenMemory;

impl Unit for EvenMemory {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForMemoryEvenDistribution",
            "Gives hosts with more schedulable memory a lower cost, so that VMs spread \
             memory evenly across the cluster.",
        )
        .with_param(ParamSpec::new(
            MAX_MEMORY_OVER_COMMIT,
            "Memory a host may promise to VMs, in percent of its physical memory (100 to 1000).",
            "100",
            "^([1-9][0-9]{2}|1000)$",
        ))
        .with_score_order(ScoreOrder::LowerIsBetter)
    }
}

impl Score for EvenMemory {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        // A broken parameter leaves every candidate equal: this unit then
        // has no say, and the rest of the policy still decides.
        let Ok(over_commit_percent) = cx.params().f64(MAX_MEMORY_OVER_COMMIT) else {
            return Scores::new(vec![MAX_COST; candidates.len()]);
        };
        let hosts = cx.hosts();
        let schedulable: Vec<f64> = candidates
            .iter()
            .map(|&index| {
                hosts
                    .get(index)
                    .map_or(0.0, |host| schedulable_mib(&host, over_commit_percent))
            })
            .collect();
        let max = schedulable.iter().copied().fold(0.0, f64::max);
        if max <= 1.0 {
            return Scores::new(vec![MAX_COST; candidates.len()]);
        }
        let vm = cx.vm();
        let vm_memory = vm.memory_mib.max(0.0);
        let values = candidates
            .iter()
            .zip(&schedulable)
            .map(|(&index, &memory)| {
                let left = if vm.current_host == Some(index) {
                    memory
                } else {
                    memory - vm_memory
                };
                MAX_COST - ((left - 1.0) * (MAX_COST - 1.0) / (max - 1.0)).round()
            })
            .collect();
        Scores::new(values)
    }
}

/// oVirt's max scheduling memory, MiB; 0 when the host reports nothing.
fn schedulable_mib(host: &HostRef<'_>, over_commit_percent: f64) -> f64 {
    let limit = host.memory_total_mib() * over_commit_percent / 100.0;
    let free = limit - host.memory_committed_mib() - host.memory_reserved_mib();
    if free.is_nan() { 0.0 } else { free.max(0.0) }
}

sandpiper_guest::export_unit!(EvenMemory: score);

//! `OptimalForMemoryEvenDistribution`: prefers hosts with more schedulable
//! memory, so memory spreads evenly.
//!
//! Behaviour from oVirt's `EvenDistributionMemoryWeightPolicyUnit`
//! (reference notes §2.2), in `float` and with Java's rounding as oVirt
//! computes it. A host's schedulable memory is oVirt's "max scheduling
//! memory": `MaxMemoryOverCommit` percent of its physical memory, minus
//! what it has committed to VMs (pending placements included) and its own
//! reservation, never below zero. The weight, lower is better, is
//!
//! ```text
//! 1000 - round((schedulable - vm_memory - 1) * 999 / (max_schedulable - 1))
//! ```
//!
//! where `max_schedulable` is the largest schedulable memory among the
//! candidates and the VM's memory is not subtracted on the host it already
//! runs on. The best-provided host weighs about 1 and a host the VM would
//! exactly fill about 1000; one the VM does not fit weighs more (the
//! `Memory` filter normally removed it already).
//!
//! Data: `memory-total-mib`, `memory-committed-mib`, `memory-reserved-mib`;
//! the VM's `memory-mib` and `current-host`.
//!
//! Where we differ from oVirt: oVirt adds a per-VM overhead estimate to the
//! VM's memory and reads the over-commit percentage from the cluster; here
//! there is no overhead and the percentage is the unit's parameter (shared
//! by name with the `Memory` filter). When no candidate has more than 1 MiB
//! schedulable, oVirt divides by zero or less; we give every candidate the
//! same weight (1000), so the unit expresses no preference.

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::MAX_SCHEDULER_WEIGHT;
use sandpiper_ovirt::memory::MemoryColumns;
use sandpiper_ovirt::params::{self, MAX_MEMORY_OVER_COMMIT};
use sandpiper_ovirt::scores::java_round;

/// The `OptimalForMemoryEvenDistribution` score.
pub struct EvenMemory;

impl Unit for EvenMemory {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForMemoryEvenDistribution",
            "Gives hosts with more schedulable memory a lower weight, so that VMs spread \
             memory evenly across the cluster.",
        )
        .with_param(params::max_memory_over_commit())
        .with_score_order(ScoreOrder::LowerIsBetter)
    }
}

impl Score for EvenMemory {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let no_preference = || Scores::new(vec![MAX_SCHEDULER_WEIGHT; candidates.len()]);
        // A broken parameter leaves every candidate equal: this unit then
        // has no say, and the rest of the policy still decides.
        let Ok(over_commit_percent) = cx.params().f64(MAX_MEMORY_OVER_COMMIT) else {
            return no_preference();
        };
        let memory = MemoryColumns::new(&cx.hosts(), over_commit_percent);
        let schedulable: Vec<f32> = candidates
            .iter()
            .map(|&h| memory.max_scheduling_mib(h) as f32)
            .collect();
        let max = schedulable.iter().copied().fold(0.0, float::max_f32);
        if max <= 1.0 {
            return no_preference();
        }
        let vm = cx.vm();
        let vm_memory = float::max(vm.memory_mib, 0.0) as f32;
        let span = (MAX_SCHEDULER_WEIGHT - 1.0) as f32;
        let values = candidates
            .iter()
            .zip(&schedulable)
            .map(|(&h, &free)| {
                let left = if vm.current_host == Some(h) {
                    free
                } else {
                    free - vm_memory
                };
                let score = (left - 1.0) * span / (max - 1.0);
                MAX_SCHEDULER_WEIGHT - java_round(f64::from(score))
            })
            .collect();
        Scores::new(values)
    }
}

sandpiper_guest::export_unit!(EvenMemory: score);

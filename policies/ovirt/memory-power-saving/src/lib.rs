//! `OptimalForMemoryPowerSaving`: prefers hosts with less schedulable
//! memory left, so VMs pack onto few hosts, but not hosts that would be
//! memory over-utilised.
//!
//! Behaviour from oVirt's `PowerSavingMemoryWeightPolicyUnit` (reference
//! notes §2.2), in `float` as oVirt computes it. With `max` the largest
//! schedulable memory among the candidates × 1.1 (so that an over-utilised
//! host can weigh more than the emptiest one) and `left` a host's
//! schedulable memory minus the VM's memory (not on the host it runs on):
//!
//! ```text
//! if left < MaxFreeMemoryForOverUtilized:
//!     left = min(max, MinFreeMemoryForUnderUtilized + (MaxFreeMemoryForOverUtilized - left))
//! weight = (int)(left / max × 999) + 1
//! ```
//!
//! so less memory left is better, and a host pushed under the low limit
//! wraps to the worse end. Empty parameters are oVirt's fallbacks:
//! `MaxFreeMemoryForOverUtilized` 0, `MinFreeMemoryForUnderUtilized`
//! unlimited (a wrapped host then weighs 1000). Schedulable memory is
//! oVirt's max scheduling memory under `MaxMemoryOverCommit` (a cluster
//! setting in oVirt, shared by name with `Memory`). Lower is better.
//!
//! Data: `memory-total-mib`, `memory-committed-mib`, `memory-reserved-mib`;
//! the VM's `memory-mib` and `current-host`. oVirt also adds a per-VM
//! overhead estimate to the VM's memory; our model has none.

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::MAX_SCHEDULER_WEIGHT;
use sandpiper_ovirt::memory::MemoryColumns;
use sandpiper_ovirt::params::{
    self, MAX_FREE_MEMORY_FOR_OVER_UTILIZED, MAX_MEMORY_OVER_COMMIT,
    MIN_FREE_MEMORY_FOR_UNDER_UTILIZED, optional_f64,
};

/// oVirt's headroom over the largest schedulable memory, so a wrapped
/// (over-utilised) host can weigh more than the emptiest host.
pub const MAX_MEMORY_HEADROOM: f32 = 1.1;
/// oVirt's `orElse(1.0f)` for the largest memory when there are no hosts.
pub const NO_HOSTS_MAX_MEMORY: f32 = 1.0;

/// The `OptimalForMemoryPowerSaving` score.
pub struct MemoryPowerSaving;

impl Unit for MemoryPowerSaving {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForMemoryPowerSaving",
            "Gives hosts with less schedulable memory left a lower weight, so that VMs pack onto \
             few hosts; hosts left under MaxFreeMemoryForOverUtilized weigh as if nearly empty.",
        )
        .with_param(params::max_free_memory_for_over_utilized())
        .with_param(params::min_free_memory_for_under_utilized())
        .with_param(params::max_memory_over_commit())
        .with_score_order(ScoreOrder::LowerIsBetter)
    }
}

impl Score for MemoryPowerSaving {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let params = cx.params();
        // A broken parameter leaves every candidate equal: this unit then
        // has no say, and the rest of the policy still decides.
        let (Ok(low), Ok(high), Ok(over_commit_percent)) = (
            optional_f64(&params, MAX_FREE_MEMORY_FOR_OVER_UTILIZED),
            optional_f64(&params, MIN_FREE_MEMORY_FOR_UNDER_UTILIZED),
            params.f64(MAX_MEMORY_OVER_COMMIT),
        ) else {
            return Scores::new(vec![MAX_SCHEDULER_WEIGHT; candidates.len()]);
        };
        let low = low.unwrap_or(0.0) as f32;
        let high = high.map_or(f32::INFINITY, |h| h as f32);
        let memory = MemoryColumns::new(&cx.hosts(), over_commit_percent);
        let schedulable: Vec<f32> = candidates
            .iter()
            .map(|&h| memory.max_scheduling_mib(h) as f32)
            .collect();
        let largest = schedulable
            .iter()
            .copied()
            .reduce(float::max_f32)
            .unwrap_or(NO_HOSTS_MAX_MEMORY);
        let max = largest * MAX_MEMORY_HEADROOM;
        let vm = cx.vm();
        let vm_memory = float::max(vm.memory_mib, 0.0) as f32;
        let weight_span = (MAX_SCHEDULER_WEIGHT - 1.0) as f32;
        let values = candidates
            .iter()
            .zip(&schedulable)
            .map(|(&h, &free)| {
                let mut left = if vm.current_host == Some(h) {
                    free
                } else {
                    free - vm_memory
                };
                if left < low {
                    left = float::min_f32(max, high + (low - left));
                }
                // Java's `(int)` cast: truncation, NaN to 0, as `as i32`.
                f64::from((left / max * weight_span) as i32) + 1.0
            })
            .collect();
        Scores::new(values)
    }
}

sandpiper_guest::export_unit!(MemoryPowerSaving: score);

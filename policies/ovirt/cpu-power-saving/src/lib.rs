//! `OptimalForCpuPowerSaving`: prefers the busiest hosts that are not
//! over-utilised, so VMs pack onto few hosts and the rest can be emptied.
//!
//! Behaviour from oVirt's `PowerSavingCPUWeightPolicyUnit` (reference notes
//! §2.2), the negation of `OptimalForCpuEvenDistribution`'s figure: a
//! host's raw weight is `−round((usage% × CPUs + SPM 10 + vm_load) / CPUs)`
//! (Java's rounding, halves towards +∞; no vCPU penalty), stretched
//! linearly onto 1..1000. A host without CPU statistics, or whose current
//! load (pending placements included, rounded up) is over
//! `HighUtilization`, weighs 1000 unstretched. Lower is better.
//!
//! `HighUtilization` defaults to empty, oVirt's fallback for this unit: no
//! cap (oVirt's built-in `power_saving` policy sets 80).
//!
//! Data: `cpu-cores`, `cpu-threads`, `cpu-usage-percent`, the `spm` flag;
//! the VM's `vcpus`, `cpu-usage-percent`, `current-host`. Differences from
//! oVirt as in `OptimalForCpuEvenDistribution` (no exclusive pinning;
//! `CountThreadsAsCores` is a parameter).

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::MAX_SCHEDULER_WEIGHT;
use sandpiper_ovirt::cpu::{CpuColumns, Pending, predicted_load_score};
use sandpiper_ovirt::params::{self, COUNT_THREADS_AS_CORES, HIGH_UTILIZATION, optional_f64};
use sandpiper_ovirt::scores::{java_round, stretch};

/// The `OptimalForCpuPowerSaving` score.
pub struct CpuPowerSaving;

impl Unit for CpuPowerSaving {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForCpuPowerSaving",
            "Gives busier hosts a lower weight, so that VMs pack onto few hosts; hosts over \
             HighUtilization get the worst weight.",
        )
        .with_param(params::high_utilization_or_unlimited())
        .with_param(params::count_threads_as_cores())
        .with_score_order(ScoreOrder::LowerIsBetter)
    }
}

impl Score for CpuPowerSaving {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let params = cx.params();
        // A broken parameter leaves every candidate equal: this unit then
        // has no say, and the rest of the policy still decides.
        let (Ok(high), Ok(threads_as_cores)) = (
            optional_f64(&params, HIGH_UTILIZATION),
            params.bool(COUNT_THREADS_AS_CORES),
        ) else {
            return Scores::new(vec![MAX_SCHEDULER_WEIGHT; candidates.len()]);
        };
        let high = high.unwrap_or(f64::INFINITY);
        let hosts = cx.hosts();
        let cpu = CpuColumns::new(&hosts, Pending::Included);
        let vm = cx.vm();
        let raw: Vec<Option<f64>> = candidates
            .iter()
            .map(|&h| {
                let load = cpu.load(h, threads_as_cores)?;
                if load.percent() > high {
                    return None;
                }
                Some(-java_round(predicted_load_score(load, vm, h, 0.0, 0.0)))
            })
            .collect();
        Scores::new(stretch(&raw))
    }
}

sandpiper_guest::export_unit!(CpuPowerSaving: score);

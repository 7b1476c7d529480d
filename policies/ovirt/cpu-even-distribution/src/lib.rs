//! `OptimalForCpuEvenDistribution`: prefers hosts whose CPU load stays
//! lowest with the VM, so CPU load spreads evenly.
//!
//! Behaviour from oVirt's `EvenDistributionCPUWeightPolicyUnit` (reference
//! notes §2.2). A host's raw weight is its predicted load per CPU once the
//! VM runs there, rounded (Java's `Math.round`):
//!
//! ```text
//! round(penalty × (usage% × CPUs + SPM 10 + vm_load) / CPUs)
//! ```
//!
//! * `usage%` includes pending placements (oVirt's weight counts pending
//!   CPU load); CPUs are cores, or threads with `CountThreadsAsCores`;
//! * `vm_load` is the VM's measured usage × its vCPUs when it is running (a
//!   migration), else 10% (`VcpuConsumptionPercentage`) per vCPU, and
//!   nothing on the host it already runs on;
//! * `penalty` is 1000 when `VCpuToPhysicalCpuRatio` > 0 and the host's
//!   vCPUs (pending included) plus the VM's, per CPU, reach it; else 1.
//!
//! Raw weights are stretched linearly onto 1..1000 (all equal: all 1); a
//! host without CPU statistics (no core count or usage) weighs 1000. Lower
//! is better.
//!
//! Data: `cpu-cores`, `cpu-threads`, `cpu-usage-percent`, `vcpus-used`,
//! the `spm` flag; the VM's `vcpus`, `cpu-usage-percent`, `current-host`.
//!
//! Where we differ from oVirt: oVirt subtracts CPUs exclusively pinned to
//! VMs and adds no load for exclusively pinned VMs; our inventory has no
//! pinning, so every CPU is shared. `CountThreadsAsCores` is a cluster
//! setting in oVirt and a parameter here.
//!
//! This was half of the seed's `OptimalForEvenDistribution` unit; oVirt
//! names the weight and the balancer differently, so they are two units.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::cpu::{CpuColumns, Pending, predicted_load_score};
use sandpiper_ovirt::params::{self, COUNT_THREADS_AS_CORES, VCPU_TO_PHYSICAL_CPU_RATIO};
use sandpiper_ovirt::scores::{java_round, stretch};
use sandpiper_ovirt::{MAX_SCHEDULER_WEIGHT, value};

/// The `OptimalForCpuEvenDistribution` score.
pub struct CpuEvenDistribution;

impl Unit for CpuEvenDistribution {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForCpuEvenDistribution",
            "Gives hosts whose CPU load per CPU stays lower with the VM a lower weight, so that \
             CPU load spreads evenly; hosts over VCpuToPhysicalCpuRatio are penalised.",
        )
        .with_param(params::vcpu_to_physical_cpu_ratio())
        .with_param(params::count_threads_as_cores())
        .with_score_order(ScoreOrder::LowerIsBetter)
    }
}

impl Score for CpuEvenDistribution {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let params = cx.params();
        // A broken parameter leaves every candidate equal: this unit then
        // has no say, and the rest of the policy still decides.
        let (Ok(ratio), Ok(threads_as_cores)) = (
            params.f64(VCPU_TO_PHYSICAL_CPU_RATIO),
            params.bool(COUNT_THREADS_AS_CORES),
        ) else {
            return Scores::new(vec![MAX_SCHEDULER_WEIGHT; candidates.len()]);
        };
        let hosts = cx.hosts();
        let cpu = CpuColumns::new(&hosts, Pending::Included);
        // Only read when the penalty is on.
        let vcpus_used = if ratio > 0.0 {
            hosts.metric(HostMetric::VcpusUsed)
        } else {
            &[]
        };
        let vm = cx.vm();
        let raw: Vec<Option<f64>> = candidates
            .iter()
            .map(|&h| {
                let load = cpu.load(h, threads_as_cores)?;
                Some(java_round(predicted_load_score(
                    load,
                    vm,
                    h,
                    value(vcpus_used, h),
                    ratio,
                )))
            })
            .collect();
        Scores::new(stretch(&raw))
    }
}

sandpiper_guest::export_unit!(CpuEvenDistribution: score);

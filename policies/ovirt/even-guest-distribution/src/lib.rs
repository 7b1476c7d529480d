//! `OptimalForEvenGuestDistribution`: spreads VMs evenly by count, when
//! placing a VM (score) and by moving VMs off the busiest host (balance).
//!
//! oVirt has a weight and a balancer of this name (reference notes §2.2,
//! §2.3, §6); this one unit exports both. A host's *VM slots* are its VMs
//! plus `SpmVmGrace` when it holds the SPM role (the SPM's storage work
//! counts as that many VMs).
//!
//! **Score**, from `EvenGuestDistributionWeightPolicyUnit`: the slots, with
//! pending placements counted (oVirt adds pending VMs); fewer is better.
//! Not stretched.
//!
//! **Balance**, from `EvenGuestDistributionBalancePolicyUnit` and the
//! shared `CpuAndMemoryBalancingPolicyUnit` (see `sandpiper_ovirt::balancing`),
//! with slots counting running VMs only:
//! * the worst host is the first candidate with the most slots; with fewer
//!   than `HighVmCount` slots there, nothing moves;
//! * sources: every candidate with as many slots as the worst host, in
//!   candidate order;
//! * destinations: candidates with at least `MigrationThreshold` slots
//!   fewer than the worst host;
//! * the VM: oVirt's `FindVmAndDestinations`: on each source, its
//!   migratable VMs from the least CPU use, the first with a destination
//!   that stays at or under `HighUtilization` (oVirt's fallback 75; its
//!   `vm_evenly_distributed` policy sets 80) and keeps more than
//!   `MaxFreeMemoryForOverUtilized` schedulable memory.
//!
//! oVirt's balancer reads `HighUtilization` and `MaxFreeMemoryForOverUtilized`
//! from the cluster's shared properties; our units receive only what they
//! declare, so this unit declares them (and `MaxMemoryOverCommit`, for
//! schedulable memory) too.
//!
//! Data: `vm-count`, `vm-pending-count`, the `spm` flag; for the balancer
//! also the CPU and memory columns and the running VMs' host, flags,
//! memory, vCPUs and CPU usage.
//!
//! Per-host: the score reads only the host's own row; the balancer
//! answers with one migration, not per host, so the promise does not
//! concern it.

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::balancing::{self, BalancePlan, Cluster, DestinationLimits};
use sandpiper_ovirt::params::{
    self, HIGH_UTILIZATION, HIGH_VM_COUNT, MAX_FREE_MEMORY_FOR_OVER_UTILIZED, MIGRATION_THRESHOLD,
    SPM_VM_GRACE, optional_f64,
};
use sandpiper_ovirt::{MAX_SCHEDULER_WEIGHT, flag, value};

/// oVirt's `HighUtilizationForEvenlyDistribute`: this balancer's fallback.
pub const DEFAULT_HIGH_UTILIZATION: &str = "75";

/// The `OptimalForEvenGuestDistribution` score and balancer.
pub struct EvenGuestDistribution;

impl Unit for EvenGuestDistribution {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForEvenGuestDistribution",
            "Prefers hosts running fewer VMs (the SPM counting SpmVmGrace more), and moves VMs \
             off the busiest host once it has HighVmCount and another has MigrationThreshold \
             fewer.",
        )
        .with_param(params::spm_vm_grace())
        .with_param(params::high_vm_count())
        .with_param(params::migration_threshold())
        .with_param(params::high_utilization(DEFAULT_HIGH_UTILIZATION))
        .with_param(params::max_free_memory_for_over_utilized())
        .with_param(params::max_memory_over_commit())
        .with_score_order(ScoreOrder::LowerIsBetter)
        .per_host()
    }
}

impl Score for EvenGuestDistribution {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        // A broken parameter leaves every candidate equal: this unit then
        // has no say, and the rest of the policy still decides.
        let Ok(grace) = cx.params().f64(SPM_VM_GRACE) else {
            return Scores::new(vec![MAX_SCHEDULER_WEIGHT; candidates.len()]);
        };
        let hosts = cx.hosts();
        let vm_count = hosts.metric(HostMetric::VmCount);
        let spm = hosts.flags(HostFlag::Spm);
        Scores::new(
            candidates
                .iter()
                .map(|&h| {
                    let vms = value(vm_count, h);
                    let vms = if vms.is_finite() { vms } else { 0.0 };
                    let grace = if flag(spm, h) { grace } else { 0.0 };
                    float::max(vms + grace, 0.0)
                })
                .collect(),
        )
    }
}

/// The balancer's plan: slot counts instead of CPU load.
struct Slots {
    grace: f64,
    high_vm_count: f64,
    migration_threshold: f64,
    limits: DestinationLimits,
}

impl Slots {
    fn slots(&self, cluster: &Cluster<'_>, host: u32) -> f64 {
        let grace = if cluster.is_spm(host) {
            self.grace
        } else {
            0.0
        };
        cluster.running_vms(host) + grace
    }

    /// The slots of oVirt's `getWorstVDS`, the first candidate with the
    /// most slots: slots are never negative, so that is the largest count
    /// (0 without candidates).
    fn worst(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> f64 {
        candidates
            .iter()
            .map(|&h| self.slots(cluster, h))
            .fold(0.0, float::max)
    }
}

impl BalancePlan for Slots {
    fn primary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let worst = self.worst(cluster, candidates);
        if worst < self.high_vm_count {
            return Vec::new();
        }
        candidates
            .iter()
            .copied()
            .filter(|&h| self.slots(cluster, h) >= worst)
            .collect()
    }

    fn primary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let worst = self.worst(cluster, candidates);
        candidates
            .iter()
            .copied()
            .filter(|&h| worst - self.slots(cluster, h) >= self.migration_threshold)
            .collect()
    }

    fn secondary_sources(&self, _: &Cluster<'_>, _: &[u32]) -> Vec<u32> {
        Vec::new()
    }

    fn secondary_destinations(&self, _: &Cluster<'_>, _: &[u32]) -> Vec<u32> {
        Vec::new()
    }

    fn destination_limits(&self) -> DestinationLimits {
        self.limits
    }
}

impl Balance for EvenGuestDistribution {
    fn balance(cx: &BalanceContext<'_>) -> Option<Migration> {
        let params = cx.params();
        let plan = Slots {
            grace: params.f64(SPM_VM_GRACE).ok()?,
            high_vm_count: params.f64(HIGH_VM_COUNT).ok()?,
            migration_threshold: params.f64(MIGRATION_THRESHOLD).ok()?,
            limits: DestinationLimits {
                high_utilization: params.f64(HIGH_UTILIZATION).ok()?,
                min_free_memory_mib: optional_f64(&params, MAX_FREE_MEMORY_FOR_OVER_UTILIZED)
                    .ok()?
                    .unwrap_or(0.0),
            },
        };
        balancing::run(cx, &plan)
    }
}

sandpiper_guest::export_unit!(EvenGuestDistribution: score, balance);

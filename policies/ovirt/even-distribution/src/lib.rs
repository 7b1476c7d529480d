//! `OptimalForEvenDistribution`: moves VMs off hosts whose CPU has stayed
//! overloaded (or whose memory runs short) onto under-utilised hosts.
//!
//! Behaviour from oVirt's `EvenDistributionBalancePolicyUnit` on the shared
//! `CpuAndMemoryBalancingPolicyUnit` and `FindVmAndDestinations`
//! (reference notes §2.3, §6; the skeleton is `sandpiper_ovirt::balancing`).
//! Loads are oVirt's `HostCpuLoadHelper` figures without pending
//! placements: `ceil((usage% × CPUs + SPM 10) / CPUs)`.
//!
//! * **CPU sources**: candidates with load ≥ `HighUtilization` for at least
//!   `CpuOverCommitDurationMinutes` and at least one VM, or (with
//!   `VCpuToPhysicalCpuRatio` > 0) with that many vCPUs per CPU; most
//!   loaded first.
//! * **CPU destinations**: candidates under `min(80% of HighUtilization,
//!   HighUtilization − 10)` (whole percent, as oVirt's integer
//!   arithmetic), least loaded first.
//! * **Memory sources**: schedulable memory under
//!   `MaxFreeMemoryForOverUtilized` with more than one VM; **memory
//!   destinations**: schedulable memory over `MinFreeMemoryForUnderUtilized`
//!   (empty, the default: over 0, oVirt's fallback here).
//! * **The VM**: on each source in order, its migratable running VMs from
//!   the least CPU use (usage × vCPUs); the first with destinations that
//!   stay at or under `HighUtilization` with it (its usage over the
//!   destination's cores) and keep more than `MaxFreeMemoryForOverUtilized`
//!   schedulable memory. CPU first; memory when the CPU pass finds nothing.
//!
//! `HighUtilization` defaults to 75, oVirt's fallback for its balancers
//! (`HighUtilizationForEvenlyDistribute`; the built-in policies set 80).
//! `CountThreadsAsCores` and `MaxMemoryOverCommit` are cluster settings in
//! oVirt and parameters here. oVirt returns every (VM, destinations) pair
//! and the engine tries them in order until one migrates; our contract
//! returns one, the first. Other differences are the skeleton's (see
//! `sandpiper_ovirt::balancing`).
//!
//! The seed's unit of this name also scored hosts; oVirt calls that weight
//! `OptimalForCpuEvenDistribution`, now its own unit.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::balancing::{
    self, BalancePlan, Cluster, DestinationLimits, Thresholds, UnderUtilized, lowered_threshold,
};
use sandpiper_ovirt::params::{self, VCPU_TO_PHYSICAL_CPU_RATIO};

/// oVirt's `HighUtilizationForEvenlyDistribute`: this balancer's fallback.
pub const DEFAULT_HIGH_UTILIZATION: &str = "75";

/// The `OptimalForEvenDistribution` balancer.
pub struct EvenDistribution;

impl Unit for EvenDistribution {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForEvenDistribution",
            "Moves a VM off a host that has stayed over HighUtilization for \
             CpuOverCommitDurationMinutes (or is short of memory) onto an under-utilised host.",
        )
        .with_param(params::high_utilization(DEFAULT_HIGH_UTILIZATION))
        .with_param(params::max_free_memory_for_over_utilized())
        .with_param(params::min_free_memory_for_under_utilized())
        .with_param(params::cpu_over_commit_duration_minutes())
        .with_param(params::vcpu_to_physical_cpu_ratio())
        .with_param(params::count_threads_as_cores())
        .with_param(params::max_memory_over_commit())
    }
}

/// The balancer's thresholds for one call.
struct Plan {
    thresholds: Thresholds,
    vcpu_ratio: f64,
    /// `MinFreeMemoryForUnderUtilized`; empty is 0, oVirt's fallback here.
    min_free_for_under: f64,
}

impl BalancePlan for Plan {
    fn primary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let t = &self.thresholds;
        let rule = t.over_utilized(t.high, t.threads_as_cores, self.vcpu_ratio);
        t.cpu_sources(cluster, candidates, &rule)
    }

    fn primary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let t = &self.thresholds;
        let rule = UnderUtilized {
            utilization: lowered_threshold(t.high),
            duration_minutes: t.duration_minutes,
            min_vms: 0.0,
        };
        cluster.under_utilized_cpu_hosts(candidates, &rule, t.threads_as_cores)
    }

    fn secondary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        self.thresholds.memory_sources(cluster, candidates)
    }

    fn secondary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        cluster.hosts_with_more_free_memory(candidates, self.min_free_for_under, 0.0)
    }

    fn destination_limits(&self) -> DestinationLimits {
        self.thresholds.destination_limits()
    }
}

impl Balance for EvenDistribution {
    fn balance(cx: &BalanceContext<'_>) -> Option<Migration> {
        let params = cx.params();
        let thresholds = Thresholds::read(&params)?;
        let plan = Plan {
            thresholds,
            vcpu_ratio: params.f64(VCPU_TO_PHYSICAL_CPU_RATIO).ok()?,
            min_free_for_under: thresholds.min_free_for_under.unwrap_or(0.0),
        };
        balancing::run(cx, &plan)
    }
}

sandpiper_guest::export_unit!(EvenDistribution: balance);

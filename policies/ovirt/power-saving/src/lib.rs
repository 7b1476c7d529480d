//! `OptimalForPowerSaving`: moves VMs off under-utilised hosts (to empty
//! them) and off overloaded ones, onto hosts that are not overloaded.
//!
//! Behaviour from oVirt's `PowerSavingBalancePolicyUnit` on the shared
//! `CpuAndMemoryBalancingPolicyUnit` and `FindVmAndDestinations`
//! (reference notes §2.3, §6; the skeleton is `sandpiper_ovirt::balancing`).
//! Loads are oVirt's `HostCpuLoadHelper` figures without pending
//! placements, counting cores (as every oVirt check here does).
//!
//! * **CPU sources**, over-utilised first: candidates with load ≥
//!   `min(80% of HighUtilization, HighUtilization − 10)` that have stayed
//!   over `HighUtilization` for `CpuOverCommitDurationMinutes` with at least
//!   one VM (most loaded first); then candidates under `LowUtilization`
//!   with at least one VM (least loaded first).
//! * **CPU destinations**: candidates that are not over-utilised at
//!   `HighUtilization` itself.
//! * **Memory sources**: schedulable memory under
//!   `MaxFreeMemoryForOverUtilized` with more than one VM, then over
//!   `MinFreeMemoryForUnderUtilized` with at least one VM (empty, the
//!   default: unlimited, so none); **memory destinations**: over
//!   `MaxFreeMemoryForOverUtilized` (empty: 0).
//! * **The VM**: as `OptimalForEvenDistribution`: the least CPU-hungry
//!   migratable VM of the first source that has a destination staying at
//!   or under `HighUtilization` with more than `MaxFreeMemoryForOverUtilized`
//!   memory left.
//!
//! Defaults are oVirt's fallbacks: `HighUtilization` 75
//! (`HighUtilizationForPowerSave`), `LowUtilization` 20. The sort order of
//! sources follows `CountThreadsAsCores`, as oVirt's comparator does.
//!
//! **Not done: host power management.** oVirt's balancer also puts empty
//! hosts into maintenance, powers them off and back on
//! (`EnableAutomaticHostPowerManagement`, `HostsInReserve`). Our contract's
//! balance answer is one migration; powering hosts is the engine's job, so
//! those parameters are not declared (a policy setting them is refused,
//! rather than silently ignored).

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::balancing::{
    self, BalancePlan, Cluster, DestinationLimits, OverUtilized, UnderUtilized, lowered_threshold,
};
use sandpiper_ovirt::params::{
    self, COUNT_THREADS_AS_CORES, CPU_OVER_COMMIT_DURATION_MINUTES, HIGH_UTILIZATION,
    LOW_UTILIZATION, MAX_FREE_MEMORY_FOR_OVER_UTILIZED, MAX_MEMORY_OVER_COMMIT,
    MIN_FREE_MEMORY_FOR_UNDER_UTILIZED, optional_f64,
};

/// oVirt's `HighUtilizationForPowerSave`: this balancer's fallback.
pub const DEFAULT_HIGH_UTILIZATION: &str = "75";

/// The `OptimalForPowerSaving` balancer.
pub struct PowerSaving;

impl Unit for PowerSaving {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForPowerSaving",
            "Moves a VM off a host under LowUtilization (to empty it) or over HighUtilization \
             onto a host that is not overloaded. Does not power hosts on or off.",
        )
        .with_param(params::high_utilization(DEFAULT_HIGH_UTILIZATION))
        .with_param(params::low_utilization())
        .with_param(params::max_free_memory_for_over_utilized())
        .with_param(params::min_free_memory_for_under_utilized())
        .with_param(params::cpu_over_commit_duration_minutes())
        .with_param(params::count_threads_as_cores())
        .with_param(params::max_memory_over_commit())
    }
}

/// The balancer's thresholds for one call.
struct Plan {
    high: f64,
    low: f64,
    duration_minutes: f64,
    threads_as_cores: bool,
    max_free_for_over: f64,
    min_free_for_under: f64,
}

impl Plan {
    /// Over-utilised at `utilization` (cores, no vCPU ratio: oVirt's
    /// power-saving checks never set either).
    fn over(&self, utilization: f64) -> OverUtilized {
        OverUtilized {
            utilization,
            duration_minutes: self.duration_minutes,
            threads_as_cores: false,
            vcpu_ratio: 0.0,
        }
    }
}

impl BalancePlan for Plan {
    fn primary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let over = self.over(lowered_threshold(self.high));
        let under = UnderUtilized {
            utilization: self.low,
            duration_minutes: self.duration_minutes,
            min_vms: 1.0,
        };
        let mut sources = cluster.over_utilized_cpu_hosts(candidates, &over, self.threads_as_cores);
        sources.extend(cluster.under_utilized_cpu_hosts(candidates, &under, self.threads_as_cores));
        sources
    }

    fn primary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let over = self.over(self.high);
        candidates
            .iter()
            .copied()
            .filter(|&h| !cluster.cpu_over_utilized(h, &over))
            .collect()
    }

    fn secondary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let mut sources = cluster.hosts_with_less_free_memory(candidates, self.max_free_for_over);
        sources.extend(cluster.hosts_with_more_free_memory(
            candidates,
            self.min_free_for_under,
            1.0,
        ));
        sources
    }

    fn secondary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        cluster.hosts_with_more_free_memory(candidates, self.max_free_for_over, 0.0)
    }

    fn destination_limits(&self) -> DestinationLimits {
        DestinationLimits {
            high_utilization: self.high,
            min_free_memory_mib: self.max_free_for_over,
        }
    }
}

impl Balance for PowerSaving {
    fn balance(cx: &BalanceContext<'_>) -> Option<Migration> {
        let params = cx.params();
        let plan = Plan {
            high: params.f64(HIGH_UTILIZATION).ok()?,
            low: params.f64(LOW_UTILIZATION).ok()?,
            duration_minutes: params.f64(CPU_OVER_COMMIT_DURATION_MINUTES).ok()?,
            threads_as_cores: params.bool(COUNT_THREADS_AS_CORES).ok()?,
            max_free_for_over: optional_f64(&params, MAX_FREE_MEMORY_FOR_OVER_UTILIZED)
                .ok()?
                .unwrap_or(0.0),
            min_free_for_under: optional_f64(&params, MIN_FREE_MEMORY_FOR_UNDER_UTILIZED)
                .ok()?
                .unwrap_or(f64::INFINITY),
        };
        let cluster = Cluster::new(cx, params.f64(MAX_MEMORY_OVER_COMMIT).ok()?);
        balancing::balance(&plan, &cluster, cx.candidates())
    }
}

sandpiper_guest::export_unit!(PowerSaving: balance);

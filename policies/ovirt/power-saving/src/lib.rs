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
    self, BalancePlan, Cluster, DestinationLimits, Thresholds, UnderUtilized, lowered_threshold,
};
use sandpiper_ovirt::params::{self, LOW_UTILIZATION};

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
    thresholds: Thresholds,
    low: f64,
    /// `MinFreeMemoryForUnderUtilized`; empty is unlimited (no host is
    /// under-utilised by memory), oVirt's fallback here.
    min_free_for_under: f64,
}

/// oVirt's power-saving checks count cores and set no vCPU ratio.
const THREADS_AS_CORES: bool = false;
const NO_VCPU_RATIO: f64 = 0.0;

impl BalancePlan for Plan {
    fn primary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let t = &self.thresholds;
        let over = t.over_utilized(lowered_threshold(t.high), THREADS_AS_CORES, NO_VCPU_RATIO);
        let under = UnderUtilized {
            utilization: self.low,
            duration_minutes: t.duration_minutes,
            min_vms: 1.0,
        };
        let mut sources = t.cpu_sources(cluster, candidates, &over);
        sources.extend(cluster.under_utilized_cpu_hosts(candidates, &under, t.threads_as_cores));
        sources
    }

    fn primary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let t = &self.thresholds;
        let over = t.over_utilized(t.high, THREADS_AS_CORES, NO_VCPU_RATIO);
        candidates
            .iter()
            .copied()
            .filter(|&h| !cluster.cpu_over_utilized(h, &over))
            .collect()
    }

    fn secondary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        let mut sources = self.thresholds.memory_sources(cluster, candidates);
        sources.extend(cluster.hosts_with_more_free_memory(
            candidates,
            self.min_free_for_under,
            1.0,
        ));
        sources
    }

    fn secondary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        cluster.hosts_with_more_free_memory(candidates, self.thresholds.max_free_for_over, 0.0)
    }

    fn destination_limits(&self) -> DestinationLimits {
        self.thresholds.destination_limits()
    }
}

impl Balance for PowerSaving {
    fn balance(cx: &BalanceContext<'_>) -> Option<Migration> {
        let params = cx.params();
        let thresholds = Thresholds::read(&params)?;
        let plan = Plan {
            thresholds,
            low: params.f64(LOW_UTILIZATION).ok()?,
            min_free_for_under: thresholds.min_free_for_under.unwrap_or(f64::INFINITY),
        };
        balancing::run(cx, &plan)
    }
}

sandpiper_guest::export_unit!(PowerSaving: balance);

//! oVirt's balancing skeleton, shared by `OptimalForEvenDistribution`,
//! `OptimalForPowerSaving` and `OptimalForEvenGuestDistribution`:
//! `CpuAndMemoryBalancingPolicyUnit.balance` and `FindVmAndDestinations`
//! (reference notes §6).
//!
//! A balancer names its *primary* (CPU) and *secondary* (memory) sources and
//! destinations ([`BalancePlan`]), the two CPU-and-memory balancers through
//! the thresholds and source selection they share ([`Thresholds`]);
//! [`balance`] then does what oVirt does:
//! nothing with fewer than two hosts or no source; primary sources with
//! primary destinations first, secondary ones after; on each source, in
//! order, the migratable VMs from the least to the most CPU-hungry; the
//! first VM that has a destination which stays under `HighUtilization` with
//! it and keeps more than `MaxFreeMemoryForOverUtilized` schedulable memory
//! is the answer. oVirt computes every such (VM, destinations) pair and
//! the engine tries them in order, stopping at the first migration that
//! happens; our contract returns one proposal, so we return the first pair.
//! The engine then schedules the VM over the destinations *and* its current
//! host, so "stay" can still win (oVirt appends the source to the list; our
//! contract says the host does).
//!
//! Differences from oVirt, all from data our inventory does not carry:
//! * `cpu-overloaded-minutes` tracks only the time over `HighUtilization`;
//!   oVirt's `cpuOverCommitTimestamp` is also set under `LowUtilization`.
//!   So an under-utilised host never has to wait `CpuOverCommitDurationMinutes`.
//! * Hosts without CPU statistics are never sources or destinations (oVirt
//!   would fail on the missing figure).
//! * Ties in load keep candidate order (oVirt's sorts are stable too, over
//!   its own host order).

use std::cell::OnceCell;
use std::cmp::Ordering;

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;

use crate::cpu::{CpuColumns, HostLoad, Pending};
use crate::memory::MemoryColumns;
use crate::params::{
    COUNT_THREADS_AS_CORES, CPU_OVER_COMMIT_DURATION_MINUTES, HIGH_UTILIZATION,
    MAX_FREE_MEMORY_FOR_OVER_UTILIZED, MAX_MEMORY_OVER_COMMIT, MIN_FREE_MEMORY_FOR_UNDER_UTILIZED,
    optional_f64,
};
use crate::{UTILIZATION_THRESHOLD_PERCENT, VCPU_CONSUMPTION_PERCENT, flag, value};

/// What a balancer considers over- and under-utilised.
pub trait BalancePlan {
    /// Hosts to move VMs away from, first attempt (CPU), in order.
    fn primary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32>;
    /// Where the first attempt may move VMs.
    fn primary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32>;
    /// Hosts to move VMs away from, second attempt (memory), in order.
    fn secondary_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32>;
    /// Where the second attempt may move VMs.
    fn secondary_destinations(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32>;
    /// `FindVmAndDestinations`' limits for this balancer.
    fn destination_limits(&self) -> DestinationLimits;
}

/// A destination must stay at or under `high_utilization` percent with the
/// VM and keep more than `min_free_memory_mib` of schedulable memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DestinationLimits {
    pub high_utilization: f64,
    pub min_free_memory_mib: f64,
}

/// oVirt's `isHostCpuOverUtilized` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverUtilized {
    /// Load, percent, at or above which the host is over-utilised...
    pub utilization: f64,
    /// ...once it has stayed over `HighUtilization` this many minutes.
    pub duration_minutes: f64,
    /// CPUs counted as threads for this check.
    pub threads_as_cores: bool,
    /// vCPUs per CPU at which the host is over-committed (0: off).
    pub vcpu_ratio: f64,
}

/// oVirt's `isHostCpuUnderUtilized` parameters (always counting cores, as
/// every oVirt caller does).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnderUtilized {
    /// Load, percent, under which the host is under-utilised...
    pub utilization: f64,
    /// ...unless it was over `HighUtilization` for less than this.
    pub duration_minutes: f64,
    /// ...and only with at least this many running VMs.
    pub min_vms: f64,
}

/// The cluster as oVirt's balancers read it. Every column is fetched the
/// first time a check needs it (and kept by the inventory for the call),
/// so a balancer that stops early, or never looks at CPU or memory, does
/// not pay for those columns.
pub struct Cluster<'a> {
    hosts: Hosts<'a>,
    vms: Vms<'a>,
    over_commit_percent: f64,
    cpu: OnceCell<CpuColumns<'a>>,
    memory: OnceCell<MemoryColumns<'a>>,
}

impl<'a> Cluster<'a> {
    /// Reads the cluster of `cx`; `over_commit_percent` is
    /// `MaxMemoryOverCommit`, for the hosts' schedulable memory.
    pub fn new(cx: &BalanceContext<'a>, over_commit_percent: f64) -> Self {
        Cluster {
            hosts: cx.hosts(),
            vms: cx.vms(),
            over_commit_percent,
            cpu: OnceCell::new(),
            memory: OnceCell::new(),
        }
    }

    fn metric(&self, metric: HostMetric, host: u32) -> f64 {
        let v = value(self.hosts.metric(metric), host);
        if v.is_finite() { v } else { 0.0 }
    }

    fn cpu(&self) -> &CpuColumns<'a> {
        self.cpu
            .get_or_init(|| CpuColumns::new(&self.hosts, Pending::Excluded))
    }

    /// VMs running on `host`, pending placements not counted (oVirt's
    /// `getVmCount`/`getVmActive` come from the engine's database).
    pub fn running_vms(&self, host: u32) -> f64 {
        let running =
            self.metric(HostMetric::VmCount, host) - self.metric(HostMetric::VmPendingCount, host);
        float::max(running, 0.0)
    }

    /// `host`'s CPU load without pending placements.
    pub fn load(&self, host: u32, threads_as_cores: bool) -> Option<HostLoad> {
        self.cpu().load(host, threads_as_cores)
    }

    /// True when `host` holds the SPM role.
    pub fn is_spm(&self, host: u32) -> bool {
        flag(self.hosts.flags(HostFlag::Spm), host)
    }

    /// `host`'s max scheduling memory, MiB.
    pub fn max_scheduling_mib(&self, host: u32) -> f64 {
        self.memory
            .get_or_init(|| MemoryColumns::new(&self.hosts, self.over_commit_percent))
            .max_scheduling_mib(host)
    }

    fn overloaded_minutes(&self, host: u32) -> f64 {
        self.metric(HostMetric::CpuOverloadedMinutes, host)
    }

    /// oVirt's `isHostCpuOverUtilized`: loaded at or over the threshold for
    /// the duration with at least one VM, or over the vCPU ratio.
    pub fn cpu_over_utilized(&self, host: u32, rule: &OverUtilized) -> bool {
        let Some(load) = self.load(host, rule.threads_as_cores) else {
            return false;
        };
        let minutes = self.overloaded_minutes(host);
        let overloaded = load.percent() >= rule.utilization
            && minutes > 0.0
            && minutes >= rule.duration_minutes
            && self.running_vms(host) > 0.0;
        if overloaded {
            return true;
        }
        if rule.vcpu_ratio > 0.0 {
            let vcpus = float::max(
                self.metric(HostMetric::VcpusUsed, host)
                    - self.metric(HostMetric::VcpusPending, host),
                0.0,
            );
            return vcpus / load.cpus >= rule.vcpu_ratio;
        }
        false
    }

    /// oVirt's `isHostCpuUnderUtilized`.
    pub fn cpu_under_utilized(&self, host: u32, rule: &UnderUtilized) -> bool {
        let Some(load) = self.load(host, false) else {
            return false;
        };
        let minutes = self.overloaded_minutes(host);
        load.percent() < rule.utilization
            && (minutes <= 0.0 || minutes >= rule.duration_minutes)
            && self.running_vms(host) >= rule.min_vms
    }

    /// oVirt's `getOverUtilizedCPUHosts`: the over-utilised candidates,
    /// most loaded first (load counted with `sort_threads_as_cores`, the
    /// cluster's setting, as oVirt's comparator does).
    pub fn over_utilized_cpu_hosts(
        &self,
        candidates: &[u32],
        rule: &OverUtilized,
        sort_threads_as_cores: bool,
    ) -> Vec<u32> {
        let mut hosts: Vec<u32> = candidates
            .iter()
            .copied()
            .filter(|&h| self.cpu_over_utilized(h, rule))
            .collect();
        self.sort_by_load(&mut hosts, sort_threads_as_cores, Ordering::reverse);
        hosts
    }

    /// oVirt's `getUnderUtilizedCPUHosts`: the under-utilised candidates,
    /// least loaded first.
    pub fn under_utilized_cpu_hosts(
        &self,
        candidates: &[u32],
        rule: &UnderUtilized,
        sort_threads_as_cores: bool,
    ) -> Vec<u32> {
        let mut hosts: Vec<u32> = candidates
            .iter()
            .copied()
            .filter(|&h| self.cpu_under_utilized(h, rule))
            .collect();
        self.sort_by_load(&mut hosts, sort_threads_as_cores, |order| order);
        hosts
    }

    /// Sorts by load percent, `direction` turning the ascending order into
    /// the wanted one. The sort is stable, as Java's `List.sort`, so ties
    /// keep candidate order either way.
    fn sort_by_load(
        &self,
        hosts: &mut [u32],
        threads_as_cores: bool,
        direction: impl Fn(Ordering) -> Ordering,
    ) {
        let percent = |h: u32| self.load(h, threads_as_cores).map_or(0.0, |l| l.percent());
        hosts.sort_by(|&a, &b| direction(percent(a).total_cmp(&percent(b))));
    }

    /// oVirt's `getHostsWithLessFreeMemory`: schedulable memory under
    /// `limit_mib` and more than one VM.
    pub fn hosts_with_less_free_memory(&self, candidates: &[u32], limit_mib: f64) -> Vec<u32> {
        candidates
            .iter()
            .copied()
            .filter(|&h| self.max_scheduling_mib(h) < limit_mib && self.running_vms(h) > 1.0)
            .collect()
    }

    /// oVirt's `getHostsWithMoreFreeMemory`: schedulable memory over
    /// `limit_mib` and at least `min_vms` VMs.
    pub fn hosts_with_more_free_memory(
        &self,
        candidates: &[u32],
        limit_mib: f64,
        min_vms: f64,
    ) -> Vec<u32> {
        candidates
            .iter()
            .copied()
            .filter(|&h| self.max_scheduling_mib(h) > limit_mib && self.running_vms(h) >= min_vms)
            .collect()
    }

    /// oVirt's `FindVmAndDestinations`, stopped at its first result: on
    /// each source in order, its migratable running VMs from the least CPU
    /// use (`VmCpuUsageComparator`), the first VM that has a valid
    /// destination.
    pub fn find_vm_and_destinations(
        &self,
        sources: &[u32],
        destinations: &[u32],
        limits: DestinationLimits,
    ) -> Option<Migration> {
        let by_source = self.migratable_vms_by_source(sources);
        let memory = self.vms.metric(VmMetric::MemoryMib);
        for vms in by_source {
            for vm in vms {
                let vm_memory = memory.get(vm.index as usize).copied().unwrap_or(0.0);
                let valid: Vec<u32> = destinations
                    .iter()
                    .copied()
                    .filter(|&d| d != vm.host && self.takes(d, vm.cpu_use, vm_memory, limits))
                    .collect();
                if !valid.is_empty() {
                    return Some(Migration {
                        vm: vm.index,
                        destinations: valid,
                    });
                }
            }
        }
        None
    }

    /// oVirt's `getValidHosts` for one destination.
    fn takes(&self, host: u32, vm_cpu_use: f64, vm_memory: f64, limits: DestinationLimits) -> bool {
        let Some(load) = self.load(host, false) else {
            return false;
        };
        // oVirt adds the VM's load only when the host reports its threads.
        let added = if self.metric(HostMetric::CpuThreads, host) > 0.0 {
            vm_cpu_use
        } else {
            0.0
        };
        let predicted = (load.total + added) / load.cpus;
        predicted <= limits.high_utilization
            && self.max_scheduling_mib(host) - vm_memory > limits.min_free_memory_mib
    }

    /// Each source's migratable, running (not pending) VMs, sorted by CPU
    /// use, in source order. One pass over the VM columns.
    fn migratable_vms_by_source(&self, sources: &[u32]) -> Vec<Vec<Candidate>> {
        const NOT_A_SOURCE: u32 = u32::MAX;
        let mut position = vec![NOT_A_SOURCE; self.hosts.len()];
        for (i, &source) in sources.iter().enumerate() {
            if let Some(slot) = position.get_mut(source as usize)
                && *slot == NOT_A_SOURCE
            {
                *slot = i as u32;
            }
        }
        let on_host = self.vms.hosts();
        let migratable = self.vms.flags(VmFlag::Migratable);
        let pending = self.vms.flags(VmFlag::Pending);
        let usage = self.vms.metric(VmMetric::CpuUsagePercent);
        let vcpus = self.vms.metric(VmMetric::Vcpus);
        let mut by_source: Vec<Vec<Candidate>> = vec![Vec::new(); sources.len()];
        for (index, &host) in on_host.iter().enumerate() {
            let Some(&slot) = position.get(host as usize) else {
                continue;
            };
            let flag = |column: &[bool]| column.get(index).copied().unwrap_or(false);
            if slot == NOT_A_SOURCE || !flag(migratable) || flag(pending) {
                continue;
            }
            let read = |column: &[f64]| {
                let value = column.get(index).copied().filter(|v| v.is_finite());
                float::max(value.unwrap_or(0.0), 0.0)
            };
            by_source[slot as usize].push(Candidate {
                index: index as u32,
                host,
                cpu_use: read(usage) * read(vcpus),
            });
        }
        for vms in &mut by_source {
            vms.sort_by(|a, b| a.cpu_use.total_cmp(&b.cpu_use));
        }
        by_source
    }
}

/// A VM that may move, with what `VmCpuUsageComparator` sorts by.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    index: u32,
    host: u32,
    /// Usage percent × vCPUs.
    cpu_use: f64,
}

/// The thresholds `OptimalForEvenDistribution` and `OptimalForPowerSaving`
/// both read (oVirt's `CpuAndMemoryBalancingPolicyUnit` fields), and the
/// source selection and destination limits they share; each balancer adds
/// only what it does differently.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// `HighUtilization`, percent.
    pub high: f64,
    /// `CpuOverCommitDurationMinutes`.
    pub duration_minutes: f64,
    /// `CountThreadsAsCores`: how CPU sources are sorted (oVirt's comparator).
    pub threads_as_cores: bool,
    /// `MaxFreeMemoryForOverUtilized`, MiB; empty reads as 0, oVirt's fallback.
    pub max_free_for_over: f64,
    /// `MinFreeMemoryForUnderUtilized`, MiB; `None` when empty, whose
    /// meaning differs per balancer.
    pub min_free_for_under: Option<f64>,
}

impl Thresholds {
    /// Reads the shared parameters; `None` when one does not parse (the
    /// balancer then proposes nothing).
    pub fn read(params: &Params<'_>) -> Option<Self> {
        Some(Thresholds {
            high: params.f64(HIGH_UTILIZATION).ok()?,
            duration_minutes: params.f64(CPU_OVER_COMMIT_DURATION_MINUTES).ok()?,
            threads_as_cores: params.bool(COUNT_THREADS_AS_CORES).ok()?,
            max_free_for_over: optional_f64(params, MAX_FREE_MEMORY_FOR_OVER_UTILIZED)
                .ok()?
                .unwrap_or(0.0),
            min_free_for_under: optional_f64(params, MIN_FREE_MEMORY_FOR_UNDER_UTILIZED).ok()?,
        })
    }

    /// oVirt's `isHostCpuOverUtilized` at `utilization` percent, after
    /// `CpuOverCommitDurationMinutes`, counting CPUs as threads or not and
    /// with a vCPU ratio (0: off) as the balancer asks.
    pub fn over_utilized(
        &self,
        utilization: f64,
        threads_as_cores: bool,
        vcpu_ratio: f64,
    ) -> OverUtilized {
        OverUtilized {
            utilization,
            duration_minutes: self.duration_minutes,
            threads_as_cores,
            vcpu_ratio,
        }
    }

    /// The CPU sources over `rule`, most loaded first (sorted by
    /// `CountThreadsAsCores`, whatever `rule` counts).
    pub fn cpu_sources(
        &self,
        cluster: &Cluster<'_>,
        candidates: &[u32],
        rule: &OverUtilized,
    ) -> Vec<u32> {
        cluster.over_utilized_cpu_hosts(candidates, rule, self.threads_as_cores)
    }

    /// The memory sources both balancers start from: hosts whose
    /// schedulable memory is under `MaxFreeMemoryForOverUtilized`, with more
    /// than one VM.
    pub fn memory_sources(&self, cluster: &Cluster<'_>, candidates: &[u32]) -> Vec<u32> {
        cluster.hosts_with_less_free_memory(candidates, self.max_free_for_over)
    }

    /// A destination stays at or under `HighUtilization` with the VM and
    /// keeps more than `MaxFreeMemoryForOverUtilized`.
    pub fn destination_limits(&self) -> DestinationLimits {
        DestinationLimits {
            high_utilization: self.high,
            min_free_memory_mib: self.max_free_for_over,
        }
    }
}

/// Runs `plan` on `cx`'s cluster, its schedulable memory counted with the
/// `MaxMemoryOverCommit` parameter; `None` when that does not parse.
pub fn run(cx: &BalanceContext<'_>, plan: &impl BalancePlan) -> Option<Migration> {
    let cluster = Cluster::new(cx, cx.params().f64(MAX_MEMORY_OVER_COMMIT).ok()?);
    balance(plan, &cluster, cx.candidates())
}

/// oVirt's `CpuAndMemoryBalancingPolicyUnit.balance` over `candidates`.
pub fn balance(
    plan: &impl BalancePlan,
    cluster: &Cluster<'_>,
    candidates: &[u32],
) -> Option<Migration> {
    if candidates.len() < 2 {
        return None;
    }
    let primary_sources = plan.primary_sources(cluster, candidates);
    let secondary_sources = plan.secondary_sources(cluster, candidates);
    if primary_sources.is_empty() && secondary_sources.is_empty() {
        return None;
    }
    let limits = plan.destination_limits();
    if !primary_sources.is_empty() {
        let destinations = plan.primary_destinations(cluster, candidates);
        if !destinations.is_empty()
            && let Some(found) =
                cluster.find_vm_and_destinations(&primary_sources, &destinations, limits)
        {
            return Some(found);
        }
    }
    if !secondary_sources.is_empty() {
        let destinations = plan.secondary_destinations(cluster, candidates);
        if !destinations.is_empty() {
            return cluster.find_vm_and_destinations(&secondary_sources, &destinations, limits);
        }
    }
    None
}

/// oVirt's lowered threshold for `high` percent: `min(80 × high / 100,
/// high − 10)` (`UtilizationThresholdInPercent`, `VcpuConsumptionPercentage`)
/// in whole percent, as oVirt's `int` arithmetic. `OptimalForEvenDistribution`
/// takes destinations under it; `OptimalForPowerSaving` takes sources over it.
pub fn lowered_threshold(high: f64) -> f64 {
    float::min(
        (UTILIZATION_THRESHOLD_PERCENT * high / 100.0).floor(),
        high - VCPU_CONSUMPTION_PERCENT,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowered_threshold_is_whole_percent() {
        assert_eq!(lowered_threshold(80.0), 64.0);
        assert_eq!(lowered_threshold(75.0), 60.0);
        assert_eq!(lowered_threshold(50.0), 40.0);
        assert_eq!(lowered_threshold(99.0), 79.0);
        assert_eq!(lowered_threshold(57.0), 45.0);
    }
}

//! A host's CPU load as oVirt's `HostCpuLoadHelper` computes it.
//!
//! oVirt sums the load of a host's shared CPUs in "percent of one CPU"
//! (usage × CPUs), adds what pending placements will add, and adds the SPM
//! role's share (one unmeasured vCPU); the load in percent of the host is
//! that sum over the CPU count, rounded up. Our inventory has no per-CPU
//! topology or exclusive pinning, so every CPU is shared and the host-wide
//! usage figure is used (oVirt's own fallback when per-CPU figures are
//! missing).
//!
//! Our `cpu-usage-percent` column already includes pending placements.
//! oVirt's scores count pending load and its filters and balancers do not,
//! so [`Pending`] says which one a unit wants and the pending part
//! (`cpu-pending-percent`) is taken out when excluded.

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;

use crate::{SPM_VCPU_CONSUMPTION, VCPU_CONSUMPTION_PERCENT, flag, value};

/// Whether pending placements count towards a host's load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pending {
    /// As oVirt's weights (`HostCpuLoadHelper` built with the pending
    /// resource manager).
    Included,
    /// As oVirt's `CPUOverloaded` filter and its balancers.
    Excluded,
}

/// The columns the load arithmetic reads. Core counts and usage, which
/// every load needs, are fetched up front; threads, the pending part and
/// the SPM flags only when a host's load first needs them (the inventory
/// then keeps them for the call), so a unit that judges few hosts in full
/// pays for few columns.
pub struct CpuColumns<'a> {
    hosts: Hosts<'a>,
    cores: &'a [f64],
    usage: &'a [f64],
    pending: Pending,
}

/// One host's shared CPU load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostLoad {
    /// CPUs the load is spread over: cores, or threads when counted so.
    pub cpus: f64,
    /// Load in percent of one CPU, summed over the host's CPUs, with the
    /// SPM role's share (`getEffectiveSharedCpuTotalLoad`).
    pub total: f64,
}

impl HostLoad {
    /// Load in percent of the whole host, rounded up as oVirt's
    /// `getEffectiveSharedCpuLoad` does.
    #[inline]
    pub fn percent(&self) -> f64 {
        (self.total / self.cpus).ceil()
    }
}

/// The load, in percent of one CPU, that the SPM role adds to its host.
pub const SPM_LOAD: f64 = SPM_VCPU_CONSUMPTION * VCPU_CONSUMPTION_PERCENT;

impl<'a> CpuColumns<'a> {
    /// Fetches the core and usage columns; `pending` says whether loads
    /// count pending placements.
    pub fn new(hosts: &Hosts<'a>, pending: Pending) -> Self {
        CpuColumns {
            hosts: *hosts,
            cores: hosts.metric(HostMetric::CpuCores),
            usage: hosts.metric(HostMetric::CpuUsagePercent),
            pending,
        }
    }

    /// True when `host` reports a core count and a usage figure (oVirt's
    /// `hostStatisticsPresent`).
    #[inline]
    pub fn has_statistics(&self, host: u32) -> bool {
        value(self.cores, host) > 0.0 && value(self.usage, host).is_finite()
    }

    /// Host `host`'s CPU count: threads when `threads_as_cores` and the
    /// host reports them (oVirt's `SlaValidator.getEffectiveCpuCores`),
    /// else cores. `None` when the host reports no CPUs.
    #[inline]
    pub fn cpus(&self, host: u32, threads_as_cores: bool) -> Option<f64> {
        let cores = Some(value(self.cores, host)).filter(|&c| c > 0.0)?;
        if !threads_as_cores {
            return Some(cores);
        }
        let threads = value(self.hosts.metric(HostMetric::CpuThreads), host);
        Some(if threads > 0.0 { threads } else { cores })
    }

    /// Hardware threads of `host`, its cores when it reports none.
    pub fn threads(&self, host: u32) -> Option<f64> {
        self.cpus(host, true)
    }

    /// True when `host` holds the SPM role.
    #[inline]
    pub fn is_spm(&self, host: u32) -> bool {
        flag(self.hosts.flags(HostFlag::Spm), host)
    }

    /// Host `host`'s load, or `None` without statistics (no CPU count or no
    /// usage figure: oVirt's `hostStatisticsPresent`).
    #[inline]
    pub fn load(&self, host: u32, threads_as_cores: bool) -> Option<HostLoad> {
        let cpus = self.cpus(host, threads_as_cores)?;
        let mut usage = Some(value(self.usage, host)).filter(|u| u.is_finite())?;
        if self.pending == Pending::Excluded {
            let part = value(self.hosts.metric(HostMetric::CpuPendingPercent), host);
            if part.is_finite() && part > 0.0 {
                usage = float::max(usage - part, 0.0);
            }
        }
        let spm = if self.is_spm(host) { SPM_LOAD } else { 0.0 };
        Some(HostLoad {
            cpus,
            total: usage * cpus + spm,
        })
    }
}

/// The load, in percent of one CPU, the VM being placed adds to a host
/// (oVirt's `calcAddedSharedVmsLoad`): its measured usage times its vCPUs
/// when it is running (a migration), else `VcpuConsumptionPercentage` per
/// vCPU. Nothing on the host it already runs on.
#[inline]
pub fn added_vm_load(vm: &Vm, host: u32) -> f64 {
    if vm.current_host == Some(host) {
        return 0.0;
    }
    let vcpus = f64::from(vm.vcpus);
    match (vm.current_host, vm.cpu_usage_percent) {
        (Some(_), Some(usage)) if usage.is_finite() => float::max(usage, 0.0) * vcpus,
        _ => VCPU_CONSUMPTION_PERCENT * vcpus,
    }
}

/// oVirt's `EvenDistributionCPUWeightPolicyUnit.calcHostScore` before
/// rounding: the host's predicted load per CPU with the VM on it, times the
/// vCPU over-commit penalty (1, or 1000 when the vCPU to CPU ratio with the
/// VM reaches `vcpu_ratio_limit`; a limit of 0 disables it).
#[inline]
pub fn predicted_load_score(
    load: HostLoad,
    vm: &Vm,
    host: u32,
    host_vcpus: f64,
    vcpu_ratio_limit: f64,
) -> f64 {
    let predicted = (load.total + added_vm_load(vm, host)) / load.cpus;
    predicted * vcpu_penalty(load, vm, host, host_vcpus, vcpu_ratio_limit)
}

/// oVirt's `calculateVCpuPenalty` multiplier for the penalised case.
pub const VCPU_PENALTY: f64 = 1000.0;

/// 1, or [`VCPU_PENALTY`] when the host's vCPUs (pending included) plus the
/// VM's, per CPU, reach `limit` (0 = off).
#[inline]
fn vcpu_penalty(load: HostLoad, vm: &Vm, host: u32, host_vcpus: f64, limit: f64) -> f64 {
    if limit == 0.0 {
        return 1.0;
    }
    let added = if vm.current_host == Some(host) {
        0.0
    } else {
        f64::from(vm.vcpus)
    };
    let host_vcpus = if host_vcpus.is_finite() {
        host_vcpus
    } else {
        0.0
    };
    if (host_vcpus + added) / load.cpus < limit {
        1.0
    } else {
        VCPU_PENALTY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory() -> Inventory {
        let mut inventory = Inventory::new(3, 0);
        inventory
            .set_host_metric(HostMetric::CpuCores, vec![4.0, 8.0, 0.0])
            .unwrap();
        inventory
            .set_host_metric(HostMetric::CpuThreads, vec![8.0, 0.0, 4.0])
            .unwrap();
        inventory
            .set_host_metric(HostMetric::CpuUsagePercent, vec![50.0, 21.0, 10.0])
            .unwrap();
        inventory
            .set_host_metric(HostMetric::CpuPendingPercent, vec![10.0, 0.0, 0.0])
            .unwrap();
        inventory
            .set_host_flag(HostFlag::Spm, vec![false, true, false])
            .unwrap();
        inventory
    }

    #[test]
    fn load_counts_spm_and_optionally_pending() {
        let inventory = inventory();
        let hosts = Hosts::new(&inventory);
        let with = CpuColumns::new(&hosts, Pending::Included);
        let without = CpuColumns::new(&hosts, Pending::Excluded);
        assert_eq!(with.load(0, false).map(|l| l.total), Some(200.0));
        assert_eq!(without.load(0, false).map(|l| l.total), Some(160.0));
        assert_eq!(with.load(0, true).map(|l| l.cpus), Some(8.0));
        // 21% of 8 cores plus the SPM's 10 = 178, over 8 = 22.25, up to 23.
        assert_eq!(with.load(1, false).map(|l| l.percent()), Some(23.0));
        assert_eq!(with.load(1, true).map(|l| l.cpus), Some(8.0), "no threads");
        assert_eq!(with.load(2, false), None, "no cores: no statistics");
    }
}

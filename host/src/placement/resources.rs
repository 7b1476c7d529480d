//! What a VM consumes on a host, and how consumption that is claimed but not
//! yet reported (pending) changes the usage columns units read.
//!
//! The WIT contract says every usage column already includes pending
//! placements and that the `*-pending` columns say how much of it is
//! pending. This module is the one place that says which columns a claim
//! moves and by how much, so the claim ledger, multi-instance virtual
//! consumption and the overcommit checks of the tests all agree.

use sandpiper_model::{HostMetric, Vm};
use serde::{Deserialize, Serialize};

/// CPU load a VM that is not running yet is assumed to cause, in percent of
/// each of its vCPUs. oVirt's `VcpuConsumptionPercentage` default: a new VM
/// has no measured load, and counting none would let a burst of starts pile
/// onto the host that looks idlest.
pub const DEFAULT_VCPU_CONSUMPTION_PERCENT: f64 = 10.0;

/// Resources a VM takes on a host, or the sum of several VMs' resources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// Physical memory, MiB: lowers `memory-free-mib`.
    pub memory_mib: f64,
    /// Guaranteed memory, MiB: raises `memory-committed-mib`.
    pub memory_guaranteed_mib: f64,
    /// Virtual CPUs: raise `vcpus-used`.
    pub vcpus: f64,
    /// CPU load in vCPU-percent (100 is one vCPU fully busy); divided by the
    /// host's CPUs it raises `cpu-usage-percent`.
    pub cpu_vcpu_percent: f64,
    /// Local disk, GiB: lowers `disk-free-gib`.
    pub disk_gib: f64,
    /// VMs: raise `vm-count`.
    pub vms: f64,
}

impl Resources {
    /// The amounts bit for bit, for fingerprints.
    pub fn bits(&self) -> [u64; 6] {
        [
            self.memory_mib,
            self.memory_guaranteed_mib,
            self.vcpus,
            self.cpu_vcpu_percent,
            self.disk_gib,
            self.vms,
        ]
        .map(f64::to_bits)
    }

    /// What `vm` takes on the host it is placed on.
    pub fn of_vm(vm: &Vm) -> Self {
        let vcpus = f64::from(vm.vcpus);
        let guaranteed = if vm.memory_guaranteed_mib > 0.0 {
            vm.memory_guaranteed_mib
        } else {
            vm.memory_mib
        };
        let per_vcpu = vm
            .cpu_usage_percent
            .filter(|p| p.is_finite() && *p >= 0.0)
            .unwrap_or(DEFAULT_VCPU_CONSUMPTION_PERCENT);
        Resources {
            memory_mib: non_negative(vm.memory_mib),
            memory_guaranteed_mib: non_negative(guaranteed),
            vcpus,
            cpu_vcpu_percent: vcpus * per_vcpu.min(100.0),
            disk_gib: non_negative(vm.disk_gib),
            vms: 1.0,
        }
    }

    /// Adds `other` to these resources.
    pub fn add(&mut self, other: &Resources) {
        self.memory_mib += other.memory_mib;
        self.memory_guaranteed_mib += other.memory_guaranteed_mib;
        self.vcpus += other.vcpus;
        self.cpu_vcpu_percent += other.cpu_vcpu_percent;
        self.disk_gib += other.disk_gib;
        self.vms += other.vms;
    }

    /// True when nothing is claimed.
    pub fn is_empty(&self) -> bool {
        *self == Resources::default()
    }
}

/// Values a claim could carry that are not usable amounts (NaN, negative)
/// count as nothing rather than poisoning a host's columns.
fn non_negative(value: f64) -> f64 {
    if value.is_finite() && value > 0.0 {
        value
    } else {
        0.0
    }
}

/// The host columns pending claims change. Every other column is the
/// engine's report, shared untouched.
pub const PENDING_METRICS: [HostMetric; 10] = [
    HostMetric::CpuUsagePercent,
    HostMetric::CpuPendingPercent,
    HostMetric::VcpusUsed,
    HostMetric::VcpusPending,
    HostMetric::MemoryFreeMib,
    HostMetric::MemoryPendingMib,
    HostMetric::MemoryCommittedMib,
    HostMetric::VmCount,
    HostMetric::VmPendingCount,
    HostMetric::DiskFreeGib,
];

/// Whether pending claims change `metric`.
pub fn moved_by_pending(metric: HostMetric) -> bool {
    PENDING_METRICS.contains(&metric)
}

/// The host's CPUs that CPU load percentages are relative to: its threads
/// when it reports them, else its cores; 0 when it reports neither.
pub fn host_cpus(threads: f64, cores: f64) -> f64 {
    if threads > 0.0 {
        threads
    } else if cores > 0.0 {
        cores
    } else {
        0.0
    }
}

/// The value of `metric` for a host that reported `reported` and has
/// `pending` claimed on it; `cpus` is [`host_cpus`] of the host. Free
/// amounts go below 0 when claims take more than the host reported free
/// (over-commit, swap): stopping them at 0 would hide every claim past
/// that point, and filters that allow over-commit (`RamFilter` at a ratio
/// above 1, `Memory` counting free swap) would then admit VMs without
/// end. Nova's `free_ram_mb` goes negative the same way. CPU load stops
/// at 100 %, the column's range.
pub fn with_pending(metric: HostMetric, reported: f64, pending: &Resources, cpus: f64) -> f64 {
    let cpu_percent = if cpus > 0.0 {
        pending.cpu_vcpu_percent / cpus
    } else {
        0.0
    };
    match metric {
        HostMetric::CpuUsagePercent => (reported + cpu_percent).min(100.0),
        HostMetric::CpuPendingPercent => (reported + cpu_percent).min(100.0),
        HostMetric::VcpusUsed | HostMetric::VcpusPending => reported + pending.vcpus,
        HostMetric::MemoryFreeMib => reported - pending.memory_mib,
        HostMetric::MemoryPendingMib => reported + pending.memory_mib,
        HostMetric::MemoryCommittedMib => reported + pending.memory_guaranteed_mib,
        HostMetric::VmCount | HostMetric::VmPendingCount => reported + pending.vms,
        HostMetric::DiskFreeGib => reported - pending.disk_gib,
        _ => reported,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_vm_takes_its_memory_guarantee_cpus_and_a_default_load() {
        let vm = Vm {
            memory_mib: 4096.0,
            memory_guaranteed_mib: 0.0,
            vcpus: 4,
            disk_gib: 20.0,
            ..Vm::default()
        };
        let r = Resources::of_vm(&vm);
        assert_eq!(r.memory_guaranteed_mib, 4096.0);
        assert_eq!(r.cpu_vcpu_percent, 40.0);
        assert_eq!((r.vcpus, r.vms, r.disk_gib), (4.0, 1.0, 20.0));
    }

    #[test]
    fn unusable_amounts_count_as_nothing() {
        let vm = Vm {
            memory_mib: f64::NAN,
            disk_gib: -3.0,
            cpu_usage_percent: Some(f64::INFINITY),
            ..Vm::default()
        };
        let r = Resources::of_vm(&vm);
        assert_eq!((r.memory_mib, r.disk_gib), (0.0, 0.0));
        assert_eq!(r.cpu_vcpu_percent, DEFAULT_VCPU_CONSUMPTION_PERCENT);
    }

    #[test]
    fn pending_moves_exactly_the_pending_columns() {
        let pending = Resources {
            memory_mib: 1024.0,
            memory_guaranteed_mib: 512.0,
            vcpus: 2.0,
            cpu_vcpu_percent: 80.0,
            disk_gib: 10.0,
            vms: 1.0,
        };
        let cpus = host_cpus(8.0, 4.0);
        assert_eq!(
            with_pending(HostMetric::MemoryFreeMib, 4096.0, &pending, cpus),
            3072.0
        );
        // Claimed past what was free: the shortfall stays visible.
        assert_eq!(
            with_pending(HostMetric::MemoryFreeMib, 512.0, &pending, cpus),
            -512.0
        );
        assert_eq!(
            with_pending(HostMetric::DiskFreeGib, 4.0, &pending, cpus),
            -6.0
        );
        assert_eq!(
            with_pending(HostMetric::MemoryCommittedMib, 0.0, &pending, cpus),
            512.0
        );
        assert_eq!(
            with_pending(HostMetric::CpuUsagePercent, 15.0, &pending, cpus),
            25.0
        );
        assert_eq!(
            with_pending(HostMetric::CpuUsagePercent, 95.0, &pending, cpus),
            100.0
        );
        assert_eq!(
            with_pending(HostMetric::VmPendingCount, 0.0, &pending, cpus),
            1.0
        );
        assert_eq!(with_pending(HostMetric::CpuCores, 4.0, &pending, cpus), 4.0);
        for metric in HostMetric::ALL {
            let moved = with_pending(*metric, 50.0, &pending, cpus) != 50.0;
            assert_eq!(moved, moved_by_pending(*metric), "{metric:?}");
        }
    }
}

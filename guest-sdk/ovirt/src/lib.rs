//! oVirt's scheduling arithmetic, written once for every built-in oVirt unit.
//!
//! oVirt's policy units share helpers (`HostCpuLoadHelper`,
//! `VDS.getMaxSchedulingMemory`, `PolicyUnitImpl.stretchScores`,
//! `ListUtils.rankSorted`, `CpuAndMemoryBalancingPolicyUnit`,
//! `FindVmAndDestinations`) and configuration values (`MaxSchedulerWeight`,
//! `VcpuConsumptionPercentage`, ...). This crate is their one Rust copy, so
//! that `OptimalForCpuEvenDistribution` and `OptimalForCpuPowerSaving`, or
//! the three balancers, cannot drift apart. It is a plain library on the
//! guest SDK, not a unit: units link it into their own components.
//!
//! Everything here reads the inventory column by column (each column once
//! per call), so a unit's cost stays one pass over its candidates.

pub mod balancing;
pub mod cpu;
pub mod hardware;
pub mod memory;
pub mod numa;
pub mod params;
pub mod pinning;
pub mod scores;

/// oVirt's `MaxSchedulerWeight`: weights are stretched onto `1..=` this, and
/// a host a weight cannot judge gets this (the worst) weight.
pub const MAX_SCHEDULER_WEIGHT: f64 = 1000.0;

/// oVirt's `VcpuConsumptionPercentage`: the load, in percent of one CPU,
/// assumed for each vCPU whose real usage is not measured yet.
pub const VCPU_CONSUMPTION_PERCENT: f64 = 10.0;

/// oVirt's `SpmVCpuConsumption`: the storage pool manager role loads its
/// host like this many unmeasured vCPUs.
pub const SPM_VCPU_CONSUMPTION: f64 = 1.0;

/// oVirt's `UtilizationThresholdInPercent`: balancing destinations must stay
/// under this share of `HighUtilization`, so a move never creates a new hot
/// spot.
pub const UTILIZATION_THRESHOLD_PERCENT: f64 = 80.0;

/// Host `host`'s value in a numeric column, NaN when the column has no
/// such row (the inventory's length checks rule that out; this keeps a
/// unit from ever indexing out of bounds).
#[inline]
pub fn value(column: &[f64], host: u32) -> f64 {
    column.get(host as usize).copied().unwrap_or(f64::NAN)
}

/// Host `host`'s value in a boolean column, false when missing.
#[inline]
pub fn flag(column: &[bool], host: u32) -> bool {
    column.get(host as usize).copied().unwrap_or(false)
}

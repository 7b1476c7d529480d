//! oVirt's policy-unit parameters: names, patterns and descriptions, so that
//! every unit sharing a key (`HighUtilization` is read by a filter, a weight
//! and three balancers) declares it identically.
//!
//! Names and patterns are oVirt's `PolicyUnitParameter` (reference notes
//! §8). Defaults are the fallback oVirt uses *in that unit* when the cluster
//! sets nothing, so each builder takes the default from its caller. Where
//! oVirt's fallback cannot be written in its own pattern (no
//! `MaxFreeMemoryForOverUtilized` means 0, which `^([1-9][0-9]*)$` refuses;
//! no `HighUtilization` in `OptimalForCpuPowerSaving` means "no cap") the
//! pattern also admits the empty string, and the empty default means
//! exactly that fallback. Every value oVirt accepts is still accepted.

use sandpiper_guest::prelude::*;

/// CPU load, percent, at or above which a host is over-utilised.
pub const HIGH_UTILIZATION: &str = "HighUtilization";
/// oVirt's pattern for `HighUtilization`: 50 to 99.
pub const HIGH_UTILIZATION_PATTERN: &str = "^([5-9][0-9])$";
/// CPU load, percent, under which a host is under-utilised.
pub const LOW_UTILIZATION: &str = "LowUtilization";
/// Minutes a host must stay over `HighUtilization` before oVirt acts.
pub const CPU_OVER_COMMIT_DURATION_MINUTES: &str = "CpuOverCommitDurationMinutes";
/// Largest vCPU to physical CPU ratio before a host counts as over-utilised.
pub const VCPU_TO_PHYSICAL_CPU_RATIO: &str = "VCpuToPhysicalCpuRatio";
/// VM slots the busiest host must have before VMs are spread.
pub const HIGH_VM_COUNT: &str = "HighVmCount";
/// Slot difference between the busiest host and a destination.
pub const MIGRATION_THRESHOLD: &str = "MigrationThreshold";
/// VM slots the SPM role counts for.
pub const SPM_VM_GRACE: &str = "SpmVmGrace";
/// Free memory, MiB, under which a host is over-utilised.
pub const MAX_FREE_MEMORY_FOR_OVER_UTILIZED: &str = "MaxFreeMemoryForOverUtilized";
/// Free memory, MiB, over which a host is under-utilised.
pub const MIN_FREE_MEMORY_FOR_UNDER_UTILIZED: &str = "MinFreeMemoryForUnderUtilized";
/// Hosted-engine hosts kept able to receive the engine VM.
pub const HE_SPARES_COUNT: &str = "HeSparesCount";
/// Swap use, percent of physical memory, a host may have.
pub const MAXIMUM_ALLOWED_SWAP_USAGE: &str = "MaximumAllowedSwapUsage";
/// Divisor of the HA-reservation weight.
pub const SCALE_DOWN: &str = "ScaleDown";
/// Whether the cluster reserves capacity for its highly available VMs.
pub const HA_RESERVATION: &str = "HaReservation";
/// Count hardware threads as CPUs (oVirt's cluster `countThreadsAsCores`).
pub const COUNT_THREADS_AS_CORES: &str = "CountThreadsAsCores";
/// Memory a host may promise to VMs, percent of its physical memory
/// (oVirt's cluster `max_vds_memory_over_commit`).
pub const MAX_MEMORY_OVER_COMMIT: &str = "MaxMemoryOverCommit";

/// `HighUtilization` with oVirt's pattern and `default` (oVirt's fallback
/// differs per unit: 90 in `CPUOverloaded`, 75 in the balancers).
pub fn high_utilization(default: &str) -> ParamSpec {
    ParamSpec::new(
        HIGH_UTILIZATION,
        "CPU load, percent, over which a host is over-utilised (50 to 99).",
        default,
        HIGH_UTILIZATION_PATTERN,
    )
}

/// `HighUtilization` where oVirt's fallback is "no cap": empty (the
/// default) means no host is too loaded.
pub fn high_utilization_or_unlimited() -> ParamSpec {
    ParamSpec::new(
        HIGH_UTILIZATION,
        "CPU load, percent, over which a host gets the worst weight (50 to 99; empty: no cap).",
        "",
        "^([5-9][0-9])?$",
    )
}

/// `LowUtilization`, oVirt's pattern, fallback 20 (`LowUtilizationForPowerSave`).
pub fn low_utilization() -> ParamSpec {
    ParamSpec::new(
        LOW_UTILIZATION,
        "CPU load, percent, under which a host is under-utilised (0 to 49).",
        "20",
        "^([0-9]|[1-4][0-9])$",
    )
}

/// `CpuOverCommitDurationMinutes`, oVirt's pattern, fallback 2.
pub fn cpu_over_commit_duration_minutes() -> ParamSpec {
    ParamSpec::new(
        CPU_OVER_COMMIT_DURATION_MINUTES,
        "Minutes a host must stay over HighUtilization before it counts as overloaded.",
        "2",
        "^([1-9][0-9]*)$",
    )
}

/// `VCpuToPhysicalCpuRatio`, oVirt's pattern, fallback 0 (off).
pub fn vcpu_to_physical_cpu_ratio() -> ParamSpec {
    ParamSpec::new(
        VCPU_TO_PHYSICAL_CPU_RATIO,
        "vCPUs per physical CPU at which a host counts as over-committed (0 to 2.x; 0: off).",
        "0",
        r"^([0-2](\.([0-9]+))?)$",
    )
}

/// `HighVmCount`, oVirt's pattern, fallback 10.
pub fn high_vm_count() -> ParamSpec {
    ParamSpec::new(
        HIGH_VM_COUNT,
        "VM slots the busiest host must reach before VMs are spread.",
        "10",
        "^([0-9]|[1-9][0-9]+)$",
    )
}

/// `MigrationThreshold`, oVirt's pattern, fallback 5.
pub fn migration_threshold() -> ParamSpec {
    ParamSpec::new(
        MIGRATION_THRESHOLD,
        "VM slots a destination must have fewer than the busiest host.",
        "5",
        "^([2-9]|[1-9][0-9]+)$",
    )
}

/// `SpmVmGrace`, oVirt's pattern, fallback 5.
pub fn spm_vm_grace() -> ParamSpec {
    ParamSpec::new(
        SPM_VM_GRACE,
        "VM slots the storage pool manager (SPM) role takes on its host.",
        "5",
        "^([0-9]|[1-9][0-9]+)$",
    )
}

/// `MaxFreeMemoryForOverUtilized`: oVirt's pattern plus empty (the default,
/// oVirt's fallback 0: no host is memory over-utilised).
pub fn max_free_memory_for_over_utilized() -> ParamSpec {
    ParamSpec::new(
        MAX_FREE_MEMORY_FOR_OVER_UTILIZED,
        "MiB of schedulable memory under which a host is over-utilised (empty: 0).",
        "",
        "^([1-9][0-9]*)?$",
    )
}

/// `MinFreeMemoryForUnderUtilized`: oVirt's pattern plus empty (the
/// default, meaning oVirt's fallback in that unit, documented there).
pub fn min_free_memory_for_under_utilized() -> ParamSpec {
    ParamSpec::new(
        MIN_FREE_MEMORY_FOR_UNDER_UTILIZED,
        "MiB of schedulable memory over which a host is under-utilised (empty: the unit's fallback).",
        "",
        "^([1-9][0-9]*)?$",
    )
}

/// `HeSparesCount`, oVirt's pattern, fallback 0 (off).
pub fn he_spares_count() -> ParamSpec {
    ParamSpec::new(
        HE_SPARES_COUNT,
        "Hosted-engine hosts to keep able to receive the engine VM (0: off).",
        "0",
        "^([0-9][0-9]*)$",
    )
}

/// `MaximumAllowedSwapUsage`, oVirt's pattern, fallback 0
/// (`BlockMigrationOnSwapUsagePercentage`).
pub fn maximum_allowed_swap_usage() -> ParamSpec {
    ParamSpec::new(
        MAXIMUM_ALLOWED_SWAP_USAGE,
        "Swap in use beyond free memory, percent of physical memory, a host may have (0 to 199).",
        "0",
        "^1?[0-9]?[0-9]$",
    )
}

/// `ScaleDown`, oVirt's pattern (which lacks its `^`; the host anchors
/// every pattern anyway), fallback 1 (`ScaleDownForHaReservation`).
pub fn scale_down() -> ParamSpec {
    ParamSpec::new(
        SCALE_DOWN,
        "Divisor of the HA-reservation weight (1 to 100).",
        "1",
        "(100|[1-9]|[1-9][0-9])$",
    )
}

/// `HaReservation`: oVirt's cluster flag `ha_reservation`, default off as
/// in a new oVirt cluster.
pub fn ha_reservation() -> ParamSpec {
    ParamSpec::new(
        HA_RESERVATION,
        "The cluster reserves capacity for its highly available VMs (oVirt's cluster HA reservation).",
        "false",
        "^(true|false)$",
    )
}

/// `CountThreadsAsCores`: oVirt's cluster setting, default off.
pub fn count_threads_as_cores() -> ParamSpec {
    ParamSpec::new(
        COUNT_THREADS_AS_CORES,
        "Count a host's hardware threads, not its cores, as its CPUs.",
        "false",
        "^(true|false)$",
    )
}

/// `MaxMemoryOverCommit`: oVirt's cluster memory over-commit, default 100.
pub fn max_memory_over_commit() -> ParamSpec {
    ParamSpec::new(
        MAX_MEMORY_OVER_COMMIT,
        "Memory a host may promise to VMs, in percent of its physical memory (100 to 1000).",
        "100",
        "^([1-9][0-9]{2}|1000)$",
    )
}

/// A parameter whose empty value means "not set": `None` when empty, else
/// the value as a finite number.
pub fn optional_f64(params: &Params<'_>, name: &str) -> Result<Option<f64>, ParamError> {
    let value = params.str(name)?;
    if value.trim().is_empty() {
        return Ok(None);
    }
    params.f64(name).map(Some)
}

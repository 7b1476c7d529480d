//! `OptimalForEvenDistribution`: spreads CPU load across hosts, when placing
//! a VM (score) and by moving running VMs off overloaded hosts (balance).
//!
//! **Score**, from oVirt's `EvenDistributionCPUWeightPolicyUnit`
//! (`OptimalForCpuEvenDistribution`, reference notes §2.2): a host's cost is
//! its predicted CPU load per CPU once the VM runs there,
//!
//! ```text
//! round((usage% * cpus + spm_load + vm_load) / cpus)
//! ```
//!
//! where `vm_load` is the VM's measured usage times its vCPUs when it is
//! running (a migration), else 10% per vCPU (oVirt's
//! `VcpuConsumptionPercentage`), and nothing on the host it already runs on;
//! `spm_load` is one such vCPU on the SPM host. Costs are then stretched
//! linearly onto 1..1000 (all equal: all 1) and a host with no CPU figures
//! costs 1000. Lower is better.
//!
//! **Balance**, from oVirt's `EvenDistributionBalancePolicyUnit` with
//! `CpuAndMemoryBalancingPolicyUnit` and `FindVmAndDestinations` (§6):
//! * sources: candidates whose load (plus the SPM share) is at least
//!   `HighUtilization` and has been for `CpuOverCommitDurationMinutes`
//!   (the `cpu-overloaded-minutes` column), with at least one VM; most
//!   loaded first;
//! * destinations: candidates under `min(80% of HighUtilization,
//!   HighUtilization - 10)`, whose load plus the VM's predicted share of
//!   their threads stays at or under `HighUtilization`, and whose free
//!   memory can take the VM;
//! * the VM: on the first source that has one, the migratable VM with the
//!   least CPU use (`usage% * vCPUs`, oVirt's `VmCpuUsageComparator`) for
//!   which any destination qualifies; pending VMs never move.
//!
//! `None` when no source is overloaded or nothing can move.
//!
//! Where we differ from oVirt, and why:
//! * oVirt's balancer falls back to memory-based balancing
//!   (`MaxFreeMemoryForOverUtilized`); this unit balances CPU only.
//! * oVirt's `VCpuToPhysicalCpuRatio` penalty and over-commit trigger are
//!   not implemented (no per-host vCPU ratio policy yet).
//! * oVirt returns every (VM, destinations) pair and the engine tries them
//!   in order; our contract returns one migration, so we return the first.
//! * `CountThreadsAsCores` is a cluster setting in oVirt; here it is a
//!   parameter, shared by name with the `CPU` filter.
//! * Ties (equal load or usage) go to the lower index, so answers are
//!   deterministic where oVirt's depend on list order.

use sandpiper_guest::prelude::*;

/// Parameter: CPU load, percent, at or above which a host is overloaded.
pub const HIGH_UTILIZATION: &str = "HighUtilization";
/// Parameter: minutes a host must stay overloaded before VMs leave it.
pub const CPU_OVER_COMMIT_DURATION_MINUTES: &str = "CpuOverCommitDurationMinutes";
/// Parameter: count hardware threads instead of cores.
pub const COUNT_THREADS_AS_CORES: &str = "CountThreadsAsCores";

/// oVirt's `VcpuConsumptionPercentage`: load, percent of one CPU, assumed
/// per vCPU of a VM whose usage is not measured.
pub const VCPU_CONSUMPTION_PERCENT: f64 = 10.0;
/// oVirt's `SpmVCpuConsumption`: the SPM role loads a host like this many
/// such vCPUs.
pub const SPM_VCPUS: f64 = 1.0;
/// oVirt's `UtilizationThresholdInPercent`: destinations must be under this
/// share of `HighUtilization`, so a move never creates a new hot spot.
pub const DESTINATION_SHARE_PERCENT: f64 = 80.0;
/// oVirt's `MaxSchedulerWeight`: stretched costs run from 1 to this.
pub const MAX_COST: f64 = 1000.0;

/// The `OptimalForEvenDistribution` score and balancer.
pub struct EvenDistribution;

impl Unit for EvenDistribution {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForEvenDistribution",
            "Prefers hosts whose CPU load stays lowest with the VM, and moves VMs off hosts \
             that stay over HighUtilization for CpuOverCommitDurationMinutes.",
        )
        .with_param(ParamSpec::new(
            HIGH_UTILIZATION,
            "CPU load, percent, at or above which a host is overloaded (50 to 99).",
            "80",
            "^([5-9][0-9])$",
        ))
        .with_param(ParamSpec::new(
            CPU_OVER_COMMIT_DURATION_MINUTES,
            "Minutes a host must stay overloaded before VMs are moved off it.",
            "2",
            "^([1-9][0-9]*)$",
        ))
        .with_param(ParamSpec::new(
            COUNT_THREADS_AS_CORES,
            "Count a host's hardware threads, not its cores, as its CPUs.",
            "false",
            "^(true|false)$",
        ))
        .with_score_order(ScoreOrder::LowerIsBetter)
    }
}

/// A host's CPU count: cores, or threads when asked and reported.
fn cpus(host: &HostRef<'_>, threads_as_cores: bool) -> f64 {
    let threads = host.cpu_threads();
    if threads_as_cores && threads > 0.0 {
        threads
    } else {
        host.cpu_cores()
    }
}

/// Threads, for predicting a VM's share of a host: the unit VDSM reports
/// usage in. Cores when threads are not reported.
fn threads(host: &HostRef<'_>) -> f64 {
    let threads = host.cpu_threads();
    if threads > 0.0 {
        threads
    } else {
        host.cpu_cores()
    }
}

/// Load, percent of one CPU, that the SPM role adds to its host.
fn spm_load(host: &HostRef<'_>) -> f64 {
    if host.is_spm() {
        VCPU_CONSUMPTION_PERCENT * SPM_VCPUS
    } else {
        0.0
    }
}

impl Score for EvenDistribution {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        // A broken parameter leaves every candidate equal: this unit then
        // has no say, and the rest of the policy still decides.
        let Ok(threads_as_cores) = cx.params().bool(COUNT_THREADS_AS_CORES) else {
            return Scores::new(vec![MAX_COST; candidates.len()]);
        };
        let vm = cx.vm();
        let vcpus = f64::from(vm.vcpus);
        let vm_load = match (vm.current_host, vm.cpu_usage_percent) {
            (Some(_), Some(usage)) if usage.is_finite() => usage.max(0.0) * vcpus,
            _ => VCPU_CONSUMPTION_PERCENT * vcpus,
        };
        let hosts = cx.hosts();
        // Predicted load per CPU, `None` for hosts without CPU figures.
        let loads: Vec<Option<f64>> = candidates
            .iter()
            .map(|&index| {
                let host = hosts.get(index)?;
                let cpus = cpus(&host, threads_as_cores);
                let usage = host.cpu_usage_percent();
                if cpus.is_nan() || cpus <= 0.0 || !usage.is_finite() {
                    return None;
                }
                let added = if vm.current_host == Some(index) {
                    0.0
                } else {
                    vm_load
                };
                Some(((usage * cpus + spm_load(&host) + added) / cpus).round())
            })
            .collect();
        Scores::new(stretch(&loads))
    }
}

/// oVirt's `stretchScores`: maps the known values linearly onto
/// `1..=MAX_COST` (all equal: all 1); unknown values cost `MAX_COST`.
fn stretch(values: &[Option<f64>]) -> Vec<f64> {
    let known = values.iter().flatten().copied();
    let min = known.clone().fold(f64::INFINITY, f64::min);
    let max = known.fold(f64::NEG_INFINITY, f64::max);
    values
        .iter()
        .map(|value| match *value {
            None => MAX_COST,
            Some(_) if max <= min => 1.0,
            Some(value) => (1.0 + (value - min) / (max - min) * (MAX_COST - 1.0)).round(),
        })
        .collect()
}

/// The balancer's thresholds for one call.
struct Thresholds {
    high_percent: f64,
    duration_minutes: f64,
    destination_percent: f64,
}

impl Balance for EvenDistribution {
    fn balance(cx: &BalanceContext<'_>) -> Option<Migration> {
        let params = cx.params();
        let high_percent = params.f64(HIGH_UTILIZATION).ok()?;
        let thresholds = Thresholds {
            high_percent,
            duration_minutes: params.f64(CPU_OVER_COMMIT_DURATION_MINUTES).ok()?,
            destination_percent: (DESTINATION_SHARE_PERCENT * high_percent / 100.0)
                .min(high_percent - VCPU_CONSUMPTION_PERCENT),
        };
        let threads_as_cores = params.bool(COUNT_THREADS_AS_CORES).ok()?;
        let hosts = cx.hosts();
        let candidates: Vec<HostRef<'_>> = hosts.candidates(cx.candidates()).collect();
        if candidates.len() < 2 {
            return None;
        }
        // Load in percent of the host, with the SPM role's share.
        let load = |host: &HostRef<'_>| {
            let cpus = cpus(host, threads_as_cores);
            let spm = if cpus > 0.0 {
                spm_load(host) / cpus
            } else {
                0.0
            };
            host.cpu_usage_percent() + spm
        };

        let mut sources: Vec<(f64, &HostRef<'_>)> = candidates
            .iter()
            .map(|host| (load(host), host))
            .filter(|&(load, host)| {
                load >= thresholds.high_percent
                    && host.cpu_overloaded_minutes() >= thresholds.duration_minutes
                    && host.vm_count() > 0.0
            })
            .collect();
        sources.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.index().cmp(&b.1.index())));

        let mut underloaded: Vec<(f64, &HostRef<'_>)> = candidates
            .iter()
            .map(|host| (load(host), host))
            .filter(|&(load, host)| load < thresholds.destination_percent && threads(host) > 0.0)
            .collect();
        underloaded.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.index().cmp(&b.1.index())));
        if underloaded.is_empty() {
            return None;
        }

        let vms = cx.vms();
        for (_, source) in sources {
            let mut movable: Vec<VmRef<'_>> = vms
                .on_host(source.index())
                .filter(|vm| vm.is_migratable() && !vm.is_pending())
                .collect();
            movable.sort_by(|a, b| {
                vm_cpu_use(a)
                    .total_cmp(&vm_cpu_use(b))
                    .then(a.index().cmp(&b.index()))
            });
            for vm in movable {
                let destinations: Vec<u32> = underloaded
                    .iter()
                    .filter(|(_, host)| host.index() != source.index())
                    .filter(|(_, host)| fits(host, &vm, thresholds.high_percent))
                    .map(|(_, host)| host.index())
                    .collect();
                if !destinations.is_empty() {
                    return Some(Migration {
                        vm: vm.index(),
                        destinations,
                    });
                }
            }
        }
        None
    }
}

/// A VM's CPU use in percent of one CPU (0 when not measured).
fn vm_cpu_use(vm: &VmRef<'_>) -> f64 {
    let usage = vm.cpu_usage_percent();
    let usage = if usage.is_finite() {
        usage.max(0.0)
    } else {
        0.0
    };
    usage * vm.vcpus().max(0.0)
}

/// Whether `host` can take `vm` without reaching overload (oVirt's
/// `getValidHosts`): its load plus the VM's share of its threads stays at
/// or under `high_percent`, and its free memory exceeds the VM's.
fn fits(host: &HostRef<'_>, vm: &VmRef<'_>, high_percent: f64) -> bool {
    let predicted = host.cpu_usage_percent() + vm_cpu_use(vm) / threads(host);
    predicted <= high_percent && host.memory_free_mib() - vm.memory_mib() > 0.0
}

sandpiper_guest::export_unit!(EvenDistribution: score, balance);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretch_maps_known_values_onto_one_to_a_thousand() {
        assert_eq!(
            stretch(&[Some(10.0), Some(60.0), None, Some(110.0)]),
            [1.0, 501.0, MAX_COST, MAX_COST]
        );
        assert_eq!(stretch(&[Some(5.0), Some(5.0)]), [1.0, 1.0]);
        assert!(stretch(&[]).is_empty());
    }
}

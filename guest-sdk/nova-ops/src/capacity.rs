//! Nova's legacy resource filters: `RamFilter`, `CoreFilter`, `DiskFilter`
//! and their `Aggregate*` variants, written once for the six units.
//!
//! Nova removed them (Train and Victoria) when Placement took over the
//! capacity checks; an engine without Placement still needs them, and the
//! semantics are their last in-tree versions (`git show
//! 78645e61c6^:nova/scheduler/filters/{ram,core,disk}_filter.py`,
//! reference notes §1.1):
//!
//! * **RAM**: fail when the host's physical memory is below the request
//!   (no instance over-commits against itself); otherwise the limit is
//!   `total × ratio`, the usable memory `limit − (total − free)`, and the
//!   host passes when that covers the request.
//! * **CPU**: a host reporting no CPUs passes (Nova's fail-safe); fail when
//!   the VM has more vCPUs than the host has CPUs (when the limit is
//!   positive); pass when `total × ratio − used` covers the vCPUs.
//! * **Disk**: as RAM, in MiB, with the request `1024 × disk GiB` (our VM
//!   has no separate swap disk).
//!
//! The ratio is the host's own, as in Nova (each compute node reports its
//! `*_allocation_ratio`): here the host's named metric of that name
//! (`cpu_allocation_ratio`, ...), and where a host reports none, the
//! unit's parameter of the same name. The `Aggregate*` variants let the
//! host's aggregates override it with metadata of the same key, the
//! smallest value winning, the host's ratio applying when a value does not
//! parse (Nova logs and does the same).
//! Columns: `memory-total-mib`/`memory-free-mib`, `cpu-threads` (else
//! `cpu-cores`)/`vcpus-used`, `disk-total-gib`/`disk-free-gib`; all usage
//! includes pending placements.

use sandpiper_guest::prelude::*;

use crate::aggregates::{Cast, Override, Setting};
use crate::host_state::{MIB_PER_GIB, vcpus_total};
use crate::params::{CPU_ALLOCATION_RATIO, DISK_ALLOCATION_RATIO, Param, RAM_ALLOCATION_RATIO};

/// Which resource a filter checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Ram,
    Cpu,
    Disk,
}

/// Where the allocation ratio comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RatioFrom {
    /// The unit's parameter only (`RamFilter`).
    Parameter,
    /// Aggregate metadata of the same key, else the parameter
    /// (`AggregateRamFilter`).
    Aggregates,
}

impl Resource {
    /// The ratio parameter (and aggregate metadata key) of this resource.
    pub fn ratio_param(self) -> Param {
        match self {
            Resource::Ram => RAM_ALLOCATION_RATIO,
            Resource::Cpu => CPU_ALLOCATION_RATIO,
            Resource::Disk => DISK_ALLOCATION_RATIO,
        }
    }
}

/// The columns a resource filter reads, fetched once per call.
struct Columns<'a> {
    total: &'a [f64],
    free_or_used: &'a [f64],
    /// Only for CPU: the core count, used when a host reports no threads.
    cores: &'a [f64],
}

/// Runs the filter for `resource` over `candidates`.
#[inline(always)]
pub fn filter(
    cx: &Context<'_>,
    candidates: &[u32],
    resource: Resource,
    from: RatioFrom,
) -> Vec<Rejection> {
    let mut rejections = Rejections::new();
    let param = resource.ratio_param();
    let configured = match cx.params().f64(param.name) {
        Ok(ratio) => ratio,
        Err(error) => {
            rejections.reject_all(candidates, error.to_string());
            return rejections.into_vec();
        }
    };
    let hosts = cx.hosts();
    let columns = match resource {
        Resource::Ram => Columns {
            total: hosts.metric(HostMetric::MemoryTotalMib),
            free_or_used: hosts.metric(HostMetric::MemoryFreeMib),
            cores: &[],
        },
        Resource::Cpu => Columns {
            total: hosts.metric(HostMetric::CpuThreads),
            free_or_used: hosts.metric(HostMetric::VcpusUsed),
            cores: hosts.metric(HostMetric::CpuCores),
        },
        Resource::Disk => Columns {
            total: hosts.metric(HostMetric::DiskTotalGib),
            free_or_used: hosts.metric(HostMetric::DiskFreeGib),
            cores: &[],
        },
    };
    let host_ratios = hosts.named_metric(param.name);
    let mut overrides = match from {
        RatioFrom::Parameter => None,
        RatioFrom::Aggregates => Some(Override::new(
            hosts.labels(HostLabels::AggregateMetadata),
            param.name,
            Cast::Float,
        )),
    };
    let vm = cx.vm();
    let requested = match resource {
        Resource::Ram => vm.memory_mib,
        Resource::Cpu => f64::from(vm.vcpus),
        Resource::Disk => vm.disk_gib * MIB_PER_GIB,
    };
    // The request in the columns' unit: disk columns are in GiB, and
    // scaling every figure by 1,024 (a power of two) changes no
    // comparison, so the loop compares without converting each host.
    let requested_in_columns = match resource {
        Resource::Disk => requested / MIB_PER_GIB,
        Resource::Ram | Resource::Cpu => requested,
    };
    let mut reasons: Vec<(Shortage, Setting, Reason)> = Vec::new();
    for &host in candidates {
        let row = host as usize;
        let (Some(&total), Some(&other)) = (columns.total.get(row), columns.free_or_used.get(row))
        else {
            continue;
        };
        // The ratio as a number: a `Setting` (an enum with a `String` in
        // one variant) made for every host went through memory on each
        // pass, most of these filters' time sandboxed and natively alike.
        // Where only the parameter or the host's own ratio can apply it is
        // made for a rejected host alone.
        let (ratio, overridden) = match overrides.as_mut() {
            None => (host_ratio(&host_ratios, row, configured), None),
            Some(overrides) => {
                let setting = overrides.for_host(host, host_setting(&host_ratios, row, configured));
                (setting.value(), Some(setting))
            }
        };
        let verdict = match resource {
            Resource::Ram | Resource::Disk => fits_space(total, other, ratio, requested_in_columns),
            Resource::Cpu => {
                let cores = columns.cores.get(row).copied().unwrap_or(0.0);
                fits_cpu(
                    vcpus_total(total, cores),
                    other,
                    ratio,
                    requested_in_columns,
                )
            }
        };
        if let Err(shortage) = verdict {
            let setting = overridden.unwrap_or_else(|| host_setting(&host_ratios, row, configured));
            // Hosts failing the same way at the same ratio share one reason,
            // built once: a few distinct strings however many hosts fail.
            let index = match reasons
                .iter()
                .position(|(s, r, _)| *s == shortage && *r == setting)
            {
                Some(index) => index,
                None => {
                    let text = reason(resource, shortage, requested, param.name, &setting);
                    reasons.push((shortage, setting, rejections.reason(text)));
                    reasons.len() - 1
                }
            };
            rejections.reject_for(host, reasons[index].2);
        }
    }
    rejections.into_vec()
}

/// The host's own ratio (its named metric) where it reports one, else the
/// parameter.
#[inline]
pub fn host_setting(host_ratios: &[f64], row: usize, configured: f64) -> Setting {
    match reported_ratio(host_ratios, row) {
        Some(ratio) => Setting::Host(ratio),
        None => Setting::Configured(configured),
    }
}

/// [`host_setting`]'s value alone, for loops over every host: no `Setting`
/// made and dropped a host.
#[inline]
pub fn host_ratio(host_ratios: &[f64], row: usize, configured: f64) -> f64 {
    reported_ratio(host_ratios, row).unwrap_or(configured)
}

/// The ratio host `row` reports, if it reports one (not NaN).
#[inline]
fn reported_ratio(host_ratios: &[f64], row: usize) -> Option<f64> {
    host_ratios.get(row).copied().filter(|r| !r.is_nan())
}

/// Why a host failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shortage {
    /// The request exceeds the host's whole physical capacity.
    Physical,
    /// The request exceeds what is left under the over-commit limit.
    Limit,
}

/// True when `have` covers `need`; false when either is missing (NaN), as
/// Nova's `not have >= need` rejects.
fn covers(have: f64, need: f64) -> bool {
    have >= need
}

/// RAM and disk (MiB): Nova's `BaseRamFilter` / `DiskFilter` body.
fn fits_space(total: f64, free: f64, ratio: f64, requested: f64) -> Result<(), Shortage> {
    if !covers(total, requested) {
        return Err(Shortage::Physical);
    }
    let limit = total * ratio;
    let used = total - free;
    let usable = limit - used;
    if !covers(usable, requested) {
        return Err(Shortage::Limit);
    }
    Ok(())
}

/// CPU: Nova's `BaseCoreFilter` body.
fn fits_cpu(total: f64, used: f64, ratio: f64, requested: f64) -> Result<(), Shortage> {
    // `if not host_state.vcpus_total: return True` (fail safe).
    if total == 0.0 {
        return Ok(());
    }
    let limit = total * ratio;
    if limit > 0.0 && requested > total {
        return Err(Shortage::Physical);
    }
    if limit - used < requested {
        return Err(Shortage::Limit);
    }
    Ok(())
}

/// One reason per kind of failure and ratio, so thousands of rejected
/// hosts share a handful of strings.
fn reason(
    resource: Resource,
    shortage: Shortage,
    requested: f64,
    key: &str,
    setting: &Setting,
) -> String {
    let (what, unit) = match resource {
        Resource::Ram => ("RAM", "MiB"),
        Resource::Cpu => ("CPU", "vCPUs"),
        Resource::Disk => ("disk", "MiB"),
    };
    match shortage {
        Shortage::Physical => {
            format!("needs {requested} {unit} of {what}, more than the host has before over-commit")
        }
        Shortage::Limit => {
            let ratio = match setting {
                Setting::Configured(r) => format!("{key} {r}"),
                Setting::Host(r) => format!("the host's {key} {r}"),
                Setting::Aggregate(r) => format!("aggregate {key} {r}"),
                Setting::Unparsable { value, text } => {
                    format!("{key} {value} (aggregate value {text:?} is not a number)")
                }
            };
            format!("needs {requested} {unit} of {what}, more than is free at {ratio}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nova's deleted `test_ram_filters.py`, `test_core_filters.py` and
    /// `test_disk_filters.py` (at `78645e61c6^`), as plain numbers.
    #[test]
    fn the_legacy_filter_bodies_match_novas_tests() {
        // test_ram_filter_fails_on_memory: free 1023 of 1024, ratio 1.0, 1024 asked.
        assert_eq!(
            fits_space(1024.0, 1023.0, 1.0, 1024.0),
            Err(Shortage::Limit)
        );
        // test_ram_filter_passes: free 1024 of 1024.
        assert_eq!(fits_space(1024.0, 1024.0, 1.0, 1024.0), Ok(()));
        // test_ram_filter_oversubscribe: free -1024 of 2048, ratio 2.0.
        assert_eq!(fits_space(2048.0, -1024.0, 2.0, 1024.0), Ok(()));
        // test_ram_filter_oversubscribe_singe_instance_fails: 1024 asked of 512.
        assert_eq!(
            fits_space(512.0, 512.0, 2.0, 1024.0),
            Err(Shortage::Physical)
        );
        // test_core_filter_passes / fails / fails_safe /
        // single_instance_overcommit_fails.
        assert_eq!(fits_cpu(4.0, 7.0, 2.0, 1.0), Ok(()));
        assert_eq!(fits_cpu(4.0, 8.0, 2.0, 1.0), Err(Shortage::Limit));
        assert_eq!(fits_cpu(0.0, 100.0, 2.0, 1.0), Ok(()));
        assert_eq!(fits_cpu(1.0, 0.0, 2.0, 2.0), Err(Shortage::Physical));
        // test_disk_filter_passes / fails / oversubscribe /
        // oversubscribe_single_instance_fails (MiB; swap folded into the request).
        let gib = MIB_PER_GIB;
        assert_eq!(
            fits_space(13.0 * gib, 11.0 * gib, 1.0, 2.0 * gib + 512.0),
            Ok(())
        );
        assert_eq!(
            fits_space(13.0 * gib, 11.0 * gib, 1.0, 12.0 * gib),
            Err(Shortage::Limit)
        );
        assert_eq!(fits_space(12.0 * gib, gib, 10.0, 7.0 * gib), Ok(()));
        assert_eq!(
            fits_space(12.0 * gib, 11.0 * gib, 10.0, 13.0 * gib),
            Err(Shortage::Physical)
        );
    }
}

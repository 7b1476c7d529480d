//! `CPUOverloaded`: rejects hosts whose CPU has been overloaded for too long.
//!
//! Behaviour from oVirt's `CpuOverloadPolicyUnit` (reference notes §2.1): a
//! host is rejected when its effective shared CPU load is *over*
//! `HighUtilization` (strictly: oVirt's loads are whole percent, and 100%
//! still leaves power on hosts with more than 100 CPUs) **and** it has been
//! over the threshold for at least `CpuOverCommitDurationMinutes`. The load
//! is oVirt's `HostCpuLoadHelper` figure without pending placements:
//! `ceil((usage% × CPUs + SPM share) / CPUs)`, CPUs being cores, or threads
//! with `CountThreadsAsCores`. A host without CPU statistics (no core count
//! or no usage figure) is dropped, as oVirt drops it.
//!
//! Data: `cpu-cores`, `cpu-threads`, `cpu-usage-percent` minus
//! `cpu-pending-percent` (oVirt's filter does not count pending load), the
//! `spm` flag and `cpu-overloaded-minutes` (oVirt's
//! `cpuOverCommitTimestamp`, as minutes since; 0 when not overloaded).
//!
//! Defaults are oVirt's fallbacks for this unit: `HighUtilization` 90
//! (`HighUtilizationForScheduling`; oVirt's built-in policies set 80) and
//! `CpuOverCommitDurationMinutes` 2. `CountThreadsAsCores` is a cluster
//! setting in oVirt and a parameter here.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::cpu::{CpuColumns, Pending};
use sandpiper_ovirt::params::{
    self, COUNT_THREADS_AS_CORES, CPU_OVER_COMMIT_DURATION_MINUTES, HIGH_UTILIZATION,
};
use sandpiper_ovirt::value;

/// oVirt's `HighUtilizationForScheduling`: this unit's fallback threshold.
pub const DEFAULT_HIGH_UTILIZATION: &str = "90";

/// The `CPUOverloaded` filter.
pub struct CpuOverloaded;

impl Unit for CpuOverloaded {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CPUOverloaded",
            "Rejects hosts whose CPU load is over HighUtilization and has been for \
             CpuOverCommitDurationMinutes, and hosts without CPU statistics.",
        )
        .with_param(params::high_utilization(DEFAULT_HIGH_UTILIZATION))
        .with_param(params::cpu_over_commit_duration_minutes())
        .with_param(params::count_threads_as_cores())
        .per_host()
    }
}

impl Filter for CpuOverloaded {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let params = cx.params();
        let settings = params.f64(HIGH_UTILIZATION).and_then(|high| {
            Ok((
                high,
                params.f64(CPU_OVER_COMMIT_DURATION_MINUTES)?,
                params.bool(COUNT_THREADS_AS_CORES)?,
            ))
        });
        let (high, duration, threads_as_cores) = match settings {
            Ok(settings) => settings,
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let hosts = cx.hosts();
        let cpu = CpuColumns::new(&hosts, Pending::Excluded);
        let minutes = hosts.metric(HostMetric::CpuOverloadedMinutes);
        let overloaded = rejections.reason(format!(
            "CPU overloaded: over {high}% for at least {duration} minutes (HighUtilization, \
             CpuOverCommitDurationMinutes)"
        ));
        for host in hosts.candidates(candidates) {
            let h = host.index();
            if !cpu.has_statistics(h) {
                rejections.reject(h, "reports no CPU statistics");
                continue;
            }
            // Only a host over the threshold for long enough can be
            // rejected, so only such a host's full load (threads, pending
            // part, SPM share) is computed. `over_for > 0` stands for
            // oVirt's "timestamp is set".
            let over_for = value(minutes, h);
            let overloaded_long_enough = over_for > 0.0 && over_for >= duration;
            if !overloaded_long_enough {
                continue;
            }
            match cpu.load(h, threads_as_cores) {
                None => {
                    rejections.reject(h, "reports no CPU statistics");
                }
                Some(load) if load.percent() > high => {
                    rejections.reject_for(h, overloaded);
                }
                Some(_) => {}
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(CpuOverloaded: filter);

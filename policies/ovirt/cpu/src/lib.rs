//! `CPU`: rejects hosts with fewer CPUs than the VM has vCPUs.
//!
//! Behaviour from oVirt's `CPUPolicyUnit` (reference notes §2.1): a host
//! must have at least as many CPUs as the VM has vCPUs, counting physical
//! cores, or hardware threads when the cluster sets `CountThreadsAsCores`.
//!
//! Where we differ from oVirt, and why:
//! * oVirt also subtracts CPUs exclusively pinned to other VMs and the
//!   largest shared VM's vCPUs; our inventory has no pinning data, so this
//!   is the plain capacity check.
//! * `CountThreadsAsCores` is a cluster setting in oVirt; here it is the
//!   unit's parameter. A host that reports no thread count falls back to its
//!   core count rather than being rejected, since threads are never fewer
//!   than cores.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::params::{self, COUNT_THREADS_AS_CORES};
use sandpiper_ovirt::value;

/// The `CPU` filter.
pub struct CpuFilter;

impl Unit for CpuFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CPU",
            "Rejects hosts with fewer CPU cores (or threads, when CountThreadsAsCores is \
             true) than the VM has vCPUs.",
        )
        .with_param(params::count_threads_as_cores())
        .per_host()
    }
}

impl Filter for CpuFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let threads_as_cores = match cx.params().bool(COUNT_THREADS_AS_CORES) {
            Ok(value) => value,
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let vcpus = f64::from(cx.vm().vcpus);
        let hosts = cx.hosts();
        // Read as slices, fetched once: a per-host accessor looks its
        // column up again for every value. The thread column is only
        // fetched when threads are counted.
        let cores = hosts.metric(HostMetric::CpuCores);
        let threads = threads_as_cores.then(|| hosts.metric(HostMetric::CpuThreads));
        for &host in candidates {
            // An index past the snapshot is no host: skipped, as
            // `Hosts::candidates` skips it.
            if hosts.get(host).is_none() {
                continue;
            }
            let (cpus, unit) = host_cpus(cores, threads, host);
            // `cpus > 0` is false for a missing (NaN) count too.
            if cpus.is_nan() || cpus <= 0.0 {
                rejections.reject(host, "reports no CPU cores");
            } else if cpus < vcpus {
                // A template and its figures: the host writes the sentence
                // (each figure as `{}` writes an f64), so the unit formats
                // no float for the hosts it rejects.
                let template = match unit {
                    Counted::Threads => "needs {} vCPUs, has {} threads",
                    Counted::Cores => "needs {} vCPUs, has {} cores",
                };
                rejections.reject_with(host, template, &[vcpus, cpus]);
            }
        }
        rejections.into_vec()
    }
}

/// What a host's CPU count counted.
enum Counted {
    Cores,
    Threads,
}

/// Host `host`'s CPU count and what was counted: its threads when they are
/// counted (`threads`) and it reports some, else its cores.
fn host_cpus(cores: &[f64], threads: Option<&[f64]>, host: u32) -> (f64, Counted) {
    if let Some(threads) = threads {
        let threads = value(threads, host);
        if threads > 0.0 {
            return (threads, Counted::Threads);
        }
    }
    (value(cores, host), Counted::Cores)
}

sandpiper_guest::export_unit!(CpuFilter: filter);

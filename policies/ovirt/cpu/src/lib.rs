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
        for host in cx.hosts().candidates(candidates) {
            let (cpus, unit) = host_cpus(&host, threads_as_cores);
            // `cpus > 0` is false for a missing (NaN) count too.
            if cpus.is_nan() || cpus <= 0.0 {
                rejections.reject(host.index(), "reports no CPU cores");
            } else if cpus < vcpus {
                rejections.reject(
                    host.index(),
                    format!("needs {vcpus} vCPUs, has {cpus} {unit}"),
                );
            }
        }
        rejections.into_vec()
    }
}

/// The host's CPU count and what was counted.
fn host_cpus(host: &HostRef<'_>, threads_as_cores: bool) -> (f64, &'static str) {
    // The thread column is only fetched when threads are counted.
    if threads_as_cores {
        let threads = host.cpu_threads();
        if threads > 0.0 {
            return (threads, "threads");
        }
    }
    (host.cpu_cores(), "cores")
}

sandpiper_guest::export_unit!(CpuFilter: filter);

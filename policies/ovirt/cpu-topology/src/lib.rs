//! `CPUTopology`: rejects hosts whose CPU topology cannot serve the VM's CPU
//! pinning policy.
//!
//! Behaviour from oVirt's `CpuTopologyPolicyUnit` (reference notes §2.1),
//! one of oVirt's mandatory filters:
//! * a host that does not report its sockets, cores and threads is dropped;
//! * `resize_and_pin_numa`: the host needs more than one core per socket
//!   (whole cores: `cores / sockets`) and exactly one NUMA node per socket;
//! * `dedicated`: the host's threads per core (`threads / cores`) must be at
//!   least the VM's, because all vThreads of one vCore are pinned to one
//!   physical core;
//! * any other policy: no topology constraint.
//!
//! Encodings (our VM and host records have no pinning or NUMA fields):
//! * the VM's CPU pinning policy is its extra spec
//!   `ovirt:cpu_pinning_policy` = `none` (also when absent), `manual`,
//!   `resize_and_pin_numa`, `dedicated` or `isolate_threads` (oVirt's
//!   `CpuPinningPolicy`, lower case), or without it the hardware
//!   `cpu_policy` and `thread_policy` (`sandpiper_ovirt::pinning`). Nova's
//!   filters ignore the `ovirt:` scope. Any other value, or `mixed`,
//!   rejects every host, naming it;
//! * the host's NUMA node count is the number of its NUMA cells (WIT
//!   0.2.0), or when it reports none its capability `numa_nodes` (absent:
//!   none, so `resize_and_pin_numa` fails there, as in oVirt when a host
//!   reports no NUMA nodes).
//!
//! Data: `cpu-sockets`, `cpu-cores`, `cpu-threads`, `numa-cells`, capability
//! `numa_nodes`, the VM's `cpu-threads-per-core`, extra specs and hardware
//! `cpu_policy`, `thread_policy`.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::numa::node_count;
use sandpiper_ovirt::pinning::PinningPolicy;
use sandpiper_ovirt::value;

/// The host capability carrying its NUMA node count.
pub const NUMA_NODES_CAPABILITY: &str = "numa_nodes";

/// oVirt's `CpuPinningPolicy` values that constrain the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Unconstrained,
    ResizeAndPinNuma,
    Dedicated,
}

impl Policy {
    /// The VM's policy (`sandpiper_ovirt::pinning`); `Err` with a sentence
    /// when it is none of oVirt's.
    fn of(vm: &Vm) -> Result<Policy, String> {
        Ok(match PinningPolicy::of(vm)? {
            PinningPolicy::None | PinningPolicy::Manual | PinningPolicy::IsolateThreads => {
                Policy::Unconstrained
            }
            PinningPolicy::ResizeAndPinNuma => Policy::ResizeAndPinNuma,
            PinningPolicy::Dedicated => Policy::Dedicated,
        })
    }
}

/// The `CPUTopology` filter.
pub struct CpuTopology;

impl Unit for CpuTopology {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CPUTopology",
            "Rejects hosts without a known CPU topology, and hosts whose topology cannot serve \
             the VM's resize-and-pin-NUMA or dedicated CPU pinning policy.",
        )
        .per_host()
    }
}

impl Filter for CpuTopology {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        let policy = match Policy::of(vm) {
            Ok(policy) => policy,
            Err(reason) => {
                rejections.reject_all(candidates, reason);
                return rejections.into_vec();
            }
        };
        let hosts = cx.hosts();
        let sockets = hosts.metric(HostMetric::CpuSockets);
        let cores = hosts.metric(HostMetric::CpuCores);
        let threads = hosts.metric(HostMetric::CpuThreads);
        let vm_threads_per_core = f64::from(vm.cpu_threads_per_core);
        let dedicated = format!(
            "fewer CPU threads per core than the VM's {vm_threads_per_core} (dedicated pinning)"
        );
        for host in hosts.candidates(candidates) {
            let h = host.index();
            let (sockets, cores, threads) = (value(sockets, h), value(cores, h), value(threads, h));
            // `> 0` is false for NaN too: unknown counts.
            let known = sockets > 0.0 && cores > 0.0 && threads > 0.0;
            if !known {
                rejections.reject(h, "reports no CPU topology (sockets, cores, threads)");
                continue;
            }
            match policy {
                Policy::Unconstrained => {}
                Policy::ResizeAndPinNuma => {
                    if (cores / sockets).trunc() <= 1.0 {
                        rejections.reject(h, "one core per socket; resize-and-pin-NUMA needs more");
                    } else if numa_nodes(cx.inventory(), &host) != Some(sockets) {
                        rejections.reject(
                            h,
                            "NUMA nodes differ from sockets; resize-and-pin-NUMA needs one per socket",
                        );
                    }
                }
                Policy::Dedicated => {
                    if (threads / cores).trunc() < vm_threads_per_core {
                        rejections.reject(h, &dedicated);
                    }
                }
            }
        }
        rejections.into_vec()
    }
}

/// The host's NUMA node count: its NUMA cells when it reports any (WIT
/// 0.2.0), else its `numa_nodes` capability.
fn numa_nodes(inventory: &Inventory, host: &HostRef<'_>) -> Option<f64> {
    let cells = node_count(inventory, host.index());
    if cells > 0 {
        return Some(cells as f64);
    }
    host.capability(NUMA_NODES_CAPABILITY)
        .and_then(|nodes| nodes.trim().parse::<f64>().ok())
}

sandpiper_guest::export_unit!(CpuTopology: filter);

//! `CPU for high performance VMs`: prefers hosts whose CPU topology holds
//! the VM's, and for exclusively pinned VMs the hosts where their pinning
//! spans the fewest sockets and cores.
//!
//! Behaviour from oVirt's `HighPerformanceCpuPolicyUnit` (reference notes
//! §2.2), a weight of every built-in oVirt policy (factor 4):
//! * it judges only VMs with host-specific CPU configuration: of type high
//!   performance, with CPU passthrough, a manual CPU pinning, an exclusive
//!   pinning policy, or a guest NUMA cell pinned to host nodes; any other
//!   VM weighs every host 1;
//! * an exclusively pinned VM (`dedicated`, `isolate_threads`) on a host
//!   reporting its CPUs: `1000 × sockets + cores` its proposed pinning uses
//!   (oVirt's `updatePhysicalCpuAllocations`, `sandpiper_ovirt::pinning`);
//! * otherwise 1 when the VM's sockets, cores per socket and threads per
//!   core are each at most the host's (`cores / sockets`, `threads /
//!   cores`, whole numbers), else 1000;
//! * then stretched onto 1..1000 (`stretchScores`).
//!
//! Differs: where oVirt's allocation finds no pinning (a host `CpuPinning`
//! would have rejected) oVirt fails on a null list, and where a host
//! reports no sockets or cores it divides by zero; such hosts weigh 1000
//! here, unstretched (oVirt's weight for a host it cannot judge).
//!
//! Encodings: VM type from the extra spec `ovirt:vm_type` =
//! `high_performance`; CPU passthrough is the CPU model
//! `host-passthrough`; pinning as `sandpiper_ovirt::pinning`.
//!
//! Data: `cpu-sockets`, `cpu-cores`, `cpu-threads`, `numa-cells`,
//! `numa-cell-cpus`, pcpu flags, cell `memory-free-mib`; VM topology,
//! extra specs, hardware `cpu_model`, `cpu_policy`, `thread_policy`,
//! `numa_cells`.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::hardware::{VM_TYPE_SPEC, is_high_performance, uses_cpu_passthrough};
use sandpiper_ovirt::numa::any_cell_pinned;
use sandpiper_ovirt::pinning::{
    CPU_PINNING_PREFIX, ExclusiveAllocator, HostCpus, PinningPolicy, VmTopology, VnumaNeed,
    cell_free_mib, manual_pinning,
};
use sandpiper_ovirt::scores::stretch;
use sandpiper_ovirt::{MAX_SCHEDULER_WEIGHT, value};

/// The `CPU for high performance VMs` weight.
pub struct HighPerformanceCpu;

impl Unit for HighPerformanceCpu {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CPU for high performance VMs",
            "For VMs with host-specific CPU settings, prefers hosts with at least the VM's \
             sockets, cores and threads, and for exclusively pinned VMs the hosts where the \
             pinning spans the fewest sockets and cores.",
        )
        .applies_to([
            RequestProperty::CpuPinning,
            RequestProperty::NumaTopology,
            RequestProperty::CpuModel,
            RequestProperty::ExtraSpec(CPU_PINNING_PREFIX.to_owned()),
            RequestProperty::ExtraSpec(VM_TYPE_SPEC.to_owned()),
        ])
    }
}

impl Score for HighPerformanceCpu {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let vm = cx.vm();
        let policy = PinningPolicy::of(vm).unwrap_or(PinningPolicy::None);
        let manual = manual_pinning(vm).map(|p| !p.is_empty()).unwrap_or(false);
        let enabled = is_high_performance(vm)
            || uses_cpu_passthrough(vm)
            || manual
            || policy.is_exclusive()
            || any_cell_pinned(&vm.hardware.numa_cells);
        if !enabled {
            return Scores::new(vec![1.0; candidates.len()]);
        }
        let topology = VmTopology::of(vm);
        let vnuma = VnumaNeed::of(vm);
        let inventory = cx.inventory();
        let hosts = cx.hosts();
        let sockets = hosts.metric(HostMetric::CpuSockets);
        let cores = hosts.metric(HostMetric::CpuCores);
        let threads = hosts.metric(HostMetric::CpuThreads);
        let cell_free: &[f64] = if policy.is_exclusive() && vnuma.is_some() {
            cell_free_mib(inventory)
        } else {
            &[]
        };
        let host_cpus = HostCpus::new(inventory);
        let mut allocator = ExclusiveAllocator::new();
        let mut ids = Vec::new();
        let raw: Vec<Option<f64>> = candidates
            .iter()
            .map(|&host| {
                if policy.is_exclusive() && host_cpus.iter(host).next().is_some() {
                    let cpus = host_cpus.iter(host);
                    let pinned = allocator.allocate(cpus, policy, topology, vnuma, cell_free)?;
                    let sockets = distinct(&mut ids, pinned.iter().map(|c| c.socket));
                    let cores = distinct(&mut ids, pinned.iter().map(|c| c.core));
                    return Some(1000.0 * sockets as f64 + cores as f64);
                }
                let (s, c, t) = (
                    value(sockets, host),
                    value(cores, host),
                    value(threads, host),
                );
                // No sockets or cores (or NaN, which fails every comparison).
                if !(s >= 1.0 && c >= 1.0 && t >= 0.0) {
                    return None;
                }
                let cores_per_socket = (c / s).trunc();
                let threads_per_core = (t / c).trunc();
                let fits = f64::from(topology.sockets) <= s
                    && f64::from(topology.cores_per_socket) <= cores_per_socket
                    && f64::from(topology.threads_per_core) <= threads_per_core;
                Some(if fits { 1.0 } else { MAX_SCHEDULER_WEIGHT })
            })
            .collect();
        Scores::new(stretch(&raw))
    }
}

/// How many distinct values `values` has, counted in `scratch` (kept
/// from host to host).
fn distinct(scratch: &mut Vec<u32>, values: impl Iterator<Item = u32>) -> usize {
    scratch.clear();
    scratch.extend(values);
    scratch.sort_unstable();
    scratch.dedup();
    scratch.len()
}

sandpiper_guest::export_unit!(HighPerformanceCpu: score);

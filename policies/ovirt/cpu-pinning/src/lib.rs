//! `CpuPinning`: rejects hosts that cannot satisfy the VM's CPU pinning.
//!
//! Behaviour from oVirt's `CpuPinningPolicyUnit` (reference notes §2.1),
//! one of oVirt's mandatory filters:
//! * a VM without a pinning policy passes every host;
//! * `dedicated` / `isolate_threads` (exclusive): a host reporting no CPU
//!   topology is rejected, and so is one where oVirt's allocation
//!   (`VdsCpuUnitPinningHelper.updatePhysicalCpuAllocations`, see
//!   `sandpiper_ovirt::pinning`) finds no CPUs for the VM's virtual
//!   sockets, cores and threads among the free ones;
//! * `resize_and_pin_numa`: a host with any exclusively pinned CPU is
//!   rejected (the VM would be resized over the whole host);
//! * a manual pinning (or a resize-and-pin VM's pinning, when set): every
//!   host CPU it names must be online (in one of the host's NUMA cells) and
//!   not exclusively pinned; the reason lists those that are not.
//!
//! Encodings: `sandpiper_ovirt::pinning` (policy from the extra spec
//! `ovirt:cpu_pinning_policy` or the hardware `cpu_policy` and
//! `thread_policy`, pinning string from `ovirt:cpu_pinning`). An unknown
//! policy, `mixed`, or a malformed pinning string rejects every host,
//! naming it.
//!
//! Data: `numa-cells`, `numa-cell-cpus`, pcpu flags `dedicated` and
//! `pinned`, cell `memory-free-mib` (vNUMA VMs); VM topology, extra specs,
//! hardware `cpu_policy`, `thread_policy`, `numa_cells`.

use std::collections::BTreeSet;

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::pinning::{
    CPU_PINNING_PREFIX, ExclusiveAllocator, HostCpus, PinningPolicy, VmTopology, VnumaNeed,
    cell_free_mib, manual_pinning,
};

/// How many CPUs a reason names before "and N more".
const LISTED: usize = 16;

/// The `CpuPinning` filter.
pub struct CpuPinning;

impl Unit for CpuPinning {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CpuPinning",
            "Rejects hosts that cannot give a dedicated VM its exclusive CPUs, hosts with \
             exclusively pinned CPUs for a resize-and-pin VM, and hosts missing a CPU a \
             manual pinning names.",
        )
        .applies_to([
            RequestProperty::CpuPinning,
            RequestProperty::ExtraSpec(CPU_PINNING_PREFIX.to_owned()),
        ])
        .per_host()
    }
}

impl Filter for CpuPinning {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        let policy = match PinningPolicy::of(vm) {
            Ok(policy) => policy,
            Err(reason) => {
                rejections.reject_all(candidates, reason);
                return rejections.into_vec();
            }
        };
        if policy == PinningPolicy::None {
            return rejections.into_vec();
        }
        let pinning = match manual_pinning(vm) {
            Ok(pinning) => pinning,
            Err(reason) => {
                rejections.reject_all(candidates, reason);
                return rejections.into_vec();
            }
        };
        let exclusive = policy.is_exclusive();
        // The host CPUs the VM is pinned to by hand, ascending, once each.
        let pinned_cpus: Vec<u32> = if exclusive {
            Vec::new()
        } else {
            let cpus: BTreeSet<u32> = pinning.values().flatten().copied().collect();
            cpus.into_iter().collect()
        };
        let topology = VmTopology::of(vm);
        let vnuma = VnumaNeed::of(vm);
        let inventory = cx.inventory();
        let cell_free: &[f64] = if exclusive && vnuma.is_some() {
            cell_free_mib(inventory)
        } else {
            &[]
        };
        let no_topology = "reports no CPU topology (NUMA cells with CPUs) to pin the VM's CPUs on";
        // Templates: the figures vary by host, the sentence does not.
        let cannot_pin = format!(
            "cannot pin the VM's {} vCPUs ({} sockets x {} cores x {} threads{}) \
             exclusively: {{}} of its {{}} dedicated CPUs are free",
            topology.cpus(),
            topology.sockets,
            topology.cores_per_socket,
            topology.threads_per_core,
            if policy == PinningPolicy::IsolateThreads {
                ", whole cores"
            } else {
                ""
            },
        );
        let already_pinned = "has {} exclusively pinned CPUs; resize-and-pin-NUMA needs none";
        // Per set of CPUs a host lacks, one sentence naming them.
        let mut unavailable: Sentences<Vec<u32>> = Sentences::new();
        let mut host_cpus = HostCpus::new(inventory);
        let mut allocator = ExclusiveAllocator::new();
        // The pinned CPUs' span, for skipping the host's other CPUs cheaply
        // (unused when there are none).
        let pinned_range = match (pinned_cpus.first(), pinned_cpus.last()) {
            (Some(&lo), Some(&hi)) => lo..=hi,
            _ => 0..=0,
        };
        // Per CPU of `pinned_cpus`: whether the host has it unpinned.
        let mut found: Vec<bool> = Vec::new();
        let mut missing: Vec<u32> = Vec::new();
        for &host in candidates {
            if exclusive {
                // Read from the columns as allocated; the host's list is
                // built only to say why it failed.
                if host_cpus.iter(host).next().is_none() {
                    rejections.reject(host, no_topology);
                } else if allocator
                    .allocate(host_cpus.iter(host), policy, topology, vnuma, cell_free)
                    .is_none()
                {
                    let cpus = host_cpus.of(host);
                    let free = cpus.iter().filter(|c| c.dedicated && !c.pinned).count();
                    let dedicated = cpus.iter().filter(|c| c.dedicated).count();
                    rejections.reject_with(host, &cannot_pin, &[free as f64, dedicated as f64]);
                }
                // An exclusive policy pins no CPUs by hand and is not
                // resize-and-pin: nothing else to check.
                continue;
            }
            if policy == PinningPolicy::ResizeAndPinNuma {
                let taken = host_cpus.iter(host).filter(|c| c.pinned).count();
                if taken > 0 {
                    rejections.reject_with(host, already_pinned, &[taken as f64]);
                    continue;
                }
            }
            if !pinned_cpus.is_empty() {
                // One walk over the host's CPUs (`for_each`: as plain loops).
                found.clear();
                found.resize(pinned_cpus.len(), false);
                host_cpus.iter(host).for_each(|cpu| {
                    // Most of a host's CPUs are outside the pinned range.
                    if cpu.pinned || !pinned_range.contains(&cpu.cpu) {
                        return;
                    }
                    if let Ok(at) = pinned_cpus.binary_search(&cpu.cpu) {
                        found[at] = true;
                    }
                });
                missing.clear();
                missing.extend(
                    (pinned_cpus.iter().zip(&found))
                        .filter(|&(_, &found)| !found)
                        .map(|(&cpu, _)| cpu),
                );
                if !missing.is_empty() {
                    let reason = unavailable.get(&missing[..], || {
                        let missing: Vec<String> = missing.iter().map(u32::to_string).collect();
                        let shown: Vec<&str> = missing.iter().map(String::as_str).collect();
                        format!(
                            "host CPUs {} the VM is pinned to are offline, missing or \
                             exclusively pinned",
                            sandpiper_ovirt::hardware::list(&shown, LISTED)
                        )
                    });
                    rejections.reject(host, reason);
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(CpuPinning: filter);

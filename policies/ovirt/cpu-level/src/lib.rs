//! `CPU-Level`: rejects hosts whose CPU lacks what the VM's CPU model
//! needs.
//!
//! Behaviour from oVirt's `CpuLevelFilterPolicyUnit` (reference notes §2.1),
//! one of oVirt's mandatory filters:
//! * a VM without a CPU model of its own runs on the cluster's CPU, which
//!   every host of the cluster has: no host is rejected;
//! * otherwise the host's CPU flags must include every flag of the VM's
//!   CPU (`missingClusterCpuFlags`); the rejection lists the missing ones,
//!   sorted, as oVirt's message does;
//! * CPU passthrough: a VM starting may run anywhere; a running one may
//!   only migrate to hosts having every flag it started with.
//!
//! Encodings: oVirt resolves the VM's CPU name to its flags engine side
//! (`CpuFlagsManagerHandler`), so the engine sends them resolved as
//! `required_cpu_flags`. The model itself (`cpu_model`) is one more
//! requirement: VDSM reports a `model_<name>` flag for every libvirt CPU
//! model a host can run, so the host needs the flag `model_<cpu_model>`,
//! or to be of that very model (its `cpu-model`). CPU passthrough is the
//! model `host-passthrough`, with the flags the VM started with as
//! `required_cpu_flags`. `forbidden_cpu_flags` (oVirt has none) are
//! honoured too: a host having one is rejected.
//!
//! Data: host `cpu-flags`, `cpu-model`; VM hardware `cpu_model`,
//! `required_cpu_flags`, `forbidden_cpu_flags`, `current-host`.

use sandpiper_guest::collections::HashSet;

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::hardware::{host_set, list, uses_cpu_passthrough};

/// How many missing flags a reason names before "and N more".
const LISTED: usize = 8;

/// The `CPU-Level` filter.
pub struct CpuLevel;

impl Unit for CpuLevel {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CPU-Level",
            "Rejects hosts whose CPU lacks a flag of the VM's CPU model; a VM with CPU \
             passthrough starts anywhere and migrates only to hosts with all its flags.",
        )
        .applies_to([RequestProperty::CpuModel, RequestProperty::CpuFlags])
        .per_host()
    }
}

impl Filter for CpuLevel {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        let hardware = &vm.hardware;
        let passthrough = uses_cpu_passthrough(vm);
        if passthrough && vm.current_host.is_none() {
            return rejections.into_vec();
        }
        let model = hardware.cpu_model.trim();
        let model_flag = (!passthrough && !model.is_empty()).then(|| format!("model_{model}"));
        let mut required: Vec<&str> = hardware
            .required_cpu_flags
            .iter()
            .map(String::as_str)
            .collect();
        required.sort_unstable();
        required.dedup();
        if required.is_empty() && model_flag.is_none() && hardware.forbidden_cpu_flags.is_empty() {
            return rejections.into_vec();
        }
        for host in cx.hosts().candidates(candidates) {
            let flags: HashSet<&str> = host_set(&host, HostLabels::CpuFlags).into_iter().collect();
            let mut missing: Vec<&str> = required
                .iter()
                .copied()
                .filter(|flag| !flags.contains(flag))
                .collect();
            if let Some(model_flag) = &model_flag
                && host.text(HostText::CpuModel) != model
                && !flags.contains(model_flag.as_str())
            {
                missing.push(model_flag);
                missing.sort_unstable();
            }
            if !missing.is_empty() {
                let what = if passthrough {
                    "the flags the VM started with (CPU passthrough)"
                } else {
                    "the VM's CPU"
                };
                rejections.reject(
                    host.index(),
                    format!(
                        "CPU lacks {} flag(s) of {what}: {}",
                        missing.len(),
                        list(&missing, LISTED)
                    ),
                );
                continue;
            }
            let mut present: Vec<&str> = hardware
                .forbidden_cpu_flags
                .iter()
                .map(String::as_str)
                .filter(|flag| flags.contains(flag))
                .collect();
            if !present.is_empty() {
                present.sort_unstable();
                rejections.reject(
                    host.index(),
                    format!("CPU has flag(s) the VM forbids: {}", list(&present, LISTED)),
                );
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(CpuLevel: filter);

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

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::hardware::{HostSets, list, uses_cpu_passthrough};

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
        let mut flags = HostSets::new(&cx.hosts(), HostLabels::CpuFlags);
        let required: Vec<(&str, Option<u32>)> =
            required.into_iter().map(|f| (f, flags.id(f))).collect();
        let model_flag = model_flag.as_deref().map(|f| (f, flags.id(f)));
        let forbidden: Vec<(&str, Option<u32>)> = hardware
            .forbidden_cpu_flags
            .iter()
            .map(|f| (f.as_str(), flags.id(f)))
            .collect();
        let what = if passthrough {
            "the flags the VM started with (CPU passthrough)"
        } else {
            "the VM's CPU"
        };
        let mut lacking: Sentences<Vec<&str>, Reason> = Sentences::new();
        let mut forbidding: Sentences<Vec<&str>, Reason> = Sentences::new();
        let mut listed: Vec<&str> = Vec::new();
        for host in cx.hosts().candidates(candidates) {
            flags.load(host.index());
            listed.clear();
            listed.extend(
                required
                    .iter()
                    .filter(|(_, id)| !flags.has(*id))
                    .map(|(f, _)| *f),
            );
            if let Some((model_flag, id)) = model_flag
                && host.text(HostText::CpuModel) != model
                && !flags.has(id)
            {
                listed.push(model_flag);
                listed.sort_unstable();
            }
            if !listed.is_empty() {
                let reason = *lacking.get(listed.as_slice(), || {
                    rejections.reason(format!(
                        "CPU lacks {} flag(s) of {what}: {}",
                        listed.len(),
                        list(&listed, LISTED)
                    ))
                });
                rejections.reject_for(host.index(), reason);
                continue;
            }
            listed.extend(
                forbidden
                    .iter()
                    .filter(|(_, id)| flags.has(*id))
                    .map(|(f, _)| *f),
            );
            if !listed.is_empty() {
                listed.sort_unstable();
                let reason = *forbidding.get(listed.as_slice(), || {
                    rejections.reason(format!(
                        "CPU has flag(s) the VM forbids: {}",
                        list(&listed, LISTED)
                    ))
                });
                rejections.reject_for(host.index(), reason);
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(CpuLevel: filter);

//! `Emulated-Machine`: rejects hosts that do not support the VM's emulated
//! machine type.
//!
//! Behaviour from oVirt's `EmulatedMachineFilterPolicyUnit` (reference
//! notes §2.1): a VM without a machine type of its own uses the cluster's,
//! which every host supports (no host rejected); otherwise the host's
//! supported emulated machines must contain it exactly. A host reporting
//! no emulated machines is dropped, as in oVirt (which drops it without a
//! message; here the reason says so).
//!
//! Data: host `emulated-machines`; VM hardware `machine_type`.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::hardware::HostSets;

/// The `Emulated-Machine` filter.
pub struct EmulatedMachine;

impl Unit for EmulatedMachine {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Emulated-Machine",
            "Rejects hosts whose emulator does not support the VM's machine type.",
        )
        .applies_to([RequestProperty::MachineType])
        .per_host()
    }
}

impl Filter for EmulatedMachine {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let wanted = cx.vm().hardware.machine_type.trim();
        if wanted.is_empty() {
            return rejections.into_vec();
        }
        let none = rejections.reason(format!(
            "reports no emulated machines; the VM needs {wanted}"
        ));
        let other = rejections.reason(format!(
            "does not support the VM's emulated machine {wanted}"
        ));
        let machines = HostSets::new(&cx.hosts(), HostLabels::EmulatedMachines);
        let wanted = machines.id(wanted);
        for host in cx.hosts().candidates(candidates) {
            let row = machines.row(host.index());
            if row.is_empty() {
                rejections.reject_for(host.index(), none);
            } else if !wanted.is_some_and(|id| row.contains(&id)) {
                rejections.reject_for(host.index(), other);
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(EmulatedMachine: filter);

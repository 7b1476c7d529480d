//! `ClusterInMaintenance`: in a cluster under maintenance, only highly
//! available VMs may start.
//!
//! Behaviour from oVirt's `ClusterInMaintenanceFilterPolicyUnit` (reference
//! notes §2.1), the first filter of oVirt's `cluster_maintenance` policy:
//! a highly available VM passes everywhere, a running VM may still migrate,
//! and any other VM may start nowhere.
//!
//! Data: the VM's `highly-available` flag (oVirt's `autoStartup`) and
//! `current-host`. Reads no host column.

use sandpiper_guest::prelude::*;

/// The `ClusterInMaintenance` filter.
pub struct ClusterInMaintenance;

impl Unit for ClusterInMaintenance {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "ClusterInMaintenance",
            "Rejects every host for a VM start unless the VM is highly available; running VMs \
             may still migrate.",
        )
        .per_host()
    }
}

impl Filter for ClusterInMaintenance {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let vm = cx.vm();
        let mut rejections = Rejections::new();
        if !vm.highly_available && vm.current_host.is_none() {
            rejections.reject_all(
                candidates,
                "cluster in maintenance: only highly available VMs may start",
            );
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(ClusterInMaintenance: filter);

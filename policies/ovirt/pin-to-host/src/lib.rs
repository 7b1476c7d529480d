//! `PinToHost`: keeps a pinned VM on the hosts it is pinned to.
//!
//! Behaviour from oVirt's `PinToHostPolicyUnit` (reference notes §2.1), one
//! of oVirt's mandatory filters. Only a VM whose migration mode is "pinned
//! to host" is constrained:
//! * with dedicated hosts, every other host is rejected;
//! * with none, a VM that is not running may start anywhere, and a running
//!   one (a migration) may go nowhere.
//!
//! Data: the VM's `pinned` flag (oVirt's `MigrationSupport.PINNED_TO_HOST`),
//! `dedicated-hosts` (oVirt's `dedicatedVmForVdsList`) and `current-host`.
//! Reads no host column.

use sandpiper_guest::prelude::*;

/// The `PinToHost` filter.
pub struct PinToHost;

impl Unit for PinToHost {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "PinToHost",
            "Rejects every host a VM pinned to its hosts is not pinned to; a running pinned VM \
             without dedicated hosts cannot move at all.",
        )
        .applies_to([
            RequestProperty::DedicatedHosts,
            RequestProperty::CurrentHost,
        ])
        .per_host()
    }
}

impl Filter for PinToHost {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let vm = cx.vm();
        let mut rejections = Rejections::new();
        if !vm.pinned {
            return rejections.into_vec();
        }
        if vm.dedicated_hosts.is_empty() {
            if vm.current_host.is_some() {
                rejections.reject_all(candidates, "the VM is pinned to its current host");
            }
            return rejections.into_vec();
        }
        let mut dedicated = vm.dedicated_hosts.clone();
        dedicated.sort_unstable();
        for &host in candidates {
            if dedicated.binary_search(&host).is_err() {
                rejections.reject(host, "not a host the VM is pinned to");
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(PinToHost: filter);

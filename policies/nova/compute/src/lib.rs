//! `ComputeFilter`: rejects hosts whose compute service is disabled or not
//! up.
//!
//! Behaviour from Nova's `nova/scheduler/filters/compute_filter.py`
//! (reference notes §1.1): a host fails when its service is disabled,
//! otherwise when the service group says it is not up (no recent heartbeat,
//! or forced down). Our engine reports that judgement as the host's status:
//! `disabled` is Nova's disabled service; `down`, `maintenance` and
//! `non-operational` are all "not up" (Nova has no maintenance state; a
//! host in one takes no new instances either). Reads the status column
//! only.

use sandpiper_guest::prelude::*;

/// The `ComputeFilter` filter.
pub struct ComputeFilter;

impl Unit for ComputeFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "ComputeFilter",
            "Rejects hosts whose compute service is disabled or not up (Nova's ComputeFilter).",
        )
        .per_host()
    }
}

impl Filter for ComputeFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let statuses = cx.hosts().statuses();
        for &host in candidates {
            let reason = match statuses.get(host as usize) {
                None | Some(HostStatus::Up) => continue,
                Some(HostStatus::Disabled) => "compute service is disabled",
                Some(HostStatus::Down) => "compute service is down",
                Some(HostStatus::Maintenance) => "compute service is not up (maintenance)",
                Some(HostStatus::NonOperational) => "compute service is not up (non-operational)",
            };
            rejections.reject(host, reason);
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(ComputeFilter: filter);

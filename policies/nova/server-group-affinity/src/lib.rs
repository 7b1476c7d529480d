//! `ServerGroupAffinityFilter`: keeps the members of an affinity server
//! group together.
//!
//! Behaviour from Nova's `ServerGroupAffinityFilter`
//! (`nova/scheduler/filters/affinity_filter.py`, reference notes §1.1):
//! when the VM belongs to a group with the `affinity` policy and the group
//! already has hosts, a host outside them fails; a group with no members
//! placed yet constrains nothing.
//!
//! Data: Nova's server group is the VM's group with scope `vms`, `positive`
//! and `enforcing` (a hard affinity rule); its hosts are where the other
//! members run, pending placements included. Groups of other kinds (soft,
//! anti-affinity, VM-to-host) are for other units. Nova gives an instance
//! at most one server group; a VM in several such groups must satisfy each.
//!
//! Per-host: where the members run comes from the request's group, not
//! from other hosts' VMs.

use sandpiper_guest::model::GroupScope;
use sandpiper_guest::prelude::*;

/// The `ServerGroupAffinityFilter` filter.
pub struct ServerGroupAffinityFilter;

impl Unit for ServerGroupAffinityFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "ServerGroupAffinityFilter",
            "Rejects hosts other than those already running members of the VM's hard affinity \
             server group (Nova's ServerGroupAffinityFilter).",
        )
        .applies_to([RequestProperty::Groups])
        .per_host()
    }
}

impl Filter for ServerGroupAffinityFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let host_count = cx.hosts().len();
        for group in &cx.vm().groups {
            let affinity = group.scope == GroupScope::Vms && group.positive && group.enforcing;
            // `if group_hosts: return host in group_hosts`.
            if !affinity || group.hosts.is_empty() {
                continue;
            }
            let mut members = vec![false; host_count];
            for &host in &group.hosts {
                if let Some(flag) = members.get_mut(host as usize) {
                    *flag = true;
                }
            }
            let reason =
                rejections.reason(format!("runs no member of affinity group {:?}", group.name));
            for &host in candidates {
                if !members.get(host as usize).copied().unwrap_or(false) {
                    rejections.reject_for(host, reason);
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(ServerGroupAffinityFilter: filter);

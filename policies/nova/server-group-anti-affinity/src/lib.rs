//! `ServerGroupAntiAffinityFilter`: keeps the members of an anti-affinity
//! server group apart.
//!
//! Behaviour from Nova's `ServerGroupAntiAffinityFilter`
//! (`nova/scheduler/filters/affinity_filter.py`, reference notes §1.1):
//! when the VM belongs to a group with the `anti-affinity` policy, a host
//! passes while it runs fewer of the group's members than the group's
//! `max_server_per_host` rule (default 1: none); the host the VM already
//! runs on always passes (a resize or migration may stay).
//!
//! Data: Nova's server group is the VM's group with scope `vms`, not
//! `positive`, and `enforcing` (a hard anti-affinity rule); its hosts list
//! a host once per member running there, pending placements included.
//! Nova keeps `max_server_per_host` in the group's rules; here it is the
//! hint `max_server_per_host` (an instance has at most one server group in
//! Nova, so the request carries its group's rule). A VM in several such
//! groups must satisfy each.
//!
//! Where we differ from Nova: a rule that is not a positive integer is
//! refused by Nova's API; here it rejects every host with the reason.
//!
//! Per-host: where the members run comes from the request's group, not
//! from other hosts' VMs.

use sandpiper_guest::model::GroupScope;
use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::hints::Hint;
use sandpiper_nova_ops::python;

/// Hint: the group rule `max_server_per_host`.
pub const MAX_SERVER_PER_HOST_HINT: &str = "max_server_per_host";
/// Nova's default when the group has no such rule.
pub const DEFAULT_MAX_SERVER_PER_HOST: f64 = 1.0;

/// The `ServerGroupAntiAffinityFilter` filter.
pub struct ServerGroupAntiAffinityFilter;

impl Unit for ServerGroupAntiAffinityFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "ServerGroupAntiAffinityFilter",
            "Rejects hosts already running max_server_per_host (hint, default 1) members of the \
             VM's hard anti-affinity server group (Nova's ServerGroupAntiAffinityFilter).",
        )
        .applies_to([RequestProperty::Groups])
        .per_host()
    }
}

/// The `max_server_per_host` rule from the hints.
fn max_server_per_host(hints: &[KeyValue]) -> Result<f64, String> {
    match Hint::of(hints, MAX_SERVER_PER_HOST_HINT) {
        Hint::Absent => Ok(DEFAULT_MAX_SERVER_PER_HOST),
        Hint::One(text) => python::int(text)
            .filter(|n| *n >= 1.0)
            .ok_or_else(|| format!("max_server_per_host {text:?} is not a positive integer")),
        Hint::Many(_) => Err("more than one `max_server_per_host` hint".to_owned()),
    }
}

impl Filter for ServerGroupAntiAffinityFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        let groups: Vec<_> = vm
            .groups
            .iter()
            .filter(|g| g.scope == GroupScope::Vms && !g.positive && g.enforcing)
            .collect();
        if groups.is_empty() {
            return rejections.into_vec();
        }
        let max = match max_server_per_host(&cx.request().hints) {
            Ok(max) => max,
            Err(error) => {
                rejections.reject_all(candidates, error);
                return rejections.into_vec();
            }
        };
        let host_count = cx.hosts().len();
        for group in groups {
            let mut members = vec![0u32; host_count];
            for &host in &group.hosts {
                if let Some(count) = members.get_mut(host as usize) {
                    *count += 1;
                }
            }
            let reason = rejections.reason(format!(
                "already runs {max} member(s) of anti-affinity group {:?}",
                group.name
            ));
            for &host in candidates {
                if vm.current_host == Some(host) {
                    continue;
                }
                let count = members.get(host as usize).copied().unwrap_or(0);
                if f64::from(count) >= max {
                    rejections.reject_for(host, reason);
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(ServerGroupAntiAffinityFilter: filter);

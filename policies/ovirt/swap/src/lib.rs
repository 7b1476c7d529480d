//! `Swap`: rejects hosts that are swapping more than allowed.
//!
//! Behaviour from oVirt's `SwapFilterPolicyUnit` (reference notes §2.1): a
//! host is swapping when the swap it uses beyond its free memory, in whole
//! percent of its physical memory (integer division, as oVirt's `long`
//! arithmetic), is over `MaximumAllowedSwapUsage`:
//!
//! ```text
//! (swap_total - swap_free - memory_free) * 100 / physical > MaximumAllowedSwapUsage
//! ```
//!
//! A host that reports no free memory or no physical memory is not judged
//! (oVirt: "no swap information available") and passes.
//!
//! Data: `swap-total-mib`, `swap-free-mib`, `memory-free-mib` plus
//! `memory-pending-mib` (oVirt's free memory is the figure the host
//! reports, before pending placements, so the pending part is added back),
//! `memory-total-mib`.
//!
//! Where we differ from oVirt: oVirt skips the check for a paused VM and
//! when `EnableSwapCheck` is off; our VM has no state and the check is
//! always on (leave the unit out of the policy to turn it off).

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::params::{self, MAXIMUM_ALLOWED_SWAP_USAGE};
use sandpiper_ovirt::value;

/// The `Swap` filter.
pub struct SwapFilter;

impl Unit for SwapFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Swap",
            "Rejects hosts that are swapping: swap in use beyond their free memory, in percent \
             of physical memory, over MaximumAllowedSwapUsage.",
        )
        .with_param(params::maximum_allowed_swap_usage())
        .per_host()
    }
}

impl Filter for SwapFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let allowed = match cx.params().f64(MAXIMUM_ALLOWED_SWAP_USAGE) {
            Ok(allowed) => allowed,
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let hosts = cx.hosts();
        let swap_total = hosts.metric(HostMetric::SwapTotalMib);
        let swap_free = hosts.metric(HostMetric::SwapFreeMib);
        let reason = rejections.reason(format!(
            "swapping: swap in use beyond free memory is over {allowed}% of physical memory \
             (MaximumAllowedSwapUsage)"
        ));
        for host in hosts.candidates(candidates) {
            let h = host.index();
            let used = value(swap_total, h) - value(swap_free, h);
            // A host using no swap (or not saying) cannot be swapping, so
            // the memory columns are only fetched for hosts that use some.
            let uses_swap = used > 0.0;
            if !uses_swap {
                continue;
            }
            let physical = value(hosts.metric(HostMetric::MemoryTotalMib), h);
            let free = value(hosts.metric(HostMetric::MemoryFreeMib), h);
            let swapping = |free: f64| {
                swap_percent(used, free, physical).is_some_and(|percent| percent > allowed)
            };
            // Adding the pending part back can only lower the figure, so
            // it is only fetched when the host looks swapping without it.
            if free > 0.0 && !swapping(free) {
                continue;
            }
            let pending = value(hosts.metric(HostMetric::MemoryPendingMib), h);
            let pending = if pending.is_finite() {
                float::max(pending, 0.0)
            } else {
                0.0
            };
            if swapping(free + pending) {
                rejections.reject_for(h, reason);
            }
        }
        rejections.into_vec()
    }
}

/// Swap in use beyond free memory, whole percent of physical memory
/// (truncated like Java's integer division), from the swap in use; `None`
/// when the host reports no free or no physical memory.
fn swap_percent(swap_used: f64, memory_free: f64, physical: f64) -> Option<f64> {
    // `> 0` is false for NaN: missing figures are "no information".
    let reported = memory_free > 0.0 && physical > 0.0;
    if !reported {
        return None;
    }
    Some(((swap_used - memory_free) * 100.0 / physical).trunc()).filter(|p| p.is_finite())
}

sandpiper_guest::export_unit!(SwapFilter: filter);

//! `NumInstancesFilter`: rejects hosts with too many instances.
//!
//! Behaviour from Nova's `nova/scheduler/filters/num_instances_filter.py`
//! (reference notes §1.1), shared with its sibling in
//! `sandpiper_nova_ops::counts`, whose doc gives the rule: a host passes while
//! its count is below the maximum.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::counts::{self, Count};

/// The `NumInstancesFilter` filter.
pub struct NumInstancesFilter;

impl Unit for NumInstancesFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "NumInstancesFilter",
            "Rejects hosts with `max_instances_per_host` or more instances (Nova's \
             NumInstancesFilter).",
        )
        .with_param(Count::Instances.param().spec())
        .per_host()
    }
}

impl Filter for NumInstancesFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        counts::filter(cx, candidates, Count::Instances, false)
    }
}

sandpiper_guest::export_unit!(NumInstancesFilter: filter);

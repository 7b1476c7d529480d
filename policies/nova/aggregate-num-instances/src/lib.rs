//! `AggregateNumInstancesFilter`: rejects hosts with too many instances, with a
//! per-aggregate maximum.
//!
//! Behaviour from Nova's `nova/scheduler/filters/num_instances_filter.py`
//! (reference notes §1.1), shared with its sibling in
//! `sandpiper_nova_ops::counts`, whose doc gives the rule: a host passes while
//! its count is below the maximum. The host's aggregates may override the
//! maximum with metadata of the same key: the smallest of their values wins,
//! and a value that is not an integer makes the parameter apply, as Nova does
//! after logging.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::counts::{self, Count};

/// The `AggregateNumInstancesFilter` filter.
pub struct AggregateNumInstancesFilter;

impl Unit for AggregateNumInstancesFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AggregateNumInstancesFilter",
            "Rejects hosts with `max_instances_per_host` or more instances; the host's \
             aggregates may override the maximum (the smallest wins) (Nova's \
             AggregateNumInstancesFilter).",
        )
        .with_param(Count::Instances.param().spec())
        .per_host()
    }
}

impl Filter for AggregateNumInstancesFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        counts::filter(cx, candidates, Count::Instances, true)
    }
}

sandpiper_guest::export_unit!(AggregateNumInstancesFilter: filter);

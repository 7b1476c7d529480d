//! `AggregateIoOpsFilter`: rejects hosts with too many concurrent I/O
//! operations, with a per-aggregate maximum.
//!
//! Behaviour from Nova's `nova/scheduler/filters/io_ops_filter.py` (reference
//! notes §1.1), shared with its sibling in `sandpiper_nova_ops::counts`, whose
//! doc gives the rule: a host passes while its count is below the maximum. The
//! host's aggregates may override the maximum with metadata of the same key:
//! the smallest of their values wins, and a value that is not an integer makes
//! the parameter apply, as Nova does after logging.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::counts::{self, Count};

/// The `AggregateIoOpsFilter` filter.
pub struct AggregateIoOpsFilter;

impl Unit for AggregateIoOpsFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AggregateIoOpsFilter",
            "Rejects hosts with `max_io_ops_per_host` or more instances building, resizing or \
             migrating; the host's aggregates may override the maximum (the smallest wins) \
             (Nova's AggregateIoOpsFilter).",
        )
        .with_param(Count::IoOps.param().spec())
        .per_host()
    }
}

impl Filter for AggregateIoOpsFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        counts::filter(cx, candidates, Count::IoOps, true)
    }
}

sandpiper_guest::export_unit!(AggregateIoOpsFilter: filter);

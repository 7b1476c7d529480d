//! `IoOpsFilter`: rejects hosts with too many concurrent I/O operations
//! (instances building, resizing or migrating).
//!
//! Behaviour from Nova's `nova/scheduler/filters/io_ops_filter.py` (reference
//! notes §1.1), shared with its sibling in `sandpiper_nova_ops::counts`, whose
//! doc gives the rule: a host passes while its count is below the maximum.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::counts::{self, Count};

/// The `IoOpsFilter` filter.
pub struct IoOpsFilter;

impl Unit for IoOpsFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "IoOpsFilter",
            "Rejects hosts with `max_io_ops_per_host` or more instances building, resizing or \
             migrating (Nova's IoOpsFilter).",
        )
        .with_param(Count::IoOps.param().spec())
        .per_host()
    }
}

impl Filter for IoOpsFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        counts::filter(cx, candidates, Count::IoOps, false)
    }
}

sandpiper_guest::export_unit!(IoOpsFilter: filter);

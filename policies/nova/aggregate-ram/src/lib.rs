//! `AggregateRamFilter`: rejects hosts without the RAM for the VM at the
//! per-aggregate allocation ratio.
//!
//! Behaviour from Nova's legacy `AggregateRamFilter` (removed when Placement
//! took over capacity checks), shared with its sibling `RamFilter` in
//! `sandpiper_nova_ops::capacity`, whose doc gives the exact rule and the
//! columns read.
//!
//! The ratio is the parameter unless the host's aggregates set metadata of
//! the same key: then the smallest of their values (a value that does not
//! parse makes the parameter apply, as Nova does after logging).
//!
//! Where we differ from Nova: the default ratio is Nova's current initial
//! ratio (see `sandpiper_nova_ops::params`), not the legacy filters'
//! default; Nova's filter also recorded the limit for the compute node's
//! claim, which has no counterpart here.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::capacity::{self, RatioFrom, Resource};

/// The `AggregateRamFilter` filter.
pub struct AggregateRamFilter;

impl Unit for AggregateRamFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AggregateRamFilter",
            "Rejects hosts without the RAM for the VM at `ram_allocation_ratio`, which the \
             host's aggregates may override (the smallest wins) (Nova's legacy \
             AggregateRamFilter).",
        )
        .with_param(Resource::Ram.ratio_param().spec())
        .per_host()
    }
}

impl Filter for AggregateRamFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        capacity::filter(cx, candidates, Resource::Ram, RatioFrom::Aggregates)
    }
}

sandpiper_guest::export_unit!(AggregateRamFilter: filter);

//! `RamFilter`: rejects hosts without the RAM for the VM at the allocation
//! ratio.
//!
//! Behaviour from Nova's legacy `RamFilter` (removed when Placement took over
//! capacity checks), shared with its sibling `AggregateRamFilter` in
//! `sandpiper_nova_ops::capacity`, whose doc gives the exact rule and the
//! columns read.
//!
//! Where we differ from Nova: the default ratio is Nova's current initial
//! ratio (see `sandpiper_nova_ops::params`), not the legacy filters'
//! default; Nova's filter also recorded the limit for the compute node's
//! claim, which has no counterpart here.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::capacity::{self, RatioFrom, Resource};

/// The `RamFilter` filter.
pub struct RamFilter;

impl Unit for RamFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "RamFilter",
            "Rejects hosts without the RAM for the VM at `ram_allocation_ratio` (Nova's \
             legacy RamFilter).",
        )
        .with_param(Resource::Ram.ratio_param().spec())
        .per_host()
    }
}

impl Filter for RamFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        capacity::filter(cx, candidates, Resource::Ram, RatioFrom::Parameter)
    }
}

sandpiper_guest::export_unit!(RamFilter: filter);

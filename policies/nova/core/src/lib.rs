//! `CoreFilter`: rejects hosts without the vCPUs for the VM at the allocation
//! ratio.
//!
//! Behaviour from Nova's legacy `CoreFilter` (removed when Placement took over
//! capacity checks), shared with its sibling `AggregateCoreFilter` in
//! `sandpiper_nova_ops::capacity`, whose doc gives the exact rule and the
//! columns read.
//!
//! Where we differ from Nova: the default ratio is Nova's current initial
//! ratio (see `sandpiper_nova_ops::params`), not the legacy filters'
//! default; Nova's filter also recorded the limit for the compute node's
//! claim, which has no counterpart here.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::capacity::{self, RatioFrom, Resource};

/// The `CoreFilter` filter.
pub struct CoreFilter;

impl Unit for CoreFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "CoreFilter",
            "Rejects hosts without the vCPUs for the VM at `cpu_allocation_ratio` (Nova's \
             legacy CoreFilter).",
        )
        .with_param(Resource::Cpu.ratio_param().spec())
        .per_host()
    }
}

impl Filter for CoreFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        capacity::filter(cx, candidates, Resource::Cpu, RatioFrom::Parameter)
    }
}

sandpiper_guest::export_unit!(CoreFilter: filter);

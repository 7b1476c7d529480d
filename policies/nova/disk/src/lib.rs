//! `DiskFilter`: rejects hosts without the disk for the VM at the allocation
//! ratio.
//!
//! Behaviour from Nova's legacy `DiskFilter` (removed when Placement took over
//! capacity checks), shared with its sibling `AggregateDiskFilter` in
//! `sandpiper_nova_ops::capacity`, whose doc gives the exact rule and the
//! columns read.
//!
//! Where we differ from Nova: the default ratio is Nova's current initial
//! ratio (see `sandpiper_nova_ops::params`), not the legacy filters'
//! default; Nova's filter also recorded the limit for the compute node's
//! claim, which has no counterpart here.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::capacity::{self, RatioFrom, Resource};

/// The `DiskFilter` filter.
pub struct DiskFilter;

impl Unit for DiskFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "DiskFilter",
            "Rejects hosts without the local disk for the VM at `disk_allocation_ratio` \
             (Nova's legacy DiskFilter).",
        )
        .with_param(Resource::Disk.ratio_param().spec())
        .per_host()
    }
}

impl Filter for DiskFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        capacity::filter(cx, candidates, Resource::Disk, RatioFrom::Parameter)
    }
}

sandpiper_guest::export_unit!(DiskFilter: filter);

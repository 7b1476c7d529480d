//! `DifferentHostFilter`: rejects hosts running any of the given instances.
//!
//! Behaviour from Nova's `DifferentHostFilter`
//! (`nova/scheduler/filters/affinity_filter.py`, reference notes §1.1):
//! the hint `different_host` lists instance ids; a host running any of them
//! fails. Without the hint (or with one empty value) every host passes.
//!
//! Data: the running VMs' `id` and host columns (pending placements
//! included); the hint repeats its key for several instances. The shared
//! logic is `sandpiper_nova_ops::instances`.
//!
//! Per-host: a host's verdict reads only the ids of the VMs on it.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::instances::{self, Wanted};

/// Hint: instances the VM must not share a host with.
pub const DIFFERENT_HOST_HINT: &str = "different_host";

/// The `DifferentHostFilter` filter.
pub struct DifferentHostFilter;

impl Unit for DifferentHostFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "DifferentHostFilter",
            "Rejects hosts running any of the instances listed in the `different_host` hint \
             (Nova's DifferentHostFilter).",
        )
        .applies_to([RequestProperty::Hint(DIFFERENT_HOST_HINT.to_owned())])
        .per_host()
    }
}

impl Filter for DifferentHostFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        instances::filter(cx, candidates, DIFFERENT_HOST_HINT, Wanted::NoneOf)
    }
}

sandpiper_guest::export_unit!(DifferentHostFilter: filter);

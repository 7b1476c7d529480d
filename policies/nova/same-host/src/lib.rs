//! `SameHostFilter`: rejects hosts running none of the given instances.
//!
//! Behaviour from Nova's `SameHostFilter`
//! (`nova/scheduler/filters/affinity_filter.py`, reference notes §1.1):
//! the hint `same_host` lists instance ids; a host passes only when it runs
//! at least one of them (an id no host runs fails every host). Without the
//! hint (or with one empty value) every host passes.
//!
//! Data: the running VMs' `id` and host columns (pending placements
//! included); the hint repeats its key for several instances. The shared
//! logic is `sandpiper_nova_ops::instances`.
//!
//! Per-host: a host's verdict reads only the ids of the VMs on it.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::instances::{self, Wanted};

/// Hint: instances the VM must share a host with (any one of them).
pub const SAME_HOST_HINT: &str = "same_host";

/// The `SameHostFilter` filter.
pub struct SameHostFilter;

impl Unit for SameHostFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "SameHostFilter",
            "Rejects hosts running none of the instances listed in the `same_host` hint (Nova's \
             SameHostFilter).",
        )
        .applies_to([RequestProperty::Hint(SAME_HOST_HINT.to_owned())])
        .per_host()
    }
}

impl Filter for SameHostFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        instances::filter(cx, candidates, SAME_HOST_HINT, Wanted::AnyOf)
    }
}

sandpiper_guest::export_unit!(SameHostFilter: filter);

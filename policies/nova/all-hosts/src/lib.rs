//! `AllHostsFilter`: passes every host.
//!
//! Behaviour from Nova's `nova/scheduler/filters/all_hosts_filter.py`
//! (reference notes §1.1): a no-op filter, useful to give a policy a filter
//! slot that removes nothing. Reads no data.

use sandpiper_guest::prelude::*;

/// The `AllHostsFilter` filter.
pub struct AllHostsFilter;

impl Unit for AllHostsFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AllHostsFilter",
            "Passes every host (Nova's AllHostsFilter, a no-op).",
        )
        .per_host()
    }
}

impl Filter for AllHostsFilter {
    fn filter(_cx: &Context<'_>, _candidates: &[u32]) -> Vec<Rejection> {
        Vec::new()
    }
}

sandpiper_guest::export_unit!(AllHostsFilter: filter);

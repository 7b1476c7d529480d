//! `AggregateTypeAffinityFilter`: keeps flavors to the aggregates that list
//! them.
//!
//! Behaviour from Nova's `nova/scheduler/filters/type_filter.py`
//! (reference notes §1.1): when any aggregate of the host sets
//! `instance_type` metadata, the VM's flavor name must appear in one of
//! those values (each comma separated, items stripped); a host no
//! aggregate restricts takes every flavor.
//!
//! Data: the VM's `instance-type` (Nova's flavor name) and the
//! `aggregate-metadata` column.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::aggregates;

/// Aggregate metadata key listing the flavors an aggregate takes.
pub const INSTANCE_TYPE_KEY: &str = "instance_type";

/// The `AggregateTypeAffinityFilter` filter.
pub struct AggregateTypeAffinityFilter;

impl Unit for AggregateTypeAffinityFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AggregateTypeAffinityFilter",
            "Rejects hosts whose aggregates' instance_type metadata does not list the VM's \
             flavor (Nova's AggregateTypeAffinityFilter).",
        )
        .per_host()
    }
}

impl Filter for AggregateTypeAffinityFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let flavor = cx.vm().instance_type.as_str();
        let metadata = cx.hosts().labels(HostLabels::AggregateMetadata);
        let Some(key) = metadata.id(INSTANCE_TYPE_KEY) else {
            return rejections.into_vec();
        };
        let mut lists: Vec<Option<bool>> = vec![None; metadata.strings.len()];
        let reason = rejections.reason(format!("its aggregates do not take flavor {flavor:?}"));
        for &host in candidates {
            let mut restricted = false;
            let mut listed = false;
            for value in metadata.values_of(host as usize, key) {
                restricted = true;
                if let Some(slot) = lists.get_mut(value as usize) {
                    listed |= *slot.get_or_insert_with(|| {
                        aggregates::split(metadata.string(value)).any(|f| f == flavor)
                    });
                }
            }
            if restricted && !listed {
                rejections.reject_for(host, reason);
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(AggregateTypeAffinityFilter: filter);

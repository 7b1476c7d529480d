//! `AggregateMultiTenancyIsolation`: keeps tenants out of aggregates
//! reserved for others.
//!
//! Behaviour from Nova's
//! `nova/scheduler/filters/aggregate_multitenancy_isolation.py` (reference
//! notes §1.1): the tenants a host is reserved for are the comma-split
//! values of every aggregate metadata key *starting with*
//! `filter_tenant_id` (`filter_tenant_id`, `filter_tenant_id2`, …), over
//! all the host's aggregates. A host with no such tenants takes anyone;
//! otherwise the VM's tenant must be one of them.
//!
//! Data: the VM's `tenant` (Nova's project id) and the `aggregate-metadata`
//! column.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::aggregates;

/// Prefix of the metadata keys that reserve a host for tenants.
pub const TENANT_KEY_PREFIX: &str = "filter_tenant_id";

/// The `AggregateMultiTenancyIsolation` filter.
pub struct AggregateMultiTenancyIsolation;

impl Unit for AggregateMultiTenancyIsolation {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AggregateMultiTenancyIsolation",
            "Rejects hosts whose aggregates reserve them (metadata keys starting with \
             filter_tenant_id) for tenants other than the VM's (Nova's \
             AggregateMultiTenancyIsolation).",
        )
        .per_host()
    }
}

impl Filter for AggregateMultiTenancyIsolation {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let tenant = cx.vm().tenant.as_str();
        let metadata = cx.hosts().labels(HostLabels::AggregateMetadata);
        // The ids of the reserving keys (usually one: `filter_tenant_id`).
        let reserving: Vec<u32> = (0u32..)
            .zip(&metadata.strings)
            .filter(|(_, s)| s.starts_with(TENANT_KEY_PREFIX))
            .map(|(id, _)| id)
            .collect();
        if reserving.is_empty() {
            return rejections.into_vec();
        }
        // Per string id: does this value list the tenant.
        let mut lists: Vec<Option<bool>> = vec![None; metadata.strings.len()];
        let reason = rejections.reason(format!(
            "reserved by its aggregates for tenants other than {tenant:?}"
        ));
        for &host in candidates {
            let mut reserved = false;
            let mut allowed = false;
            for &key in &reserving {
                for value in metadata.values_of(host as usize, key) {
                    reserved = true;
                    if let Some(slot) = lists.get_mut(value as usize) {
                        allowed |= *slot.get_or_insert_with(|| {
                            aggregates::split(metadata.string(value)).any(|t| t == tenant)
                        });
                    }
                }
            }
            if reserved && !allowed {
                rejections.reject_for(host, reason);
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(AggregateMultiTenancyIsolation: filter);

//! `RetryFilter`: rejects hosts already tried for this request.
//!
//! Behaviour from Nova's legacy `RetryFilter` (removed in Victoria; `git
//! show 4939d0d1e2^:nova/scheduler/filters/retry_filter.py`, reference
//! notes §1.1): when the request carries retry information, every host
//! already attempted fails; without it every host passes.
//!
//! Encoding: Nova kept the attempted `[host, node]` pairs in the request
//! spec; here they arrive as the repeated hint `retry_hosts`, each value a
//! host's id or name (Nova compared host and node names; an engine may send
//! either of ours).

use std::collections::HashSet;

use sandpiper_guest::prelude::*;

/// Hint: a host already attempted (repeat the key for several).
pub const RETRY_HOSTS_HINT: &str = "retry_hosts";

/// The `RetryFilter` filter.
pub struct RetryFilter;

impl Unit for RetryFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "RetryFilter",
            "Rejects hosts already attempted for this request, listed by id or name in the \
             repeated hint `retry_hosts` (Nova's legacy RetryFilter).",
        )
    }
}

impl Filter for RetryFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let tried: HashSet<&str> = cx.hints(RETRY_HOSTS_HINT).collect();
        if tried.is_empty() {
            return Vec::new();
        }
        let hosts = cx.hosts();
        // Judge each distinct id and name once, then each host by index.
        let ids = hosts.texts(HostText::Id);
        let names = hosts.texts(HostText::Name);
        let tried_id: Vec<bool> = ids
            .values
            .iter()
            .map(|v| tried.contains(v.as_str()))
            .collect();
        let tried_name: Vec<bool> = names
            .values
            .iter()
            .map(|v| tried.contains(v.as_str()))
            .collect();
        let flag = |flags: &[bool], indices: &[u32], row: usize| {
            indices
                .get(row)
                .and_then(|&i| flags.get(i as usize))
                .copied()
                .unwrap_or(false)
        };
        let mut rejections = Rejections::new();
        for &host in candidates {
            let row = host as usize;
            if flag(&tried_id, &ids.indices, row) || flag(&tried_name, &names.indices, row) {
                rejections.reject(host, "already attempted for this request");
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(RetryFilter: filter);

//! `RetryFilter`: rejects hosts already tried for this request.
//!
//! Behaviour from Nova's legacy `RetryFilter` (removed in Victoria; `git
//! show 4939d0d1e2^:nova/scheduler/filters/retry_filter.py`, reference
//! notes §1.1): when the request carries retry information, every host
//! already attempted fails; without it every host passes.
//!
//! Encoding: Nova kept the attempted `[host, node]` pairs in the request
//! spec; here they arrive as the repeated hint `retry_hosts`, each value a
//! host's name, as Nova compared names (a snapshot host without a name is
//! named by its id). Only the name column is read, and only when the hint
//! is there: each string crosses the component boundary once per call.

use sandpiper_guest::collections::HashSet;

use sandpiper_guest::prelude::*;

/// Hint: a host already attempted (repeat the key for several).
pub const RETRY_HOSTS_HINT: &str = "retry_hosts";

/// The `RetryFilter` filter.
pub struct RetryFilter;

impl Unit for RetryFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "RetryFilter",
            "Rejects hosts already attempted for this request, listed by name in the \
             repeated hint `retry_hosts` (Nova's legacy RetryFilter).",
        )
        .applies_to([RequestProperty::Hint(RETRY_HOSTS_HINT.to_owned())])
        .per_host()
    }
}

impl Filter for RetryFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let tried: HashSet<&str> = cx.hints(RETRY_HOSTS_HINT).collect();
        if tried.is_empty() {
            return Vec::new();
        }
        // Judge each distinct name once, then each host by index.
        let names = cx.hosts().texts(HostText::Name);
        let tried_name: Vec<bool> = names.values().map(|v| tried.contains(v)).collect();
        let mut rejections = Rejections::new();
        for &host in candidates {
            let tried = names
                .indices
                .get(host as usize)
                .and_then(|&i| tried_name.get(i as usize))
                .copied()
                .unwrap_or(false);
            if tried {
                rejections.reject(host, "already attempted for this request");
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(RetryFilter: filter);

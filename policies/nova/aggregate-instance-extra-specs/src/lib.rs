//! `AggregateInstanceExtraSpecsFilter`: rejects hosts whose aggregate
//! metadata does not satisfy the flavor's extra specs.
//!
//! Behaviour from Nova's
//! `nova/scheduler/filters/aggregate_instance_extra_specs.py` (reference
//! notes §1.1, §2.2). For each extra spec of the VM whose key is unscoped
//! (`ssd`) or in the `aggregate_instance_extra_specs:` scope (the scope is
//! cut once, so `aggregate_instance_extra_specs:a:b` reads key `a:b`); keys
//! of any other scope (`hw:`, `capabilities:`) are ignored:
//!
//! * the host's values for the key are the union, over the aggregates it
//!   belongs to, of that key's metadata split on commas and stripped;
//! * no value at all fails the host;
//! * otherwise at least one value must satisfy the requirement, with Nova's
//!   operator grammar (`sandpiper_nova_ops::extra_specs`).
//!
//! A VM without extra specs passes everywhere. Reads the
//! `aggregate-metadata` column.
//!
//! Where we differ from Nova: a numeric operator over a value Python's
//! `float()` rejects raises `ValueError` in Nova and aborts the request;
//! here the value does not match, and a host none of whose values matches
//! fails with the error as its reason.
//!
//! Cost: each distinct metadata text is split and matched once per spec.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::aggregates;
use sandpiper_nova_ops::extra_specs::{MatchError, Requirement};

/// The extra-spec scope this filter reads besides unscoped keys.
pub const SCOPE: &str = "aggregate_instance_extra_specs";

/// The `AggregateInstanceExtraSpecsFilter` filter.
pub struct AggregateInstanceExtraSpecsFilter;

impl Unit for AggregateInstanceExtraSpecsFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AggregateInstanceExtraSpecsFilter",
            "Rejects hosts whose aggregates' metadata does not satisfy the flavor's unscoped and \
             `aggregate_instance_extra_specs:` extra specs, with Nova's operator grammar (Nova's \
             AggregateInstanceExtraSpecsFilter).",
        )
        .applies_to([RequestProperty::ExtraSpec(String::new())])
        .per_host()
    }
}

/// What one metadata text says about one requirement.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    /// One of its comma-separated values matches.
    Match,
    /// None matches.
    NoMatch,
    /// None matches and one could not be compared.
    Error(MatchError),
}

/// Matches the comma-separated values of `text`.
fn outcome(requirement: &Requirement<'_>, text: &str) -> Outcome {
    let mut error = None;
    for value in aggregates::split(text) {
        match requirement.matches(value) {
            Ok(true) => return Outcome::Match,
            Ok(false) => {}
            Err(e) => error = error.or(Some(e)),
        }
    }
    error.map_or(Outcome::NoMatch, Outcome::Error)
}

impl Filter for AggregateInstanceExtraSpecsFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let specs: Vec<(&str, &str)> = cx
            .vm()
            .extra_specs
            .iter()
            .filter_map(|kv| match kv.key.split_once(':') {
                None => Some((kv.key.as_str(), kv.value.as_str())),
                Some((SCOPE, key)) => Some((key, kv.value.as_str())),
                Some(_) => None,
            })
            .collect();
        let mut rejections = Rejections::new();
        if specs.is_empty() {
            return rejections.into_vec();
        }
        let metadata = cx.hosts().labels(HostLabels::AggregateMetadata);
        let mut pending: Vec<u32> = candidates.to_vec();
        for (key, req) in specs {
            let requirement = Requirement::parse(req);
            let key_id = metadata.id(key);
            // Outcome per metadata text, computed on first use.
            let mut memo: Vec<Option<Outcome>> = vec![None; metadata.strings.len()];
            let missing = rejections.reason(format!("no aggregate of the host sets `{key}`"));
            let mismatch =
                rejections.reason(format!("no aggregate value of `{key}` satisfies `{req}`"));
            pending.retain(|&host| {
                let Some(key_id) = key_id else {
                    rejections.reject_for(host, missing);
                    return false;
                };
                let mut seen = false;
                let mut error = None;
                for value in metadata.values_of(host as usize, key_id) {
                    seen = true;
                    let Some(slot) = memo.get_mut(value as usize) else {
                        continue;
                    };
                    let outcome =
                        slot.get_or_insert_with(|| outcome(&requirement, metadata.string(value)));
                    match outcome {
                        Outcome::Match => return true,
                        Outcome::NoMatch => {}
                        Outcome::Error(e) => error = error.or_else(|| Some(e.clone())),
                    }
                }
                match (seen, error) {
                    (false, _) => rejections.reject_for(host, missing),
                    (true, None) => rejections.reject_for(host, mismatch),
                    (true, Some(e)) => {
                        rejections.reject(host, format!("extra spec `{key}` = `{req}`: {e}"))
                    }
                };
                false
            });
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(AggregateInstanceExtraSpecsFilter: filter);

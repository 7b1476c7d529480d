//! Filters that run once per request (Nova's
//! `run_filter_once_per_request`): the names a request gives, checked, and
//! the policy later instances run without them.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::PlaceError;
use crate::pipeline::{Policy, only_declared};

/// Refuses once-per-request names that are not filters of the policy: a
/// typo would otherwise silently run the filter for every instance.
pub(super) fn check_filter_names(
    policy: &Policy,
    names: &BTreeSet<String>,
) -> Result<(), PlaceError> {
    for name in names {
        if !policy.filters().iter().any(|f| &f.unit.info().name == name) {
            return Err(PlaceError::BadRequest(format!(
                "once_per_request names `{name}`, which is not a filter of the policy"
            )));
        }
    }
    Ok(())
}

/// `policy` without the filters named in `skip`, keeping the policy's
/// values of the parameters its remaining units declare.
pub(super) fn policy_without(
    policy: &Policy,
    skip: &BTreeSet<String>,
) -> Result<Policy, PlaceError> {
    check_filter_names(policy, skip)?;
    let kept: Vec<_> = policy
        .filters()
        .iter()
        .filter(|step| !skip.contains(&step.unit.info().name))
        .collect();
    let units = kept
        .iter()
        .map(|s| &s.unit)
        .chain(policy.scores().iter().map(|s| &s.unit))
        .chain(policy.balance_unit());
    let mut builder = Policy::builder()
        .combination(policy.combination())
        .params(only_declared(policy.params(), units));
    for step in kept {
        builder = builder.filter_step(
            Arc::clone(&step.unit),
            step.position,
            step.on_failure,
            step.run_once,
        );
    }
    for step in policy.scores() {
        builder = builder.score_with(Arc::clone(&step.unit), step.factor, step.on_failure);
    }
    if let Some(unit) = policy.balance_unit() {
        builder = builder.balance(Arc::clone(unit));
    }
    Ok(builder.build()?)
}

//! Turns a stored policy into a runnable `pipeline::Policy`, both to run
//! decisions and to check a change before it is stored: the pipeline's
//! builder is the one place where oVirt's composition rules live (a unit at
//! most once, the slot matches the exports, one first and one last filter,
//! one balance unit, parameter keys declared and values matching).

use std::collections::HashSet;
use std::sync::Arc;

use uuid::Uuid;

use super::error::ApiError;
use crate::pipeline::{Policy, PolicyError, only_declared};
use crate::registry::Registry;
use crate::store::clusters::ClusterRecord;
use crate::store::policies::PolicyRecord;
use crate::unit::Unit;

/// Why a stored policy could not be assembled.
#[derive(Debug)]
pub enum AssemblyError {
    /// The policy names a unit the server has not loaded: the store and
    /// the registry disagree, which is our bug, not the caller's.
    NotLoaded(Uuid),
    Policy(PolicyError),
}

impl From<AssemblyError> for ApiError {
    fn from(e: AssemblyError) -> Self {
        match e {
            AssemblyError::NotLoaded(id) => {
                ApiError::Internal(format!("unit {id} is used by a policy but is not loaded"))
            }
            AssemblyError::Policy(e) => e.into(),
        }
    }
}

/// Builds `record` with the units `lookup` gives, leaving out the units in
/// `skip` (and the parameter values only they declare).
pub fn assemble(
    record: &PolicyRecord,
    lookup: &dyn Fn(Uuid) -> Option<Arc<dyn Unit>>,
    skip: &HashSet<Uuid>,
) -> Result<Policy, AssemblyError> {
    let get = |id: Uuid| lookup(id).ok_or(AssemblyError::NotLoaded(id));
    let mut builder = Policy::builder().combination(record.combination);
    let mut units = Vec::new();
    for f in record.filters.iter().filter(|f| !skip.contains(&f.unit_id)) {
        let unit = get(f.unit_id)?;
        units.push(Arc::clone(&unit));
        builder = builder.filter_step(unit, f.position, f.on_failure, f.run_once);
    }
    for w in record.weights.iter().filter(|w| !skip.contains(&w.unit_id)) {
        let unit = get(w.unit_id)?;
        units.push(Arc::clone(&unit));
        builder = builder.score_with(unit, w.factor, w.on_failure);
    }
    if let Some(id) = record.balance.filter(|id| !skip.contains(id)) {
        let unit = get(id)?;
        units.push(Arc::clone(&unit));
        builder = builder.balance(unit);
    }
    let params = if skip.is_empty() {
        record.params.clone()
    } else {
        only_declared(&record.params, &units)
    };
    builder
        .params(params)
        .build()
        .map_err(AssemblyError::Policy)
}

/// The loaded units.
pub fn from_registry(registry: &Registry) -> impl Fn(Uuid) -> Option<Arc<dyn Unit>> + '_ {
    move |id| registry.get(id)
}

/// Checks that `record`, as it would be stored, still makes a runnable
/// policy and that every cluster in `clusters` (those running it) still has
/// valid overrides. Problems with what is already stored — values the
/// change would strand — are conflicts naming their owner; a problem with
/// the change itself keeps its own status.
pub fn check_change(
    record: &PolicyRecord,
    clusters: &[ClusterRecord],
    lookup: &dyn Fn(Uuid) -> Option<Arc<dyn Unit>>,
    params_are_the_change: bool,
) -> Result<Policy, ApiError> {
    let policy = match assemble(record, lookup, &HashSet::new()) {
        Ok(policy) => policy,
        Err(AssemblyError::Policy(PolicyError::Param(e))) if !params_are_the_change => {
            return Err(ApiError::ParamsWouldBreak {
                message: format!(
                    "the change would leave policy `{}` with an unusable value: {e}",
                    record.name
                ),
                owner: format!("policy {}", record.name),
            });
        }
        Err(e) => return Err(e.into()),
    };
    for cluster in clusters {
        policy
            .check_overrides(&cluster.params)
            .map_err(|e| ApiError::ParamsWouldBreak {
                message: format!(
                    "the change would leave cluster `{}` with an unusable override: {e}",
                    cluster.name
                ),
                owner: format!("cluster {}", cluster.name),
            })?;
    }
    Ok(policy)
}

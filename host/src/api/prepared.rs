//! What a decision needs from the store, read once and kept: a cluster's
//! policy assembled from the loaded units, with its overrides
//! ([`Prepared`]), cached per cluster until the configuration changes
//! ([`PreparedCache`], invalidated by [`track_config_changes`]); and, for
//! a what-if dry run, another policy prepared the same way for the cluster
//! ([`decision_policy`]), never cached.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::Response;
use uuid::Uuid;

use super::AppState;
use super::assemble::{assemble, from_registry};
use super::clusters::load as load_cluster;
use super::error::ApiError;
use super::schedule::request::DecisionQuery;
use crate::pipeline::{ParamValues, Policy, only_declared};

/// What a decision needs to know about the cluster, read from the store in
/// one go: its policy assembled from the loaded units, its parameter
/// overrides, and the disabled units left out. Kept between decisions in
/// the [`PreparedCache`].
#[derive(Clone)]
pub struct Prepared {
    pub policy_id: Uuid,
    /// Shared with each decision's job: a clone would copy the units'
    /// list and its parameter patterns (their regex caches) per request.
    pub policy: Arc<Policy>,
    pub overrides: ParamValues,
    pub skipped_units: Vec<String>,
}

/// Reads what a decision for the cluster needs: with its own policy, or
/// with `other` (a what-if), whose units get the cluster's overrides of the
/// parameters they declare.
async fn read(
    state: &AppState,
    cluster_id: Uuid,
    other: Option<Uuid>,
) -> Result<Prepared, ApiError> {
    let mut conn = state.store().read().await?;
    let cluster = load_cluster(&mut conn, cluster_id).await?;
    let policy_id = other.unwrap_or(cluster.policy_id);
    let record = conn.policy(policy_id).await?.ok_or_else(|| match other {
        Some(id) => ApiError::NotFound {
            resource: "scheduling policy",
            id: id.to_string(),
        },
        None => ApiError::Internal(format!("cluster {cluster_id} has no policy")),
    })?;
    let disabled = conn.disabled_units().await?;
    let names = conn.unit_names().await?;
    drop(conn);
    let (policy, skip, skipped_units) = assemble_enabled(state, &record, &disabled, &names)?;
    let overrides = if skip.is_empty() && other.is_none() {
        cluster.params
    } else {
        only_declared(&cluster.params, policy.units())
    };
    Ok(Prepared {
        policy_id: record.id,
        policy: Arc::new(policy),
        overrides,
        skipped_units,
    })
}

/// A stored policy assembled as a cluster's is, disabled units left out,
/// with no cluster's overrides: what a simulation compares
/// (`super::simulations`). Its name comes along.
pub async fn stored_policy(
    state: &AppState,
    policy_id: Uuid,
) -> Result<(String, Policy), ApiError> {
    let mut conn = state.store().read().await?;
    let record = conn
        .policy(policy_id)
        .await?
        .ok_or_else(|| ApiError::NotFound {
            resource: "scheduling policy",
            id: policy_id.to_string(),
        })?;
    let disabled = conn.disabled_units().await?;
    let names = conn.unit_names().await?;
    drop(conn);
    let (policy, _, _) = assemble_enabled(state, &record, &disabled, &names)?;
    Ok((record.name, policy))
}

/// `record` assembled from the loaded units without the disabled ones;
/// also which were left out, by id and by name (sorted).
fn assemble_enabled(
    state: &AppState,
    record: &crate::store::policies::PolicyRecord,
    disabled: &HashSet<Uuid>,
    names: &HashMap<Uuid, String>,
) -> Result<(Policy, HashSet<Uuid>, Vec<String>), ApiError> {
    let in_policy: HashSet<_> = record
        .filters
        .iter()
        .map(|f| f.unit_id)
        .chain(record.weights.iter().map(|w| w.unit_id))
        .chain(record.balance)
        .collect();
    let skip: HashSet<_> = disabled.intersection(&in_policy).copied().collect();
    let mut skipped_units: Vec<String> = skip
        .iter()
        .map(|id| names.get(id).cloned().unwrap_or_else(|| id.to_string()))
        .collect();
    skipped_units.sort();
    let lookup = from_registry(state.registry());
    let policy = assemble(record, &lookup, &skip)?;
    Ok((policy, skip, skipped_units))
}

/// The cluster's prepared policy, from the cache unless the configuration
/// changed since it was read.
pub async fn prepared(state: &AppState, cluster_id: Uuid) -> Result<Arc<Prepared>, ApiError> {
    state
        .prepared()
        .get(cluster_id, read(state, cluster_id, None))
        .await
}

/// The policy a decision asked with `query` runs: the cluster's own, or
/// for a what-if (`policy=ID`, only with `dry_run=true`, so that nothing is
/// ever claimed or logged under a policy the cluster does not have) that
/// policy, read afresh.
pub async fn decision_policy(
    state: &AppState,
    cluster_id: Uuid,
    query: DecisionQuery,
) -> Result<Arc<Prepared>, ApiError> {
    match query.policy {
        None => prepared(state, cluster_id).await,
        // 422, not 400: a rule between two fields, which no schema states.
        Some(_) if !query.dry_run => Err(ApiError::Unprocessable {
            code: "policy_needs_dry_run",
            message: "invalid value for `policy`: another policy than the cluster's decides \
                      only a dry run; add `dry_run=true`"
                .to_owned(),
            details: serde_json::json!({ "field": "policy" }),
        }),
        Some(other) => Ok(Arc::new(read(state, cluster_id, Some(other)).await?)),
    }
}

/// Clusters' prepared policies, kept between decisions. Reading and assembling them takes about ten store queries
/// and compiling every parameter pattern, which at thousands of decisions
/// a second costs more than the decision itself.
///
/// Every change a prepared policy depends on (units, modules, policies,
/// clusters, their parameters) is made through an admin route, and every
/// admin write bumps the configuration epoch ([`track_config_changes`])
/// before its answer is sent; an entry is used only while the epoch it
/// was read at is still current, so a decision never runs a policy older
/// than the last change its caller could have seen.
#[derive(Default)]
pub struct PreparedCache {
    epoch: AtomicU64,
    entries: Mutex<HashMap<Uuid, (u64, Arc<Prepared>)>>,
}

impl PreparedCache {
    /// Forgets every entry: the configuration changed.
    pub fn invalidate(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The cluster's prepared policy, from the cache when nothing changed
    /// since it was read, else from `read`.
    pub async fn get(
        &self,
        cluster_id: Uuid,
        read: impl Future<Output = Result<Prepared, ApiError>>,
    ) -> Result<Arc<Prepared>, ApiError> {
        // The epoch is read first: a change racing with `read` leaves the
        // entry tagged with the older epoch, so it is read again next time.
        let epoch = self.epoch.load(Ordering::SeqCst);
        if let Some((at, prepared)) = self.lock().get(&cluster_id)
            && *at == epoch
        {
            return Ok(Arc::clone(prepared));
        }
        let prepared = Arc::new(read.await?);
        self.lock()
            .insert(cluster_id, (epoch, Arc::clone(&prepared)));
        Ok(prepared)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, (u64, Arc<Prepared>)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Middleware: after every admin route that changes something, the
/// prepared policies are stale, here and (with several replicas) on the
/// others, which the raised configuration generation tells
/// (`server::follow`).
pub async fn track_config_changes(
    State(state): State<AppState>,
    matched: Option<axum::extract::MatchedPath>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let changes =
        matched.is_some_and(|path| super::access::is_admin_change(request.method(), path.as_str()));
    let response = next.run(request).await;
    if changes {
        state.prepared().invalidate();
        if state.fleet().is_shared() && response.status().is_success() {
            let bumped = async {
                let mut conn = state.store().read().await?;
                conn.bump_config_generation().await
            };
            if let Err(e) = bumped.await {
                tracing::warn!(error = %e, "could not tell the other replicas of a configuration change");
            }
        }
    }
    response
}

//! `/api/v1/clusters`: clusters, the policy each runs, its parameter
//! overrides, and the log of decisions made for it.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::assemble::{AssemblyError, assemble, from_registry};
use super::error::{ApiError, ErrorBody};
use super::extract::{Json, Path, Query};
use super::policies::policy_href;
use super::types::{
    IdRef, NamedRef, Property, check_name, properties_to_values, values_to_properties,
};
use super::{AppState, location};
use crate::pipeline::ParamValues;
use crate::store::Db;
use crate::store::clusters::{
    ClusterRecord, DEFAULT_BALANCE_INTERVAL_SECONDS, MAX_BALANCE_INTERVAL_SECONDS,
    MIN_BALANCE_INTERVAL_SECONDS, PeriodicBalance,
};
use crate::store::decisions::DecisionRecord;

/// Decisions listed when the request does not say how many.
pub const DEFAULT_DECISIONS_LISTED: u32 = 20;

/// Most decisions one list request returns: each carries a whole explain
/// record, and a page of a few hundred is already more than anyone reads.
pub const MAX_DECISIONS_LISTED: u32 = 500;

/// A cluster (oVirt's `cluster`, as far as scheduling goes).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Cluster {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub scheduling_policy: NamedRef,
    /// Overrides of the policy's values and the units' defaults (oVirt's
    /// custom scheduling policy properties).
    pub properties: Vec<Property>,
    pub balance: BalanceSettings,
    pub href: String,
    pub created_at: String,
    pub updated_at: String,
}

/// Whether Sandpiper balances the cluster's held inventory on its own, and
/// how often (oVirt's `VdsLoadBalancingIntervalInMinutes`). Only a cluster
/// whose policy has a balance unit and whose inventory is held is ever
/// balanced; see docs/operations.md.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BalanceSettings {
    /// Default `true`.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Seconds between two rounds, 1 to 86,400; default 60.
    #[serde(default = "default_interval")]
    #[schema(minimum = 1, maximum = 86400)]
    pub interval_seconds: u32,
}

fn enabled() -> bool {
    true
}

fn default_interval() -> u32 {
    DEFAULT_BALANCE_INTERVAL_SECONDS
}

impl BalanceSettings {
    fn checked(self) -> Result<PeriodicBalance, ApiError> {
        let range = MIN_BALANCE_INTERVAL_SECONDS..=MAX_BALANCE_INTERVAL_SECONDS;
        if !range.contains(&self.interval_seconds) {
            return Err(ApiError::InvalidValue {
                field: "balance.interval_seconds".to_owned(),
                message: format!(
                    "{} is outside {MIN_BALANCE_INTERVAL_SECONDS} to {MAX_BALANCE_INTERVAL_SECONDS} seconds",
                    self.interval_seconds
                ),
            });
        }
        Ok(PeriodicBalance {
            enabled: self.enabled,
            interval_seconds: self.interval_seconds,
        })
    }
}

impl From<PeriodicBalance> for BalanceSettings {
    fn from(b: PeriodicBalance) -> Self {
        BalanceSettings {
            enabled: b.enabled,
            interval_seconds: b.interval_seconds,
        }
    }
}

/// A new cluster.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterAdd {
    #[schema(schema_with = crate::names::name_schema, required = true)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Defaults to the default policy.
    #[serde(default)]
    pub scheduling_policy: Option<IdRef>,
    /// Every key must be declared by a unit of the policy and every value
    /// match its pattern.
    #[serde(default)]
    pub properties: Vec<Property>,
    /// The periodic balance; default: every 60 seconds.
    #[serde(default)]
    pub balance: Option<BalanceSettings>,
}

/// Changes to a cluster; fields left out stay as they are. Attaching
/// another policy checks the cluster's overrides against it.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterUpdate {
    #[schema(schema_with = crate::names::optional_name_schema)]
    pub name: Option<String>,
    pub description: Option<String>,
    pub scheduling_policy: Option<IdRef>,
    /// Replaces all of the cluster's overrides.
    pub properties: Option<Vec<Property>>,
    /// Replaces the periodic balance settings.
    pub balance: Option<BalanceSettings>,
}

/// A decision made for a cluster.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct DecisionEntry {
    pub id: Uuid,
    /// `schedule` or `balance`.
    pub kind: String,
    /// The VM placed, or the VM the balance unit proposed to move.
    pub vm_id: Option<String>,
    /// The host chosen, if any.
    pub host_id: Option<String>,
    pub created_at: String,
    /// The answer as it was returned, explain record included; for a large
    /// answer, its bounded summary (explain summary, best hosts only).
    #[schema(value_type = Object)]
    pub answer: Box<serde_json::value::RawValue>,
    pub href: String,
    /// Set when `answer` is a summary: where the answer as returned is,
    /// while the decisions log's byte budget keeps it.
    pub full_answer: Option<String>,
}

/// How many decisions to list.
#[derive(Clone, Copy, Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DecisionsQuery {
    /// Newest first; default 20, at most 500.
    #[param(maximum = 500)]
    pub limit: Option<u32>,
}

pub(crate) fn cluster_href(id: Uuid) -> String {
    format!("/api/v1/clusters/{id}")
}

pub(crate) fn decision_href(d: &DecisionRecord) -> String {
    format!("{}/decisions/{}", cluster_href(d.cluster_id), d.id)
}

/// Where a summarized decision's answer as returned is kept.
pub(crate) fn full_answer_href(d: &DecisionRecord) -> Option<String> {
    d.summarized.then(|| format!("{}/answer", decision_href(d)))
}

async fn view(conn: &mut Db, c: &ClusterRecord) -> Result<Cluster, ApiError> {
    let policy_name = conn
        .policy(c.policy_id)
        .await?
        .map(|p| p.name)
        .unwrap_or_default();
    Ok(Cluster {
        id: c.id,
        name: c.name.clone(),
        description: c.description.clone(),
        scheduling_policy: NamedRef {
            id: c.policy_id,
            name: policy_name,
            href: policy_href(c.policy_id),
        },
        properties: values_to_properties(&c.params),
        balance: c.balance.into(),
        href: cluster_href(c.id),
        created_at: c.created_at.clone(),
        updated_at: c.updated_at.clone(),
    })
}

pub(crate) async fn load(conn: &mut Db, id: Uuid) -> Result<ClusterRecord, ApiError> {
    conn.cluster(id).await?.ok_or_else(|| ApiError::NotFound {
        resource: "cluster",
        id: id.to_string(),
    })
}

async fn ensure_name_free(conn: &mut Db, name: &str, except: Option<Uuid>) -> Result<(), ApiError> {
    let taken = conn.cluster_id_by_name(name).await?;
    if taken.is_some() && taken != except {
        Err(ApiError::NameTaken {
            resource: "cluster",
            name: name.to_owned(),
        })
    } else {
        Ok(())
    }
}

/// Checks `overrides` against policy `policy_id`. `overrides_are_the_change`
/// says whether a bad override is the request's fault (422) or would be
/// stranded by it (409).
async fn check_overrides(
    state: &AppState,
    conn: &mut Db,
    cluster_name: &str,
    policy_id: Uuid,
    overrides: &ParamValues,
    overrides_are_the_change: bool,
) -> Result<(), ApiError> {
    let record = conn
        .policy(policy_id)
        .await?
        .ok_or_else(|| ApiError::NotFound {
            resource: "scheduling policy",
            id: policy_id.to_string(),
        })?;
    let lookup = from_registry(state.registry());
    let policy = assemble(&record, &lookup, &Default::default()).map_err(|e| match e {
        AssemblyError::Policy(e) => ApiError::Internal(format!(
            "stored policy `{}` does not assemble: {e}",
            record.name
        )),
        other => other.into(),
    })?;
    policy.check_overrides(overrides).map_err(|e| {
        if overrides_are_the_change {
            ApiError::Param(e)
        } else {
            ApiError::ParamsWouldBreak {
                message: format!(
                    "cluster `{cluster_name}` has an override policy `{}` does not accept: {e}",
                    record.name
                ),
                owner: format!("cluster {cluster_name}"),
            }
        }
    })
}

/// Lists every cluster.
#[utoipa::path(get, path = "/api/v1/clusters", tag = "clusters",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every cluster, by name", body = Vec<Cluster>),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    ))]
pub async fn list_clusters(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<Cluster>>, ApiError> {
    let mut conn = state.store().read().await?;
    let clusters = conn.clusters().await?;
    let mut out = Vec::with_capacity(clusters.len());
    for c in &clusters {
        out.push(view(&mut conn, c).await?);
    }
    Ok(axum::Json(out))
}

/// Adds a cluster.
#[utoipa::path(post, path = "/api/v1/clusters", tag = "clusters",
    security(("bearer" = [])),
    request_body = ClusterAdd,
    responses(
        (status = 201, body = Cluster),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "The policy", body = ErrorBody),
        (status = 409, description = "`name_taken`", body = ErrorBody),
        (status = 422, description = "`unknown_parameter`, `invalid_parameter_value`", body = ErrorBody),
    ))]
pub async fn add_cluster(
    State(state): State<AppState>,
    Json(body): Json<ClusterAdd>,
) -> Result<impl IntoResponse, ApiError> {
    check_name("name", &body.name)?;
    let params = properties_to_values(body.properties, "properties")?;
    let balance = match body.balance {
        Some(settings) => settings.checked()?,
        None => PeriodicBalance::default(),
    };
    let mut tx = state.store().write().await?;
    ensure_name_free(&mut tx, &body.name, None).await?;
    let policy_id = match body.scheduling_policy {
        Some(r) => r.id,
        None => tx
            .default_policy_id()
            .await?
            .ok_or_else(|| ApiError::Internal("there is no default policy".to_owned()))?,
    };
    check_overrides(&state, &mut tx, &body.name, policy_id, &params, true).await?;
    let record = ClusterRecord {
        id: Uuid::new_v4(),
        name: body.name,
        description: body.description,
        policy_id,
        params,
        balance,
        created_at: String::new(),
        updated_at: String::new(),
    };
    tx.save_cluster(&record).await?;
    let stored = load(&mut tx, record.id).await?;
    let body = view(&mut tx, &stored).await?;
    tx.commit().await?;
    Ok((
        StatusCode::CREATED,
        location(cluster_href(record.id)),
        axum::Json(body),
    ))
}

/// Gets one cluster.
#[utoipa::path(get, path = "/api/v1/clusters/{id}", tag = "clusters",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    responses(
        (status = 200, body = Cluster),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn get_cluster(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Cluster>, ApiError> {
    let mut conn = state.store().read().await?;
    let cluster = load(&mut conn, id).await?;
    Ok(axum::Json(view(&mut conn, &cluster).await?))
}

/// Renames a cluster, attaches another policy or sets its overrides.
#[utoipa::path(put, path = "/api/v1/clusters/{id}", tag = "clusters",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    request_body = ClusterUpdate,
    responses(
        (status = 200, body = Cluster),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster or the policy", body = ErrorBody),
        (status = 409, description = "`name_taken`, `params_would_break`", body = ErrorBody),
        (status = 422, description = "`unknown_parameter`, `invalid_parameter_value`", body = ErrorBody),
    ))]
pub async fn update_cluster(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<ClusterUpdate>,
) -> Result<axum::Json<Cluster>, ApiError> {
    let mut tx = state.store().write().await?;
    let mut cluster = load(&mut tx, id).await?;
    if let Some(name) = body.name {
        check_name("name", &name)?;
        ensure_name_free(&mut tx, &name, Some(id)).await?;
        cluster.name = name;
    }
    if let Some(description) = body.description {
        cluster.description = description;
    }
    if let Some(policy) = body.scheduling_policy {
        cluster.policy_id = policy.id;
    }
    if let Some(settings) = body.balance {
        cluster.balance = settings.checked()?;
    }
    let params_change = body.properties.is_some();
    if let Some(properties) = body.properties {
        cluster.params = properties_to_values(properties, "properties")?;
    }
    check_overrides(
        &state,
        &mut tx,
        &cluster.name,
        cluster.policy_id,
        &cluster.params,
        params_change,
    )
    .await?;
    tx.save_cluster(&cluster).await?;
    let stored = load(&mut tx, id).await?;
    let body = view(&mut tx, &stored).await?;
    tx.commit().await?;
    Ok(axum::Json(body))
}

/// Deletes a cluster, its held inventory and claims, and its decisions log.
#[utoipa::path(delete, path = "/api/v1/clusters/{id}", tag = "clusters",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn delete_cluster(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = state.store().write().await?;
    load(&mut tx, id).await?;
    tx.delete_cluster(id).await?;
    tx.commit().await?;
    // Its stored inventory, claims and decisions went with the row; the
    // state held in memory goes too, or the claim sweeper would keep
    // working on it for as long as the server runs.
    state.placement().forget(id);
    state.operations().forget(id);
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) fn decision_view(d: DecisionRecord) -> Result<DecisionEntry, ApiError> {
    let (href, full_answer) = (decision_href(&d), full_answer_href(&d));
    let answer = serde_json::value::RawValue::from_string(d.answer)
        .map_err(|e| ApiError::Internal(format!("stored decision {} is not JSON: {e}", d.id)))?;
    Ok(DecisionEntry {
        href,
        full_answer,
        id: d.id,
        kind: d.kind.name().to_owned(),
        vm_id: d.vm_id,
        host_id: d.host_id,
        created_at: d.created_at,
        answer,
    })
}

/// Lists a cluster's latest decisions, newest first.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/decisions", tag = "clusters",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), DecisionsQuery),
    responses(
        (status = 200, body = Vec<DecisionEntry>),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn list_decisions(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(query): Query<DecisionsQuery>,
) -> Result<axum::Json<Vec<DecisionEntry>>, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_DECISIONS_LISTED);
    if limit > MAX_DECISIONS_LISTED {
        return Err(ApiError::InvalidQuery(format!(
            "limit {limit} is above the maximum of {MAX_DECISIONS_LISTED}"
        )));
    }
    let mut conn = state.store().read().await?;
    load(&mut conn, id).await?;
    let decisions = conn.cluster_decisions(id, limit).await?;
    let entries = decisions
        .into_iter()
        .map(decision_view)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(axum::Json(entries))
}

/// Gets one decision of a cluster.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/decisions/{decision_id}", tag = "clusters",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("decision_id" = Uuid, Path, description = "Decision id")),
    responses(
        (status = 200, body = DecisionEntry),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn get_decision(
    State(state): State<AppState>,
    Path((id, decision_id)): Path<(Uuid, Uuid)>,
) -> Result<axum::Json<DecisionEntry>, ApiError> {
    let mut conn = state.store().read().await?;
    let decision = conn
        .decision(decision_id)
        .await?
        .filter(|d| d.cluster_id == id)
        .ok_or_else(|| ApiError::NotFound {
            resource: "decision",
            id: decision_id.to_string(),
        })?;
    Ok(axum::Json(decision_view(decision)?))
}

//! `/api/v1/schedulingpolicies`: scheduling policies and their `filters`,
//! `weights` and `balances` sub-collections, with oVirt's rules. A
//! sub-resource's id is its unit's id, as in oVirt's REST model.
//!
//! Every change runs inside one write transaction: read the policy, apply
//! the change in memory, assemble it with the pipeline's builder (which
//! enforces the composition rules) and check the overrides of the clusters
//! running it, then store it whole.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::assemble::{check_change, from_registry};
use super::error::{ApiError, ErrorBody};
use super::extract::{Json, Path};
use super::types::{
    IdRef, NamedRef, Property, check_name, properties_to_values, values_to_properties,
};
use super::{AppState, location};
use crate::pipeline::{Combination, DEFAULT_FACTOR, DEFAULT_WEIGHT_ON_FAILURE, OnFailure};
use crate::store::policies::{FilterLink, PolicyRecord, WeightLink, position_number};
use crate::store::{self, Db};

/// How score units' answers combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CombinationMode {
    /// oVirt's rank selector: each unit ranks the hosts, ranks times factors
    /// add up. Only a unit's ordering matters.
    Rank,
    /// Nova's weighers: each unit's scores are mapped to [0, 1], times
    /// factors add up. A unit's spread matters.
    Normalised,
}

impl From<CombinationMode> for Combination {
    fn from(c: CombinationMode) -> Self {
        match c {
            CombinationMode::Rank => Combination::Rank,
            CombinationMode::Normalised => Combination::Normalised,
        }
    }
}

impl From<Combination> for CombinationMode {
    fn from(c: Combination) -> Self {
        match c {
            Combination::Rank => CombinationMode::Rank,
            Combination::Normalised => CombinationMode::Normalised,
        }
    }
}

/// What a failing filter or weight does to a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// The decision fails (a constraint that cannot be checked is not met;
    /// a weight the policy insists on is not dropped).
    FailClosed,
    /// The unit is skipped and the failure recorded in the explain record
    /// and the answer's `degraded` list.
    FailOpen,
}

impl From<FailureMode> for OnFailure {
    fn from(f: FailureMode) -> Self {
        match f {
            FailureMode::FailClosed => OnFailure::FailClosed,
            FailureMode::FailOpen => OnFailure::FailOpen,
        }
    }
}

impl From<OnFailure> for FailureMode {
    fn from(f: OnFailure) -> Self {
        match f {
            OnFailure::FailClosed => FailureMode::FailClosed,
            OnFailure::FailOpen => FailureMode::FailOpen,
        }
    }
}

/// A scheduling policy (oVirt's `scheduling_policy`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SchedulingPolicy {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// Built in: read-only (clone it to change it).
    pub locked: bool,
    /// Clusters created without a policy get this one.
    pub default_policy: bool,
    pub combination: CombinationMode,
    /// The policy's parameter values; clusters may override them.
    pub properties: Vec<Property>,
    /// In the order they were added; they run first (position -1), then
    /// the position-0 ones in this order, then the last (position 1).
    pub filters: Vec<Filter>,
    /// Score units, in the order they were added.
    pub weights: Vec<Weight>,
    /// At most one.
    pub balances: Vec<Balance>,
    pub href: String,
    pub created_at: String,
    pub updated_at: String,
}

/// A filter of a policy. Its id is the unit's id.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Filter {
    pub id: Uuid,
    pub scheduling_policy_unit: NamedRef,
    /// -1 runs first, 1 runs last, 0 in between (oVirt's positions).
    pub position: i64,
    pub on_failure: FailureMode,
    /// Runs for the first instance of a multi-instance request only
    /// (Nova's `run_filter_once_per_request`).
    pub run_once: bool,
    pub href: String,
}

/// A score unit of a policy with its factor. Its id is the unit's id.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Weight {
    pub id: Uuid,
    pub scheduling_policy_unit: NamedRef,
    /// How much the unit counts; 0 disables it without removing it.
    pub factor: u32,
    /// `fail_open`: a failing unit is left out of the totals and listed in
    /// the answer's `degraded`; `fail_closed`: the request fails with 422
    /// `score_failed`.
    pub on_failure: FailureMode,
    pub href: String,
}

/// The balance unit of a policy. Its id is the unit's id.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Balance {
    pub id: Uuid,
    pub scheduling_policy_unit: NamedRef,
    pub href: String,
}

/// A new policy. Units are added through its sub-collections, and
/// parameter values once units declaring them are in the policy.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyAdd {
    #[schema(schema_with = crate::names::name_schema, required = true)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Defaults to `rank` (oVirt's behaviour).
    #[serde(default)]
    pub combination: Option<CombinationMode>,
    /// Make it the default policy (the previous default stops being one).
    #[serde(default)]
    pub default_policy: Option<bool>,
}

/// Changes to a policy; fields left out stay as they are. A locked policy
/// accepts only `default_policy: true`.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyUpdate {
    #[schema(schema_with = crate::names::optional_name_schema)]
    pub name: Option<String>,
    pub description: Option<String>,
    pub combination: Option<CombinationMode>,
    /// `true` makes it the default; `false` is refused for the default
    /// policy (make another one the default instead).
    pub default_policy: Option<bool>,
    /// Replaces all of the policy's values. Every key must be declared by a
    /// unit of the policy and every value match its pattern.
    pub properties: Option<Vec<Property>>,
}

/// The clone's name and description.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyClone {
    #[schema(schema_with = crate::names::name_schema, required = true)]
    pub name: String,
    /// Defaults to the original's description.
    pub description: Option<String>,
}

/// A unit to add as a filter.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FilterAdd {
    pub scheduling_policy_unit: IdRef,
    /// -1 first, 0 (default) in between, 1 last; at most one first and one
    /// last per policy.
    #[serde(default)]
    #[schema(minimum = -1, maximum = 1)]
    pub position: i64,
    /// Defaults to `fail_closed`.
    #[serde(default)]
    pub on_failure: Option<FailureMode>,
    /// Run for the first instance of a multi-instance (`count`) request
    /// only, as Nova's `run_filter_once_per_request` filters do (a host's
    /// zone or service state does not change between instances); later
    /// instances consider the hosts it let through. Default `false`.
    #[serde(default)]
    pub run_once: bool,
}

/// A unit to add as a weight.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightAdd {
    pub scheduling_policy_unit: IdRef,
    /// At least 0; defaults to 1 (oVirt's REST default).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 4294967295_i64)]
    pub factor: Option<i64>,
    /// Defaults to `fail_open` (a failing weight is left out and the
    /// decision is `degraded`); `fail_closed` fails the request instead.
    #[serde(default)]
    pub on_failure: Option<FailureMode>,
}

/// A unit to add as the balance unit.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BalanceAdd {
    pub scheduling_policy_unit: IdRef,
}

pub(crate) fn policy_href(id: Uuid) -> String {
    format!("/api/v1/schedulingpolicies/{id}")
}

fn unit_ref(id: Uuid, names: &HashMap<Uuid, String>) -> NamedRef {
    NamedRef {
        id,
        name: names.get(&id).cloned().unwrap_or_default(),
        href: super::units::unit_href(id),
    }
}

fn filter_view(policy: Uuid, f: &FilterLink, names: &HashMap<Uuid, String>) -> Filter {
    Filter {
        id: f.unit_id,
        scheduling_policy_unit: unit_ref(f.unit_id, names),
        position: position_number(f.position),
        on_failure: f.on_failure.into(),
        run_once: f.run_once,
        href: format!("{}/filters/{}", policy_href(policy), f.unit_id),
    }
}

fn weight_view(policy: Uuid, w: &WeightLink, names: &HashMap<Uuid, String>) -> Weight {
    Weight {
        id: w.unit_id,
        scheduling_policy_unit: unit_ref(w.unit_id, names),
        factor: w.factor,
        on_failure: w.on_failure.into(),
        href: format!("{}/weights/{}", policy_href(policy), w.unit_id),
    }
}

fn balance_view(policy: Uuid, unit: Uuid, names: &HashMap<Uuid, String>) -> Balance {
    Balance {
        id: unit,
        scheduling_policy_unit: unit_ref(unit, names),
        href: format!("{}/balances/{}", policy_href(policy), unit),
    }
}

fn view(p: &PolicyRecord, names: &HashMap<Uuid, String>) -> SchedulingPolicy {
    SchedulingPolicy {
        id: p.id,
        name: p.name.clone(),
        description: p.description.clone(),
        locked: p.locked,
        default_policy: p.is_default,
        combination: p.combination.into(),
        properties: values_to_properties(&p.params),
        filters: p
            .filters
            .iter()
            .map(|f| filter_view(p.id, f, names))
            .collect(),
        weights: p
            .weights
            .iter()
            .map(|w| weight_view(p.id, w, names))
            .collect(),
        balances: p
            .balance
            .iter()
            .map(|&b| balance_view(p.id, b, names))
            .collect(),
        href: policy_href(p.id),
        created_at: p.created_at.clone(),
        updated_at: p.updated_at.clone(),
    }
}

async fn load(conn: &mut Db, id: Uuid) -> Result<PolicyRecord, ApiError> {
    conn.policy(id).await?.ok_or_else(|| ApiError::NotFound {
        resource: "scheduling policy",
        id: id.to_string(),
    })
}

async fn load_view(conn: &mut Db, id: Uuid) -> Result<SchedulingPolicy, ApiError> {
    let policy = load(conn, id).await?;
    let names = conn.unit_names().await?;
    Ok(view(&policy, &names))
}

fn ensure_unlocked(policy: &PolicyRecord) -> Result<(), ApiError> {
    if policy.locked {
        Err(ApiError::PolicyLocked {
            policy: policy.name.clone(),
        })
    } else {
        Ok(())
    }
}

async fn ensure_name_free(conn: &mut Db, name: &str, except: Option<Uuid>) -> Result<(), ApiError> {
    match conn.policy_id_by_name(name).await? {
        Some(other) if Some(other) != except => Err(ApiError::NameTaken {
            resource: "scheduling policy",
            name: name.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Checks `policy` as changed, stores it and commits.
async fn check_and_save(
    state: &AppState,
    mut tx: store::Tx,
    policy: &PolicyRecord,
    params_are_the_change: bool,
) -> Result<(), ApiError> {
    let clusters = tx.clusters_with_policy(policy.id).await?;
    let lookup = from_registry(state.registry());
    check_change(policy, &clusters, &lookup, params_are_the_change)?;
    tx.save_policy(policy).await?;
    tx.commit().await?;
    Ok(())
}

/// The unit `id` if it exists and may join a policy.
async fn joinable_unit(conn: &mut Db, id: Uuid) -> Result<(), ApiError> {
    let unit = conn.unit(id).await?.ok_or_else(|| ApiError::NotFound {
        resource: "scheduling policy unit",
        id: id.to_string(),
    })?;
    if !unit.enabled {
        return Err(ApiError::UnitDisabled { unit: unit.name });
    }
    Ok(())
}

/// Lists every policy.
#[utoipa::path(get, path = "/api/v1/schedulingpolicies", tag = "schedulingpolicies",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every policy, by name", body = Vec<SchedulingPolicy>),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    ))]
pub async fn list_policies(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<SchedulingPolicy>>, ApiError> {
    let mut conn = state.store().read().await?;
    let policies = conn.policies().await?;
    let names = conn.unit_names().await?;
    Ok(axum::Json(
        policies.iter().map(|p| view(p, &names)).collect(),
    ))
}

/// Adds an empty policy.
#[utoipa::path(post, path = "/api/v1/schedulingpolicies", tag = "schedulingpolicies",
    security(("bearer" = [])),
    request_body = PolicyAdd,
    responses(
        (status = 201, description = "Created", body = SchedulingPolicy),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, description = "`name_taken`", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
    ))]
pub async fn add_policy(
    State(state): State<AppState>,
    Json(body): Json<PolicyAdd>,
) -> Result<impl IntoResponse, ApiError> {
    check_name("name", &body.name)?;
    let mut tx = state.store().write().await?;
    ensure_name_free(&mut tx, &body.name, None).await?;
    let id = Uuid::new_v4();
    let record = PolicyRecord {
        id,
        name: body.name,
        description: body.description,
        locked: false,
        is_default: false,
        combination: body.combination.map(Into::into).unwrap_or_default(),
        params: Default::default(),
        filters: Vec::new(),
        weights: Vec::new(),
        balance: None,
        created_at: String::new(),
        updated_at: String::new(),
    };
    tx.save_policy(&record).await?;
    if body.default_policy == Some(true) {
        tx.make_default_policy(id).await?;
    }
    let view = load_view(&mut tx, id).await?;
    tx.commit().await?;
    Ok((
        StatusCode::CREATED,
        location(policy_href(id)),
        axum::Json(view),
    ))
}

/// Gets one policy.
#[utoipa::path(get, path = "/api/v1/schedulingpolicies/{id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    responses(
        (status = 200, body = SchedulingPolicy),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn get_policy(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<SchedulingPolicy>, ApiError> {
    let mut conn = state.store().read().await?;
    Ok(axum::Json(load_view(&mut conn, id).await?))
}

/// Changes a policy's name, description, combination, default flag or
/// parameter values.
#[utoipa::path(put, path = "/api/v1/schedulingpolicies/{id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    request_body = PolicyUpdate,
    responses(
        (status = 200, body = SchedulingPolicy),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`policy_locked`, `name_taken`, `default_policy`, `params_would_break`", body = ErrorBody),
        (status = 422, description = "`unknown_parameter`, `invalid_parameter_value`", body = ErrorBody),
    ))]
pub async fn update_policy(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<PolicyUpdate>,
) -> Result<axum::Json<SchedulingPolicy>, ApiError> {
    let mut tx = state.store().write().await?;
    let mut policy = load(&mut tx, id).await?;
    let only_default = body.name.is_none()
        && body.description.is_none()
        && body.combination.is_none()
        && body.properties.is_none();
    if policy.locked && !(only_default && body.default_policy != Some(false)) {
        return Err(ApiError::PolicyLocked {
            policy: policy.name,
        });
    }
    if body.default_policy == Some(false) && policy.is_default {
        return Err(ApiError::DefaultPolicy {
            policy: policy.name,
        });
    }
    if let Some(name) = body.name {
        check_name("name", &name)?;
        ensure_name_free(&mut tx, &name, Some(id)).await?;
        policy.name = name;
    }
    if let Some(description) = body.description {
        policy.description = description;
    }
    if let Some(combination) = body.combination {
        policy.combination = combination.into();
    }
    let params_change = body.properties.is_some();
    if let Some(properties) = body.properties {
        policy.params = properties_to_values(properties, "properties")?;
    }
    let clusters = tx.clusters_with_policy(id).await?;
    let lookup = from_registry(state.registry());
    check_change(&policy, &clusters, &lookup, params_change)?;
    if !policy.locked {
        tx.save_policy(&policy).await?;
    }
    if body.default_policy == Some(true) {
        tx.make_default_policy(id).await?;
    }
    let view = load_view(&mut tx, id).await?;
    tx.commit().await?;
    Ok(axum::Json(view))
}

/// Deletes a policy that no cluster runs.
#[utoipa::path(delete, path = "/api/v1/schedulingpolicies/{id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`policy_locked`, `policy_in_use`, `default_policy`", body = ErrorBody),
    ))]
pub async fn delete_policy(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = state.store().write().await?;
    let policy = load(&mut tx, id).await?;
    ensure_unlocked(&policy)?;
    if policy.is_default {
        return Err(ApiError::DefaultPolicy {
            policy: policy.name,
        });
    }
    let clusters = tx.clusters_using_policy(id).await?;
    if !clusters.is_empty() {
        return Err(ApiError::PolicyInUse {
            policy: policy.name,
            clusters,
        });
    }
    tx.delete_policy(id).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Copies a policy (locked ones included) into a new, unlocked one.
#[utoipa::path(post, path = "/api/v1/schedulingpolicies/{id}/clone", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy to copy")),
    request_body = PolicyClone,
    responses(
        (status = 201, body = SchedulingPolicy),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`name_taken`", body = ErrorBody),
    ))]
pub async fn clone_policy(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<PolicyClone>,
) -> Result<impl IntoResponse, ApiError> {
    check_name("name", &body.name)?;
    let mut tx = state.store().write().await?;
    let source = load(&mut tx, id).await?;
    ensure_name_free(&mut tx, &body.name, None).await?;
    let copy = PolicyRecord {
        id: Uuid::new_v4(),
        name: body.name,
        description: body
            .description
            .unwrap_or_else(|| source.description.clone()),
        locked: false,
        is_default: false,
        ..source
    };
    tx.save_policy(&copy).await?;
    let view = load_view(&mut tx, copy.id).await?;
    tx.commit().await?;
    Ok((
        StatusCode::CREATED,
        location(policy_href(copy.id)),
        axum::Json(view),
    ))
}

// ---- filters ----

/// Lists a policy's filters.
#[utoipa::path(get, path = "/api/v1/schedulingpolicies/{id}/filters", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    responses(
        (status = 200, body = Vec<Filter>),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn list_filters(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<Filter>>, ApiError> {
    Ok(axum::Json(
        load_view(&mut *state.store().read().await?, id)
            .await?
            .filters,
    ))
}

/// Adds a unit to a policy as a filter.
#[utoipa::path(post, path = "/api/v1/schedulingpolicies/{id}/filters", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    request_body = FilterAdd,
    responses(
        (status = 201, body = Filter),
        (status = 400, description = "`invalid_value` (position)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The policy or the unit", body = ErrorBody),
        (status = 409, description = "`policy_locked`, `unit_disabled`, `unit_already_in_policy`, `first_filter_taken`, `last_filter_taken`", body = ErrorBody),
        (status = 422, description = "`unit_type_mismatch`", body = ErrorBody),
    ))]
pub async fn add_filter(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<FilterAdd>,
) -> Result<impl IntoResponse, ApiError> {
    let position = store::policies::position_from_number(body.position).ok_or_else(|| {
        ApiError::InvalidValue {
            field: "position".to_owned(),
            message: format!("{} is not -1 (first), 0 or 1 (last)", body.position),
        }
    })?;
    let unit_id = body.scheduling_policy_unit.id;
    let mut tx = state.store().write().await?;
    let mut policy = load(&mut tx, id).await?;
    ensure_unlocked(&policy)?;
    joinable_unit(&mut tx, unit_id).await?;
    let link = FilterLink {
        unit_id,
        position,
        on_failure: body.on_failure.map(Into::into).unwrap_or_default(),
        run_once: body.run_once,
    };
    policy.filters.push(link);
    let names = tx.unit_names().await?;
    check_and_save(&state, tx, &policy, false).await?;
    Ok((
        StatusCode::CREATED,
        location(format!("{}/filters/{unit_id}", policy_href(id))),
        axum::Json(filter_view(id, &link, &names)),
    ))
}

/// Gets one filter of a policy; its id is the unit's id.
#[utoipa::path(get, path = "/api/v1/schedulingpolicies/{id}/filters/{unit_id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id"), ("unit_id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 200, body = Filter),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn get_filter(
    State(state): State<AppState>,
    Path((id, unit_id)): Path<(Uuid, Uuid)>,
) -> Result<axum::Json<Filter>, ApiError> {
    let view = load_view(&mut *state.store().read().await?, id).await?;
    one_of(view.filters, |f| f.id, unit_id, "filter").map(axum::Json)
}

fn not_in_policy(resource: &'static str, unit_id: Uuid) -> ApiError {
    ApiError::NotFound {
        resource,
        id: unit_id.to_string(),
    }
}

/// The one of a policy's `slot` views (filters, weights, balances) whose
/// unit is `unit_id`.
fn one_of<T>(
    views: Vec<T>,
    unit_of: impl Fn(&T) -> Uuid,
    unit_id: Uuid,
    slot: &'static str,
) -> Result<T, ApiError> {
    views
        .into_iter()
        .find(|view| unit_of(view) == unit_id)
        .ok_or_else(|| not_in_policy(slot, unit_id))
}

/// Takes `unit_id` out of one slot of policy `id` (`remove` says whether
/// it was there) and stores the policy if it still composes.
async fn remove_from_policy(
    state: &AppState,
    id: Uuid,
    unit_id: Uuid,
    slot: &'static str,
    remove: impl FnOnce(&mut PolicyRecord) -> bool,
) -> Result<StatusCode, ApiError> {
    let mut tx = state.store().write().await?;
    let mut policy = load(&mut tx, id).await?;
    ensure_unlocked(&policy)?;
    if !remove(&mut policy) {
        return Err(not_in_policy(slot, unit_id));
    }
    check_and_save(state, tx, &policy, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes a filter from a policy.
#[utoipa::path(delete, path = "/api/v1/schedulingpolicies/{id}/filters/{unit_id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id"), ("unit_id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`policy_locked`, `params_would_break`", body = ErrorBody),
    ))]
pub async fn delete_filter(
    State(state): State<AppState>,
    Path((id, unit_id)): Path<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    remove_from_policy(&state, id, unit_id, "filter", |policy| {
        let before = policy.filters.len();
        policy.filters.retain(|f| f.unit_id != unit_id);
        policy.filters.len() < before
    })
    .await
}

// ---- weights ----

/// Lists a policy's weights.
#[utoipa::path(get, path = "/api/v1/schedulingpolicies/{id}/weights", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    responses(
        (status = 200, body = Vec<Weight>),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn list_weights(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<Weight>>, ApiError> {
    Ok(axum::Json(
        load_view(&mut *state.store().read().await?, id)
            .await?
            .weights,
    ))
}

/// Adds a unit to a policy as a weight (score unit) with a factor.
#[utoipa::path(post, path = "/api/v1/schedulingpolicies/{id}/weights", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    request_body = WeightAdd,
    responses(
        (status = 201, body = Weight),
        (status = 400, description = "`invalid_value` (factor)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The policy or the unit", body = ErrorBody),
        (status = 409, description = "`policy_locked`, `unit_disabled`, `unit_already_in_policy`", body = ErrorBody),
        (status = 422, description = "`unit_type_mismatch`", body = ErrorBody),
    ))]
pub async fn add_weight(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<WeightAdd>,
) -> Result<impl IntoResponse, ApiError> {
    let factor = match body.factor {
        None => DEFAULT_FACTOR,
        Some(f) => u32::try_from(f).map_err(|_| ApiError::InvalidValue {
            field: "factor".to_owned(),
            message: format!("{f} is not between 0 and {}", u32::MAX),
        })?,
    };
    let unit_id = body.scheduling_policy_unit.id;
    let mut tx = state.store().write().await?;
    let mut policy = load(&mut tx, id).await?;
    ensure_unlocked(&policy)?;
    joinable_unit(&mut tx, unit_id).await?;
    let link = WeightLink {
        unit_id,
        factor,
        on_failure: body
            .on_failure
            .map_or(DEFAULT_WEIGHT_ON_FAILURE, Into::into),
    };
    policy.weights.push(link);
    let names = tx.unit_names().await?;
    check_and_save(&state, tx, &policy, false).await?;
    Ok((
        StatusCode::CREATED,
        location(format!("{}/weights/{unit_id}", policy_href(id))),
        axum::Json(weight_view(id, &link, &names)),
    ))
}

/// Gets one weight of a policy; its id is the unit's id.
#[utoipa::path(get, path = "/api/v1/schedulingpolicies/{id}/weights/{unit_id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id"), ("unit_id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 200, body = Weight),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn get_weight(
    State(state): State<AppState>,
    Path((id, unit_id)): Path<(Uuid, Uuid)>,
) -> Result<axum::Json<Weight>, ApiError> {
    let view = load_view(&mut *state.store().read().await?, id).await?;
    one_of(view.weights, |w| w.id, unit_id, "weight").map(axum::Json)
}

/// Removes a weight from a policy.
#[utoipa::path(delete, path = "/api/v1/schedulingpolicies/{id}/weights/{unit_id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id"), ("unit_id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`policy_locked`, `params_would_break`", body = ErrorBody),
    ))]
pub async fn delete_weight(
    State(state): State<AppState>,
    Path((id, unit_id)): Path<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    remove_from_policy(&state, id, unit_id, "weight", |policy| {
        let before = policy.weights.len();
        policy.weights.retain(|w| w.unit_id != unit_id);
        policy.weights.len() < before
    })
    .await
}

// ---- balances ----

/// Lists a policy's balance unit (zero or one).
#[utoipa::path(get, path = "/api/v1/schedulingpolicies/{id}/balances", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    responses(
        (status = 200, body = Vec<Balance>),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn list_balances(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<Balance>>, ApiError> {
    Ok(axum::Json(
        load_view(&mut *state.store().read().await?, id)
            .await?
            .balances,
    ))
}

/// Sets a policy's balance unit.
#[utoipa::path(post, path = "/api/v1/schedulingpolicies/{id}/balances", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id")),
    request_body = BalanceAdd,
    responses(
        (status = 201, body = Balance),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "The policy or the unit", body = ErrorBody),
        (status = 409, description = "`policy_locked`, `unit_disabled`, `unit_already_in_policy`, `balance_taken`", body = ErrorBody),
        (status = 422, description = "`unit_type_mismatch`", body = ErrorBody),
    ))]
pub async fn add_balance(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<BalanceAdd>,
) -> Result<impl IntoResponse, ApiError> {
    let unit_id = body.scheduling_policy_unit.id;
    let mut tx = state.store().write().await?;
    let mut policy = load(&mut tx, id).await?;
    ensure_unlocked(&policy)?;
    joinable_unit(&mut tx, unit_id).await?;
    let names = tx.unit_names().await?;
    if let Some(existing) = policy.balance {
        let name = |id: Uuid| names.get(&id).cloned().unwrap_or_default();
        return Err(if existing == unit_id {
            ApiError::PolicyConflict(crate::pipeline::PolicyError::DuplicateUnit {
                unit: name(unit_id),
            })
        } else {
            ApiError::PolicyConflict(crate::pipeline::PolicyError::SecondBalance {
                unit: name(unit_id),
                balance: name(existing),
            })
        });
    }
    policy.balance = Some(unit_id);
    check_and_save(&state, tx, &policy, false).await?;
    Ok((
        StatusCode::CREATED,
        location(format!("{}/balances/{unit_id}", policy_href(id))),
        axum::Json(balance_view(id, unit_id, &names)),
    ))
}

/// Gets a policy's balance unit; its id is the unit's id.
#[utoipa::path(get, path = "/api/v1/schedulingpolicies/{id}/balances/{unit_id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id"), ("unit_id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 200, body = Balance),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn get_balance(
    State(state): State<AppState>,
    Path((id, unit_id)): Path<(Uuid, Uuid)>,
) -> Result<axum::Json<Balance>, ApiError> {
    let view = load_view(&mut *state.store().read().await?, id).await?;
    one_of(view.balances, |b| b.id, unit_id, "balance").map(axum::Json)
}

/// Removes a policy's balance unit.
#[utoipa::path(delete, path = "/api/v1/schedulingpolicies/{id}/balances/{unit_id}", tag = "schedulingpolicies",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Policy id"), ("unit_id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`policy_locked`, `params_would_break`", body = ErrorBody),
    ))]
pub async fn delete_balance(
    State(state): State<AppState>,
    Path((id, unit_id)): Path<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    remove_from_policy(&state, id, unit_id, "balance", |policy| {
        policy.balance.take_if(|b| *b == unit_id).is_some()
    })
    .await
}

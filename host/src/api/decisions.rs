//! `GET /api/v1/decisions`: the decisions log across clusters, filtered by
//! cluster, VM and time, newest first, each decision with its answer
//! (explain record included; a bounded summary for a large answer) and the
//! claims it made; and `GET /api/v1/clusters/{id}/decisions/{decision_id}/answer`,
//! a decision's answer exactly as it was returned, kept apart from a
//! summarized row so that listing never reads it.
//!
//! A VM matches a decision that placed it, proposed to move it, or claimed
//! resources for it (each instance of a multi-instance request has its own
//! claim). Retention is bounded by count per cluster and by age (see
//! `crate::store::decisions::Retention`), and the whole log by a byte
//! budget (`sandpiper serve --decisions-max-mib`) that drops the full
//! answers of summarized decisions first, oldest first, then the oldest
//! decisions.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::AppState;
use super::clusters::{decision_href, full_answer_href};
use super::error::{ApiError, ErrorBody};
use super::extract::{Path, Query};
use crate::store::decisions::{DecisionQuery, DecisionWithClaims};
use crate::time::Timestamp;

/// Decisions listed when the request does not say how many.
pub const DEFAULT_LISTED: u32 = 50;

/// Most decisions one request lists: each carries its explain record, and
/// a page of a few hundred is already more than anyone reads.
pub const MAX_LISTED: u32 = 500;

/// Which decisions to list.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DecisionFilter {
    /// Only this cluster's decisions.
    pub cluster_id: Option<Uuid>,
    /// Only decisions about this VM (placed, moved or claimed for).
    pub vm_id: Option<String>,
    /// Only decisions made at or after this time (RFC 3339, UTC).
    #[param(format = DateTime)]
    pub since: Option<String>,
    /// Only decisions made before this time (RFC 3339, UTC).
    #[param(format = DateTime)]
    pub until: Option<String>,
    /// Only decisions after this one, newest first: the last id of the
    /// previous page. None are listed once that decision has left the log.
    pub after: Option<Uuid>,
    /// Newest first; default 50, at most 500.
    #[param(maximum = 500)]
    pub limit: Option<u32>,
}

/// A claim a decision made.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct DecisionClaim {
    pub vm_id: String,
    pub host_id: String,
}

/// A logged decision.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LoggedDecisionEntry {
    pub id: Uuid,
    pub cluster_id: Uuid,
    /// `schedule` or `balance`.
    pub kind: String,
    pub vm_id: Option<String>,
    pub host_id: Option<String>,
    pub created_at: String,
    /// The claims the decision made (none for a decision over inline hosts).
    pub claims: Vec<DecisionClaim>,
    /// The answer as it was returned, with its explain record; for a large
    /// answer, its bounded summary (explain summary, best hosts only).
    #[schema(value_type = Object)]
    pub answer: Box<serde_json::value::RawValue>,
    pub href: String,
    /// Set when `answer` is a summary: where the answer as returned is,
    /// while the decisions log's byte budget keeps it.
    pub full_answer: Option<String>,
}

/// The decisions found.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct DecisionPage {
    pub decisions: Vec<LoggedDecisionEntry>,
}

fn time(field: &str, value: Option<&str>) -> Result<Option<Timestamp>, ApiError> {
    value
        .map(|text| {
            Timestamp::parse_rfc3339(text).ok_or_else(|| {
                ApiError::InvalidQuery(format!(
                    "{field} must be an RFC 3339 date-time such as 2026-11-22T10:04:05Z, not `{text}`"
                ))
            })
        })
        .transpose()
}

/// Lists logged decisions, newest first.
#[utoipa::path(get, path = "/api/v1/decisions", tag = "decisions",
    security(("bearer" = [])),
    params(DecisionFilter),
    responses(
        (status = 200, body = DecisionPage),
        (status = 400, description = "`invalid_query`: a bad time, id or limit", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    Query(filter): Query<DecisionFilter>,
) -> Result<axum::Json<DecisionPage>, ApiError> {
    let limit = filter.limit.unwrap_or(DEFAULT_LISTED);
    if limit > MAX_LISTED {
        return Err(ApiError::InvalidQuery(format!(
            "limit {limit} is above the maximum of {MAX_LISTED}"
        )));
    }
    let query = DecisionQuery {
        since: time("since", filter.since.as_deref())?,
        until: time("until", filter.until.as_deref())?,
        cluster_id: filter.cluster_id,
        vm_id: filter.vm_id,
        after: filter.after,
        limit,
    };
    let page = state.store().read().await?.decision_page(&query).await?;
    let decisions = page
        .into_iter()
        .map(|DecisionWithClaims { record, claims }| {
            let id = record.id;
            let (href, full_answer) = (decision_href(&record), full_answer_href(&record));
            let answer = serde_json::value::RawValue::from_string(record.answer).map_err(|e| {
                ApiError::Internal(format!("stored decision {id} is not JSON: {e}"))
            })?;
            Ok(LoggedDecisionEntry {
                href,
                full_answer,
                id,
                cluster_id: record.cluster_id,
                kind: record.kind.name().to_owned(),
                vm_id: record.vm_id,
                host_id: record.host_id,
                created_at: record.created_at,
                claims: claims
                    .into_iter()
                    .map(|(vm_id, host_id)| DecisionClaim { vm_id, host_id })
                    .collect(),
                answer,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    Ok(axum::Json(DecisionPage { decisions }))
}

/// A decision's answer exactly as it was returned to the engine, explain
/// record included: for a large answer, whose log row holds a summary, the
/// full answer kept apart while the decisions log's byte budget keeps it
/// (the oldest such answers are dropped first).
#[utoipa::path(get, path = "/api/v1/clusters/{id}/decisions/{decision_id}/answer", tag = "clusters",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("decision_id" = Uuid, Path, description = "Decision id")),
    responses(
        (status = 200, description = "The answer as it was returned: a `ScheduleAnswer`, `HeldScheduleAnswer` or `BalanceAnswer`", content_type = "application/json"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "`not_found`: no such decision of the cluster, or its full answer was dropped by the log's byte budget", body = ErrorBody),
    ))]
pub async fn full_answer(
    State(state): State<AppState>,
    Path((id, decision_id)): Path<(Uuid, Uuid)>,
) -> Result<Response, ApiError> {
    let found = state
        .store()
        .read()
        .await?
        .full_answer(decision_id)
        .await?
        .filter(|f| f.cluster_id == id)
        .ok_or_else(|| ApiError::NotFound {
            resource: "decision",
            id: decision_id.to_string(),
        })?;
    let answer = found.answer.ok_or_else(|| ApiError::NotFound {
        resource: "full answer of decision",
        id: decision_id.to_string(),
    })?;
    Ok(([(header::CONTENT_TYPE, "application/json")], answer).into_response())
}

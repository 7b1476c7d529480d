//! `GET /api/v1/decisions`: the decisions log across clusters, filtered by
//! cluster, VM and time, newest first, each decision with its answer
//! (explain record included) and the claims it made.
//!
//! A VM matches a decision that placed it, proposed to move it, or claimed
//! resources for it (each instance of a multi-instance request has its own
//! claim). Retention is bounded by count per cluster and by age (see
//! `crate::placement::persist`).

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::AppState;
use super::clusters::cluster_href;
use super::error::ApiError;
use super::extract::Query;
use super::types::ErrorBody;
use crate::placement::Timestamp;

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
    pub since: Option<String>,
    /// Only decisions made before this time (RFC 3339, UTC).
    pub until: Option<String>,
    /// Newest first; default 50, at most 500.
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
    /// The answer as it was returned, with its explain record.
    #[schema(value_type = Object)]
    pub answer: Box<serde_json::value::RawValue>,
    pub href: String,
}

/// The decisions found.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct DecisionPage {
    pub decisions: Vec<LoggedDecisionEntry>,
}

fn time(field: &str, value: Option<&str>) -> Result<Option<String>, ApiError> {
    value
        .map(|text| {
            Timestamp::parse_rfc3339(text)
                .map(Timestamp::to_rfc3339)
                .ok_or_else(|| {
                    ApiError::InvalidQuery(format!(
                        "{field} must be an RFC 3339 UTC time such as 2026-11-22T10:04:05Z, not `{text}`"
                    ))
                })
        })
        .transpose()
}

type Row = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
);

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
    let since = time("since", filter.since.as_deref())?;
    let until = time("until", filter.until.as_deref())?;
    let mut conn = state.store().read().await?;
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT d.id, d.cluster_id, d.kind, d.vm_id, d.host_id, d.answer, d.created_at \
         FROM decisions d \
         WHERE (?1 IS NULL OR d.cluster_id = ?1) \
           AND (?2 IS NULL OR d.vm_id = ?2 \
                OR d.id IN (SELECT decision_id FROM decision_claims WHERE vm_id = ?2)) \
           AND (?3 IS NULL OR d.created_at >= ?3) \
           AND (?4 IS NULL OR d.created_at < ?4) \
         ORDER BY d.created_at DESC, d.rowid DESC LIMIT ?5",
    )
    .bind(filter.cluster_id.map(|id| id.to_string()))
    .bind(&filter.vm_id)
    .bind(since)
    .bind(until)
    .bind(i64::from(limit))
    .fetch_all(&mut *conn)
    .await
    .map_err(crate::store::StoreError::from)?;
    let mut decisions = Vec::with_capacity(rows.len());
    for (id, cluster_id, kind, vm_id, host_id, answer, created_at) in rows {
        let claims: Vec<(String, String)> = sqlx::query_as(
            "SELECT vm_id, host_id FROM decision_claims WHERE decision_id = ? ORDER BY rowid",
        )
        .bind(&id)
        .fetch_all(&mut *conn)
        .await
        .map_err(crate::store::StoreError::from)?;
        let cluster_id = crate::store::parse_id(&cluster_id)?;
        let answer = serde_json::value::RawValue::from_string(answer)
            .map_err(|e| ApiError::Internal(format!("stored decision {id} is not JSON: {e}")))?;
        decisions.push(LoggedDecisionEntry {
            href: format!("{}/decisions/{id}", cluster_href(cluster_id)),
            id: crate::store::parse_id(&id)?,
            cluster_id,
            kind,
            vm_id,
            host_id,
            created_at,
            claims: claims
                .into_iter()
                .map(|(vm_id, host_id)| DecisionClaim { vm_id, host_id })
                .collect(),
            answer,
        });
    }
    Ok(axum::Json(DecisionPage { decisions }))
}

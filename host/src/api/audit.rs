//! The audit log: who changed what, and when. Every request to an admin
//! route that changes something (tokens, units, policies, clusters, pools:
//! [`access::is_admin_change`]) and passes the token check is recorded
//! once its answer is known, whatever the answer, by [`record`]; admins
//! read the log at `GET /api/v1/audit`, newest first.
//!
//! **When a row is written.** After the handler, before the answer leaves:
//! an answered change has its row unless the process dies between the two,
//! or the store refuses the row (logged at error level with the whole
//! entry, so the change is still in the server's log). Writing the row in
//! the handler's own transaction would close that gap, at the price of one
//! audit call in each of some thirty handlers; one middleware that cannot
//! be forgotten by a new route was chosen instead. Reads, engine calls
//! (schedule, claims, operations: the decisions log and the operations
//! queue keep those) and refused tokens (401, 403: no one to name) are not
//! audited.

use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::AppState;
use super::access;
use super::error::{ApiError, ErrorBody, ErrorCode};
use super::extract::Query;
use crate::auth::Principal;
use crate::role::Role;
use crate::store::audit::{AuditEntry as StoredEntry, NewAuditEntry};

/// How long entries are kept by default: over a year, so a yearly review
/// still finds last year's changes.
pub const DEFAULT_AUDIT_RETAINED_DAYS: u32 = 400;

/// Entries listed when the request does not say how many.
pub const DEFAULT_LISTED: u32 = 100;

/// Most entries one request lists.
pub const MAX_LISTED: u32 = 500;

/// Middleware: records every admin change that passed the token check.
/// Layered inside `access::authorize`, which hands it the [`Principal`].
pub async fn record(
    State(state): State<AppState>,
    matched: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let route = matched.map(|m| m.as_str().to_owned());
    let audited = route
        .as_deref()
        .is_some_and(|route| access::is_admin_change(request.method(), route));
    let principal = request.extensions().get::<Principal>().cloned();
    let (Some(route), Some(principal), true) = (route, principal, audited) else {
        return next.run(request).await;
    };
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    // The id `observe` gave the request (the client's, or a new one).
    let request_id = super::observe::current_request_id();
    let response = next.run(request).await;
    let target = response
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map_or(path, str::to_owned);
    let entry = NewAuditEntry {
        token_id: principal.token_id,
        token_name: principal.name,
        role: principal.role,
        method,
        route,
        target,
        status: response.status().as_u16(),
        error_code: response
            .extensions()
            .get::<ErrorCode>()
            .map(|code| code.0.to_owned()),
        request_id,
    };
    if let Err(e) = store(&state, &entry).await {
        tracing::error!(error = %e, ?entry, "audit entry not stored");
    }
    response
}

async fn store(state: &AppState, entry: &NewAuditEntry) -> Result<(), ApiError> {
    let mut tx = state.store().write().await?;
    tx.insert_audit(entry, state.retention().audit).await?;
    tx.commit().await?;
    Ok(())
}

/// How long entries are kept, from `--audit-retained-days`.
pub fn retained(days: u32) -> Duration {
    Duration::from_secs(u64::from(days) * 86_400)
}

/// Which entries to list.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditPage {
    /// Only entries older than this one (the last `id` of the previous
    /// page).
    pub before: Option<i64>,
    /// Newest first; default 100, at most 500.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// One recorded change.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct AuditEntry {
    /// Increases with every entry; pages with `before`.
    pub id: i64,
    /// When the answer was known (RFC 3339, UTC).
    pub at: String,
    /// Who: the token's id.
    pub token_id: Uuid,
    /// Who: the token's name.
    pub token_name: String,
    /// Who: the token's role (`admin`).
    #[schema(value_type = String)]
    pub role: Role,
    /// What: the method.
    pub method: String,
    /// What: the route as declared, e.g. `/api/v1/clusters/{id}`.
    pub route: String,
    /// What: the resource changed (a created resource's location, else the
    /// path).
    pub target: String,
    /// What came of it: the answer's status.
    pub status: u16,
    /// What came of it: the error code, when the change was refused or
    /// failed.
    pub error_code: Option<String>,
    /// The request's id (its `X-Request-Id`, sent or generated), to find
    /// it in the server's log.
    pub request_id: Option<String>,
}

impl From<StoredEntry> for AuditEntry {
    fn from(stored: StoredEntry) -> Self {
        let e = stored.entry;
        AuditEntry {
            id: stored.id,
            at: stored.at,
            token_id: e.token_id,
            token_name: e.token_name,
            role: e.role,
            method: e.method,
            route: e.route,
            target: e.target,
            status: e.status,
            error_code: e.error_code,
            request_id: e.request_id,
        }
    }
}

/// Lists the audit log, newest first.
#[utoipa::path(get, path = "/api/v1/audit", tag = "audit",
    operation_id = "list_audit",
    security(("bearer" = [])),
    params(AuditPage),
    responses(
        (status = 200, description = "Entries, newest first", body = Vec<AuditEntry>),
        (status = 400, description = "`invalid_query`: a bad `before` or `limit`", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    ))]
pub async fn list(
    State(state): State<AppState>,
    Query(page): Query<AuditPage>,
) -> Result<axum::Json<Vec<AuditEntry>>, ApiError> {
    let limit = page.limit.unwrap_or(DEFAULT_LISTED);
    if !(1..=MAX_LISTED).contains(&limit) {
        return Err(ApiError::InvalidQuery(format!(
            "limit {limit} is not between 1 and {MAX_LISTED}"
        )));
    }
    let mut conn = state.store().read().await?;
    let entries = conn.audit_entries(page.before, limit).await?;
    Ok(axum::Json(
        entries.into_iter().map(AuditEntry::from).collect(),
    ))
}

//! `GET /metrics`: the process's metrics in Prometheus' text format, for a
//! Prometheus scrape with a `reader` token (docs/metrics.md lists every
//! metric and the scrape configuration).

use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorBody};
use crate::metrics;

/// The process's metrics.
///
/// Decisions by cluster and result, unit calls by unit and role (time,
/// fuel, failures by kind, skipped calls), claims, inventories, HTTP
/// requests by route and status, upload compile times.
#[utoipa::path(get, path = "/metrics", tag = "health",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Prometheus' text format 0.0.4", content_type = "text/plain; version=0.0.4; charset=utf-8", body = String),
        (status = 401, description = "`unauthenticated`: no token, or not a valid one", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token's role is below `reader` (every role includes it)", body = ErrorBody),
    ))]
pub async fn scrape() -> Result<Response, ApiError> {
    let text = metrics::encode()
        .map_err(|e| ApiError::Internal(format!("could not encode the metrics: {e}")))?;
    Ok(([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response())
}

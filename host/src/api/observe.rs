//! What every request leaves behind for operators: a request id (the
//! client's `X-Request-Id` when it sent a sane one, else a new one),
//! returned in the `X-Request-Id` response header and in every error body;
//! a `tracing` span carrying it, the route, the cluster and, once decided,
//! the decision id; one access log line; and the HTTP metrics by route and
//! status (`crate::metrics`).
//!
//! Two layers: [`observe`] wraps the whole router (so a 404 or a refused
//! token is observed too), and [`matched_route`] runs once a route matched
//! and hands the route's template out to it, since only the router knows
//! which route matched.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument as _;
use tracing::field::Empty;
use uuid::Uuid;

use crate::metrics;

/// The header a request id travels in, both ways.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest request id taken from a client, bytes: room for any UUID or
/// trace id an engine or proxy makes (those are 32 to 64 characters),
/// short enough that a client cannot make every log line long.
pub const MAX_REQUEST_ID_BYTES: usize = 128;

/// The `tracing` target of the access log lines, so an operator can filter
/// them apart (`SANDPIPER_LOG=info,sandpiper::access=warn` drops them).
pub const ACCESS_LOG_TARGET: &str = "sandpiper::access";

tokio::task_local! {
    /// The id of the request being answered, for its error body.
    static REQUEST_ID: Arc<str>;
}

/// The id of the request this task answers, if it answers one: error
/// bodies carry it (`ErrorBody::request_id`).
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(|id| id.to_string()).ok()
}

/// A client's request id, when it is one we can log and return as it came:
/// 1 to [`MAX_REQUEST_ID_BYTES`] bytes of visible ASCII (no spaces, no
/// control characters, nothing to escape in a log line).
fn sane(value: &HeaderValue) -> Option<&str> {
    let bytes = value.as_bytes();
    let fits = (1..=MAX_REQUEST_ID_BYTES).contains(&bytes.len())
        && bytes.iter().all(|b| (0x21..=0x7e).contains(b));
    fits.then(|| value.to_str().ok()).flatten()
}

/// The matched route's template, handed from [`matched_route`] out to
/// [`observe`] in the response's extensions.
#[derive(Clone)]
struct Route(MatchedPath);

/// The outer layer: request id, span, access log line and metrics.
pub async fn observe(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id: Arc<str> = match request.headers().get(&REQUEST_ID_HEADER).and_then(sane) {
        Some(sent) => Arc::from(sent),
        None => Arc::from(Uuid::new_v4().simple().to_string()),
    };
    let method = request.method().clone();
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %method,
        route = Empty,
        cluster = Empty,
        decision_id = Empty,
    );
    let mut response = REQUEST_ID
        .scope(Arc::clone(&id), next.run(request))
        .instrument(span.clone())
        .await;
    let elapsed = started.elapsed();
    let route = response.extensions_mut().remove::<Route>();
    let route = route.as_ref().map(|r| r.0.as_str());
    let status = response.status().as_u16();
    metrics::http_request(method.as_str(), route, status, elapsed);
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    span.in_scope(|| {
        tracing::info!(
            target: ACCESS_LOG_TARGET,
            method = %method,
            route = route.unwrap_or(metrics::UNMATCHED_ROUTE),
            status,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            "request"
        );
    });
    response
}

/// The inner layer, once a route matched: names the route and the
/// cluster on the request's span and hands the route out to [`observe`].
pub async fn matched_route(matched: MatchedPath, request: Request, next: Next) -> Response {
    let span = tracing::Span::current();
    span.record("route", matched.as_str());
    if let Some(cluster) = cluster_in_path(matched.as_str(), request.uri().path()) {
        span.record("cluster", cluster);
    }
    let mut response = next.run(request).await;
    response.extensions_mut().insert(Route(matched));
    response
}

/// The cluster a request's path names (`/api/v1/clusters/{id}/...`,
/// `/k8s/{cluster}/...`), read by walking the route's template beside the
/// path.
fn cluster_in_path<'p>(template: &str, path: &'p str) -> Option<&'p str> {
    let mut previous = "";
    for (t, p) in template.split('/').zip(path.split('/')) {
        if t == "{cluster}" || (t == "{id}" && previous == "clusters") {
            return Some(p);
        }
        previous = t;
    }
    None
}

/// Records the decision's id on the request's span (a no-op outside a
/// request: the pools' starts and the periodic balance decide too).
pub fn record_decision(id: Uuid) {
    tracing::Span::current().record("decision_id", tracing::field::display(id));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bounded_visible_ascii_ids_are_taken() {
        let ok = HeaderValue::from_static("req-1234_ABC.def");
        assert_eq!(sane(&ok), Some("req-1234_ABC.def"));
        for bad in [
            HeaderValue::from_static(""),
            HeaderValue::from_static("has space"),
            HeaderValue::from_str(&"x".repeat(MAX_REQUEST_ID_BYTES + 1)).expect("ascii"),
            HeaderValue::from_bytes(b"caf\xc3\xa9").expect("opaque bytes"),
        ] {
            assert_eq!(sane(&bad), None, "{bad:?}");
        }
        let longest = HeaderValue::from_str(&"x".repeat(MAX_REQUEST_ID_BYTES)).expect("ascii");
        assert!(sane(&longest).is_some());
    }

    #[test]
    fn the_cluster_is_read_from_cluster_routes_only() {
        let id = "0b6f7a56-2b0b-4f5a-9a57-1b8a6b2f1f10";
        assert_eq!(
            cluster_in_path(
                "/api/v1/clusters/{id}/schedule",
                &format!("/api/v1/clusters/{id}/schedule")
            ),
            Some(id)
        );
        assert_eq!(
            cluster_in_path("/k8s/{cluster}/filter", "/k8s/prod/filter"),
            Some("prod")
        );
        assert_eq!(
            cluster_in_path(
                "/api/v1/schedulingpolicies/{id}",
                "/api/v1/schedulingpolicies/x"
            ),
            None
        );
    }
}

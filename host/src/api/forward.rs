//! Forwarding: with several replicas (docs/fleet.md), a request that names
//! a cluster is served by the replica that owns the cluster, whichever
//! replica it reached. This middleware sits after the access check (a
//! request is only forwarded for a caller who may make it; the owner checks
//! the token again) and before everything that acts on the request.
//!
//! A cluster is named by the path: `/api/v1/clusters/{id}/...`,
//! `/k8s/{cluster}/...` (an id or a name) and `/api/v1/vmpools/{id}/...`
//! (the pool's cluster). Every other route reads or writes the shared
//! database only, and any replica serves it.
//!
//! A forwarded request carries [`FORWARDED_BY`]; a replica that gets one
//! for a cluster it does not own (the cluster moved meanwhile) answers 503
//! `cluster_moved` instead of forwarding again, so a request makes at most
//! one hop.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use crate::fleet::Owner;

/// The header a forwarded request carries: the forwarding replica's id.
pub const FORWARDED_BY: &str = "x-sandpiper-forwarded-by";

/// How long connecting to the owner may take: replicas are on one network,
/// so a connection not made in this time is to a replica that is gone.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the owner may take to start answering: longer than the
/// longest wait a request may ask for (an operations lease's long poll,
/// [`crate::operations::MAX_LEASE_WAIT`]) plus a slow decision, so that
/// only an owner that hangs (paused, its machine frozen) runs into it.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Headers about the connection to this replica, not the request
/// (RFC 9110 section 7.6.1): never passed on.
const HOP_BY_HOP: [HeaderName; 5] = [
    header::CONNECTION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
];

/// The one client every forwarded request goes through: pooled
/// connections to the other replicas.
fn client() -> &'static Client<HttpConnector, Body> {
    static CLIENT: OnceLock<Client<HttpConnector, Body>> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        Client::builder(TokioExecutor::new()).build(connector)
    })
}

/// Middleware: serves the request here if this replica owns the cluster
/// it names (taking the cluster if nobody does), forwards it otherwise.
pub async fn to_owner(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let fleet = state.fleet();
    if !fleet.is_shared() {
        return next.run(request).await;
    }
    let Some(cluster_id) = cluster_named(&state, request.uri().path()).await else {
        return next.run(request).await;
    };
    match fleet.owner(cluster_id).await {
        Ok(Owner::Here) => next.run(request).await,
        Ok(Owner::There { .. }) if request.headers().contains_key(FORWARDED_BY) => {
            ApiError::cluster_moved(cluster_id).into_response()
        }
        Ok(Owner::There { replica_id, url }) => {
            let me = fleet.config().map_or("", |c| c.replica_id.as_str());
            match forward(request, &url, me).await {
                Ok(response) => {
                    // `cluster_moved` (or the owner's own trouble): ask
                    // the database who owns it next time.
                    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
                        fleet.forget_owner(cluster_id);
                    }
                    response
                }
                Err(e) => {
                    // Ask the database again next time: the owner may be
                    // gone, and its lease about to end.
                    fleet.forget_owner(cluster_id);
                    ApiError::owner_unreachable(cluster_id, &replica_id, &e).into_response()
                }
            }
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The cluster a request's path names, if it names one that exists.
async fn cluster_named(state: &AppState, path: &str) -> Option<Uuid> {
    let mut segments = path.trim_start_matches('/').split('/');
    match (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) {
        (Some("api"), Some("v1"), Some("clusters"), Some(id)) => Uuid::parse_str(id).ok(),
        (Some("api"), Some("v1"), Some("vmpools"), Some(id)) => {
            let id = Uuid::parse_str(id).ok()?;
            let mut conn = state.store().read().await.ok()?;
            conn.vm_pool(id).await.ok()?.map(|pool| pool.cluster_id)
        }
        (Some("k8s"), Some(cluster), _, _) => {
            if let Ok(id) = Uuid::parse_str(cluster) {
                return Some(id);
            }
            let mut conn = state.store().read().await.ok()?;
            conn.cluster_id_by_name(cluster).await.ok()?
        }
        _ => None,
    }
}

/// Sends `request` to the replica at `url` and returns its answer as it
/// comes (streamed both ways: event streams and long polls pass through).
async fn forward(request: Request, url: &str, me: &str) -> Result<Response, String> {
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    parts.uri = format!("{url}{path}")
        .parse::<Uri>()
        .map_err(|e| format!("bad owner URL `{url}`: {e}"))?;
    for name in &HOP_BY_HOP {
        parts.headers.remove(name);
    }
    parts.headers.remove(header::HOST);
    parts.headers.insert(
        HeaderName::from_static(FORWARDED_BY),
        HeaderValue::from_str(me).map_err(|e| e.to_string())?,
    );
    let answer = tokio::time::timeout(
        ANSWER_TIMEOUT,
        client().request(Request::from_parts(parts, body)),
    )
    .await
    .map_err(|_| format!("no answer within {} s", ANSWER_TIMEOUT.as_secs()))?
    .map_err(|e| e.to_string())?;
    Ok(answer.map(Body::new))
}

//! kube-scheduler's extender verbs: `POST /k8s/{cluster}/filter` and
//! `POST /k8s/{cluster}/prioritize`, the cluster named by id or name, so
//! that an extender's `urlPrefix` is `http(s)://<sandpiper>/k8s/<cluster>`.
//! The translation and the answers are `crate::extender`; the decision is
//! the one every front door makes (`placement::pick_over` with the
//! cluster's prepared policy), over the nodes sent whole or over the
//! cluster's held inventory, and claims nothing.
//!
//! **Errors.** kube-scheduler treats any answer but 200 as an error and
//! logs only its status, while a 200 whose `Error` is set fails the pod's
//! cycle with that message. So `filter` answers every failure it can see
//! (a malformed body, an unknown cluster, a busy one, a failed unit) as
//! 200 with `Error` set. `prioritize`'s answer, a `HostPriorityList`, has
//! no error field, and kube-scheduler ignores a failed prioritize (the
//! other scorers decide), so it answers failures with the JSON API's
//! status and error body. Tokens (the `engine` role) and body limits are
//! checked as for every route, before either.

use axum::Json;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::AppState;
use super::decision_error::placement_error;
use super::error::{ApiError, ErrorBody};
use super::extract::{Path, body_bytes, is_json, parse_json};
use super::prepared::prepared;
use crate::extender::wire::{ExtenderArgs, ExtenderFilterResult, HostPriority};
use crate::extender::{Candidates, Judged, translate};
use crate::pipeline::Means;
use crate::placement::{HeldView, PlaceError, PlaceRequest, pick_over};
use crate::snapshot::HostIndex;

/// Filters the candidate nodes with the cluster's policy.
///
/// The body is kube-scheduler's `ExtenderArgs` (`Pod`, and `NodeNames` or
/// `Nodes`); the answer its `ExtenderFilterResult`. Every rejected node
/// is in `FailedNodes` (or, when its host is not up or not held,
/// `FailedAndUnresolvableNodes`) as `"<filter unit>: <reason>"`. Any
/// failure is a 200 with `Error` set, which kube-scheduler reports.
#[utoipa::path(post, path = "/k8s/{cluster}/filter", tag = "kubernetes",
    operation_id = "extender_filter",
    security(("bearer" = [])),
    params(("cluster" = String, Path, description = "Cluster id or name")),
    request_body = ExtenderArgs,
    responses(
        (status = 200, description = "The nodes that pass, and why the others do not; or `Error`", body = ExtenderFilterResult),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    ))]
pub async fn filter(
    State(state): State<AppState>,
    Path(cluster): Path<String>,
    request: Request,
) -> Response {
    let result = match judge(&state, &cluster, request).await {
        Ok(judged) => judged.filter_result(),
        Err(e) => ExtenderFilterResult {
            error: e.to_string(),
            ..ExtenderFilterResult::default()
        },
    };
    Json(result).into_response()
}

/// Scores the candidate nodes 0-10 with the cluster's policy.
///
/// The body is kube-scheduler's `ExtenderArgs`; the answer its
/// `HostPriorityList`, every node asked about in the order asked: the
/// policy's ranking mapped onto 0-10 (ties score alike; with more than
/// eleven distinct totals, neighbouring totals share a score), 0 for a
/// node the policy's filters reject or the held inventory lacks.
#[utoipa::path(post, path = "/k8s/{cluster}/prioritize", tag = "kubernetes",
    operation_id = "extender_prioritize",
    security(("bearer" = [])),
    params(("cluster" = String, Path, description = "Cluster id or name")),
    request_body = ExtenderArgs,
    responses(
        (status = 200, description = "A score per node", body = Vec<HostPriority>),
        (status = 400, description = "`malformed_json`, `invalid_value` (naming the field)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 409, description = "`no_inventory`: nodes named but no inventory held", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 422, description = "`invalid_snapshot`, `filter_failed`, `score_failed`", body = ErrorBody),
        (status = 503, description = "`cluster_busy`, `overloaded`; with `Retry-After`", body = ErrorBody),
    ))]
pub async fn prioritize(
    State(state): State<AppState>,
    Path(cluster): Path<String>,
    request: Request,
) -> Result<Json<Vec<HostPriority>>, ApiError> {
    Ok(Json(judge(&state, &cluster, request).await?.priorities()))
}

/// The cluster a path names: its id, or else its name.
async fn cluster_id(state: &AppState, cluster: &str) -> Result<Uuid, ApiError> {
    if let Ok(id) = Uuid::parse_str(cluster) {
        return Ok(id);
    }
    let mut conn = state.store().read().await?;
    conn.cluster_id_by_name(cluster)
        .await?
        .ok_or_else(|| ApiError::NotFound {
            resource: "cluster",
            id: cluster.to_owned(),
        })
}

/// Reads, translates and decides one extender request.
async fn judge(state: &AppState, cluster: &str, request: Request) -> Result<Judged, ApiError> {
    let cluster_id = cluster_id(state, cluster).await?;
    let admission = state
        .placement()
        .admit(cluster_id)
        .map_err(placement_error)?;
    if !is_json(request.headers()) {
        return Err(ApiError::UnsupportedMediaType {
            expected: "application/json",
        });
    }
    let body = body_bytes(request, &()).await?;
    let translated = admission
        .run(move || {
            let args: ExtenderArgs = parse_json(&body)?;
            translate(args).map_err(|e| ApiError::InvalidValue {
                field: "$".to_owned(),
                message: e.to_string(),
            })
        })
        .await
        .map_err(|e| ApiError::Internal(format!("extender task failed: {e}")))??;
    let prepared = prepared(state, cluster_id).await?;
    let request = PlaceRequest {
        vm: translated.vm,
        ..PlaceRequest::default()
    };
    let place_error = |e: PlaceError| placement_error(crate::placement::PlacementError::Place(e));
    match translated.candidates {
        Candidates::Inline { snapshot, items } => {
            let names: Vec<String> = snapshot.hosts.iter().map(|h| h.id.clone()).collect();
            let decision = admission
                .run(move || {
                    crate::placement::over_snapshot(
                        &snapshot,
                        &request,
                        &prepared.policy,
                        &prepared.overrides,
                    )
                    .map(|mut outcome| outcome.picks.remove(0).decision)
                })
                .await
                .map_err(|e| ApiError::Internal(format!("extender task failed: {e}")))?
                .map_err(place_error)?;
            Ok(Judged {
                decision,
                items: Some(names.iter().cloned().zip(items).collect()),
                asked: names,
                unknown: Vec::new(),
            })
        }
        Candidates::Held { names } => {
            let mut seen = std::collections::HashSet::new();
            let asked: Vec<String> = names
                .into_iter()
                .filter(|name| seen.insert(name.clone()))
                .collect();
            let HeldView {
                inventory,
                candidates,
                unknown,
            } = state
                .placement()
                .held_view(cluster_id, asked.clone())
                .await
                .map_err(placement_error)?;
            let cores = admission.lender();
            let decision = admission
                .run(move || {
                    pick_over(
                        &std::sync::Arc::new(inventory),
                        &HostIndex::default(),
                        Some(candidates),
                        &request,
                        &prepared.policy,
                        &prepared.overrides,
                        Means {
                            reuse: None,
                            cores: Some(&cores),
                        },
                    )
                })
                .await
                .map_err(|e| ApiError::Internal(format!("extender task failed: {e}")))?
                .map_err(place_error)?;
            Ok(Judged {
                decision,
                asked,
                unknown,
                items: None,
            })
        }
    }
}

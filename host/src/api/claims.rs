//! The claims decisions over held inventories make, and the routes that
//! end them:
//!
//! * `GET /api/v1/clusters/{id}/claims` lists the live claims;
//! * `POST /api/v1/clusters/{id}/claims/{vm_id}/confirm` says the VM
//!   started (and from which inventory generation the engine's reports of
//!   its host include it);
//! * `DELETE /api/v1/clusters/{id}/claims/{vm_id}` releases a claim (the VM
//!   did not start).
//!
//! Claims are made by `POST /api/v1/clusters/{id}/schedule` without inline
//! hosts (`super::schedule`). The API error of every placement failure is
//! made in `super::decision_error`.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use super::clusters::load as load_cluster;
use super::decision_error::placement_error;
use super::error::{ApiError, ErrorBody};
use super::extract::{Json, Path};
use crate::placement::{Claim, ClaimState, Resources};

/// A claim as the API shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ClaimView {
    pub vm_id: String,
    pub host_id: String,
    /// `pending` or `confirmed`.
    pub state: &'static str,
    /// For a confirmed claim: the generation from which reports of its host
    /// include the VM.
    pub covered_from: Option<u64>,
    #[schema(value_type = Object)]
    pub resources: Resources,
    pub decision_id: Uuid,
    pub created_at: String,
    /// When an unconfirmed claim expires; `null` once confirmed.
    pub expires_at: Option<String>,
    /// For a VM with hardware needs: the cells, CPUs, pages and devices
    /// the claim holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::hardware::claim::HardwareClaim>)]
    pub hardware: Option<std::sync::Arc<crate::hardware::claim::HardwareClaim>>,
}

impl From<&Claim> for ClaimView {
    fn from(claim: &Claim) -> Self {
        let (state, covered_from, expires_at) = match claim.state {
            ClaimState::Pending => ("pending", None, Some(claim.expires_at.to_rfc3339())),
            ClaimState::Confirmed { covered_from } => ("confirmed", Some(covered_from), None),
        };
        ClaimView {
            vm_id: claim.vm_id.clone(),
            host_id: claim.host_id.clone(),
            state,
            covered_from,
            resources: claim.resources,
            decision_id: claim.decision_id,
            created_at: claim.created_at.to_rfc3339(),
            expires_at,
            hardware: claim.hardware.clone(),
        }
    }
}

/// The live claims.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ClaimList {
    pub claims: Vec<ClaimView>,
}

/// Which generation of the host's reports includes the started VM.
#[derive(Clone, Copy, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmBody {
    /// The first generation of the engine's reports of the host that
    /// counts the VM; default: the next report applied. Give it when
    /// reports may reach Sandpiper before the confirmation.
    #[serde(default)]
    pub covered_from: Option<u64>,
}

/// Lists a cluster's live claims, oldest first.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/claims", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    responses(
        (status = 200, description = "The live claims", body = ClaimList),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn list_claims(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
) -> Result<axum::Json<ClaimList>, ApiError> {
    exists(&state, cluster_id).await?;
    let claims = state
        .placement()
        .claims(cluster_id)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(ClaimList {
        claims: claims.iter().map(ClaimView::from).collect(),
    }))
}

/// Confirms a claim: the VM started. The claim keeps counting until a
/// report of its host at or after `covered_from` arrives, and no longer
/// expires.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/claims/{vm_id}/confirm", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("vm_id" = String, Path, description = "The VM")),
    request_body = ConfirmBody,
    responses(
        (status = 200, description = "The claim, confirmed (or already covered by a report held)", body = ClaimView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster, or no claim for the VM (expired, released or covered)", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn confirm_claim(
    State(state): State<AppState>,
    Path((cluster_id, vm_id)): Path<(Uuid, String)>,
    Json(body): Json<ConfirmBody>,
) -> Result<axum::Json<ClaimView>, ApiError> {
    exists(&state, cluster_id).await?;
    let claim = state
        .placement()
        .confirm(cluster_id, vm_id, body.covered_from)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(ClaimView::from(&claim)))
}

/// Releases a claim: the VM did not start, its resources are free again.
#[utoipa::path(delete, path = "/api/v1/clusters/{id}/claims/{vm_id}", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("vm_id" = String, Path, description = "The VM")),
    responses(
        (status = 200, description = "The claim released", body = ClaimView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster, or no claim for the VM", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn release_claim(
    State(state): State<AppState>,
    Path((cluster_id, vm_id)): Path<(Uuid, String)>,
) -> Result<axum::Json<ClaimView>, ApiError> {
    exists(&state, cluster_id).await?;
    let claim = state
        .placement()
        .release(cluster_id, vm_id)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(ClaimView::from(&claim)))
}

/// 404 unless the cluster exists.
pub async fn exists(state: &AppState, cluster_id: Uuid) -> Result<(), ApiError> {
    let mut conn = state.store().read().await?;
    load_cluster(&mut conn, cluster_id).await.map(|_| ())
}

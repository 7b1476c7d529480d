//! The host inventory Sandpiper holds per cluster, pushed by the engine:
//!
//! * `PUT /api/v1/clusters/{id}/inventory`: a full snapshot (hosts and VMs
//!   in the snapshot format of `crate::snapshot`) with its generation; a
//!   snapshot not newer than what is held is refused (409
//!   `stale_generation`);
//! * `POST /api/v1/clusters/{id}/inventory/updates`: a batch of
//!   incremental updates, each an upsert or a removal of one host with its
//!   generation; updates older than what is held for their host are
//!   ignored and reported `stale`, never applied over newer data;
//! * `GET /api/v1/clusters/{id}/inventory`: generations, counts and the
//!   sum of the pending claims;
//! * `GET /api/v1/clusters/{id}/inventory/hosts`: the held hosts a page at
//!   a time, each with its memory and CPU in use, reported and claimed
//!   (what the console's utilisation chart draws).
//!
//! The generation rules are in `crate::placement::hosts`.

use axum::extract::{Request, State};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::AppState;
use super::claims::exists;
use super::decision_error::placement_error;
use super::error::{ApiError, ErrorBody};
use super::extract::{Path, Query, body_bytes, is_json, parse_json};
use crate::placement::{HostUpdate, HostUsage, InventorySummary, UpdateResult};
use crate::snapshot::{Host, RunningVm, Snapshot};

/// Hosts listed when the request does not say how many: a screenful or
/// two of the console's table.
pub const DEFAULT_HOSTS_LISTED: u32 = 100;

/// Most hosts one request lists: a page is read under the cluster's lock,
/// and no reader needs a 10,000-host cluster in one answer.
pub const MAX_HOSTS_LISTED: u32 = 500;

/// A full snapshot of a cluster's hosts.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InventorySnapshot {
    /// The engine's number for this report; it must be above every
    /// generation applied so far (at most 2^53).
    pub generation: u64,
    /// Every host of the cluster, in the snapshot format.
    #[serde(default)]
    pub hosts: Vec<Host>,
    /// The VMs running (or pending, by the engine's account) on them.
    #[serde(default)]
    pub vms: Vec<RunningVm>,
}

/// A batch of incremental updates, applied in order.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InventoryUpdates {
    /// `{"op": "upsert", "generation": n, "host": {...}, "vms": [...]}`
    /// (`vms` optional: absent keeps the host's VMs) or
    /// `{"op": "remove", "generation": n, "host_id": "..."}`.
    pub updates: Vec<HostUpdate>,
}

/// The held inventory.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct InventoryView {
    pub cluster_id: Uuid,
    /// The highest generation applied.
    pub generation: u64,
    /// The last full snapshot's generation.
    pub snapshot_generation: u64,
    pub hosts: usize,
    pub vms: usize,
    /// Live claims.
    pub claims: usize,
    /// The sum of the live claims.
    #[schema(value_type = Object)]
    pub pending: crate::placement::Resources,
}

impl InventoryView {
    fn of(cluster_id: Uuid, s: InventorySummary) -> Self {
        InventoryView {
            cluster_id,
            generation: s.generation,
            snapshot_generation: s.snapshot_generation,
            hosts: s.hosts,
            vms: s.vms,
            claims: s.claims,
            pending: s.pending,
        }
    }
}

/// How a batch of updates went.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UpdatesAnswer {
    /// One per update, in order: `applied` or `stale`.
    #[schema(value_type = Vec<Object>)]
    pub results: Vec<UpdateResult>,
    pub applied: usize,
    pub stale: usize,
    pub inventory: InventoryView,
}

/// Which held hosts to list.
#[derive(Clone, Copy, Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HostsQuery {
    /// Hosts to skip, in inventory order; default 0.
    pub offset: Option<usize>,
    /// Hosts to list; default 100, at most 500.
    #[param(maximum = 500)]
    pub limit: Option<u32>,
}

/// One page of a cluster's held hosts.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct HostsPage {
    pub cluster_id: Uuid,
    /// Hosts held in all.
    pub total: usize,
    /// Where this page starts.
    pub offset: usize,
    pub hosts: Vec<HostUsage>,
}

/// The cluster's held hosts, a page at a time, in inventory order, with
/// their memory and CPU in use, reported and claimed.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/inventory/hosts", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), HostsQuery),
    responses(
        (status = 200, body = HostsPage),
        (status = 400, description = "`invalid_query`: a limit above 500", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn list_hosts(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Query(query): Query<HostsQuery>,
) -> Result<axum::Json<HostsPage>, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_HOSTS_LISTED);
    if limit > MAX_HOSTS_LISTED {
        return Err(ApiError::InvalidQuery(format!(
            "limit {limit} is above the maximum of {MAX_HOSTS_LISTED}"
        )));
    }
    exists(&state, cluster_id).await?;
    let offset = query.offset.unwrap_or(0);
    let (total, hosts) = state
        .placement()
        .held_hosts(cluster_id, offset, limit as usize)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(HostsPage {
        cluster_id,
        total,
        offset,
        hosts,
    }))
}

async fn json_bytes(request: Request) -> Result<axum::body::Bytes, ApiError> {
    if !is_json(request.headers()) {
        return Err(ApiError::UnsupportedMediaType {
            expected: "application/json",
        });
    }
    body_bytes(request, &()).await
}

/// Parses a large JSON body on the blocking pool.
async fn parse_blocking<T: serde::de::DeserializeOwned + Send + 'static>(
    bytes: axum::body::Bytes,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(move || parse_json::<T>(&bytes))
        .await
        .map_err(|e| ApiError::Internal(format!("parsing task failed: {e}")))?
}

/// Replaces the cluster's held inventory with a full snapshot.
#[utoipa::path(put, path = "/api/v1/clusters/{id}/inventory", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    request_body = InventorySnapshot,
    responses(
        (status = 200, description = "The inventory now held", body = InventoryView),
        (status = 400, description = "`malformed_json`, `invalid_field`, `invalid_value` (naming the field: a negative figure, zero vCPUs, a bad host or VM id, inconsistent hardware)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 409, description = "`stale_generation`: not newer than the inventory held", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 422, description = "`invalid_snapshot` (naming the field)", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn put_inventory(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    request: Request,
) -> Result<axum::Json<InventoryView>, ApiError> {
    let bytes = json_bytes(request).await?;
    exists(&state, cluster_id).await?;
    let body: InventorySnapshot = parse_blocking(bytes).await?;
    let snapshot = Snapshot {
        hosts: body.hosts,
        vms: body.vms,
    };
    let summary = state
        .placement()
        .replace_snapshot(cluster_id, body.generation, snapshot)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(InventoryView::of(cluster_id, summary)))
}

/// Applies a batch of incremental host updates.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/inventory/updates", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    request_body = InventoryUpdates,
    responses(
        (status = 200, description = "Each update applied or reported stale", body = UpdatesAnswer),
        (status = 400, description = "`malformed_json`, `invalid_field`, `invalid_value` (naming the field: a negative figure, zero vCPUs, a bad host or VM id, inconsistent hardware)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 422, description = "`invalid_snapshot` naming `updates[i]...`; nothing of the batch is applied", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn post_updates(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    request: Request,
) -> Result<axum::Json<UpdatesAnswer>, ApiError> {
    let bytes = json_bytes(request).await?;
    exists(&state, cluster_id).await?;
    let body: InventoryUpdates = parse_blocking(bytes).await?;
    let (results, summary) = state
        .placement()
        .apply_updates(cluster_id, body.updates)
        .await
        .map_err(placement_error)?;
    let applied = results.iter().filter(|r| r.outcome == "applied").count();
    Ok(axum::Json(UpdatesAnswer {
        stale: results.len() - applied,
        applied,
        results,
        inventory: InventoryView::of(cluster_id, summary),
    }))
}

/// The cluster's held inventory: generations, counts, pending claims.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/inventory", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    responses(
        (status = 200, body = InventoryView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn get_inventory(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
) -> Result<axum::Json<InventoryView>, ApiError> {
    exists(&state, cluster_id).await?;
    let summary = state
        .placement()
        .summary(cluster_id)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(InventoryView::of(cluster_id, summary)))
}

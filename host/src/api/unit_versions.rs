//! A unit's versions: every module it has run that the store keeps
//! (`GET /api/v1/schedulingpolicyunits/{id}/versions`), and a rollback to
//! one of them (`POST .../rollback`). Replacing a module
//! (`units::replace_module`) adds a version; a rollback adds one too, a
//! copy of the version it restores with `rollback_of` naming it, so the
//! list reads in the order things happened. A unit keeps its newest
//! `--unit-versions-retained` versions (default 10) with their modules and
//! compiled code.
//!
//! A rollback is a module replacement whose module is already stored: the
//! same checks (every policy using the unit must still assemble with the
//! restored exports, every cluster's overrides still match its
//! parameters), the same swap under the store's write lock, so decisions
//! in flight finish on the module they started with and later ones run the
//! restored one. Built-in units have versions (one per upgrade of the
//! server that changed them) but cannot be rolled back.

use axum::Extension;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::extract::{Json, Path};
use super::units::{
    ModuleInfo, SchedulingPolicyUnit, UnitExports, UnitParam, ensure_name_free_for,
    ensure_not_internal, install, load, view,
};
use crate::auth::Principal;
use crate::store::units::{UnitModule, UnitVersion};
use crate::upload::StoredLoadError;

/// One module a unit has run, as it was installed.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UnitVersionView {
    /// 1 for the first module, one more for each replacement or rollback.
    pub version: i64,
    /// Whether the unit runs this version now (the newest).
    pub current: bool,
    pub name: String,
    pub description: String,
    pub exports: UnitExports,
    pub score_order: String,
    pub params: Vec<UnitParam>,
    pub module: ModuleInfo,
    pub uploaded_at: String,
    /// The token that installed it (uploaded the module or rolled back to
    /// it), or `builtin`.
    pub uploaded_by: String,
    /// The version this one restored, when it came from a rollback.
    pub rollback_of: Option<i64>,
}

fn version_view(v: &UnitVersion, current: bool) -> UnitVersionView {
    let m = &v.module;
    UnitVersionView {
        version: v.version,
        current,
        name: m.name.clone(),
        description: m.description.clone(),
        exports: UnitExports::from(&m.exports),
        score_order: m.score_order.wit_name().to_owned(),
        params: m.params.iter().map(UnitParam::from).collect(),
        module: ModuleInfo {
            sha256: m.module_sha256.clone(),
            size_bytes: v.module_size_bytes,
            language: v.module_language.clone(),
        },
        uploaded_at: v.uploaded_at.clone(),
        uploaded_by: m.uploaded_by.clone(),
        rollback_of: v.rollback_of,
    }
}

/// Which version to restore.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// A version from the unit's `versions`, other than the current one.
    pub version: i64,
}

/// Lists the versions a unit keeps, newest (current) first.
#[utoipa::path(get, path = "/api/v1/schedulingpolicyunits/{id}/versions", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 200, description = "Newest first", body = Vec<UnitVersionView>),
        (status = 400, description = "`invalid_path`", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The unit", body = ErrorBody),
    ))]
pub async fn list_versions(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<UnitVersionView>>, ApiError> {
    let mut conn = state.store().read().await?;
    load(&mut conn, id).await?;
    let versions = conn.unit_versions(id).await?;
    Ok(axum::Json(
        versions
            .iter()
            .enumerate()
            .map(|(i, v)| version_view(v, i == 0))
            .collect(),
    ))
}

/// Restores an earlier version of a unit, as its next version.
///
/// Refused, changing nothing, when the restored module no longer fits a
/// policy that uses the unit (a slot it does not export, a cluster's
/// override its parameters refuse) or its name now belongs to another
/// unit. Decisions in flight finish on the module they started with.
#[utoipa::path(post, path = "/api/v1/schedulingpolicyunits/{id}/rollback", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Unit id")),
    request_body = Rollback,
    responses(
        (status = 200, description = "The unit, running the restored module", body = SchedulingPolicyUnit),
        (status = 400, description = "`malformed_json`, `invalid_value` (`version` is the current one)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The unit, or the version (never kept or past the retention)", body = ErrorBody),
        (status = 409, description = "`unit_internal`, `name_taken`, `params_would_break`", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 422, description = "`unit_type_mismatch`: a policy uses the unit in a slot the version does not export; `module_*` when the stored module no longer compiles for this engine", body = ErrorBody),
    ))]
pub async fn rollback(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<Uuid>,
    Json(body): Json<Rollback>,
) -> Result<axum::Json<SchedulingPolicyUnit>, ApiError> {
    let target = {
        let mut conn = state.store().read().await?;
        ensure_not_internal(&load(&mut conn, id).await?)?;
        find_version(&mut conn, id, body.version).await?
    };
    // Loaded (or recompiled, after an engine upgrade) before the write
    // transaction, which must not wait on a compile.
    let unit = state
        .modules()
        .load_stored(state.store(), &target.module.module_sha256)
        .await
        .map_err(|e| match e {
            StoredLoadError::Store(e) => e.into(),
            StoredLoadError::Module(e) => e.into(),
            e @ StoredLoadError::Unreadable { .. } => ApiError::Internal(e.to_string()),
        })?;

    let mut tx = state.store().write().await?;
    let current = load(&mut tx, id).await?;
    ensure_not_internal(&current)?;
    let target = find_version(&mut tx, id, body.version).await?;
    ensure_name_free_for(&mut tx, &target.module.name, id).await?;
    let module = UnitModule {
        uploaded_by: principal.name.clone(),
        ..target.module
    };
    let record = install(&state, tx, &current, unit, module, Some(target.version)).await?;
    tracing::info!(unit = %record.name, %id, version = target.version, sha256 = %record.module_sha256, by = %principal.name, "unit rolled back");
    Ok(axum::Json(view(&record)))
}

/// The kept version `version` of unit `id`, other than its current one
/// (the newest).
async fn find_version(
    conn: &mut crate::store::Db,
    id: Uuid,
    version: i64,
) -> Result<UnitVersion, ApiError> {
    let mut versions = conn.unit_versions(id).await?;
    if versions.first().is_some_and(|v| v.version == version) {
        return Err(ApiError::InvalidValue {
            field: "version".to_owned(),
            message: format!("version {version} is the current one"),
        });
    }
    let found = versions.iter().position(|v| v.version == version);
    found
        .map(|i| versions.swap_remove(i))
        .ok_or_else(|| ApiError::NotFound {
            resource: "unit version",
            id: format!("{id} version {version}"),
        })
}

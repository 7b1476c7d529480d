//! `/api/v1/schedulingpolicyunits`: policy units. Uploading one sends the
//! `.wasm` component as the body; what the unit does (its roles, its
//! parameters) is read from the module, never declared by hand.
//!
//! An upload is validated and compiled (out of process, see `upload`)
//! before anything is stored; a refused upload changes nothing. Replacing a
//! unit's module stores the new module in one transaction and swaps the
//! loaded unit (an `Arc`) inside it, so decisions in flight finish on the
//! old code and every later one runs the new.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::assemble::check_change;
use super::error::{ApiError, ErrorBody};
use super::extract::{Path, Query, body_timeout, check_content_length};
use super::types::check_name;
use super::{AppState, location};
use crate::auth::Principal;
use crate::registry::Named;
use crate::store::units::{UnitModule, UnitRecord};
use crate::store::{Db, Tx};
use crate::unit::Unit;
use crate::upload::{COMPILE_QUEUE_RETRY_AFTER_SECS, Spooled, Ticket, UploadError};

/// Header that names an uploaded unit when the query does not.
pub const NAME_HEADER: &str = "sandpiper-unit-name";

/// Header that describes an uploaded unit when the query does not.
pub const DESCRIPTION_HEADER: &str = "sandpiper-unit-description";

/// The only media type an upload's body may have.
pub const WASM_MEDIA_TYPE: &str = "application/wasm";

/// A WebAssembly component's bytes, sent as they are (not JSON, not
/// multipart), with `Content-Type: application/wasm`.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct WasmBody(#[expect(dead_code, reason = "only described")] Vec<u8>);

/// A policy unit (oVirt's `scheduling_policy_unit`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SchedulingPolicyUnit {
    pub id: Uuid,
    /// Unique. Taken from the module's `info()` unless given at upload.
    pub name: String,
    pub description: String,
    /// Built into the server: cannot be deleted, replaced or disabled.
    pub internal: bool,
    /// Disabled units are skipped by decisions and cannot join policies.
    pub enabled: bool,
    /// Which interfaces the module exports: the slots it can fill.
    pub exports: UnitExports,
    /// How to read the unit's scores: `lower-is-better` (oVirt costs) or
    /// `higher-is-better` (Nova merits).
    pub score_order: String,
    /// The parameters the unit accepts (oVirt's properties, with defaults).
    pub params: Vec<UnitParam>,
    pub module: ModuleInfo,
    pub uploaded_at: String,
    /// The name of the token that uploaded it, or `builtin`.
    pub uploaded_by: String,
    pub href: String,
}

/// Which of `filter`, `score` and `balance` a module exports.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
pub struct UnitExports {
    pub filter: bool,
    pub score: bool,
    pub balance: bool,
}

/// A parameter a unit declares.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UnitParam {
    pub name: String,
    pub description: String,
    /// Used when neither the cluster nor the policy sets a value.
    pub default_value: String,
    /// A value must match it as a whole (Rust `regex` syntax).
    pub pattern: String,
}

/// The module a unit runs.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ModuleInfo {
    /// sha256 of the `.wasm`, hex: the same bytes are the same module.
    pub sha256: String,
    pub size_bytes: u64,
    /// The language it was written in (`rust`, `python`, `javascript`,
    /// `c`), as the module's producers sections tell; absent when they do
    /// not say.
    pub language: Option<String>,
}

/// Overrides of what the module says about itself. Headers
/// `Sandpiper-Unit-Name` and `Sandpiper-Unit-Description` do the same.
#[derive(Clone, Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UploadQuery {
    /// The unit's name instead of the module's own.
    pub name: Option<String>,
    /// The unit's description instead of the module's own.
    pub description: Option<String>,
}

impl From<&crate::unit::Exports> for UnitExports {
    fn from(e: &crate::unit::Exports) -> Self {
        UnitExports {
            filter: e.filter,
            score: e.score,
            balance: e.balance,
        }
    }
}

impl From<&sandpiper_model::ParamSpec> for UnitParam {
    fn from(p: &sandpiper_model::ParamSpec) -> Self {
        UnitParam {
            name: p.name.clone(),
            description: p.description.clone(),
            default_value: p.default_value.clone(),
            pattern: p.pattern.clone(),
        }
    }
}

pub(crate) fn unit_href(id: Uuid) -> String {
    format!("/api/v1/schedulingpolicyunits/{id}")
}

pub(crate) fn view(u: &UnitRecord) -> SchedulingPolicyUnit {
    SchedulingPolicyUnit {
        id: u.id,
        name: u.name.clone(),
        description: u.description.clone(),
        internal: u.internal,
        enabled: u.enabled,
        exports: UnitExports::from(&u.exports),
        score_order: u.score_order.wit_name().to_owned(),
        params: u.params.iter().map(UnitParam::from).collect(),
        module: ModuleInfo {
            sha256: u.module_sha256.clone(),
            size_bytes: u.module_size_bytes,
            language: u.module_language.clone(),
        },
        uploaded_at: u.uploaded_at.clone(),
        uploaded_by: u.uploaded_by.clone(),
        href: unit_href(u.id),
    }
}

pub(crate) async fn load(conn: &mut Db, id: Uuid) -> Result<UnitRecord, ApiError> {
    conn.unit(id).await?.ok_or_else(|| ApiError::NotFound {
        resource: "scheduling policy unit",
        id: id.to_string(),
    })
}

pub(crate) fn ensure_not_internal(unit: &UnitRecord) -> Result<(), ApiError> {
    if unit.internal {
        Err(ApiError::UnitInternal {
            unit: unit.name.clone(),
        })
    } else {
        Ok(())
    }
}

impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::Rejected(r) => ApiError::ModuleRejected {
                code: module_code(&r.code),
                message: r.message,
            },
            UploadError::Timeout(_) => ApiError::ModuleRejected {
                code: "module_compile_timeout",
                message: e.to_string(),
            },
            UploadError::CompileFailed(_) => ApiError::ModuleRejected {
                code: "module_compile_failed",
                message: e.to_string(),
            },
            UploadError::ResourceLimit(_) => ApiError::ModuleRejected {
                code: "module_compiler_limit",
                message: e.to_string(),
            },
            UploadError::QueueFull { message } => ApiError::Busy {
                code: "compile_queue_full",
                message,
                details: serde_json::json!({}),
                retry_after_secs: COMPILE_QUEUE_RETRY_AFTER_SECS,
            },
            UploadError::TooLarge { limit_bytes } => ApiError::PayloadTooLarge { limit_bytes },
            UploadError::Body(error) => match body_timeout(&*error) {
                Some(timeout) => timeout.into(),
                None => ApiError::InvalidField {
                    field: ".".to_owned(),
                    message: format!("the body could not be read: {error}"),
                },
            },
            UploadError::Internal(message) => ApiError::Internal(message),
        }
    }
}

/// The stable code for a rejection code from the compile step; one this
/// version does not know (a newer child?) is reported as `module_invalid`.
fn module_code(code: &str) -> &'static str {
    super::error::ERROR_CODES
        .iter()
        .copied()
        .find(|c| c.starts_with("module_") && *c == code)
        .unwrap_or("module_invalid")
}

/// The name and description an upload asks for, from the query or else the
/// headers.
fn overrides(query: UploadQuery, headers: &HeaderMap) -> Result<UploadQuery, ApiError> {
    let header = |name: &str| -> Result<Option<String>, ApiError> {
        match headers.get(name) {
            None => Ok(None),
            Some(v) => v
                .to_str()
                .map(|s| Some(s.to_owned()))
                .map_err(|_| ApiError::InvalidValue {
                    field: name.to_owned(),
                    message: "must be visible ASCII".to_owned(),
                }),
        }
    };
    let wanted = UploadQuery {
        name: match query.name {
            Some(n) => Some(n),
            None => header(NAME_HEADER)?,
        },
        description: match query.description {
            Some(d) => Some(d),
            None => header(DESCRIPTION_HEADER)?,
        },
    };
    if let Some(name) = &wanted.name {
        check_name("name", name)?;
    }
    Ok(wanted)
}

/// The module behind an upload: compiled (or found compiled in the store),
/// loaded, and ready to store.
struct Prepared {
    /// The body, on disk.
    upload: Spooled,
    /// Compiled code to store, when it was compiled now.
    artifact: Option<Bytes>,
    /// The module's language, when it was compiled now and its producers
    /// sections tell (a module whose code was stored is stored too).
    language: Option<String>,
    unit: Arc<dyn Unit>,
}

impl Prepared {
    fn sha256(&self) -> &str {
        self.upload.sha256()
    }
}

/// Checks an upload's headers and streams its body to disk, holding a
/// place in the compile queue from before the body is read: a refused
/// upload (wrong type, too large, queue full) is never read.
async fn receive(
    state: &AppState,
    principal: &Principal,
    headers: &HeaderMap,
    request: Request,
) -> Result<(Ticket, Spooled), ApiError> {
    if !is_wasm(headers) {
        return Err(ApiError::UnsupportedMediaType {
            expected: WASM_MEDIA_TYPE,
        });
    }
    let limit = state.limits().max_module_bytes;
    check_content_length(headers, limit)?;
    let ticket = state.modules().reserve(principal.token_id)?;
    let upload = Spooled::receive(request.into_body(), limit).await?;
    Ok((ticket, upload))
}

/// Whether the request says its body is a WebAssembly module.
fn is_wasm(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(WASM_MEDIA_TYPE))
}

/// Turns an upload into a loaded unit, reusing stored compiled code for
/// bytes the store already has.
async fn prepare(state: &AppState, ticket: &Ticket, upload: Spooled) -> Result<Prepared, ApiError> {
    let engine_hash = state.modules().engine_hash();
    let stored = {
        let mut conn = state.store().read().await?;
        conn.artifact(upload.sha256(), &engine_hash).await?
    };
    let (artifact, fresh, language) = match stored {
        Some(artifact) => (Bytes::from(artifact), false, None),
        None => {
            let started = std::time::Instant::now();
            let compiled = state.modules().compile_upload(ticket, &upload).await;
            crate::metrics::unit_compiled(compiled.is_ok(), started.elapsed());
            let compiled = compiled?;
            (Bytes::from(compiled.artifact), true, compiled.language)
        }
    };
    let unit = state
        .modules()
        .load(upload.sha256(), artifact.clone())
        .await?;
    Ok(Prepared {
        upload,
        artifact: fresh.then_some(artifact),
        language,
        unit,
    })
}

/// Stores the module and its compiled code (if new) inside `tx`. The
/// module goes from its temporary file to the store a chunk at a time, so
/// the server never holds it whole (issue #11).
async fn store_module(
    state: &AppState,
    conn: &mut Db,
    prepared: &Prepared,
) -> Result<(), ApiError> {
    let upload = &prepared.upload;
    conn.insert_module(
        upload.sha256(),
        upload.len(),
        prepared.language.as_deref(),
        upload.reader()?,
    )
    .await?;
    if let Some(artifact) = &prepared.artifact {
        conn.insert_artifact(prepared.sha256(), &state.modules().engine_hash(), artifact)
            .await?;
    }
    Ok(())
}

fn unit_module(
    unit: &Arc<dyn Unit>,
    name: String,
    description: String,
    sha256: &str,
    by: &Principal,
) -> UnitModule {
    let info = unit.info();
    UnitModule {
        name,
        description,
        exports: unit.exports(),
        score_order: info.score_order,
        params: info.params.clone(),
        module_sha256: sha256.to_owned(),
        uploaded_by: by.name.clone(),
    }
}

/// Lists every unit.
#[utoipa::path(get, path = "/api/v1/schedulingpolicyunits", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every unit, by name", body = Vec<SchedulingPolicyUnit>),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    ))]
pub async fn list_units(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<SchedulingPolicyUnit>>, ApiError> {
    let mut conn = state.store().read().await?;
    let units = conn.units().await?;
    Ok(axum::Json(units.iter().map(view).collect()))
}

/// Uploads a unit: the body is the `.wasm` component.
///
/// The module must be a component exporting `metadata` and at least one of
/// `filter`, `score`, `balance` from one version of `sandpiper:policy`
/// (`0.3.0`, or `0.2.0` or `0.1.0`, which are still served), and import nothing but that
/// version's `inventory` and the WASI interfaces the host provides. Uploading the same bytes under the same name again returns the
/// existing unit (200).
#[utoipa::path(post, path = "/api/v1/schedulingpolicyunits", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    params(UploadQuery,
        ("Sandpiper-Unit-Name" = Option<String>, Header, description = "The unit's name, when the query gives none"),
        ("Sandpiper-Unit-Description" = Option<String>, Header, description = "The unit's description, when the query gives none")),
    request_body(content = WasmBody, content_type = "application/wasm", description = "The component's bytes"),
    responses(
        (status = 201, description = "Stored and loaded", body = SchedulingPolicyUnit),
        (status = 200, description = "The same bytes under the same name: the existing unit", body = SchedulingPolicyUnit),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 408, description = "`body_timeout`: the body stalled or took too long", body = ErrorBody),
        (status = 409, description = "`name_taken`", body = ErrorBody),
        (status = 413, description = "`payload_too_large` (refused from `Content-Length` before reading when it is announced)", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body must be sent as `application/wasm`", body = ErrorBody),
        (status = 422, description = "`module_not_wasm`, `module_is_core_module`, `module_invalid`, `module_exports`, `module_forbidden_import`, `module_memory_too_large`, `module_compile_failed`, `module_compile_timeout`, `module_compiler_limit`, `module_unit_failed`, `unit_params_invalid`", body = ErrorBody),
        (status = 503, description = "`compile_queue_full`, with `Retry-After`", body = ErrorBody),
    ))]
pub async fn upload_unit(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<UploadQuery>,
    headers: HeaderMap,
    request: Request,
) -> Result<impl IntoResponse, ApiError> {
    let wanted = overrides(query, &headers)?;
    let (ticket, upload) = receive(&state, &principal, &headers, request).await?;
    let sha256 = upload.sha256().to_owned();
    if let Some(name) = &wanted.name {
        // Fail fast, before compiling, on a name that is certainly taken
        // by another module.
        let mut conn = state.store().read().await?;
        let existing = conn.unit_by_name(name).await?;
        if existing.is_some_and(|e| e.module_sha256 != sha256) {
            return Err(ApiError::NameTaken {
                resource: "scheduling policy unit",
                name: name.clone(),
            });
        }
    }
    let prepared = prepare(&state, &ticket, upload).await?;
    let info = prepared.unit.info();
    let name = wanted.name.unwrap_or_else(|| info.name.clone());
    check_name("name", &name).map_err(|_| ApiError::ModuleRejected {
        code: "module_unit_failed",
        message: format!("the unit's info() gives an unusable name {:?}", info.name),
    })?;
    let description = wanted
        .description
        .unwrap_or_else(|| info.description.clone());

    let mut tx = state.store().write().await?;
    if let Some(existing) = tx.unit_by_name(&name).await? {
        if existing.module_sha256 == prepared.sha256() {
            return Ok((
                StatusCode::OK,
                location(unit_href(existing.id)),
                axum::Json(view(&existing)),
            ));
        }
        return Err(ApiError::NameTaken {
            resource: "scheduling policy unit",
            name,
        });
    }
    store_module(&state, &mut tx, &prepared).await?;
    let id = Uuid::new_v4();
    let module = unit_module(
        &prepared.unit,
        name,
        description,
        prepared.sha256(),
        &principal,
    );
    tx.insert_unit(id, false, &module).await?;
    let record = load(&mut tx, id).await?;
    // Loaded while the write transaction still holds the store's write
    // lock, so concurrent changes to units reach the registry in the order
    // they reach the store; forgotten again if the commit fails.
    state.registry().insert(
        id,
        Arc::new(Named::new(prepared.unit, &record.name, &record.description)),
    );
    if let Err(e) = tx.commit().await {
        state.registry().remove(id);
        return Err(e.into());
    }
    tracing::info!(unit = %record.name, %id, sha256 = %record.module_sha256, by = %principal.name, "unit uploaded");
    Ok((
        StatusCode::CREATED,
        location(unit_href(id)),
        axum::Json(view(&record)),
    ))
}

/// Gets one unit.
#[utoipa::path(get, path = "/api/v1/schedulingpolicyunits/{id}", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 200, body = SchedulingPolicyUnit),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn get_unit(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<SchedulingPolicyUnit>, ApiError> {
    let mut conn = state.store().read().await?;
    Ok(axum::Json(view(&load(&mut conn, id).await?)))
}

/// Deletes a unit no policy uses.
#[utoipa::path(delete, path = "/api/v1/schedulingpolicyunits/{id}", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`unit_internal`, `unit_in_use`", body = ErrorBody),
    ))]
pub async fn delete_unit(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = state.store().write().await?;
    let unit = load(&mut tx, id).await?;
    ensure_not_internal(&unit)?;
    let policies = tx.policies_using_unit(id).await?;
    if !policies.is_empty() {
        return Err(ApiError::UnitInUse {
            unit: unit.name,
            policies,
        });
    }
    tx.delete_unit(id).await?;
    tx.collect_module_garbage(&state.modules().engine_hash())
        .await?;
    let module_gone = !tx.has_module(&unit.module_sha256).await?;
    tx.commit().await?;
    state.registry().remove(id);
    if module_gone {
        state.modules().unload(&unit.module_sha256);
    }
    tracing::info!(unit = %unit.name, %id, "unit deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// Replaces a unit's module: the body is the new `.wasm`.
///
/// The new module must still fit every policy that uses the unit (same
/// slots exported, parameter values still valid). Decisions in flight
/// finish on the old module; later ones use the new one. The unit keeps its
/// name unless the query or header gives one; its description becomes the
/// new module's unless given.
#[utoipa::path(put, path = "/api/v1/schedulingpolicyunits/{id}/module", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Unit id"), UploadQuery),
    request_body(content = WasmBody, content_type = "application/wasm", description = "The new component's bytes"),
    responses(
        (status = 200, body = SchedulingPolicyUnit),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 408, description = "`body_timeout`: the body stalled or took too long", body = ErrorBody),
        (status = 409, description = "`unit_internal`, `name_taken`, `params_would_break`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body must be sent as `application/wasm`", body = ErrorBody),
        (status = 422, description = "As for an upload, plus `unit_type_mismatch` when a policy uses the unit in a slot the new module does not export", body = ErrorBody),
        (status = 503, description = "`compile_queue_full`, with `Retry-After`", body = ErrorBody),
    ))]
pub async fn replace_module(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<Uuid>,
    Query(query): Query<UploadQuery>,
    headers: HeaderMap,
    request: Request,
) -> Result<axum::Json<SchedulingPolicyUnit>, ApiError> {
    let wanted = overrides(query, &headers)?;
    {
        let mut conn = state.store().read().await?;
        ensure_not_internal(&load(&mut conn, id).await?)?;
    }
    let (ticket, upload) = receive(&state, &principal, &headers, request).await?;
    let prepared = prepare(&state, &ticket, upload).await?;

    let mut tx = state.store().write().await?;
    let current = load(&mut tx, id).await?;
    ensure_not_internal(&current)?;
    let name = wanted.name.unwrap_or_else(|| current.name.clone());
    ensure_name_free_for(&mut tx, &name, id).await?;
    let description = wanted
        .description
        .unwrap_or_else(|| prepared.unit.info().description.clone());
    store_module(&state, &mut tx, &prepared).await?;
    let module = unit_module(
        &prepared.unit,
        name,
        description,
        prepared.sha256(),
        &principal,
    );
    let record = install(
        &state,
        tx,
        &current,
        Arc::clone(&prepared.unit),
        module,
        None,
    )
    .await?;
    tracing::info!(unit = %record.name, %id, sha256 = %record.module_sha256, by = %principal.name, "unit module replaced");
    Ok(axum::Json(view(&record)))
}

/// Refuses `name` when a unit other than `id` has it.
pub(crate) async fn ensure_name_free_for(
    conn: &mut Db,
    name: &str,
    id: Uuid,
) -> Result<(), ApiError> {
    if conn
        .unit_by_name(name)
        .await?
        .is_some_and(|other| other.id != id)
    {
        return Err(ApiError::NameTaken {
            resource: "scheduling policy unit",
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Makes `unit`, described by `module` (whose bytes are already in `tx`),
/// the current module of the unit `current`, as its next version
/// (`rollback_of`: the version it restores), and commits. Every policy
/// using the unit must still assemble with it, and every cluster running
/// one of them keep valid overrides; otherwise nothing changes.
pub(crate) async fn install(
    state: &AppState,
    mut tx: Tx,
    current: &UnitRecord,
    unit: Arc<dyn Unit>,
    module: UnitModule,
    rollback_of: Option<i64>,
) -> Result<UnitRecord, ApiError> {
    let id = current.id;
    let replacement: Arc<dyn Unit> = Arc::new(Named::new(unit, &module.name, &module.description));
    let lookup = |unit_id: Uuid| {
        if unit_id == id {
            Some(Arc::clone(&replacement))
        } else {
            state.registry().get(unit_id)
        }
    };
    for policy in tx.policies().await? {
        let uses = policy.filters.iter().any(|f| f.unit_id == id)
            || policy.weights.iter().any(|w| w.unit_id == id)
            || policy.balance == Some(id);
        if uses {
            let clusters = tx.clusters_with_policy(policy.id).await?;
            check_change(&policy, &clusters, &lookup, false).map_err(|e| match e {
                // The change is the unit's, not the policy's: say which
                // policy could not take it.
                ApiError::PolicyInvalid(error) => ApiError::UnfitForPolicy {
                    policy: policy.name.clone(),
                    error: Box::new(error),
                },
                e => e,
            })?;
        }
    }
    tx.replace_unit_module(id, &module, rollback_of, state.retention().unit_versions)
        .await?;
    tx.collect_module_garbage(&state.modules().engine_hash())
        .await?;
    // A module no unit runs any more is forgotten by the runtime, even
    // when the store keeps it as an older version: a rollback loads it
    // again from its stored code.
    let old_module_idle = current.module_sha256 != module.module_sha256
        && !tx.module_in_use(&current.module_sha256).await?;
    let record = load(&mut tx, id).await?;
    // Swapped while the write transaction still holds the store's write
    // lock: two changes reach the registry in the order they reach the
    // store, and the new module already fits every stored policy and
    // override (checked above), so a decision that picks it up before the
    // commit is consistent too. Swapped back if the commit fails.
    let previous = state.registry().get(id);
    state.registry().insert(id, replacement);
    if let Err(e) = tx.commit().await {
        match previous {
            Some(previous) => state.registry().insert(id, previous),
            None => state.registry().remove(id),
        }
        return Err(e.into());
    }
    if old_module_idle {
        state.modules().unload(&current.module_sha256);
    }
    Ok(record)
}

async fn set_enabled(
    state: &AppState,
    id: Uuid,
    enabled: bool,
) -> Result<axum::Json<SchedulingPolicyUnit>, ApiError> {
    let mut tx = state.store().write().await?;
    let unit = load(&mut tx, id).await?;
    ensure_not_internal(&unit)?;
    tx.set_unit_enabled(id, enabled).await?;
    let record = load(&mut tx, id).await?;
    tx.commit().await?;
    Ok(axum::Json(view(&record)))
}

/// Enables a unit: decisions run it again and policies may take it.
#[utoipa::path(post, path = "/api/v1/schedulingpolicyunits/{id}/enable", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 200, body = SchedulingPolicyUnit),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`unit_internal`", body = ErrorBody),
    ))]
pub async fn enable_unit(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<SchedulingPolicyUnit>, ApiError> {
    set_enabled(&state, id, true).await
}

/// Disables a unit: decisions skip it (and the parameter values only it
/// declares) and policies cannot take it, but policies keep it.
#[utoipa::path(post, path = "/api/v1/schedulingpolicyunits/{id}/disable", tag = "schedulingpolicyunits",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Unit id")),
    responses(
        (status = 200, body = SchedulingPolicyUnit),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`unit_internal`", body = ErrorBody),
    ))]
pub async fn disable_unit(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<SchedulingPolicyUnit>, ApiError> {
    set_enabled(&state, id, false).await
}

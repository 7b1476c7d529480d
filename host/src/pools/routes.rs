//! `/api/v1/vmpools`: prestarted VM pools as in oVirt's REST model
//! (`VmPool`: `size`, `prestarted_vms`, `stateful`, a cluster), the
//! members each pool keeps, and allocating a member to a user and
//! returning it. The behaviour lives in `crate::pools`; this module is
//! its HTTP contract.
//!
//! Roles: an admin creates, changes and deletes pools; readers list them;
//! allocating and returning are the engine's (it acts for its users, as
//! oVirt's user portal does for a user: Sandpiper has no user accounts).
//! The roles are declared with every other route's in
//! `api::access::ROUTES`; `server` merges [`routes()`] into the application.

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::actions::{self, Loaded};
use super::member::{Member, MemberState, RunState};
use super::monitor::MonitorRun;
use super::{MAX_VMS_IN_POOL, Pools};
use crate::api::clusters::{cluster_href, load as load_cluster};
use crate::api::decision_error::invalid_snapshot;
use crate::api::error::{ApiError, ErrorBody};
use crate::api::extract::{Json, Path};
use crate::api::types::{IdRef, NamedRef, check_name};
use crate::api::{AppState, location};
use crate::snapshot::VmSpec;
use crate::store::Db;
use crate::store::vm_pools::PoolRecord;

/// The pool routes, documented, for `api::app` to serve beside its own.
/// Their handlers take the [`Pools`] handle as an `axum::Extension`.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_pools, add_pool))
        .routes(routes!(get_pool, update_pool, delete_pool))
        .routes(routes!(list_pool_vms))
        .routes(routes!(allocate_vm))
        .routes(routes!(return_vm))
}

/// A pool of identical VMs in one cluster, `prestarted_vms` of which are
/// kept running and free (oVirt's `VmPool`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct VmPool {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub cluster: NamedRef,
    /// Members, 1 to 1000 (oVirt's `MaxVmsInPool`).
    pub size: u32,
    /// Free members to keep starting or up, 0 to `size`.
    pub prestarted_vms: u32,
    /// `false` (oVirt's automatic pools): a returned VM is discarded and
    /// starts afresh; `true`: it keeps running as the user left it.
    pub stateful: bool,
    /// The shape every member shares (the schedule request's `vm`, without
    /// an id: member `n` is `<name>-<n>`).
    pub vm: VmSpec,
    /// Members by state.
    pub vms: PoolCounts,
    /// The pool monitor's last run over the pool; `null` before the first.
    pub last_run: Option<MonitorRun>,
    /// What the change did not do that one might expect (lowering
    /// `prestarted_vms` stops nothing); empty when nothing.
    pub notes: Vec<String>,
    pub href: String,
    pub created_at: String,
    pub updated_at: String,
}

/// How many members are in each state.
#[derive(Clone, Copy, Debug, Default, Serialize, ToSchema)]
pub struct PoolCounts {
    pub down: u32,
    pub starting: u32,
    /// Up and free.
    pub up: u32,
    pub assigned: u32,
}

/// A member of a pool.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PoolVm {
    /// `<pool name>-<index>`: the VM's id in claims, operations and the
    /// decisions log.
    pub vm_id: String,
    pub index: u32,
    /// `down`, `starting`, `up` (and free) or `assigned`.
    pub state: MemberState,
    /// Whether its VM runs, assigned or not: from its last start operation
    /// (queued or leased: `starting`; succeeded: `up`; failed, cancelled or
    /// none: `down`).
    pub run_state: RunState,
    pub assigned_to: Option<String>,
    /// Where its last start placed it.
    pub host_id: Option<String>,
    pub start_operation_id: Option<Uuid>,
    /// Why its last start failed, when it did.
    pub start_failure: Option<String>,
}

/// A new pool.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VmPoolAdd {
    #[schema(schema_with = crate::names::name_schema, required = true)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub cluster: IdRef,
    /// Members, 1 to 1000 (oVirt's `MaxVmsInPool`).
    #[schema(minimum = 1, maximum = 1000)]
    pub size: u32,
    /// Free members to keep starting or up, 0 to `size`.
    #[serde(default)]
    #[schema(maximum = 1000)]
    pub prestarted_vms: u32,
    #[serde(default)]
    pub stateful: bool,
    /// Without `id`, `name` or `current_host`.
    #[schema(schema_with = member_vm_schema)]
    pub vm: VmSpec,
}

/// Changes to a pool; fields left out stay as they are. The cluster and
/// the name (which prefixes the members' ids) cannot change.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VmPoolUpdate {
    /// Accepted only unchanged.
    pub name: Option<String>,
    pub description: Option<String>,
    /// Growing adds down members; shrinking removes free members, down ones
    /// first, and never an assigned one.
    #[schema(minimum = 1, maximum = 1000)]
    pub size: Option<u32>,
    pub prestarted_vms: Option<u32>,
    pub stateful: Option<bool>,
    /// Applies to members started from now on.
    #[schema(schema_with = optional_member_vm_schema)]
    pub vm: Option<VmSpec>,
}

/// Who to give a member to.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AllocateBody {
    /// The user, as the engine names them.
    #[schema(schema_with = crate::names::name_schema, required = true)]
    pub user: String,
}

/// The member given.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Allocated {
    pub vm: PoolVm,
    /// `true`: the VM is up, use it now (200). `false`: it is starting
    /// (202); `operation_id` is its start operation.
    pub ready: bool,
    pub operation_id: Option<Uuid>,
}

pub(crate) fn pool_href(id: Uuid) -> String {
    format!("/api/v1/vmpools/{id}")
}

fn member_view(m: &Member) -> PoolVm {
    PoolVm {
        vm_id: m.row.vm_id.clone(),
        index: m.row.idx,
        state: m.state(),
        run_state: m.run,
        assigned_to: m.row.assigned_to.clone(),
        host_id: m.row.host_id.clone(),
        start_operation_id: m.row.start_operation_id,
        start_failure: m.failure.clone(),
    }
}

fn counts(members: &[Member]) -> PoolCounts {
    let mut c = PoolCounts::default();
    for m in members {
        match m.state() {
            MemberState::Down => c.down += 1,
            MemberState::Starting => c.starting += 1,
            MemberState::Up => c.up += 1,
            MemberState::Assigned => c.assigned += 1,
        }
    }
    c
}

async fn view(conn: &mut Db, loaded: &Loaded, notes: Vec<String>) -> Result<VmPool, ApiError> {
    let pool = &loaded.pool;
    let cluster_name = conn
        .cluster(pool.cluster_id)
        .await?
        .map(|c| c.name)
        .unwrap_or_default();
    let vm = crate::pools::starts::shape(pool)?;
    let last_run =
        match pool.last_run.as_deref() {
            Some(text) => Some(serde_json::from_str(text).map_err(|e| {
                ApiError::Internal(format!("pool {}: stored last run: {e}", pool.id))
            })?),
            None => None,
        };
    Ok(VmPool {
        id: pool.id,
        name: pool.name.clone(),
        description: pool.description.clone(),
        cluster: NamedRef {
            id: pool.cluster_id,
            name: cluster_name,
            href: cluster_href(pool.cluster_id),
        },
        size: pool.size,
        prestarted_vms: pool.prestarted_vms,
        stateful: pool.stateful,
        vm,
        vms: counts(&loaded.members),
        last_run,
        notes,
        href: pool_href(pool.id),
        created_at: pool.created_at.clone(),
        updated_at: pool.updated_at.clone(),
    })
}

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::InvalidValue {
        field: field.to_owned(),
        message: message.into(),
    }
}

/// The id of member `index` of pool `name`.
fn member_id(name: &str, index: u32) -> String {
    format!("{name}-{index}")
}

/// Checks a pool's settings as a whole (after an update is applied).
fn check_settings(name: &str, size: u32, prestarted: u32, vm: &VmSpec) -> Result<(), ApiError> {
    if !(1..=MAX_VMS_IN_POOL).contains(&size) {
        return Err(invalid(
            "size",
            format!("must be 1 to {MAX_VMS_IN_POOL} (oVirt's MaxVmsInPool), not {size}"),
        ));
    }
    // A rule between two fields, which no schema states: refused as
    // unacceptable content (422), like the other rules about meaning.
    if prestarted > size {
        return Err(ApiError::Unprocessable {
            code: "prestarted_above_size",
            message: format!(
                "`prestarted_vms` must be at most the pool's size ({size}), not {prestarted}"
            ),
            details: serde_json::json!({
                "field": "prestarted_vms",
                "size": size,
                "prestarted_vms": prestarted,
            }),
        });
    }
    // The longest member id must be a valid VM id.
    crate::names::check_id(&member_id(name, MAX_VMS_IN_POOL)).map_err(|e| {
        invalid(
            "name",
            format!("`{name}-<n>` is a member's VM id, which {e}"),
        )
    })?;
    if !vm.id.is_empty() {
        return Err(invalid(
            "vm.id",
            "members get their ids from the pool (`<name>-1`, `<name>-2`, ...)",
        ));
    }
    if vm.name.is_some() {
        return Err(invalid("vm.name", "members are named by their ids"));
    }
    if vm.current_host.is_some() {
        return Err(invalid(
            "vm.current_host",
            "a pool member starts, it does not migrate",
        ));
    }
    crate::inputs::check_vm(vm, "vm").map_err(invalid_snapshot)
}

/// The schedule request's VM as a member's shape: no `id` (or an empty
/// one), `name` or `current_host`, which the pool gives each member
/// (as `check_settings` checks it).
fn member_vm_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
    let RefOr::T(Schema::Object(mut vm)) = <VmSpec as utoipa::PartialSchema>::schema() else {
        unreachable!("VmSpec derives an object schema")
    };
    vm.properties.insert(
        "id".to_owned(),
        ObjectBuilder::new()
            .schema_type(Type::String)
            .max_length(Some(0))
            .into(),
    );
    for taken in ["name", "current_host"] {
        vm.properties.insert(
            taken.to_owned(),
            ObjectBuilder::new().schema_type(Type::Null).into(),
        );
    }
    vm
}

/// [`member_vm_schema`], or `null` (the shape stays as it is).
fn optional_member_vm_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{SchemaType, Type};
    let mut vm = member_vm_schema();
    vm.schema_type = SchemaType::from_iter([Type::Object, Type::Null]);
    vm
}

fn encode_vm(vm: &VmSpec) -> Result<String, ApiError> {
    serde_json::to_string(vm).map_err(|e| ApiError::Internal(format!("VM shape: {e}")))
}

async fn ensure_name_free(conn: &mut Db, name: &str) -> Result<(), ApiError> {
    match conn.vm_pool_id_by_name(name).await? {
        Some(_) => Err(ApiError::NameTaken {
            resource: "vm pool",
            name: name.to_owned(),
        }),
        None => Ok(()),
    }
}

fn assigned_conflict(pool: &PoolRecord, assigned: usize, message: String) -> ApiError {
    ApiError::Conflict {
        code: "pool_vms_assigned",
        message,
        details: serde_json::json!({ "pool": pool.name, "assigned": assigned, "field": "size" }),
    }
}

/// Lists every pool.
#[utoipa::path(get, path = "/api/v1/vmpools", tag = "vmpools",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every pool, by name", body = Vec<VmPool>),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    ))]
pub async fn list_pools(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<VmPool>>, ApiError> {
    let mut conn = state.store().read().await?;
    let pools = conn.vm_pools().await?;
    let mut out = Vec::with_capacity(pools.len());
    for p in pools {
        let loaded = actions::load(&mut conn, p.id).await?;
        out.push(view(&mut conn, &loaded, Vec::new()).await?);
    }
    Ok(axum::Json(out))
}

/// Adds a pool, its members all down; the pool monitor starts
/// `prestarted_vms` of them at once.
#[utoipa::path(post, path = "/api/v1/vmpools", tag = "vmpools",
    security(("bearer" = [])),
    request_body = VmPoolAdd,
    responses(
        (status = 201, body = VmPool),
        (status = 400, description = "`invalid_field`, `invalid_value` naming the field (`size` outside 1-1000, a bad `name`, a bad `vm`)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 409, description = "`name_taken`", body = ErrorBody),
        (status = 422, description = "`prestarted_above_size`: `prestarted_vms` above `size`", body = ErrorBody),
    ))]
pub async fn add_pool(
    State(state): State<AppState>,
    Extension(pools): Extension<Pools>,
    Json(body): Json<VmPoolAdd>,
) -> Result<impl IntoResponse, ApiError> {
    check_name("name", &body.name)?;
    check_settings(&body.name, body.size, body.prestarted_vms, &body.vm)?;
    let mut tx = state.store().write().await?;
    load_cluster(&mut tx, body.cluster.id).await?;
    ensure_name_free(&mut tx, &body.name).await?;
    let record = PoolRecord {
        id: Uuid::new_v4(),
        vm: encode_vm(&body.vm)?,
        name: body.name,
        description: body.description,
        cluster_id: body.cluster.id,
        size: body.size,
        prestarted_vms: body.prestarted_vms,
        stateful: body.stateful,
        last_run: None,
        created_at: String::new(),
        updated_at: String::new(),
    };
    tx.save_vm_pool(&record).await?;
    let members: Vec<(u32, String)> = (1..=record.size)
        .map(|i| (i, member_id(&record.name, i)))
        .collect();
    tx.add_vm_pool_members(record.id, &members).await?;
    let loaded = actions::load(&mut tx, record.id).await?;
    let body = view(&mut tx, &loaded, Vec::new()).await?;
    tx.commit().await?;
    pools.trigger();
    Ok((
        StatusCode::CREATED,
        location(pool_href(record.id)),
        axum::Json(body),
    ))
}

/// Gets one pool, with its members' counts and the monitor's last run.
#[utoipa::path(get, path = "/api/v1/vmpools/{id}", tag = "vmpools",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Pool id")),
    responses(
        (status = 200, body = VmPool),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn get_pool(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<VmPool>, ApiError> {
    let mut conn = state.store().read().await?;
    let loaded = actions::load(&mut conn, id).await?;
    Ok(axum::Json(view(&mut conn, &loaded, Vec::new()).await?))
}

/// Changes a pool's size, `prestarted_vms`, statefulness, description or
/// members' shape. Lowering `prestarted_vms` stops nothing (the answer's
/// `notes` say so); the monitor runs at once.
#[utoipa::path(put, path = "/api/v1/vmpools/{id}", tag = "vmpools",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Pool id")),
    request_body = VmPoolUpdate,
    responses(
        (status = 200, body = VmPool),
        (status = 400, description = "`invalid_field`, `invalid_value` naming the field", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "`pool_vms_assigned`: `size` below the members assigned to users", body = ErrorBody),
        (status = 422, description = "`prestarted_above_size`: `prestarted_vms` above `size` (either changed)", body = ErrorBody),
    ))]
pub async fn update_pool(
    State(state): State<AppState>,
    Extension(pools): Extension<Pools>,
    Path(id): Path<Uuid>,
    Json(body): Json<VmPoolUpdate>,
) -> Result<axum::Json<VmPool>, ApiError> {
    let _lock = pools.lock(id).await;
    let mut tx = state.store().write().await?;
    let Loaded { mut pool, members } = actions::load(&mut tx, id).await?;
    if let Some(name) = &body.name
        && *name != pool.name
    {
        return Err(invalid(
            "name",
            "a pool's name prefixes its members' VM ids and cannot change",
        ));
    }
    let size = body.size.unwrap_or(pool.size);
    let prestarted = body.prestarted_vms.unwrap_or(pool.prestarted_vms);
    let vm = match &body.vm {
        Some(vm) => vm.clone(),
        None => crate::pools::starts::shape(&pool)?,
    };
    check_settings(&pool.name, size, prestarted, &vm)?;
    let mut notes = Vec::new();
    let running_free = members.iter().filter(|m| m.is_prestarted()).count();
    if prestarted < pool.prestarted_vms {
        notes.push(format!(
            "The prestarted VMs will not be shut down automatically: lowering prestarted_vms \
             from {} to {prestarted} stops nothing ({running_free} free VMs are starting or up)",
            pool.prestarted_vms
        ));
    }
    let current = members.len();
    let wanted = size as usize;
    if wanted < current {
        let assigned = members.iter().filter(|m| !m.is_free()).count();
        if assigned > wanted {
            return Err(assigned_conflict(
                &pool,
                assigned,
                format!(
                    "pool `{}` has {assigned} VMs assigned to users; its size cannot go below that",
                    pool.name
                ),
            ));
        }
        // Free members, down ones first, the highest index first.
        let mut free: Vec<&Member> = members.iter().filter(|m| m.is_free()).collect();
        free.sort_by_key(|m| (m.run != RunState::Down, std::cmp::Reverse(m.row.idx)));
        let removed: Vec<&Member> = free.into_iter().take(current - wanted).collect();
        let running: Vec<&str> = removed
            .iter()
            .filter(|m| m.run != RunState::Down)
            .map(|m| m.row.vm_id.as_str())
            .collect();
        if !running.is_empty() {
            notes.push(format!(
                "Members {running:?} were removed from the pool while starting or up; their VMs \
                 are not stopped"
            ));
        }
        let indices: Vec<u32> = removed.iter().map(|m| m.row.idx).collect();
        tx.delete_vm_pool_members(id, &indices).await?;
    } else if wanted > current {
        let used: std::collections::HashSet<u32> = members.iter().map(|m| m.row.idx).collect();
        let added: Vec<(u32, String)> = (1..)
            .filter(|i| !used.contains(i))
            .take(wanted - current)
            .map(|i| (i, member_id(&pool.name, i)))
            .collect();
        tx.add_vm_pool_members(id, &added).await?;
    }
    if body.vm.is_some() && running_free + members.iter().filter(|m| !m.is_free()).count() > 0 {
        notes.push(
            "The new VM shape applies to members started from now on; running ones keep theirs"
                .to_owned(),
        );
    }
    if let Some(description) = body.description {
        pool.description = description;
    }
    pool.size = size;
    pool.prestarted_vms = prestarted;
    pool.stateful = body.stateful.unwrap_or(pool.stateful);
    pool.vm = encode_vm(&vm)?;
    tx.save_vm_pool(&pool).await?;
    let loaded = actions::load(&mut tx, id).await?;
    let out = view(&mut tx, &loaded, notes).await?;
    tx.commit().await?;
    pools.trigger();
    Ok(axum::Json(out))
}

/// Deletes a pool and its members. A pool with members assigned to users
/// cannot be deleted; free members that run are not stopped.
#[utoipa::path(delete, path = "/api/v1/vmpools/{id}", tag = "vmpools",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Pool id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`pool_vms_assigned`", body = ErrorBody),
    ))]
pub async fn delete_pool(
    State(state): State<AppState>,
    Extension(pools): Extension<Pools>,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let lock = pools.lock(id).await;
    let mut tx = state.store().write().await?;
    let Loaded { pool, members } = actions::load(&mut tx, id).await?;
    let assigned = members.iter().filter(|m| !m.is_free()).count();
    if assigned > 0 {
        return Err(assigned_conflict(
            &pool,
            assigned,
            format!(
                "pool `{}` has {assigned} VMs assigned to users; return them first",
                pool.name
            ),
        ));
    }
    tx.delete_vm_pool(id).await?;
    tx.commit().await?;
    drop(lock);
    pools.forget(id);
    Ok(StatusCode::NO_CONTENT)
}

/// Lists a pool's members with their states.
#[utoipa::path(get, path = "/api/v1/vmpools/{id}/vms", tag = "vmpools",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Pool id")),
    responses(
        (status = 200, description = "The members, by index", body = Vec<PoolVm>),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
    ))]
pub async fn list_pool_vms(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<PoolVm>>, ApiError> {
    let mut conn = state.store().read().await?;
    let loaded = actions::load(&mut conn, id).await?;
    Ok(axum::Json(loaded.members.iter().map(member_view).collect()))
}

/// Gives a user a member of the pool: an up, free one at once (200), else
/// one starting or, failing that, a down one started now (202, with its
/// start operation). The monitor then tops the prestarted VMs up again.
#[utoipa::path(post, path = "/api/v1/vmpools/{id}/allocatevm", tag = "vmpools",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Pool id")),
    request_body = AllocateBody,
    responses(
        (status = 200, description = "An up VM, now the user's", body = Allocated),
        (status = 202, description = "A VM starting for the user", body = Allocated),
        (status = 400, description = "`invalid_field`, `invalid_value` (`user`)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "`pool_exhausted`: every member is assigned; `pool_vm_not_placed`: no host can take a down member; `no_inventory`. Nothing changed.", body = ErrorBody),
        (status = 503, description = "`cluster_busy`, with `Retry-After`", body = ErrorBody),
    ))]
pub async fn allocate_vm(
    State(state): State<AppState>,
    Extension(pools): Extension<Pools>,
    Path(id): Path<Uuid>,
    Json(body): Json<AllocateBody>,
) -> Result<impl IntoResponse, ApiError> {
    check_name("user", &body.user)?;
    let allocated = actions::allocate(&state, &pools, id, &body.user).await?;
    let ready = allocated.starting.is_none();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((
        status,
        axum::Json(Allocated {
            vm: member_view(&allocated.member),
            ready,
            operation_id: allocated.starting,
        }),
    ))
}

/// Returns a member to the pool. Stateful pool: it stays as it is and is
/// free again. Stateless pool: it is down again (the engine powers it off
/// and restores its base snapshot), and the monitor starts a fresh one if
/// the pool needs it.
#[utoipa::path(post, path = "/api/v1/vmpools/{id}/vms/{vm_id}/return", tag = "vmpools",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Pool id"), ("vm_id" = String, Path, description = "The member's VM id")),
    responses(
        (status = 200, description = "The member, free again", body = PoolVm),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "The pool or the member", body = ErrorBody),
        (status = 409, description = "`vm_not_assigned`", body = ErrorBody),
    ))]
pub async fn return_vm(
    State(state): State<AppState>,
    Extension(pools): Extension<Pools>,
    Path((id, vm_id)): Path<(Uuid, String)>,
) -> Result<axum::Json<PoolVm>, ApiError> {
    let member = actions::give_back(&state, &pools, id, &vm_id).await?;
    Ok(axum::Json(member_view(&member)))
}

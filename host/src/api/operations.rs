//! The operations queue's routes (`crate::operations`, docs/operations.md):
//!
//! * `POST /api/v1/clusters/{id}/operations` queues an operation;
//! * `GET /api/v1/clusters/{id}/operations` and `.../{op_id}` list and show;
//! * `POST .../operations/lease` leases the next one (long poll);
//! * `POST .../{op_id}/renew`, `.../complete`, `.../cancel`;
//! * `GET .../operations/events`: the queue's changes as server-sent events.
//!
//! Every body is parsed once into its one type; every refusal is one of
//! the API's errors with a stable code naming the field, and changes
//! nothing.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use sandpiper_queue::Locks;

use super::AppState;
use super::claims::exists;
use super::error::{ApiError, ErrorBody};
use super::extract::{Json, Path, Query};
use crate::operations::{
    Kind, LeaseRequest, NewOperation, Operation, OperationError, Origin, Outcome, State as OpState,
};

/// Largest body of an operation route: a payload or detail of at most
/// `operations::MAX_PAYLOAD_BYTES` plus a lock declaration of a few
/// thousand names.
pub const MAX_OPERATION_BODY_BYTES: usize = 512 * 1024;

/// Operations listed when the request gives no `limit`.
pub const DEFAULT_LIST_LIMIT: u32 = 100;

/// Most operations one listing returns; page with `after`.
pub const MAX_LIST_LIMIT: u32 = 1000;

/// Seconds between keep-alive comments on an idle event stream, so that
/// proxies do not close it and a dead client is noticed.
pub const EVENTS_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// An operation as the API shows it. The lease's id is never shown here:
/// it is the holder's proof, returned only by the lease request.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct OperationView {
    pub id: Uuid,
    pub cluster_id: Uuid,
    /// Submit order, server-wide; `after` in listings pages by it.
    pub seq: u64,
    /// `migrate`, `start`, or an engine-defined kind.
    pub kind: String,
    /// -20 (most urgent) .. 19.
    pub priority: i32,
    /// The lock declaration (docs/operations.md).
    #[schema(schema_with = locks_schema)]
    pub locks: Locks,
    /// What the submitter attached, any JSON; `null` when nothing.
    #[schema(value_type = Value)]
    pub payload: Value,
    /// `engine`, `balance` or `pool`.
    pub origin: &'static str,
    /// The pool of an operation from a VM pool.
    pub pool_id: Option<Uuid>,
    /// The VM whose claim the operation carries (operations Sandpiper
    /// made).
    pub vm_id: Option<String>,
    /// `queued`, `leased`, `succeeded`, `failed` or `cancelled`.
    pub state: &'static str,
    /// Leases taken so far, expired ones included.
    pub attempts: u32,
    pub submitted_at: String,
    /// The current lease, or for a finished operation its last one.
    pub lease: Option<LeaseView>,
    pub finished_at: Option<String>,
    /// What the worker reported with its outcome.
    #[schema(value_type = Option<Object>)]
    pub detail: Option<Value>,
}

/// Who holds (or last held) an operation and until when.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LeaseView {
    pub holder: String,
    pub expires_at: String,
}

impl From<&Operation> for OperationView {
    fn from(op: &Operation) -> Self {
        OperationView {
            id: op.id,
            cluster_id: op.cluster_id,
            seq: op.seq,
            kind: op.kind.as_str().to_owned(),
            priority: op.priority,
            locks: op.locks.clone(),
            payload: op.payload.clone(),
            origin: op.origin.as_str(),
            pool_id: op.origin.pool_id(),
            vm_id: op.vm_id.clone(),
            state: op.state.as_str(),
            attempts: op.attempts,
            submitted_at: op.submitted_at.to_rfc3339(),
            lease: op.lease.as_ref().map(|l| LeaseView {
                holder: l.holder.clone(),
                expires_at: l.expires_at.to_rfc3339(),
            }),
            finished_at: op.finished_at.map(|t| t.to_rfc3339()),
            detail: op.detail.clone(),
        }
    }
}

/// An operation to queue.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBody {
    /// `migrate`, `start`, or the engine's own kind (a name of at most 64
    /// characters).
    #[schema(schema_with = kind_schema, required = true)]
    pub kind: String,
    /// -20 (most urgent) .. 19; default 0.
    #[serde(default)]
    #[schema(minimum = -20, maximum = 19)]
    pub priority: Option<i64>,
    /// What the operation will lock, per level; absent: the whole cluster
    /// (it then runs alone, as Ganeti treats undeclared locks).
    #[serde(default)]
    #[schema(schema_with = optional_locks_schema)]
    pub locks: Option<Locks>,
    /// Opaque to Sandpiper, at most 64 KiB as JSON; default `null`.
    #[serde(default)]
    #[schema(value_type = Value)]
    pub payload: Option<Value>,
}

/// A cluster's operations.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct OperationList {
    pub operations: Vec<OperationView>,
}

/// Which operations to list.
#[derive(Clone, Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this state: `queued`, `leased`, `succeeded`, `failed` or
    /// `cancelled`.
    #[param(schema_with = state_schema)]
    pub state: Option<String>,
    /// At most this many, in submit order; default 100, at most 1000.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Only operations submitted after the one with this `seq`.
    #[param(maximum = 9223372036854775807_i64)]
    pub after: Option<u64>,
}

/// An operation's kind: a name of at most `MAX_KIND_CHARS` characters.
fn kind_schema() -> utoipa::openapi::schema::Object {
    crate::names::text_schema(crate::operations::MAX_KIND_CHARS)
}

/// Kinds to lease from, or `null` for all.
fn kinds_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, SchemaType, Type};
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(kind_schema())
        .min_items(Some(1))
        .max_items(Some(crate::operations::MAX_LEASE_KINDS))
        .build()
}

/// A lock declaration (docs/operations.md): `cluster`, and per level one
/// of Ganeti's seven lock types, names being ids; from the queue's own
/// levels and limits, as `operations::check_locks` checks it.
fn locks_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let names = || {
        ArrayBuilder::new()
            .items(crate::names::id_schema())
            .min_items(Some(1))
            .max_items(Some(sandpiper_queue::MAX_NAMES_PER_LEVEL))
    };
    let named = |kind: &str| {
        ObjectBuilder::new()
            .property(kind, names())
            .required(kind)
            .additional_properties(Some(
                utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
            ))
    };
    let level = || {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some([
                        "none",
                        "unknown_shared",
                        "all_shared",
                        "unknown_exclusive",
                        "all_exclusive",
                    ])),
            )
            .item(named("shared"))
            .item(named("exclusive"))
            .build()
    };
    sandpiper_queue::Level::ALL
        .iter()
        .fold(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property("cluster", ObjectBuilder::new().schema_type(Type::Boolean)),
            |schema, l| schema.property(l.name(), utoipa::openapi::Schema::OneOf(level())),
        )
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ))
        .build()
}

/// [`locks_schema`], or `null` (the whole cluster).
fn optional_locks_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{SchemaType, Type};
    let mut schema = locks_schema();
    schema.schema_type = SchemaType::from_iter([Type::Object, Type::Null]);
    schema
}

/// The states an operation can be in, by name.
fn state_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(OpState::ALL.map(|s| s.as_str())))
        .build()
}

/// A lease request.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseBody {
    /// The worker taking the lease (an id: at most 256 bytes).
    #[schema(schema_with = crate::names::id_schema, required = true)]
    pub holder: String,
    /// How long to wait for an operation when none can be leased now,
    /// milliseconds; default 0, at most 30000.
    #[serde(default)]
    #[schema(maximum = 30000)]
    pub wait_ms: Option<u64>,
    /// The lease's time to live, milliseconds (1000 .. 3600000); default
    /// the server's (`--lease-ttl-ms`, 60000).
    #[serde(default)]
    #[schema(minimum = 1000, maximum = 3600000)]
    pub ttl_ms: Option<u64>,
    /// Only operations of these kinds; default all.
    #[serde(default)]
    #[schema(schema_with = kinds_schema)]
    pub kinds: Option<Vec<String>>,
}

/// A lease granted.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Leased {
    pub operation: OperationView,
    pub lease: LeaseGrant,
}

/// The lease: its id is the proof the worker renews and completes with.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LeaseGrant {
    pub id: Uuid,
    pub holder: String,
    pub expires_at: String,
}

/// A renewal.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewBody {
    /// The lease id the lease request returned.
    pub lease: Uuid,
    /// The new time to live from now, milliseconds (1000 .. 3600000);
    /// default as when leased.
    #[serde(default)]
    #[schema(minimum = 1000, maximum = 3600000)]
    pub ttl_ms: Option<u64>,
}

/// How the operation ended.
#[derive(Clone, Copy, Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeName {
    Succeeded,
    Failed,
}

/// A completion.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    /// The lease id the lease request returned.
    pub lease: Uuid,
    pub outcome: OutcomeName,
    /// What to record with the outcome (an error message, a result), at
    /// most 64 KiB as JSON.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub detail: Option<Value>,
    /// With `succeeded`, for the claim the operation carries: the first
    /// generation of the engine's reports of the claimed host that count
    /// the VM (as the claims' `confirm` takes it); default: the host's
    /// next report applied. Give it when a report taken before the VM
    /// arrived may reach Sandpiper after the completion. Refused with
    /// `failed` (422 `covered_from_needs_success`).
    #[serde(default)]
    pub covered_from: Option<u64>,
}

/// The API error of an operations error.
pub fn operation_error(e: OperationError) -> ApiError {
    match e {
        OperationError::ClusterNotFound { cluster_id } => ApiError::NotFound {
            resource: "cluster",
            id: cluster_id.to_string(),
        },
        OperationError::NotFound { id } => ApiError::NotFound {
            resource: "operation",
            id: id.to_string(),
        },
        OperationError::LeaseLost {
            id,
            lease_id,
            reason,
        } => ApiError::Conflict {
            code: "lease_lost",
            message: format!("lease `{lease_id}` does not hold operation `{id}`: {reason}"),
            details: json!({ "field": "lease", "operation": id, "lease": lease_id, "reason": reason }),
        },
        OperationError::Finished { id, state } => ApiError::Conflict {
            code: "operation_finished",
            message: format!("operation `{id}` is already {}", state.as_str()),
            details: json!({ "operation": id, "state": state.as_str() }),
        },
        OperationError::QueueFull { cluster_id, limit } => ApiError::Busy {
            code: "queue_full",
            message: format!(
                "cluster `{cluster_id}` has {limit} operations queued, its limit; retry later"
            ),
            details: json!({ "limit": limit }),
            retry_after_secs: 1,
        },
        OperationError::Invalid { field, message } => ApiError::InvalidValue { field, message },
        OperationError::Store(e) => e.into(),
    }
}

fn kind(field: &str, name: &str) -> Result<Kind, ApiError> {
    Kind::parse(name).map_err(|e| ApiError::InvalidValue {
        field: field.to_owned(),
        message: e.to_string(),
    })
}

/// Queues an operation.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/operations", tag = "operations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    request_body = SubmitBody,
    responses(
        (status = 201, description = "The operation, queued", body = OperationView),
        (status = 400, description = "`invalid_value` naming `kind`, `priority`, `locks.<level>` or `payload`; `invalid_field`", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 503, description = "`queue_full`, `database_busy`", body = ErrorBody),
    ))]
pub async fn submit_operation(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Json(body): Json<SubmitBody>,
) -> Result<Response, ApiError> {
    let kind = kind("kind", &body.kind)?;
    let priority = match body.priority {
        None => sandpiper_queue::PRIORITY_DEFAULT,
        Some(p) => i32::try_from(p).map_err(|_| ApiError::InvalidValue {
            field: "priority".to_owned(),
            message: "must be from -20 (most urgent) to 19".to_owned(),
        })?,
    };
    let op = state
        .operations()
        .submit(NewOperation {
            id: Uuid::new_v4(),
            cluster_id,
            kind,
            priority,
            locks: body.locks.unwrap_or_else(Locks::cluster_wide),
            payload: body.payload.unwrap_or(Value::Null),
            origin: Origin::Engine,
            vm_id: None,
        })
        .await
        .map_err(operation_error)?;
    let location = format!("/api/v1/clusters/{cluster_id}/operations/{}", op.id);
    Ok((
        StatusCode::CREATED,
        super::location(location),
        axum::Json(OperationView::from(&op)),
    )
        .into_response())
}

/// Lists a cluster's operations in submit order.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/operations", tag = "operations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ListQuery),
    responses(
        (status = 200, description = "The operations", body = OperationList),
        (status = 400, description = "`invalid_value` naming `state` or `limit`; `invalid_query`", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
    ))]
pub async fn list_operations(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Query(query): Query<ListQuery>,
) -> Result<axum::Json<OperationList>, ApiError> {
    let wanted = match query.state.as_deref() {
        None => None,
        Some(text) => Some(OpState::parse(text).ok_or_else(|| ApiError::InvalidValue {
            field: "state".to_owned(),
            message: format!("`{text}` is not one of queued, leased, succeeded, failed, cancelled"),
        })?),
    };
    let limit = query.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    if !(1..=MAX_LIST_LIMIT).contains(&limit) {
        return Err(ApiError::InvalidValue {
            field: "limit".to_owned(),
            message: format!("must be from 1 to {MAX_LIST_LIMIT}"),
        });
    }
    // Sequence numbers are SQLite integers: none is above i64::MAX.
    if query
        .after
        .is_some_and(|after| i64::try_from(after).is_err())
    {
        return Err(ApiError::InvalidValue {
            field: "after".to_owned(),
            message: format!("must be at most {}", i64::MAX),
        });
    }
    exists(&state, cluster_id).await?;
    let ops = state
        .operations()
        .list(cluster_id, wanted, query.after, limit)
        .await
        .map_err(operation_error)?;
    Ok(axum::Json(OperationList {
        operations: ops.iter().map(OperationView::from).collect(),
    }))
}

/// One operation.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/operations/{op_id}", tag = "operations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("op_id" = Uuid, Path, description = "Operation id")),
    responses(
        (status = 200, description = "The operation", body = OperationView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster or the operation", body = ErrorBody),
    ))]
pub async fn get_operation(
    State(state): State<AppState>,
    Path((cluster_id, op_id)): Path<(Uuid, Uuid)>,
) -> Result<axum::Json<OperationView>, ApiError> {
    exists(&state, cluster_id).await?;
    let op = state
        .operations()
        .get(cluster_id, op_id)
        .await
        .map_err(operation_error)?;
    Ok(axum::Json(OperationView::from(&op)))
}

/// Leases the next operation: the most urgent, then the least contended
/// with what is leased (Ganeti's predictive queue), then the oldest; never
/// one whose known locks conflict with a leased one, and none while the
/// cluster has `--max-leased-operations` leased. Waits up to `wait_ms` for
/// one (long poll): answers 204 when none came.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/operations/lease", tag = "operations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    request_body = LeaseBody,
    responses(
        (status = 200, description = "An operation, leased", body = Leased),
        (status = 204, description = "Nothing to lease within `wait_ms`"),
        (status = 400, description = "`invalid_value` naming `holder`, `wait_ms`, `ttl_ms` or `kinds`", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
    ))]
pub async fn lease_operation(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Json(body): Json<LeaseBody>,
) -> Result<Response, ApiError> {
    let kinds = body
        .kinds
        .as_ref()
        .map(|names| {
            names
                .iter()
                .enumerate()
                .map(|(i, name)| kind(&format!("kinds[{i}]"), name))
                .collect::<Result<Vec<Kind>, ApiError>>()
        })
        .transpose()?;
    let request = LeaseRequest {
        holder: body.holder,
        kinds,
        ttl: body.ttl_ms.map(Duration::from_millis),
        wait: Duration::from_millis(body.wait_ms.unwrap_or(0)),
    };
    exists(&state, cluster_id).await?;
    let leased = state
        .operations()
        .lease(cluster_id, request)
        .await
        .map_err(operation_error)?;
    let Some(op) = leased else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let Some(lease) = op.lease.as_ref() else {
        return Err(ApiError::Internal(format!(
            "operation {} leased without a lease",
            op.id
        )));
    };
    let grant = LeaseGrant {
        id: lease.id,
        holder: lease.holder.clone(),
        expires_at: lease.expires_at.to_rfc3339(),
    };
    Ok(axum::Json(Leased {
        operation: OperationView::from(&op),
        lease: grant,
    })
    .into_response())
}

/// Extends a lease: the worker is still at it.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/operations/{op_id}/renew", tag = "operations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("op_id" = Uuid, Path, description = "Operation id")),
    request_body = RenewBody,
    responses(
        (status = 200, description = "The operation, its lease extended", body = OperationView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster or the operation", body = ErrorBody),
        (status = 409, description = "`lease_lost`: the lease expired or is not this operation's; `operation_finished`", body = ErrorBody),
    ))]
pub async fn renew_lease(
    State(state): State<AppState>,
    Path((cluster_id, op_id)): Path<(Uuid, Uuid)>,
    Json(body): Json<RenewBody>,
) -> Result<axum::Json<OperationView>, ApiError> {
    exists(&state, cluster_id).await?;
    let op = state
        .operations()
        .renew(
            cluster_id,
            op_id,
            body.lease,
            body.ttl_ms.map(Duration::from_millis),
        )
        .await
        .map_err(operation_error)?;
    Ok(axum::Json(OperationView::from(&op)))
}

/// Records how a leased operation ended, and releases what it held: its
/// locks, and the claim it carries (confirmed when it succeeded, released
/// when it failed).
#[utoipa::path(post, path = "/api/v1/clusters/{id}/operations/{op_id}/complete", tag = "operations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("op_id" = Uuid, Path, description = "Operation id")),
    request_body = CompleteBody,
    responses(
        (status = 200, description = "The operation, finished", body = OperationView),
        (status = 400, description = "`invalid_value` naming `detail`; `invalid_field`", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster or the operation", body = ErrorBody),
        (status = 409, description = "`lease_lost`; `operation_finished` (this lease already finished it)", body = ErrorBody),
        (status = 422, description = "`covered_from_needs_success`", body = ErrorBody),
    ))]
pub async fn complete_operation(
    State(state): State<AppState>,
    Path((cluster_id, op_id)): Path<(Uuid, Uuid)>,
    Json(body): Json<CompleteBody>,
) -> Result<axum::Json<OperationView>, ApiError> {
    exists(&state, cluster_id).await?;
    let outcome = match (body.outcome, body.covered_from) {
        (OutcomeName::Succeeded, covered_from) => Outcome::Succeeded { covered_from },
        (OutcomeName::Failed, None) => Outcome::Failed,
        (OutcomeName::Failed, Some(_)) => {
            return Err(ApiError::Unprocessable {
                code: "covered_from_needs_success",
                message: "`covered_from` says which reports count the VM, so it goes with \
                          the outcome `succeeded` only"
                    .to_owned(),
                details: serde_json::json!({ "field": "covered_from" }),
            });
        }
    };
    let op = state
        .operations()
        .complete(cluster_id, op_id, body.lease, outcome, body.detail)
        .await
        .map_err(operation_error)?;
    Ok(axum::Json(OperationView::from(&op)))
}

/// Cancels a queued or leased operation (its worker's next renewal or
/// completion answers 409 `operation_finished`), releasing its claim.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/operations/{op_id}/cancel", tag = "operations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("op_id" = Uuid, Path, description = "Operation id")),
    responses(
        (status = 200, description = "The operation, cancelled", body = OperationView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster or the operation", body = ErrorBody),
        (status = 409, description = "`operation_finished`", body = ErrorBody),
    ))]
pub async fn cancel_operation(
    State(state): State<AppState>,
    Path((cluster_id, op_id)): Path<(Uuid, Uuid)>,
) -> Result<axum::Json<OperationView>, ApiError> {
    exists(&state, cluster_id).await?;
    let op = state
        .operations()
        .cancel(cluster_id, op_id)
        .await
        .map_err(operation_error)?;
    Ok(axum::Json(OperationView::from(&op)))
}

/// One event of the stream.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct OperationEvent {
    /// `submitted`, `leased`, `renewed`, `completed`, `expired`,
    /// `cancelled`; or `lagged` (the reader fell behind and missed
    /// `missed` events: list again).
    pub event: &'static str,
    pub operation: Option<OperationView>,
    pub missed: Option<u64>,
}

/// The cluster's queue changes as server-sent events
/// (`text/event-stream`), from now on: each event is named by its kind
/// and its data is an `OperationEvent` as JSON. A reader that falls
/// behind gets a `lagged` event and should list the operations again.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/operations/events", tag = "operations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    responses(
        (status = 200, description = "The event stream; each `data:` line is an `OperationEvent`", content_type = "text/event-stream", body = OperationEvent),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
    ))]
pub async fn operation_events(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    exists(&state, cluster_id).await?;
    let events = state.operations().subscribe(cluster_id);
    let stopping = state.operations().stopping();
    let stream = futures_util::stream::unfold(
        (events, stopping),
        |(mut events, mut stopping)| async move {
            let event = tokio::select! {
                received = events.recv() => match received {
                    Ok(event) => OperationEvent {
                        event: event.kind.as_str(),
                        operation: Some(OperationView::from(&*event.operation)),
                        missed: None,
                    },
                    Err(RecvError::Lagged(missed)) => OperationEvent {
                        event: "lagged",
                        operation: None,
                        missed: Some(missed),
                    },
                    Err(RecvError::Closed) => return None,
                },
                // The server is stopping: end the stream so that graceful
                // shutdown does not wait for it.
                _ = stopping.wait_for(|stop| *stop) => return None,
            };
            let data = serde_json::to_string(&event).unwrap_or_default();
            let sse = SseEvent::default().event(event.event).data(data);
            Some((Ok(sse), (events, stopping)))
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(EVENTS_KEEP_ALIVE)))
}

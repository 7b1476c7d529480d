//! The one error type of the HTTP API and its JSON shape,
//! `{"error": {"code", "message", "details"}, "request_id"}`, used for
//! every 4xx and 5xx.
//!
//! `code` is stable: engines and scripts branch on it, so a code is never
//! renamed or reused (add a new one instead). `message` is for people and
//! may change. `details` holds the structured facts behind the message (the
//! field, the conflicting names, the limit).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use uuid::Uuid;

use crate::auth::Role;
use crate::pipeline::{ParamError, PolicyError};
use crate::snapshot::{SnapshotError, SnapshotErrorKind};
use crate::store::StoreError;
use crate::unit::{Failed, UnitError};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    // ---- 400: the request is malformed ----
    /// The body is not JSON (or is cut short).
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    MalformedJson {
        message: String,
        line: usize,
        column: usize,
    },
    /// The body is JSON but a field is unknown, missing or of the wrong type.
    #[error("invalid field `{field}`: {message}")]
    InvalidField { field: String, message: String },
    #[error("invalid query string: {0}")]
    InvalidQuery(String),
    #[error("invalid path: {0}")]
    InvalidPath(String),
    /// A value is well-formed JSON but not acceptable (an empty name, a
    /// negative factor, a position other than -1/0/1).
    #[error("invalid value for `{field}`: {message}")]
    InvalidValue { field: String, message: String },
    /// The request head could not be parsed (answered by the HTTP layer,
    /// see `server::listen`).
    #[error("the request is not valid HTTP/1.1")]
    MalformedRequest,

    // ---- 408/414/431: the HTTP layer's limits ----
    /// The body stopped arriving, or took too long in all.
    #[error("{}", body_timeout_message(*.idle, *.limit_secs))]
    BodyTimeout { idle: bool, limit_secs: u64 },
    #[error("the request URI is longer than the server accepts (65,534 bytes)")]
    UriTooLong,
    #[error("the request headers are larger than the server accepts (about 400 KiB)")]
    HeadersTooLarge,

    // ---- 401/403: who is asking ----
    #[error("a valid bearer token is required (Authorization: Bearer <token>)")]
    Unauthenticated,
    #[error("this route needs the {required} role; the token has the {actual} role")]
    Forbidden { required: Role, actual: Role },

    // ---- 404/405 ----
    #[error("{resource} `{id}` does not exist")]
    NotFound { resource: &'static str, id: String },
    #[error("no such route")]
    NoRoute,
    #[error("method not allowed on this route")]
    MethodNotAllowed,

    // ---- 409: the request conflicts with what is stored ----
    #[error("a {resource} named `{name}` already exists")]
    NameTaken {
        resource: &'static str,
        name: String,
    },
    #[error("unit `{unit}` is used by policies {policies:?}")]
    UnitInUse { unit: String, policies: Vec<String> },
    #[error("unit `{unit}` is built in and cannot be changed or deleted")]
    UnitInternal { unit: String },
    #[error("unit `{unit}` is disabled and cannot be added to a policy")]
    UnitDisabled { unit: String },
    #[error("policy `{policy}` is built in and read-only; clone it to change it")]
    PolicyLocked { policy: String },
    #[error("policy `{policy}` is attached to clusters {clusters:?}")]
    PolicyInUse {
        policy: String,
        clusters: Vec<String>,
    },
    #[error("policy `{policy}` is the default policy; make another one the default first")]
    DefaultPolicy { policy: String },
    /// A policy rule (oVirt's): unit once per policy, one first and one last
    /// filter, one balance unit.
    #[error("{0}")]
    PolicyConflict(PolicyError),
    /// A change would leave parameter values that no unit declares or that
    /// no longer match (removing a unit, replacing a module, switching a
    /// cluster's policy).
    #[error("{message}")]
    ParamsWouldBreak { message: String, owner: String },
    #[error("the change conflicts with stored data")]
    StoreConflict,
    #[error("token `{token}` is the last admin token; create another admin token first")]
    LastAdminToken { token: String },
    /// The request conflicts with held state (`crate::placement`): a stale
    /// inventory generation, no inventory to decide on.
    #[error("{message}")]
    Conflict {
        code: &'static str,
        message: String,
        details: Value,
    },

    // ---- 413/415 ----
    #[error("the body is larger than the {limit_bytes}-byte limit of this route")]
    PayloadTooLarge { limit_bytes: usize },
    #[error("the body must be sent with Content-Type: {expected}")]
    UnsupportedMediaType { expected: &'static str },

    // ---- 422: well-formed but unacceptable content ----
    /// A parameter key no unit of the policy declares, or a value that does
    /// not match its pattern.
    #[error("{0}")]
    Param(ParamError),
    /// A unit put in a slot whose interface it does not export, or a unit
    /// whose declared parameters are unusable.
    #[error("{0}")]
    PolicyInvalid(PolicyError),
    /// A change to a unit (a replaced or restored module) that a policy
    /// using the unit could not take: the policy is named.
    #[error("policy `{policy}` could not use the unit any more: {error}")]
    UnfitForPolicy {
        policy: String,
        error: Box<PolicyError>,
    },
    /// An uploaded module was refused; `code` says why (see `upload`).
    #[error("{message}")]
    ModuleRejected { code: &'static str, message: String },
    /// The request's snapshot or candidates are unusable, or the policy
    /// could not decide (a fail-closed filter failed).
    #[error("{message}")]
    Unprocessable {
        code: &'static str,
        message: String,
        details: Value,
    },

    // ---- 5xx ----
    /// Something on our side failed; the message is logged, not returned.
    #[error("internal error")]
    Internal(String),
    #[error("{0}")]
    Unavailable(String),
    /// A cluster is too busy to decide now (its lock was not free in time,
    /// or a decision held it too long); answered with `Retry-After`.
    #[error("{message}")]
    Busy {
        code: &'static str,
        message: String,
        details: Value,
        retry_after_secs: u64,
    },
}

/// Every code [`ApiError`] can produce, for the OpenAPI document and tests.
pub const ERROR_CODES: &[&str] = &[
    "malformed_json",
    "invalid_field",
    "invalid_query",
    "invalid_path",
    "invalid_value",
    "text_not_nfc",
    "malformed_request",
    "body_timeout",
    "uri_too_long",
    "headers_too_large",
    "unauthenticated",
    "forbidden",
    "not_found",
    "no_route",
    "method_not_allowed",
    "name_taken",
    "unit_in_use",
    "unit_internal",
    "unit_disabled",
    "policy_locked",
    "policy_in_use",
    "default_policy",
    "unit_already_in_policy",
    "first_filter_taken",
    "last_filter_taken",
    "balance_taken",
    "params_would_break",
    "store_conflict",
    "last_admin_token",
    "payload_too_large",
    "unsupported_media_type",
    "unknown_parameter",
    "invalid_parameter_value",
    "unit_type_mismatch",
    "unit_params_invalid",
    "module_not_wasm",
    "module_is_core_module",
    "module_precompiled",
    "module_too_large",
    "module_invalid",
    "module_exports",
    "module_forbidden_import",
    "module_compile_failed",
    "module_compile_timeout",
    "module_compiler_limit",
    "module_memory_too_large",
    "compile_queue_full",
    "too_many_connections",
    "module_unit_failed",
    "module_info_invalid",
    "invalid_snapshot",
    "invalid_candidates",
    "filter_failed",
    "score_failed",
    "balance_failed",
    "no_balance_unit",
    "simulation_failed",
    "internal",
    "unavailable",
    "database_busy",
    "database_unavailable",
    "cluster_moved",
    "owner_unreachable",
    "stale_generation",
    "no_inventory",
    "cluster_busy",
    "decision_too_long",
    "overloaded",
    "lease_lost",
    "operation_finished",
    "covered_from_needs_success",
    "queue_full",
    "pool_exhausted",
    "pool_vms_assigned",
    "prestarted_above_size",
    "pool_vm_not_placed",
    "vm_not_assigned",
    "starting",
    "policy_needs_dry_run",
    "not_replayable",
    "invalid_instances",
];

/// The code of an error answer, kept in the response's extensions for the
/// middleware that records it (`audit::record`) without reading the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCode(pub &'static str);

/// The body of every error response.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
    /// The request's id, as in its `X-Request-Id` response header and in
    /// the server's log lines about it: quote it when reporting a problem.
    /// Absent only from the few answers the connection layer gives before
    /// a request was read whole (a malformed or oversized head).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// What went wrong.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable; see the `ErrorCode` schema for every value.
    #[schema(schema_with = error_code_schema)]
    pub code: String,
    /// For people; may change between versions.
    pub message: String,
    /// Structured facts behind the message (the field, the conflicting
    /// names, the limit); an empty object when there are none.
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
}

/// The schema of `error.code`: every stable code.
pub fn error_code_schema() -> utoipa::openapi::schema::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some("Stable error code; never renamed or reused."))
        .enum_values(Some(ERROR_CODES.iter().copied()))
        .build()
}
/// Seconds an engine is asked to wait (`Retry-After`) before retrying a
/// decision a unit could not finish because the machine starved it of CPU:
/// long enough for a burst of load to pass, short enough that a scheduling
/// request does not stall.
pub const OVERLOADED_RETRY_AFTER_SECS: u64 = 1;

/// Seconds an engine is asked to wait before retrying a request that found
/// no free database connection in time (`StoreError::Busy`): connections
/// are held for milliseconds, so a second lets a burst drain.
pub const DATABASE_BUSY_RETRY_AFTER_SECS: u64 = 1;

impl ApiError {
    /// Text at `field` not in Unicode NFC (`crate::names`): 422, because
    /// the document's pattern cannot say NFC (its description does), and a
    /// schema-valid request refused for what it means is 422 here.
    pub fn not_nfc(field: &str, message: &str) -> ApiError {
        ApiError::Unprocessable {
            code: "text_not_nfc",
            message: format!("invalid value for `{field}`: {message}"),
            details: json!({ "field": field }),
        }
    }

    /// A snapshot or request value refused by `crate::inputs` (a negative
    /// figure, zero vCPUs, an id with control characters) as 400
    /// `invalid_value` naming the field; `None` for the other snapshot
    /// errors, which stay 422 `invalid_snapshot`.
    pub fn refused_value(e: &SnapshotError) -> Option<ApiError> {
        match &e.kind {
            SnapshotErrorKind::InvalidValue(message) => Some(ApiError::InvalidValue {
                field: e.path.clone(),
                message: message.clone(),
            }),
            SnapshotErrorKind::NotNfc(message) => Some(ApiError::not_nfc(&e.path, message)),
            _ => None,
        }
    }

    /// Unit `unit` was starved of CPU before its deadline
    /// (`UnitError::Overloaded`): 503 `overloaded` with `Retry-After`, never
    /// the policy's verdict (422 `filter_failed`), which engines do not
    /// retry.
    pub fn overloaded(unit: &str, failed: &Failed) -> ApiError {
        let timing = match failed.error {
            UnitError::Overloaded {
                deadline,
                cpu,
                elapsed,
            } => json!({
                "deadline_ms": deadline.as_millis() as u64,
                "cpu_ms": cpu.as_millis() as u64,
                "elapsed_ms": elapsed.as_millis() as u64,
            }),
            _ => json!({}),
        };
        ApiError::Busy {
            code: "overloaded",
            message: format!(
                "the server is overloaded: unit `{unit}` {}; retry the request",
                failed.error
            ),
            details: json!({ "unit": unit, "unit_error": failed.error.code(), "timing": timing }),
            retry_after_secs: OVERLOADED_RETRY_AFTER_SECS,
        }
    }

    pub fn status_code(&self) -> StatusCode {
        use ApiError::*;
        match self {
            MalformedJson { .. }
            | InvalidField { .. }
            | InvalidQuery(_)
            | InvalidPath(_)
            | InvalidValue { .. }
            | MalformedRequest => StatusCode::BAD_REQUEST,
            BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            UriTooLong => StatusCode::URI_TOO_LONG,
            HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Unauthenticated => StatusCode::UNAUTHORIZED,
            Forbidden { .. } => StatusCode::FORBIDDEN,
            NotFound { .. } | NoRoute => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            NameTaken { .. }
            | UnitInUse { .. }
            | UnitInternal { .. }
            | UnitDisabled { .. }
            | PolicyLocked { .. }
            | PolicyInUse { .. }
            | DefaultPolicy { .. }
            | PolicyConflict(_)
            | ParamsWouldBreak { .. }
            | StoreConflict
            | LastAdminToken { .. }
            | Conflict { .. } => StatusCode::CONFLICT,
            PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Param(_)
            | PolicyInvalid(_)
            | UnfitForPolicy { .. }
            | ModuleRejected { .. }
            | Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Unavailable(_) | Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The stable machine-readable code.
    pub fn code(&self) -> &'static str {
        use ApiError::*;
        match self {
            MalformedJson { .. } => "malformed_json",
            InvalidField { .. } => "invalid_field",
            InvalidQuery(_) => "invalid_query",
            InvalidPath(_) => "invalid_path",
            InvalidValue { .. } => "invalid_value",
            MalformedRequest => "malformed_request",
            BodyTimeout { .. } => "body_timeout",
            UriTooLong => "uri_too_long",
            HeadersTooLarge => "headers_too_large",
            Unauthenticated => "unauthenticated",
            Forbidden { .. } => "forbidden",
            NotFound { .. } => "not_found",
            NoRoute => "no_route",
            MethodNotAllowed => "method_not_allowed",
            NameTaken { .. } => "name_taken",
            UnitInUse { .. } => "unit_in_use",
            UnitInternal { .. } => "unit_internal",
            UnitDisabled { .. } => "unit_disabled",
            PolicyLocked { .. } => "policy_locked",
            PolicyInUse { .. } => "policy_in_use",
            DefaultPolicy { .. } => "default_policy",
            PolicyConflict(e) | PolicyInvalid(e) => policy_error_code(e),
            UnfitForPolicy { error, .. } => policy_error_code(error),
            ParamsWouldBreak { .. } => "params_would_break",
            StoreConflict => "store_conflict",
            LastAdminToken { .. } => "last_admin_token",
            PayloadTooLarge { .. } => "payload_too_large",
            UnsupportedMediaType { .. } => "unsupported_media_type",
            Param(e) => param_error_code(e),
            ModuleRejected { code, .. }
            | Unprocessable { code, .. }
            | Conflict { code, .. }
            | Busy { code, .. } => code,
            Internal(_) => "internal",
            Unavailable(_) => "unavailable",
        }
    }

    /// The structured facts behind the message.
    pub fn details(&self) -> Value {
        use ApiError::*;
        match self {
            MalformedJson { line, column, .. } => json!({ "line": line, "column": column }),
            InvalidField { field, .. } | InvalidValue { field, .. } => json!({ "field": field }),
            Forbidden { required, actual } => json!({ "required": required, "actual": actual }),
            NotFound { resource, id } => json!({ "resource": resource, "id": id }),
            NameTaken { resource, name } => json!({ "resource": resource, "name": name }),
            UnitInUse { unit, policies } => json!({ "unit": unit, "policies": policies }),
            UnitInternal { unit } | UnitDisabled { unit } => json!({ "unit": unit }),
            PolicyLocked { policy } | DefaultPolicy { policy } => json!({ "policy": policy }),
            PolicyInUse { policy, clusters } => json!({ "policy": policy, "clusters": clusters }),
            PolicyConflict(e) | PolicyInvalid(e) => policy_error_details(e),
            UnfitForPolicy { policy, error } => {
                let mut details = policy_error_details(error);
                if let Value::Object(map) = &mut details {
                    map.insert("policy".to_owned(), json!(policy));
                }
                details
            }
            ParamsWouldBreak { owner, .. } => json!({ "owner": owner }),
            LastAdminToken { token } => json!({ "token": token }),
            PayloadTooLarge { limit_bytes } => json!({ "limit_bytes": limit_bytes }),
            UnsupportedMediaType { expected } => json!({ "expected": expected }),
            BodyTimeout { idle, limit_secs } => json!({ "idle": idle, "limit_secs": limit_secs }),
            Param(e) => param_error_details(e),
            Unprocessable { details, .. } | Conflict { details, .. } | Busy { details, .. } => {
                details.clone()
            }
            _ => json!({}),
        }
    }
}

fn param_error_code(e: &ParamError) -> &'static str {
    match e {
        ParamError::UnknownKey { .. } => "unknown_parameter",
        ParamError::BadValue { .. } => "invalid_parameter_value",
    }
}

fn param_error_details(e: &ParamError) -> Value {
    match e {
        ParamError::UnknownKey { key } => json!({ "parameter": key }),
        ParamError::BadValue {
            key,
            value,
            pattern,
            unit,
        } => json!({ "parameter": key, "value": value, "pattern": pattern, "unit": unit }),
    }
}

fn policy_error_code(e: &PolicyError) -> &'static str {
    match e {
        PolicyError::DuplicateUnit { .. } => "unit_already_in_policy",
        PolicyError::NotExported { .. } => "unit_type_mismatch",
        PolicyError::SecondFirst { .. } => "first_filter_taken",
        PolicyError::SecondLast { .. } => "last_filter_taken",
        PolicyError::SecondBalance { .. } => "balance_taken",
        PolicyError::Spec(_) => "unit_params_invalid",
        PolicyError::Param(p) => param_error_code(p),
    }
}

fn policy_error_details(e: &PolicyError) -> Value {
    match e {
        PolicyError::DuplicateUnit { unit } => json!({ "unit": unit }),
        PolicyError::NotExported { unit, role } => json!({ "unit": unit, "role": role }),
        PolicyError::SecondFirst { unit, first } => json!({ "unit": unit, "first": first }),
        PolicyError::SecondLast { unit, last } => json!({ "unit": unit, "last": last }),
        PolicyError::SecondBalance { unit, balance } => {
            json!({ "unit": unit, "balance": balance })
        }
        PolicyError::Spec(_) => json!({}),
        PolicyError::Param(p) => param_error_details(p),
    }
}

impl From<PolicyError> for ApiError {
    /// Rules about what is already in the policy are conflicts (409); a
    /// unit in the wrong slot or a bad parameter is invalid content (422).
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::DuplicateUnit { .. }
            | PolicyError::SecondFirst { .. }
            | PolicyError::SecondLast { .. }
            | PolicyError::SecondBalance { .. } => ApiError::PolicyConflict(e),
            PolicyError::Param(p) => ApiError::Param(p),
            PolicyError::NotExported { .. } | PolicyError::Spec(_) => ApiError::PolicyInvalid(e),
        }
    }
}

impl From<ParamError> for ApiError {
    fn from(e: ParamError) -> Self {
        ApiError::Param(e)
    }
}

/// Seconds a client is asked to wait when the database cannot be reached
/// or a cluster is changing owner: a replica retries the database at once,
/// and a cluster's new owner answers within a lease (docs/fleet.md).
pub const FLEET_RETRY_AFTER_SECS: u64 = 1;

impl ApiError {
    /// This replica lost the cluster to another (its lease ran out) while
    /// deciding, or a forwarded request reached a replica that no longer
    /// owns it: nothing was stored, and a retry reaches the new owner.
    pub fn cluster_moved(cluster_id: Uuid) -> ApiError {
        ApiError::Busy {
            code: "cluster_moved",
            message: format!(
                "cluster {cluster_id} is moving to another replica; nothing was stored, retry \
                 the request"
            ),
            details: json!({ "cluster_id": cluster_id }),
            retry_after_secs: FLEET_RETRY_AFTER_SECS,
        }
    }

    /// The database cannot be reached (refused or lost connections): the
    /// server recovers by itself once it is back, and nothing the request
    /// asked for was stored.
    pub fn database_unavailable(error: &dyn std::fmt::Display) -> ApiError {
        ApiError::Busy {
            code: "database_unavailable",
            message: format!("the database cannot be reached ({error}); retry shortly"),
            details: json!({}),
            retry_after_secs: FLEET_RETRY_AFTER_SECS,
        }
    }

    /// The replica that owns the cluster did not answer a forwarded
    /// request: if it died, another takes the cluster over once its lease
    /// runs out.
    pub fn owner_unreachable(cluster_id: Uuid, replica: &str, error: &str) -> ApiError {
        ApiError::Busy {
            code: "owner_unreachable",
            message: format!(
                "replica {replica}, which decides for cluster {cluster_id}, did not answer \
                 ({error}); retry the request"
            ),
            details: json!({ "cluster_id": cluster_id, "replica": replica }),
            retry_after_secs: FLEET_RETRY_AFTER_SECS,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if let StoreError::NotOwner { cluster_id } = e {
            return ApiError::cluster_moved(cluster_id);
        }
        if e.is_unreachable() {
            return ApiError::database_unavailable(&e);
        }
        if e.is_constraint_violation() {
            // Our own checks run first, inside the same transaction; a
            // constraint can still fire when they miss a case, and then the
            // request conflicts with stored data rather than failing inside.
            tracing::warn!(error = %e, "store constraint violated");
            ApiError::StoreConflict
        } else if let StoreError::Busy { waited } = e {
            ApiError::Busy {
                code: "database_busy",
                message: e.to_string(),
                details: json!({ "waited_ms": waited.as_millis() as u64 }),
                retry_after_secs: DATABASE_BUSY_RETRY_AFTER_SECS,
            }
        } else {
            ApiError::Internal(e.to_string())
        }
    }
}

fn body_timeout_message(idle: bool, limit_secs: u64) -> String {
    if idle {
        format!("the request body stalled: nothing arrived for {limit_secs} s")
    } else {
        format!("the request body took more than {limit_secs} s to arrive")
    }
}

impl ApiError {
    /// The JSON body of this error; also written by the connection layer,
    /// which answers some requests without the router.
    pub fn body(&self) -> ErrorBody {
        // A struct, not `json!`, so the fields come out in the documented
        // order: code, message, details.
        ErrorBody {
            error: ErrorDetail {
                code: self.code().to_owned(),
                message: self.to_string(),
                details: self.details(),
            },
            request_id: super::observe::current_request_id(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status_code();
        if let ApiError::Internal(cause) = &self {
            tracing::error!(%cause, "internal error");
        }
        let body = self.body();
        let retry_after = match &self {
            ApiError::Busy {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            _ => None,
        };
        let mut response = (status, axum::Json(body)).into_response();
        response.extensions_mut().insert(ErrorCode(self.code()));
        if let Some(secs) = retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for code in ERROR_CODES {
            assert!(seen.insert(code), "{code} listed twice");
        }
    }

    #[test]
    fn codes_of_sample_errors_are_listed() {
        let samples = [
            ApiError::Unauthenticated,
            ApiError::NoRoute,
            ApiError::StoreConflict,
            ApiError::Internal("x".into()),
            ApiError::Param(ParamError::UnknownKey { key: "k".into() }),
            ApiError::PolicyConflict(PolicyError::DuplicateUnit { unit: "u".into() }),
        ];
        for e in samples {
            assert!(ERROR_CODES.contains(&e.code()), "{} not listed", e.code());
        }
    }

    #[test]
    fn a_starved_unit_is_a_retryable_503_not_a_verdict() {
        use std::time::Duration;
        let failed = Failed {
            error: UnitError::Overloaded {
                deadline: Duration::from_millis(250),
                cpu: Duration::from_millis(4),
                elapsed: Duration::from_millis(410),
            },
            usage: crate::unit::Usage::default(),
        };
        let e = ApiError::overloaded("Memory", &failed);
        assert_eq!(e.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.code(), "overloaded");
        assert!(ERROR_CODES.contains(&e.code()));
        assert_eq!(e.details()["timing"]["cpu_ms"], 4);
        let response = e.into_response();
        assert_eq!(
            response.headers()[axum::http::header::RETRY_AFTER],
            OVERLOADED_RETRY_AFTER_SECS.to_string().as_str()
        );
    }

    #[test]
    fn a_saturated_database_is_a_retryable_503() {
        let e = ApiError::from(StoreError::Busy {
            waited: std::time::Duration::from_millis(2000),
        });
        assert_eq!(e.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.code(), "database_busy");
        assert!(ERROR_CODES.contains(&e.code()));
        assert_eq!(e.details()["waited_ms"], 2000);
        let response = e.into_response();
        assert_eq!(
            response.headers()[axum::http::header::RETRY_AFTER],
            DATABASE_BUSY_RETRY_AFTER_SECS.to_string().as_str()
        );
    }

    #[test]
    fn refused_values_are_400_naming_the_field() {
        let e = SnapshotError {
            path: "vms[0].vcpus".to_owned(),
            kind: SnapshotErrorKind::InvalidValue("must be at least 1".to_owned()),
        };
        let api = ApiError::refused_value(&e).expect("a refused value");
        assert_eq!(
            (api.status_code(), api.code()),
            (StatusCode::BAD_REQUEST, "invalid_value")
        );
        assert_eq!(api.details()["field"], "vms[0].vcpus");
        let other = SnapshotError {
            path: "hosts[0].id".to_owned(),
            kind: SnapshotErrorKind::EmptyId,
        };
        assert!(ApiError::refused_value(&other).is_none());
    }
}

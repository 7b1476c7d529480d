//! The OpenAPI 3.1 document: generated from the handlers' annotations
//! (utoipa), completed with the bearer scheme, each route's role from
//! `access::ROUTES` and the list of error codes, and served at
//! `GET /api/v1/openapi.json`. It is the engines' contract.

use std::sync::Arc;

use axum::Extension;
use axum::http::Method;
use utoipa::OpenApi;
use utoipa::openapi::RefOr;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use super::access::{Access, access_for};
use super::error::{ErrorBody, ErrorDetail};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sandpiper",
        description = "A scheduling policy engine for VM clusters. Policies are chains of \
            filter, score (weight) and balance units, each a sandboxed WebAssembly \
            component. Resource names follow oVirt's REST API. Every error has the shape \
            `{\"error\": {\"code\", \"message\", \"details\"}, \"request_id\"}`; `code` is \
            stable, and `request_id` (also in the `X-Request-Id` header) finds the request in \
            the server's log.",
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    tags(
        (name = "health", description = "Liveness and the API description"),
        (name = "schedulingpolicyunits", description = "Policy units: uploaded WebAssembly components"),
        (name = "schedulingpolicies", description = "Scheduling policies and their filters, weights and balances"),
        (name = "clusters", description = "Clusters, their policy and overrides, and their decisions"),
        (name = "decisions", description = "Placement and balancing decisions, for engines"),
        (name = "operations", description = "The operations queue: what should happen next in a cluster, leased by engines' workers, carried out and reported back"),
        (name = "tokens", description = "Bearer tokens and roles"),
        (name = "audit", description = "The audit log: every admin change, who made it and what came of it"),
        (name = "kubernetes", description = "kube-scheduler's extender verbs (`k8s.io/kube-scheduler/extender/v1`), for a cluster named in the path; see docs/kubernetes.md"),
        (name = "vmpools", description = "Prestarted VM pools: members kept running for users to take at once"),
        (name = "simulations", description = "The policy simulator: a workload replayed against stored policies on a copy of a cluster; see docs/simulator.md"),
    )
)]
struct Base;

/// The document before the routes are added.
pub fn base() -> utoipa::openapi::OpenApi {
    let mut doc = Base::openapi();
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A token from `POST /api/v1/tokens` (or the first admin token). \
                         Roles: reader (GET), engine (reader + schedule/balance), admin (all).",
                    ))
                    .build(),
            ),
        );
    doc
}

/// What a status means when a route's own annotation says no more. OpenAPI
/// requires a description on every response (a document without them fails
/// validation); these are the API's meanings, whichever route answers.
fn status_meaning(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created; `Location` names it",
        "204" => "Done; no body",
        "400" => {
            "The request is malformed (`malformed_json`, `invalid_value`, `invalid_path`, \
             `invalid_query`, ...); the message names the field"
        }
        "401" => "`unauthenticated`: no token, or an unknown or revoked one",
        "403" => "`forbidden`: the token's role does not allow this route",
        "404" => "`not_found`: what the path names does not exist",
        "408" => "`body_timeout`: the body stalled or took too long",
        "409" => "A conflict with what is stored; `error.code` says which",
        "413" => "`payload_too_large`: the body is over this route's limit",
        "415" => "`unsupported_media_type`: the body was sent with another content type",
        "422" => "Well-formed but unacceptable; `error.code` says why",
        "503" => "Busy or overloaded; retry after `Retry-After` seconds",
        _ => "See `error.code`",
    }
}

/// Adds each operation's role, as declared in `access::ROUTES`, to its
/// description, drops the security requirement of public routes, adds the
/// error statuses the extractors answer for every route that takes input
/// (400; 408, 413 and 415 with a body), says that `vms` needs `hosts`
/// (`VMS_NEED_HOSTS`) and that tagged unions' variants take no other
/// field (`CLOSED_UNIONS`), and gives every response without a
/// description its status's meaning.
pub fn finish(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    if let Some(components) = doc.components.as_mut() {
        for name in VMS_NEED_HOSTS {
            if let Some(RefOr::T(utoipa::openapi::Schema::Object(body))) =
                components.schemas.get_mut(name)
            {
                body.extensions.get_or_insert_with(Default::default).insert(
                    "dependentRequired".to_owned(),
                    serde_json::json!({ "vms": ["hosts"] }),
                );
            }
        }
        for name in CLOSED_UNIONS {
            if let Some(RefOr::T(utoipa::openapi::Schema::OneOf(union))) =
                components.schemas.get_mut(name)
            {
                for variant in &mut union.items {
                    if let RefOr::T(utoipa::openapi::Schema::Object(variant)) = variant {
                        variant.additional_properties = Some(Box::new(
                            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
                        ));
                    }
                }
            }
        }
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in [
            (Method::GET, item.get.as_mut()),
            (Method::POST, item.post.as_mut()),
            (Method::PUT, item.put.as_mut()),
            (Method::DELETE, item.delete.as_mut()),
            (Method::PATCH, item.patch.as_mut()),
        ] {
            let Some(op) = op else { continue };
            let note = match access_for(&method, path) {
                Some(Access::Public) => {
                    op.security = None;
                    "Public: no token needed.".to_owned()
                }
                Some(Access::Role(role)) => format!("Needs a token with the `{role}` role."),
                None => "Not reachable: the route declares no role.".to_owned(),
            };
            op.description = Some(match op.description.take() {
                Some(d) if !d.is_empty() => format!("{d}\n\n{note}"),
                _ => note,
            });
            // Statuses every route of a kind can answer, from the
            // extractors rather than the handler, so no handler lists them.
            let takes_input = path.contains('{')
                || op.parameters.as_ref().is_some_and(|p| !p.is_empty())
                || op.request_body.is_some();
            let mut implied = Vec::new();
            if takes_input {
                implied.push("400");
            }
            if op.request_body.is_some() {
                implied.extend(["408", "413", "415"]);
            }
            for status in implied {
                op.responses
                    .responses
                    .entry(status.to_owned())
                    .or_insert_with(error_response);
            }
            for (status, response) in op.responses.responses.iter_mut() {
                if let RefOr::T(response) = response
                    && response.description.is_empty()
                {
                    response.description = status_meaning(status).to_owned();
                }
            }
        }
    }
    doc
}

/// Request bodies whose `vms` may come only with `hosts` (the VMs of an
/// inline snapshot; without one, the held inventory's VMs are used): the
/// one rule between fields the derive cannot say, written as JSON
/// Schema's `dependentRequired` (checked in `api::schedule` and
/// `placement::request`).
const VMS_NEED_HOSTS: [&str; 2] = ["ScheduleBody", "BalanceBody"];

/// Internally tagged enums with `deny_unknown_fields`: serde refuses an
/// unknown field in every variant, but the derive writes
/// `additionalProperties: false` only for structs.
const CLOSED_UNIONS: [&str; 1] = ["HostUpdate"];

/// A response with our error body, its description filled in by
/// [`finish`] from the status.
fn error_response() -> RefOr<utoipa::openapi::Response> {
    let content = utoipa::openapi::ContentBuilder::new()
        .schema(Some(utoipa::openapi::Ref::from_schema_name("ErrorBody")))
        .build();
    RefOr::T(
        utoipa::openapi::ResponseBuilder::new()
            .content("application/json", content)
            .build(),
    )
}

/// The OpenAPI document of this API.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "health",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn document(
    Extension(doc): Extension<Arc<utoipa::openapi::OpenApi>>,
) -> axum::Json<Arc<utoipa::openapi::OpenApi>> {
    axum::Json(doc)
}

//! The OpenAPI 3.1 document: generated from the handlers' annotations
//! (utoipa), completed with the bearer scheme, each route's role from
//! `access::ROUTES` and the list of error codes, and served at
//! `GET /api/v1/openapi.json`. It is the engines' contract.

use std::sync::Arc;

use axum::Extension;
use axum::http::Method;
use utoipa::OpenApi;
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
        (name = "kubernetes", description = "kube-scheduler's extender verbs (`k8s.io/kube-scheduler/extender/v1`), for a cluster named in the path; see docs/kubernetes.md"),
        (name = "vmpools", description = "Prestarted VM pools: members kept running for users to take at once"),
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

/// Adds each operation's role, as declared in `access::ROUTES`, to its
/// description, and drops the security requirement of public routes.
pub fn finish(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
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
        }
    }
    doc
}

/// The OpenAPI document of this API.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "health",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn document(
    Extension(doc): Extension<Arc<utoipa::openapi::OpenApi>>,
) -> axum::Json<Arc<utoipa::openapi::OpenApi>> {
    axum::Json(doc)
}

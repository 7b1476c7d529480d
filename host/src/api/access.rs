//! Who may call which route: the one table every route is declared in, and
//! the middleware that enforces it.
//!
//! The middleware looks the matched route up in [`ROUTES`]; a route missing
//! from the table is refused (fail closed), and a test checks that the table
//! and the router list exactly the same routes.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use super::error::ApiError;
use crate::auth::{Principal, Role, hash_token};

/// What a route requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No token: health checks, the OpenAPI document and the console's
    /// static files.
    Public,
    /// A token whose role includes this one.
    Role(Role),
}

/// A route and what it requires.
#[derive(Clone, Debug)]
pub struct RouteAccess {
    pub method: Method,
    /// The route as the router spells it, e.g. `/api/v1/clusters/{id}`.
    pub path: &'static str,
    pub access: Access,
}

const fn route(method: Method, path: &'static str, access: Access) -> RouteAccess {
    RouteAccess {
        method,
        path,
        access,
    }
}

const PUBLIC: Access = Access::Public;
const READER: Access = Access::Role(Role::Reader);
const ENGINE: Access = Access::Role(Role::Engine);
const ADMIN: Access = Access::Role(Role::Admin);

/// Every route of the API with the least role it needs.
pub const ROUTES: &[RouteAccess] = &[
    route(Method::GET, "/healthz", PUBLIC),
    route(Method::GET, "/api/v1/openapi.json", PUBLIC),
    // The admin console's static files (crate::console): the page holds no
    // data, and every call it makes for data sends the user's token.
    route(Method::GET, "/ui", PUBLIC),
    route(Method::GET, "/ui/", PUBLIC),
    route(Method::GET, "/ui/{*path}", PUBLIC),
    // A Prometheus scrape sends a reader token (docs/metrics.md): the
    // metrics name clusters and units, which anonymous callers cannot list.
    route(Method::GET, "/metrics", READER),
    // Policy units.
    route(Method::GET, "/api/v1/schedulingpolicyunits", READER),
    route(Method::POST, "/api/v1/schedulingpolicyunits", ADMIN),
    route(Method::GET, "/api/v1/schedulingpolicyunits/{id}", READER),
    route(Method::DELETE, "/api/v1/schedulingpolicyunits/{id}", ADMIN),
    route(
        Method::PUT,
        "/api/v1/schedulingpolicyunits/{id}/module",
        ADMIN,
    ),
    route(
        Method::POST,
        "/api/v1/schedulingpolicyunits/{id}/enable",
        ADMIN,
    ),
    route(
        Method::POST,
        "/api/v1/schedulingpolicyunits/{id}/disable",
        ADMIN,
    ),
    route(
        Method::GET,
        "/api/v1/schedulingpolicyunits/{id}/versions",
        READER,
    ),
    route(
        Method::POST,
        "/api/v1/schedulingpolicyunits/{id}/rollback",
        ADMIN,
    ),
    // Scheduling policies.
    route(Method::GET, "/api/v1/schedulingpolicies", READER),
    route(Method::POST, "/api/v1/schedulingpolicies", ADMIN),
    route(Method::GET, "/api/v1/schedulingpolicies/{id}", READER),
    route(Method::PUT, "/api/v1/schedulingpolicies/{id}", ADMIN),
    route(Method::DELETE, "/api/v1/schedulingpolicies/{id}", ADMIN),
    route(Method::POST, "/api/v1/schedulingpolicies/{id}/clone", ADMIN),
    route(
        Method::GET,
        "/api/v1/schedulingpolicies/{id}/filters",
        READER,
    ),
    route(
        Method::POST,
        "/api/v1/schedulingpolicies/{id}/filters",
        ADMIN,
    ),
    route(
        Method::GET,
        "/api/v1/schedulingpolicies/{id}/filters/{unit_id}",
        READER,
    ),
    route(
        Method::DELETE,
        "/api/v1/schedulingpolicies/{id}/filters/{unit_id}",
        ADMIN,
    ),
    route(
        Method::GET,
        "/api/v1/schedulingpolicies/{id}/weights",
        READER,
    ),
    route(
        Method::POST,
        "/api/v1/schedulingpolicies/{id}/weights",
        ADMIN,
    ),
    route(
        Method::GET,
        "/api/v1/schedulingpolicies/{id}/weights/{unit_id}",
        READER,
    ),
    route(
        Method::DELETE,
        "/api/v1/schedulingpolicies/{id}/weights/{unit_id}",
        ADMIN,
    ),
    route(
        Method::GET,
        "/api/v1/schedulingpolicies/{id}/balances",
        READER,
    ),
    route(
        Method::POST,
        "/api/v1/schedulingpolicies/{id}/balances",
        ADMIN,
    ),
    route(
        Method::GET,
        "/api/v1/schedulingpolicies/{id}/balances/{unit_id}",
        READER,
    ),
    route(
        Method::DELETE,
        "/api/v1/schedulingpolicies/{id}/balances/{unit_id}",
        ADMIN,
    ),
    // Clusters and their decisions.
    route(Method::GET, "/api/v1/clusters", READER),
    route(Method::POST, "/api/v1/clusters", ADMIN),
    route(Method::GET, "/api/v1/clusters/{id}", READER),
    route(Method::PUT, "/api/v1/clusters/{id}", ADMIN),
    route(Method::DELETE, "/api/v1/clusters/{id}", ADMIN),
    route(Method::POST, "/api/v1/clusters/{id}/schedule", ENGINE),
    route(Method::POST, "/api/v1/clusters/{id}/balance", ENGINE),
    // The simulator decides nothing for real, but costs as much CPU as
    // many decisions: the engine role, like the decisions.
    route(Method::POST, "/api/v1/simulations", ENGINE),
    route(Method::GET, "/api/v1/clusters/{id}/decisions", READER),
    route(
        Method::GET,
        "/api/v1/clusters/{id}/decisions/{decision_id}",
        READER,
    ),
    route(
        Method::GET,
        "/api/v1/clusters/{id}/decisions/{decision_id}/answer",
        READER,
    ),
    // A replay decides again, as a dry run: what a dry-run schedule needs.
    route(
        Method::POST,
        "/api/v1/clusters/{id}/decisions/{decision_id}/replay",
        ENGINE,
    ),
    // Held inventories, claims and the decisions log (crate::placement).
    route(Method::PUT, "/api/v1/clusters/{id}/inventory", ENGINE),
    route(Method::GET, "/api/v1/clusters/{id}/inventory", READER),
    route(Method::GET, "/api/v1/clusters/{id}/inventory/hosts", READER),
    route(
        Method::POST,
        "/api/v1/clusters/{id}/inventory/updates",
        ENGINE,
    ),
    route(Method::GET, "/api/v1/clusters/{id}/claims", READER),
    route(
        Method::POST,
        "/api/v1/clusters/{id}/claims/{vm_id}/confirm",
        ENGINE,
    ),
    route(
        Method::DELETE,
        "/api/v1/clusters/{id}/claims/{vm_id}",
        ENGINE,
    ),
    // The operations queue (crate::operations).
    route(Method::GET, "/api/v1/clusters/{id}/operations", READER),
    route(Method::POST, "/api/v1/clusters/{id}/operations", ENGINE),
    route(
        Method::POST,
        "/api/v1/clusters/{id}/operations/lease",
        ENGINE,
    ),
    route(
        Method::GET,
        "/api/v1/clusters/{id}/operations/events",
        READER,
    ),
    route(
        Method::GET,
        "/api/v1/clusters/{id}/operations/{op_id}",
        READER,
    ),
    route(
        Method::POST,
        "/api/v1/clusters/{id}/operations/{op_id}/renew",
        ENGINE,
    ),
    route(
        Method::POST,
        "/api/v1/clusters/{id}/operations/{op_id}/complete",
        ENGINE,
    ),
    route(
        Method::POST,
        "/api/v1/clusters/{id}/operations/{op_id}/cancel",
        ENGINE,
    ),
    route(Method::GET, "/api/v1/decisions", READER),
    // Prestarted VM pools (crate::pools): an engine allocates and returns
    // members for its users.
    route(Method::GET, "/api/v1/vmpools", READER),
    route(Method::POST, "/api/v1/vmpools", ADMIN),
    route(Method::GET, "/api/v1/vmpools/{id}", READER),
    route(Method::PUT, "/api/v1/vmpools/{id}", ADMIN),
    route(Method::DELETE, "/api/v1/vmpools/{id}", ADMIN),
    route(Method::GET, "/api/v1/vmpools/{id}/vms", READER),
    route(Method::POST, "/api/v1/vmpools/{id}/allocatevm", ENGINE),
    route(
        Method::POST,
        "/api/v1/vmpools/{id}/vms/{vm_id}/return",
        ENGINE,
    ),
    // kube-scheduler's extender verbs (crate::extender): an engine's calls.
    route(Method::POST, "/k8s/{cluster}/filter", ENGINE),
    route(Method::POST, "/k8s/{cluster}/prioritize", ENGINE),
    // Tokens.
    route(Method::GET, "/api/v1/tokens", ADMIN),
    route(Method::POST, "/api/v1/tokens", ADMIN),
    route(Method::DELETE, "/api/v1/tokens/{id}", ADMIN),
    // The audit log (api::audit).
    route(Method::GET, "/api/v1/audit", ADMIN),
];

/// Whether `method` on the route `path` changes what admins manage
/// (tokens, units, policies, clusters, pools): every route but a read that
/// needs the admin role. Such a change invalidates the prepared policies
/// (`prepared::track_config_changes`) and is audited (`audit::record`).
pub fn is_admin_change(method: &Method, path: &str) -> bool {
    method != Method::GET
        && method != Method::HEAD
        && access_for(method, path) == Some(Access::Role(Role::Admin))
}

/// What `method` on the route `path` requires, if the route is declared.
pub fn access_for(method: &Method, path: &str) -> Option<Access> {
    // axum answers HEAD with the GET handler; it needs what GET needs.
    let method = if method == Method::HEAD {
        &Method::GET
    } else {
        method
    };
    ROUTES
        .iter()
        .find(|r| r.method == *method && r.path == path)
        .map(|r| r.access)
}

/// Checks the caller's token against the route's declared role and, when
/// it passes, hands the handler the [`Principal`].
pub async fn authorize(
    State(state): State<AppState>,
    matched: Option<MatchedPath>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let Some(path) = matched else {
        return Err(ApiError::NoRoute);
    };
    let Some(access) = access_for(req.method(), path.as_str()) else {
        return Err(ApiError::Internal(format!(
            "route {} {} has no declared access",
            req.method(),
            path.as_str()
        )));
    };
    let required = match access {
        Access::Public => return Ok(next.run(req).await),
        Access::Role(role) => role,
    };
    let token = bearer_token(&req).ok_or(ApiError::Unauthenticated)?;
    let hash = hash_token(token);
    let principal = match state.tokens().get(&hash) {
        Some(principal) => principal,
        None => {
            // Read before the query: see `TokenCache`.
            let epoch = state.tokens().epoch();
            let mut conn = state.store().read().await?;
            let record = conn
                .active_token(&hash)
                .await?
                .ok_or(ApiError::Unauthenticated)?;
            drop(conn);
            let principal = Principal {
                token_id: record.id,
                name: record.name,
                role: record.role,
            };
            state.tokens().insert(epoch, hash, principal.clone());
            principal
        }
    };
    if !principal.role.allows(required) {
        return Err(ApiError::Forbidden {
            required,
            actual: principal.role,
        });
    }
    req.extensions_mut().insert(principal);
    Ok(next.run(req).await)
}

fn bearer_token(req: &Request) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_declared_once() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(
                    !(a.method == b.method && a.path == b.path),
                    "{} {} declared twice",
                    a.method,
                    a.path
                );
            }
        }
    }

    #[test]
    fn head_needs_what_get_needs() {
        assert_eq!(
            access_for(&Method::HEAD, "/api/v1/clusters"),
            Some(Access::Role(Role::Reader))
        );
    }

    #[test]
    fn writes_are_never_public_and_gets_never_need_more_than_admin() {
        for r in ROUTES {
            if r.method != Method::GET {
                assert_ne!(r.access, Access::Public, "{} {}", r.method, r.path);
            }
        }
    }
}

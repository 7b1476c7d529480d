//! The HTTP API under `/api/v1`: oVirt's resource names
//! (`schedulingpolicyunits`, `schedulingpolicies` with `filters`, `weights`
//! and `balances`, `clusters`) plus the decisions engines ask for, as JSON.
//!
//! [`app`] builds the whole router from an [`AppState`], with no socket, so
//! tests can drive it directly; `server` binds it. Every route is declared
//! with its role in [`access::ROUTES`], and every handler is annotated for
//! the OpenAPI document served at `/api/v1/openapi.json`. Every request is
//! observed by [`observe`] (request id, span, access log, HTTP metrics).

pub mod access;
pub mod assemble;
pub mod audit;
pub mod claims;
pub mod clusters;
pub mod decision_error;
pub mod decisions;
pub mod error;
pub mod extender;
pub mod extract;
pub mod forward;
pub mod health;
pub mod inventory;
pub mod metrics;
pub mod multipart;
pub mod observe;
pub mod openapi;
pub mod operations;
pub mod ovirt;
pub mod policies;
pub mod prepared;
pub mod schedule;
pub mod simulations;
pub mod tokens;
pub mod types;
pub mod unit_versions;
pub mod units;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};
use utoipa_axum::routes;

use self::error::ApiError;
use self::extract::BodyLimit;
use crate::fleet::Fleet;
use crate::operations::OperationsService;
use crate::placement::PlacementService;
use crate::registry::Registry;
use crate::store::Store;
use crate::upload::Modules;

/// Largest JSON body of an admin request (a policy, a cluster, a token), in
/// bytes. Those are a few kilobytes; a megabyte leaves room for very long
/// descriptions and parameter lists without letting a client make the
/// server buffer much.
pub const MAX_JSON_BODY_BYTES: usize = 1 << 20;

/// Limits of the API, set from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiLimits {
    /// Largest `.wasm` upload, bytes.
    pub max_module_bytes: usize,
    /// Largest schedule or balance request (VM plus inline hosts), bytes.
    pub max_snapshot_bytes: usize,
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

struct Shared {
    store: Store,
    registry: Registry,
    modules: Modules,
    limits: ApiLimits,
    placement: PlacementService,
    operations: OperationsService,
    fleet: Fleet,
    prepared: prepared::PreparedCache,
    tokens: crate::auth::TokenCache,
    retention: Retention,
}

/// What holds clusters' state in memory, and which replica owns each
/// cluster: the services the routes of a cluster act on.
pub struct Held {
    pub placement: PlacementService,
    pub operations: OperationsService,
    pub fleet: Fleet,
}

/// How long the API keeps its own records, from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// How long the audit log keeps an entry.
    pub audit: std::time::Duration,
    /// How many versions (modules it has run) a unit keeps, its current
    /// one included.
    pub unit_versions: u32,
}

impl AppState {
    pub fn new(
        store: Store,
        registry: Registry,
        modules: Modules,
        limits: ApiLimits,
        held: Held,
        retention: Retention,
    ) -> Self {
        AppState {
            shared: Arc::new(Shared {
                store,
                registry,
                modules,
                limits,
                placement: held.placement,
                operations: held.operations,
                fleet: held.fleet,
                prepared: prepared::PreparedCache::default(),
                tokens: crate::auth::TokenCache::default(),
                retention,
            }),
        }
    }

    /// Which replica decides for each cluster (docs/fleet.md).
    pub fn fleet(&self) -> &Fleet {
        &self.shared.fleet
    }

    /// Held inventories, claims and stateful decisions.
    pub fn placement(&self) -> &PlacementService {
        &self.shared.placement
    }

    /// The operations queue.
    pub fn operations(&self) -> &OperationsService {
        &self.shared.operations
    }

    /// Clusters' prepared policies, kept between decisions.
    pub fn prepared(&self) -> &prepared::PreparedCache {
        &self.shared.prepared
    }

    /// Tokens verified by recent requests.
    pub fn tokens(&self) -> &crate::auth::TokenCache {
        &self.shared.tokens
    }

    /// How long the API keeps its own records.
    pub fn retention(&self) -> Retention {
        self.shared.retention
    }

    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    pub fn registry(&self) -> &Registry {
        &self.shared.registry
    }

    pub fn modules(&self) -> &Modules {
        &self.shared.modules
    }

    pub fn limits(&self) -> &ApiLimits {
        &self.shared.limits
    }
}

/// Gives a route its own body limit (and tells the 413 what it was).
fn with_body_limit<S>(
    (schemas, paths, router): UtoipaMethodRouter<S>,
    limit: usize,
) -> UtoipaMethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    (
        schemas,
        paths,
        router
            .layer::<_, std::convert::Infallible>(DefaultBodyLimit::max(limit))
            .layer::<_, std::convert::Infallible>(axum::Extension(BodyLimit(limit))),
    )
}

/// The routes and their OpenAPI description, before state and layers.
pub fn routes(limits: &ApiLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(health::healthz))
        .routes(routes!(openapi::document))
        .routes(routes!(metrics::scrape))
        .routes(with_body_limit(
            routes!(units::list_units, units::upload_unit),
            limits.max_module_bytes,
        ))
        .routes(routes!(units::get_unit, units::delete_unit))
        .routes(with_body_limit(
            routes!(units::replace_module),
            limits.max_module_bytes,
        ))
        .routes(routes!(units::enable_unit))
        .routes(routes!(units::disable_unit))
        .routes(routes!(unit_versions::list_versions))
        .routes(routes!(unit_versions::rollback))
        .routes(routes!(policies::list_policies, policies::add_policy))
        .routes(routes!(
            policies::get_policy,
            policies::update_policy,
            policies::delete_policy
        ))
        .routes(routes!(policies::clone_policy))
        .routes(routes!(policies::list_filters, policies::add_filter))
        .routes(routes!(policies::get_filter, policies::delete_filter))
        .routes(routes!(policies::list_weights, policies::add_weight))
        .routes(routes!(policies::get_weight, policies::delete_weight))
        .routes(routes!(policies::list_balances, policies::add_balance))
        .routes(routes!(policies::get_balance, policies::delete_balance))
        .routes(routes!(clusters::list_clusters, clusters::add_cluster))
        .routes(routes!(
            clusters::get_cluster,
            clusters::update_cluster,
            clusters::delete_cluster
        ))
        .routes(with_body_limit(
            routes!(schedule::schedule_vm),
            limits.max_snapshot_bytes,
        ))
        .routes(with_body_limit(
            routes!(schedule::balance_cluster),
            limits.max_snapshot_bytes,
        ))
        .routes(with_body_limit(
            routes!(simulations::simulate),
            limits.max_snapshot_bytes,
        ))
        .routes(routes!(clusters::list_decisions))
        .routes(routes!(clusters::get_decision))
        .routes(routes!(schedule::replay::replay_decision))
        .routes(routes!(decisions::full_answer))
        .routes(with_body_limit(
            routes!(inventory::put_inventory, inventory::get_inventory),
            limits.max_snapshot_bytes,
        ))
        .routes(routes!(inventory::list_hosts))
        .routes(with_body_limit(
            routes!(inventory::post_updates),
            limits.max_snapshot_bytes,
        ))
        .routes(routes!(claims::list_claims))
        .routes(routes!(claims::confirm_claim))
        .routes(routes!(claims::release_claim))
        .routes(with_body_limit(
            routes!(operations::list_operations, operations::submit_operation),
            operations::MAX_OPERATION_BODY_BYTES,
        ))
        .routes(routes!(operations::lease_operation))
        .routes(routes!(operations::operation_events))
        .routes(routes!(operations::get_operation))
        .routes(routes!(operations::renew_lease))
        .routes(with_body_limit(
            routes!(operations::complete_operation),
            operations::MAX_OPERATION_BODY_BYTES,
        ))
        .routes(routes!(operations::cancel_operation))
        .routes(routes!(decisions::list))
        .routes(routes!(tokens::list_tokens, tokens::add_token))
        .routes(routes!(tokens::revoke_token))
        .routes(routes!(audit::list))
        .routes(with_body_limit(
            routes!(extender::filter),
            limits.max_snapshot_bytes,
        ))
        .routes(with_body_limit(
            routes!(extender::prioritize),
            limits.max_snapshot_bytes,
        ))
}

/// The whole application: every route with its access check, body limits
/// and error shape, over `state`. `more` are the routes of what is built
/// on the API (the prestarted pools, `crate::pools::routes`), which the
/// API cannot name without importing its own clients, and `pages` the
/// routes of its clients served alongside it but outside the OpenAPI
/// document (the console, `crate::console::routes`);
/// `server::Services::app` passes them.
pub fn app(state: AppState, more: OpenApiRouter<AppState>, pages: Router<AppState>) -> Router {
    let limits = *state.limits();
    let (router, api) = routes(&limits).merge(more).split_for_parts();
    let api = openapi::finish(api);
    router
        .merge(pages)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            audit::record,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            prepared::track_config_changes,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            forward::to_owner,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::authorize,
        ))
        .route_layer(axum::middleware::from_fn(observe::matched_route))
        .layer(DefaultBodyLimit::max(MAX_JSON_BODY_BYTES))
        .layer(axum::Extension(BodyLimit(MAX_JSON_BODY_BYTES)))
        .layer(axum::Extension(Arc::new(api)))
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        // Last, so that it wraps the fallbacks too.
        .layer(axum::middleware::from_fn(observe::observe))
        .with_state(state)
}

/// kube-scheduler's extender routes alone, with no token check, for the
/// separate listener an operator binds with `--extender-listen`
/// (kube-scheduler cannot send a bearer token): the same handlers, body
/// limits and error shape as on the main listener, and nothing else.
pub fn extender_app(state: AppState) -> Router {
    let limits = *state.limits();
    let (router, _) = OpenApiRouter::<AppState>::new()
        .routes(with_body_limit(
            routes!(extender::filter),
            limits.max_snapshot_bytes,
        ))
        .routes(with_body_limit(
            routes!(extender::prioritize),
            limits.max_snapshot_bytes,
        ))
        .split_for_parts();
    router
        .route_layer(axum::middleware::from_fn(observe::matched_route))
        .layer(DefaultBodyLimit::max(MAX_JSON_BODY_BYTES))
        .layer(axum::Extension(BodyLimit(MAX_JSON_BODY_BYTES)))
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(observe::observe))
        .with_state(state)
}

async fn no_route() -> ApiError {
    ApiError::NoRoute
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The `Location` of a created resource.
pub(crate) fn location(path: String) -> [(axum::http::HeaderName, String); 1] {
    [(axum::http::header::LOCATION, path)]
}

/// Every route [`app`] serves with `more`, as (method, path), from the
/// OpenAPI document (which the router is built from).
pub fn served_routes(limits: &ApiLimits, more: OpenApiRouter<AppState>) -> Vec<(Method, String)> {
    let (_, api) = routes(limits).merge(more).split_for_parts();
    let mut out = Vec::new();
    for (path, item) in &api.paths.paths {
        for (method, present) in [
            (Method::GET, item.get.is_some()),
            (Method::POST, item.post.is_some()),
            (Method::PUT, item.put.is_some()),
            (Method::DELETE, item.delete.is_some()),
            (Method::PATCH, item.patch.is_some()),
        ] {
            if present {
                out.push((method, path.clone()));
            }
        }
    }
    out
}

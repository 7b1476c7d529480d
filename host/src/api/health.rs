//! `GET /healthz`: 200 when the store answers and the units are loaded.
//! While a server starts, its socket answers every request, this one too,
//! 503 `starting` (`server::starting`) until every unit is loaded, so a 200
//! means a decision can be made.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use crate::store::Backend;

/// The server is ready.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: &'static str,
    /// Units loaded and ready to run.
    pub units_loaded: usize,
    /// `sqlite` or `postgres`.
    #[schema(example = "sqlite")]
    pub store: &'static str,
    /// With a PostgreSQL store: this replica and the clusters it decides
    /// for now (docs/fleet.md); absent on SQLite, where one server decides
    /// for every cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<Replica>,
}

/// One replica of a fleet, as its `/healthz` describes it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Replica {
    /// New at every start.
    pub id: String,
    /// Where the other replicas forward this one's clusters' requests.
    pub url: String,
    /// The clusters whose lease this replica holds.
    pub clusters_owned: Vec<uuid::Uuid>,
}

/// Whether the server can answer.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses(
        (status = 200, body = Health),
        (status = 503, description = "`unavailable`: the store does not answer; `starting`: the server is still compiling and loading its units (with `Retry-After`)", body = ErrorBody),
    ))]
pub async fn healthz(
    State(state): State<AppState>,
) -> Result<(StatusCode, axum::Json<Health>), ApiError> {
    state
        .store()
        .ping()
        .await
        .map_err(|e| ApiError::Unavailable(format!("the store does not answer: {e}")))?;
    let fleet = state.fleet();
    Ok((
        StatusCode::OK,
        axum::Json(Health {
            status: "ok",
            units_loaded: state.registry().len(),
            store: match state.store().backend() {
                Backend::Sqlite => "sqlite",
                Backend::Postgres => "postgres",
            },
            replica: fleet.config().map(|config| Replica {
                id: config.replica_id.clone(),
                url: config.url.clone(),
                clusters_owned: fleet.owned(),
            }),
        }),
    ))
}

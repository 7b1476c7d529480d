//! `POST /api/v1/simulations`: the policy simulator (`crate::simulate`,
//! docs/simulator.md) over stored policies, for the console and scripts.
//! The body names where the cluster comes from (a held cluster's
//! inventory, or a snapshot sent inline), the trace (generated, or its
//! events) and 1 to 8 stored policies, each assembled as a cluster's is
//! (`super::prepared::stored_policy`); the answer is the report, as JSON
//! or (`?format=html`) the HTML page.
//!
//! A simulation is CPU work of seconds, not milliseconds: it runs on the
//! blocking pool, admitted under one fairness bucket shared by every
//! simulation ([`SIMULATIONS`]) rather than any cluster's, so simulations
//! queue behind each other and never take a cluster's own sandbox slots
//! from its engine's decisions. The work is bounded by
//! [`MAX_EVENTS_TIMES_POLICIES`] and [`MAX_HOST_DECISIONS`].

use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

use super::AppState;
use super::decision_error::{invalid_snapshot, placement_error};
use super::error::{ApiError, ErrorBody};
use super::extract::Query;
use super::prepared::stored_policy;
use super::schedule::json_body;
use super::schedule::request::parse_body;
use crate::placement::InventoryError;
use crate::simulate::{
    self, Candidate, GenerateParams, Intervals, MAX_POLICIES, Report, SimulateError, Start, Trace,
    TraceEvent,
};
use crate::snapshot::{Snapshot, SnapshotError};

/// The fairness bucket every simulation is admitted under
/// (`placement::fairness`): not a cluster's id (ids are random v4, never
/// the nil id), so simulations share one bound of work in progress and
/// one share of the sandbox slots among themselves.
pub const SIMULATIONS: Uuid = Uuid::nil();

/// The most events times policies one request may replay: 50,000 decisions
/// (5,000 events against 10 policies, or 6,250 against 8) take tens of
/// seconds of one core with oVirt's policies; a longer study belongs to
/// `sandpiper simulate` on the user's own machine.
pub const MAX_EVENTS_TIMES_POLICIES: usize = 50_000;

/// The most hosts times events times policies one request may replay: a
/// decision's units read every host, so a large cluster makes each of
/// those decisions dearer. 20 million host-decisions is, at the few
/// microseconds per host and unit call the built-in policies take, a
/// minute or two of one core: 5,000 events against 2 policies on 2,000
/// hosts, or the whole 50,000 on 400 hosts.
pub const MAX_HOST_DECISIONS: usize = 20_000_000;

/// A simulation to run.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SimulationBody {
    /// Start from this cluster's held inventory (hosts and the VMs on
    /// them; live claims count as usage). Exactly one of `cluster_id` and
    /// `snapshot`.
    #[serde(default)]
    pub cluster_id: Option<Uuid>,
    /// Start from these hosts and VMs, in the format of the inline hosts
    /// of `POST .../schedule`.
    #[serde(default)]
    pub snapshot: Option<Snapshot>,
    pub trace: TraceBody,
    /// Stored policies to compare, 1 to 8, by id.
    #[schema(min_items = 1, max_items = 8)]
    pub policies: Vec<Uuid>,
    /// Seconds of trace time between balancing rounds (0: never);
    /// 300 when absent.
    #[serde(default)]
    pub balance_every_s: Option<u64>,
    /// Seconds of trace time between samples; 300 when absent.
    #[serde(default)]
    pub sample_every_s: Option<u64>,
}

/// The workload: generated, or given event by event.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum TraceBody {
    Generate(GenerateParams),
    /// The events of a JSON Lines trace, in time order.
    Events(Vec<TraceEvent>),
}

/// `?format=`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SimulationQuery {
    /// `json` (the default) or `html` (the report as a page with charts).
    #[serde(default)]
    #[param(inline)]
    pub format: ReportFormat,
}

/// How the report is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportFormat {
    #[default]
    Json,
    Html,
}

#[utoipa::path(post, path = "/api/v1/simulations", tag = "simulations",
    security(("bearer" = [])),
    params(SimulationQuery),
    request_body = SimulationBody,
    responses(
        (status = 200, description = "The report (JSON, or with `format=html` an HTML page)", body = Report),
        (status = 400, description = "`malformed_json`, `invalid_field`, `invalid_value` naming the field (`cluster_id`, `policies`, `trace.events[12].vm.memory_mib`, `trace.generate.arrivals`, `sample_every_s`, `trace` past the limits of events × policies and hosts × events × policies)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster, or a policy", body = ErrorBody),
        (status = 409, description = "`no_inventory`: the cluster holds no inventory", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 422, description = "`invalid_snapshot` (naming the field under `snapshot`), `simulation_failed` (a replay could not go on: a policy's balance unit failed, or a decision failed for a reason other than the VM's)", body = ErrorBody),
        (status = 503, description = "`cluster_busy`: too many simulations in progress; `overloaded`: the machine starved a unit of CPU, so the simulation stopped rather than count a refusal the load made; with `Retry-After`", body = ErrorBody),
    ))]
pub async fn simulate(
    State(state): State<AppState>,
    Query(query): Query<SimulationQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let admission = state
        .placement()
        .admit(SIMULATIONS)
        .map_err(placement_error)?;
    let body: SimulationBody = parse_body(&admission, json_body(request).await?).await?;
    if body.policies.is_empty() || body.policies.len() > MAX_POLICIES {
        return Err(invalid(
            "policies",
            format!("name 1 to {MAX_POLICIES} policies"),
        ));
    }
    let trace = trace(body.trace)?;
    if trace.events.len().saturating_mul(body.policies.len()) > MAX_EVENTS_TIMES_POLICIES {
        return Err(invalid(
            "trace",
            format!(
                "{} events against {} policies is more than {MAX_EVENTS_TIMES_POLICIES} events times policies",
                trace.events.len(),
                body.policies.len()
            ),
        ));
    }
    let intervals = Intervals {
        balance_every_s: body
            .balance_every_s
            .unwrap_or(simulate::run::DEFAULT_BALANCE_EVERY_S),
        sample_every_s: body
            .sample_every_s
            .unwrap_or(simulate::run::DEFAULT_SAMPLE_EVERY_S),
    };
    intervals.check(trace.duration_s).map_err(simulate_error)?;
    let mut candidates = Vec::with_capacity(body.policies.len());
    for id in &body.policies {
        let (name, policy) = stored_policy(&state, *id).await?;
        candidates.push(Candidate {
            name,
            policy_id: Some(*id),
            policy,
            params: Default::default(),
        });
    }
    let held = match (body.cluster_id, body.snapshot) {
        (Some(cluster_id), None) => {
            // 404 for a cluster that does not exist, before its inventory.
            let mut conn = state.store().read().await?;
            super::clusters::load(&mut conn, cluster_id).await?;
            drop(conn);
            let (hosts, claims, now) = state
                .placement()
                .held_copy(cluster_id)
                .await
                .map_err(placement_error)?;
            Ok(Start { hosts, claims, now })
        }
        (None, Some(snapshot)) => Err(snapshot),
        _ => {
            return Err(invalid(
                "cluster_id",
                "name exactly one of `cluster_id` and `snapshot`",
            ));
        }
    };
    let hosts = match &held {
        Ok(start) => start.host_count(),
        Err(snapshot) => snapshot.hosts.len(),
    };
    let work = hosts
        .saturating_mul(trace.events.len())
        .saturating_mul(candidates.len());
    if work > MAX_HOST_DECISIONS {
        return Err(invalid(
            "trace",
            format!(
                "{hosts} hosts times {} events times {} policies is more than {MAX_HOST_DECISIONS}",
                trace.events.len(),
                candidates.len()
            ),
        ));
    }
    let report = admission
        .run(move || -> Result<Report, ApiError> {
            // Inline hosts are checked and built here, off the accepting
            // threads, as a schedule request's are.
            let start = match held {
                Ok(start) => start,
                Err(snapshot) => Start::from_snapshot(snapshot).map_err(simulate_error)?,
            };
            simulate::simulate(&start, &trace, &candidates, intervals).map_err(simulate_error)
        })
        .await
        .map_err(|e| ApiError::Internal(format!("simulation task failed: {e}")))??;
    answer(&report, query.format)
}

fn answer(report: &Report, format: ReportFormat) -> Result<Response, ApiError> {
    match format {
        ReportFormat::Json => {
            let json = serde_json::to_string(report)
                .map_err(|e| ApiError::Internal(format!("the report does not encode: {e}")))?;
            Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
        }
        ReportFormat::Html => Ok((
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            simulate::render::html(report),
        )
            .into_response()),
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ApiError {
    ApiError::InvalidValue {
        field: field.into(),
        message: message.into(),
    }
}

/// The body's trace, checked: errors name `trace.events[i].field` or
/// `trace.generate.field`.
fn trace(body: TraceBody) -> Result<Trace, ApiError> {
    match body {
        TraceBody::Generate(params) => simulate::generate(&params)
            .map_err(|e| invalid(join("trace.generate", &e.field), e.message)),
        TraceBody::Events(events) => simulate::trace::check_events(events, None).map_err(|e| {
            invalid(
                join(&format!("trace.events[{}]", e.index), &e.field),
                e.message,
            )
        }),
    }
}

fn join(prefix: &str, field: &str) -> String {
    if field.is_empty() {
        prefix.to_owned()
    } else {
        format!("{prefix}.{field}")
    }
}

/// A simulation that could not run, as the API says it.
fn simulate_error(e: SimulateError) -> ApiError {
    match e {
        SimulateError::Snapshot(InventoryError::Invalid(e)) => invalid_snapshot(SnapshotError {
            path: join("snapshot", &e.path),
            kind: e.kind,
        }),
        SimulateError::Interval { field, message } => invalid(field, message),
        SimulateError::Overloaded { unit, failed } => ApiError::overloaded(&unit, &failed),
        SimulateError::Place { .. } | SimulateError::Balance { .. } => ApiError::Unprocessable {
            code: "simulation_failed",
            message: e.to_string(),
            details: serde_json::json!({}),
        },
        other => ApiError::Internal(other.to_string()),
    }
}

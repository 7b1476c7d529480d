//! The decisions engines ask for: `POST /api/v1/clusters/{id}/schedule`
//! (where should this VM run?) and `POST /api/v1/clusters/{id}/balance`
//! (which VM should move, and where?). Follow one request:
//!
//! 0. the decision is admitted for its cluster (`placement::fairness`):
//!    past its bound of decisions in progress, 503 `cluster_busy` at once,
//!    before the body is read;
//! 1. the body is read and parsed once ([`request::parse_body`]) into the
//!    one request type (`placement::PlaceRequest`, or [`BalanceBody`]);
//! 2. the cluster's policy comes from the [`prepared`](super::prepared)
//!    cache;
//! 3. the request's hosts source decides the lower layer called: inline
//!    hosts are built into an inventory and decided by
//!    `pipeline::schedule`; without them, `PlacementService::place`
//!    decides over the held inventory, with claims, under the cluster's
//!    lock;
//! 4. the answer is rendered ([`answer`], [`summary`]) and encoded once,
//!    and the same text is recorded in the decisions log (unless
//!    `dry_run=true`) and returned.
//!
//! Parsing inline hosts and running the units are CPU work, so both run on
//! the blocking pool, never on the threads that accept requests, and only
//! with one of the cluster's sandbox slots.

pub mod answer;
pub mod logged;
pub mod request;
pub mod summary;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use uuid::Uuid;

use self::answer::{BalanceAnswer, Facts, HeldScheduleAnswer, ScheduleAnswer, to_json};
use self::logged::Logged;
use self::request::{BalanceBody, DecisionQuery, parse_body, source_mismatch};
use super::AppState;
use super::claims::{invalid_snapshot, placement_error};
use super::error::{ApiError, ErrorBody};
use super::extract::{Path, Query, body_bytes, is_json};
use super::prepared::{Prepared, prepared};
use crate::inputs;
use crate::pipeline::{self, BalanceError, BalanceInput, ScheduleError, ScheduleRequest};
use crate::placement::{
    Admission, ExplainDetail, HostsSource, LoggedDecision, PlaceJob, PlaceRequest, PlacementError,
};
use crate::snapshot::{self, Snapshot};
use crate::store::decisions::DecisionKind;

fn invalid_candidates(message: String) -> ApiError {
    ApiError::Unprocessable {
        code: "invalid_candidates",
        message,
        details: json!({ "field": "candidates" }),
    }
}

fn schedule_error(e: ScheduleError) -> ApiError {
    match e {
        ScheduleError::Params(p) => {
            ApiError::Internal(format!("stored parameters rejected at decision time: {p}"))
        }
        ScheduleError::CandidateOutOfRange { .. } | ScheduleError::DuplicateCandidate { .. } => {
            invalid_candidates(e.to_string())
        }
        ScheduleError::TooManyHosts { .. } => ApiError::Unprocessable {
            code: "invalid_snapshot",
            message: e.to_string(),
            details: json!({ "field": "hosts" }),
        },
        ScheduleError::Overloaded {
            ref unit,
            ref failed,
        } => ApiError::overloaded(unit, failed),
        ScheduleError::FilterFailed {
            ref unit,
            ref failed,
        } => ApiError::Unprocessable {
            code: "filter_failed",
            details: json!({ "unit": unit, "unit_error": failed.error.code() }),
            message: e.to_string(),
        },
        ScheduleError::ScoreFailed {
            ref unit,
            ref failed,
        } => ApiError::Unprocessable {
            code: "score_failed",
            details: json!({ "unit": unit, "unit_error": failed.error.code() }),
            message: e.to_string(),
        },
    }
}

fn balance_error(e: BalanceError) -> ApiError {
    match e {
        BalanceError::NoBalanceUnit => ApiError::Unprocessable {
            code: "no_balance_unit",
            message: e.to_string(),
            details: json!({}),
        },
        BalanceError::Params(p) => {
            ApiError::Internal(format!("stored parameters rejected at decision time: {p}"))
        }
        BalanceError::CandidateOutOfRange { .. } | BalanceError::DuplicateCandidate { .. } => {
            invalid_candidates(e.to_string())
        }
        BalanceError::BalanceFailed {
            ref unit,
            ref failed,
        } if failed.error.is_overload() => ApiError::overloaded(unit, failed),
        BalanceError::BalanceFailed {
            ref unit,
            ref failed,
        } => ApiError::Unprocessable {
            code: "balance_failed",
            details: json!({ "unit": unit, "unit_error": failed.error.code() }),
            message: e.to_string(),
        },
        BalanceError::VmOnUnknownHost { .. } => ApiError::Unprocessable {
            code: "invalid_snapshot",
            message: e.to_string(),
            details: json!({ "field": "vms" }),
        },
        BalanceError::Schedule(e) => schedule_error(e),
    }
}

/// Runs `work` on the blocking pool, with one of the cluster's sandbox
/// slots (`placement::fairness`).
async fn blocking<T: Send + 'static>(
    admission: &Admission,
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    admission
        .run(work)
        .await
        .map_err(|e| ApiError::Internal(format!("decision task failed: {e}")))?
}

/// Admits a decision for its cluster before its body is read, so that a
/// cluster with too many in progress is refused 503 `cluster_busy` at
/// once (`placement::fairness`).
fn admission(state: &AppState, cluster_id: Uuid) -> Result<Admission, ApiError> {
    state.placement().admit(cluster_id).map_err(placement_error)
}

/// The facts of a decision about to be made.
fn facts(cluster_id: Uuid, query: DecisionQuery, prepared: &Prepared) -> Facts {
    Facts {
        decision_id: (!query.dry_run).then(Uuid::new_v4),
        dry_run: query.dry_run,
        cluster_id,
        policy_id: prepared.policy_id,
        skipped_units: prepared.skipped_units.clone(),
    }
}

/// A decision's entry in the decisions log: the answer as the log keeps
/// it ([`Logged`]: as returned, or a bounded summary with the answer kept
/// apart; for a placement over the held inventory, its summary form), and
/// the claims it made. `None` for a dry run, which records nothing. Every
/// decision's entry is made here.
fn log_entry(
    facts: &Facts,
    kind: DecisionKind,
    vm_id: Option<String>,
    host_id: Option<String>,
    answer: Logged,
    claims: Vec<(String, String)>,
) -> Option<LoggedDecision> {
    facts.decision_id.map(|id| LoggedDecision {
        id,
        cluster_id: facts.cluster_id,
        kind,
        vm_id,
        host_id,
        answer: answer.row,
        full: answer.full,
        claims,
    })
}

/// Records a decision that made no claim (over inline hosts, or a
/// balancing round). A placement over the held inventory records its
/// entry through `Decided::record` instead, in the same batch as its
/// claims and before its cluster is unlocked.
async fn record(state: &AppState, entry: LoggedDecision) -> Result<(), ApiError> {
    state
        .store()
        .log_decision(entry, state.placement().config().retention)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// A JSON response from already-serialised text.
fn json_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Chooses a host for a VM with the cluster's policy.
///
/// With `hosts` in the body, the decision is made over those hosts
/// (stateless). Without, it is made over the inventory Sandpiper holds for
/// the cluster and records a claim per instance placed: the body is then a
/// `HeldScheduleBody` (`count`, `mode`, `exclude`, ...) and the answer a
/// `HeldScheduleAnswer` (see `/api/v1/clusters/{id}/inventory`).
#[utoipa::path(post, path = "/api/v1/clusters/{id}/schedule", tag = "decisions",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), DecisionQuery),
    request_body = PlaceRequest,
    responses(
        (status = 200, description = "The decision (possibly: no host fits)", body = ScheduleAnswer),
        (status = 400, description = "`malformed_json`, `invalid_field`, `invalid_value` (naming the field: a negative figure, zero vCPUs, a bad id, `count` outside 1-256)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 409, description = "`no_inventory`: no hosts inline and none held", body = ErrorBody),
        (status = 422, description = "`invalid_snapshot`, `invalid_candidates` (naming the field), `filter_failed` (a fail-closed filter failed), `score_failed` (a fail-closed weight failed)", body = ErrorBody),
        (status = 503, description = "`cluster_busy` (the cluster has too many decisions in progress, or its lock was not free in time), `decision_too_long` (the decision held it too long; nothing claimed), `overloaded` (a unit was starved of CPU by a busy machine); with `Retry-After`", body = ErrorBody),
    ))]
pub async fn schedule_vm(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Query(query): Query<DecisionQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let admission = admission(&state, cluster_id)?;
    let mut request: PlaceRequest = parse_body(&admission, json_body(request).await?).await?;
    let source = request.take_source().map_err(source_mismatch)?;
    let prepared = prepared(&state, cluster_id).await?;
    let facts = facts(cluster_id, query, &prepared);
    let text = match source {
        HostsSource::Inline(snapshot) => {
            over_inline_hosts(&state, &admission, facts, prepared, snapshot, request).await?
        }
        HostsSource::Held => {
            over_held_inventory(&state, &admission, facts, &prepared, request).await?
        }
    };
    Ok(json_response(text))
}

/// A decision over the hosts the request sent: one pick, nothing claimed.
async fn over_inline_hosts(
    state: &AppState,
    admission: &Admission,
    facts: Facts,
    prepared: Arc<Prepared>,
    snapshot: Snapshot,
    request: PlaceRequest,
) -> Result<String, ApiError> {
    let log = facts.clone();
    let vm_id = request.vm.id.clone();
    let (text, logged, host_id) = blocking(admission, move || {
        let cluster = inputs::build_checked(&snapshot).map_err(invalid_snapshot)?;
        let vm =
            inputs::to_vm_checked(&request.vm, &cluster.hosts, "vm").map_err(invalid_snapshot)?;
        let candidates = request
            .candidates
            .map(|ids| cluster.hosts.resolve_all(&ids, "candidates"))
            .transpose()
            .map_err(invalid_snapshot)?;
        let inventory = Arc::new(cluster.inventory);
        let pick = ScheduleRequest {
            vm,
            hints: snapshot::hint_pairs(&request.hints),
            candidates,
            params: prepared.overrides.clone(),
        };
        let decision =
            pipeline::schedule(&prepared.policy, &inventory, &pick).map_err(schedule_error)?;
        let answer = ScheduleAnswer::new(facts, request.vm.id, decision);
        let text = to_json(&answer)?;
        let logged = match answer.decision_id {
            Some(_) => Some(Logged::schedule(&answer, &text)?),
            None => None,
        };
        Ok((text, logged, answer.chosen_host))
    })
    .await?;
    if let Some(entry) = logged.and_then(|logged| {
        log_entry(
            &log,
            DecisionKind::Schedule,
            Some(vm_id),
            host_id,
            logged,
            Vec::new(),
        )
    }) {
        record(state, entry).await?;
    }
    Ok(text)
}

/// A placement over the inventory held for the cluster: `count` instances,
/// a claim for each placed, the answer's summary form logged with them.
async fn over_held_inventory(
    state: &AppState,
    admission: &Admission,
    facts: Facts,
    prepared: &Prepared,
    request: PlaceRequest,
) -> Result<String, ApiError> {
    crate::inputs::check_count(request.count).map_err(invalid_snapshot)?;
    crate::inputs::check_vm(&request.vm, "vm").map_err(invalid_snapshot)?;
    crate::inputs::check_instance_ids(&request.instance_ids).map_err(invalid_snapshot)?;
    let (vm_id, mode, detail) = (request.vm.id.clone(), request.mode, request.explain);
    let job = PlaceJob {
        policy: prepared.policy.clone(),
        params: prepared.overrides.clone(),
        request,
        dry_run: facts.dry_run,
        decision_id: facts.decision_id.unwrap_or_else(Uuid::new_v4),
    };
    let mut decided = state
        .placement()
        .place_admitted(facts.cluster_id, job, admission)
        .await
        .map_err(placement_error)?;
    // The cluster is still locked: the log entry is rendered now, so that
    // it is stored with the claims, in decision order.
    let summary = match facts.decision_id {
        Some(_) => Some(to_json(&HeldScheduleAnswer::new(
            &facts,
            &vm_id,
            mode,
            &decided.outcome,
            decided.waited,
            ExplainDetail::Summary,
        )?)?),
        None => None,
    };
    let entry = summary.as_ref().and_then(|text| {
        log_entry(
            &facts,
            DecisionKind::Schedule,
            Some(vm_id.clone()),
            decided
                .outcome
                .picks
                .first()
                .and_then(|p| p.host_id.clone()),
            Logged::whole(text.clone()),
            decided
                .outcome
                .claims
                .iter()
                .map(|c| (c.vm_id.clone(), c.host_id.clone()))
                .collect(),
        )
    });
    decided.record(entry).await.map_err(placement_error)?;
    match (summary, detail) {
        (Some(text), ExplainDetail::Summary) => Ok(text),
        _ => {
            blocking(admission, move || {
                to_json(&HeldScheduleAnswer::new(
                    &facts,
                    &vm_id,
                    mode,
                    &decided.outcome,
                    decided.waited,
                    detail,
                )?)
            })
            .await
        }
    }
}

/// Asks the cluster's balance unit for a migration and lets the policy
/// decide where the VM goes (possibly nowhere: it stays).
///
/// With `hosts` in the body, over those hosts. Without, over the inventory
/// Sandpiper holds for the cluster, every live claim counted as usage and
/// listed as a pending VM of its host, as a schedule decision sees them;
/// the answer is the same, and no claim is recorded (the engine schedules
/// the migration it decides on).
#[utoipa::path(post, path = "/api/v1/clusters/{id}/balance", tag = "decisions",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), DecisionQuery),
    request_body = BalanceBody,
    responses(
        (status = 200, description = "The proposal and where it leads", body = BalanceAnswer),
        (status = 400, description = "`malformed_json`, `invalid_field`, `invalid_value` (naming the field: a negative figure, zero vCPUs, a bad id, `count` outside 1-256)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 409, description = "`no_inventory`: no hosts inline and none held", body = ErrorBody),
        (status = 422, description = "`no_balance_unit`, `invalid_snapshot`, `invalid_candidates`, `balance_failed`, `filter_failed`, `score_failed`", body = ErrorBody),
        (status = 503, description = "`cluster_busy` (the cluster has too many decisions in progress, or, over the held inventory, its lock was not free in time), `overloaded` (a unit was starved of CPU by a busy machine); with `Retry-After`", body = ErrorBody),
    ))]
pub async fn balance_cluster(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Query(query): Query<DecisionQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let admission = admission(&state, cluster_id)?;
    let body: BalanceBody = parse_body(&admission, json_body(request).await?).await?;
    let prepared = prepared(&state, cluster_id).await?;
    let facts = facts(cluster_id, query, &prepared);
    let log = facts.clone();
    // The two sources of hosts: inline, built on the blocking pool below;
    // or the held inventory with its claims, taken under the cluster's
    // lock (the decision itself claims nothing).
    let held = match &body.hosts {
        Some(_) => None,
        None if !body.vms.is_empty() => {
            return Err(ApiError::InvalidValue {
                field: "vms".to_owned(),
                message: "VMs come with their hosts: without `hosts`, the inventory held for \
                          the cluster (and its VMs) is used"
                    .to_owned(),
            });
        }
        None => Some(
            state
                .placement()
                .held_snapshot(cluster_id, body.candidates.clone())
                .await
                .map_err(|e| match e {
                    PlacementError::Invalid(e) if e.path.starts_with("candidates") => {
                        invalid_candidates(e.to_string())
                    }
                    e => placement_error(e),
                })?,
        ),
    };
    let (text, logged, vm_id, destination) = blocking(&admission, move || {
        let (inventory, candidates) = match held {
            Some(held) => held,
            None => {
                let cluster = inputs::build_checked(&Snapshot {
                    hosts: body.hosts.unwrap_or_default(),
                    vms: body.vms,
                })
                .map_err(invalid_snapshot)?;
                let candidates = body
                    .candidates
                    .map(|ids| cluster.hosts.resolve_all(&ids, "candidates"))
                    .transpose()
                    .map_err(invalid_snapshot)?;
                (cluster.inventory, candidates)
            }
        };
        let inventory = Arc::new(inventory);
        let input = BalanceInput {
            candidates,
            params: prepared.overrides.clone(),
        };
        let decision =
            pipeline::balance(&prepared.policy, &inventory, &input).map_err(balance_error)?;
        let vm_id = decision.proposal.as_ref().map(|m| {
            inventory
                .vm_text(sandpiper_model::VmText::Id)
                .get(m.vm as usize)
                .to_owned()
        });
        let destination = decision
            .destination
            .and_then(|h| decision.explain.schedule.as_ref().map(|s| s.host_id(h)));
        let answer =
            BalanceAnswer::new(facts, vm_id.clone(), destination.clone(), decision.explain);
        let text = to_json(&answer)?;
        let logged = match answer.decision_id {
            Some(_) => Some(Logged::balance(&answer, &text)?),
            None => None,
        };
        Ok((text, logged, vm_id, destination))
    })
    .await?;
    if let Some(entry) = logged.and_then(|logged| {
        log_entry(
            &log,
            DecisionKind::Balance,
            vm_id,
            destination,
            logged,
            Vec::new(),
        )
    }) {
        record(&state, entry).await?;
    }
    Ok(json_response(text))
}

/// Reads a JSON body (checking its content type) without parsing it.
async fn json_body(request: Request) -> Result<axum::body::Bytes, ApiError> {
    if !is_json(request.headers()) {
        return Err(ApiError::UnsupportedMediaType {
            expected: "application/json",
        });
    }
    body_bytes(request, &()).await
}

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
//! 3. `PlacementService::place_admitted` decides, whichever source the
//!    hosts come from (the request's [`HostsSource`]): over inline hosts,
//!    one pick over exactly those hosts; over the held inventory, with
//!    claims, under the cluster's lock;
//! 4. the one answer type is rendered ([`answer`], [`summary`]) and
//!    encoded once, and recorded in the decisions log (unless
//!    `dry_run=true`) before it is returned.
//!
//! Parsing inline hosts and running the units are CPU work, so both run on
//! the blocking pool, never on the threads that accept requests, and only
//! with one of the cluster's sandbox slots.

pub mod answer;
pub mod logged;
pub mod replay;
pub mod request;
pub mod summary;

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use self::answer::{AnswerForm, BalanceAnswer, Facts, ScheduleAnswer, to_json};
use self::logged::Logged;
use self::request::{
    BalanceBody, CompactBalanceBody, CompactScheduleBody, DecisionQuery, is_multipart, parse_body,
    read_compact, read_compact_balance, source_mismatch,
};
use super::AppState;
use super::decision_error::{invalid_snapshot, placement_error};
use super::error::{ApiError, ErrorBody};
use super::extract::{Path, Query, body_bytes, is_json};
use super::prepared::{Prepared, decision_policy, prepared};
use crate::inputs;
use crate::metrics::{AttemptResult, SchedulingAttempt};
use crate::placement::{
    Admission, BalanceJob, Balanced, Decided, ExplainDetail, HostsSource, InlineHosts,
    LoggedDecision, PlaceJob, PlaceRequest,
};
use crate::store::decisions::DecisionKind;

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
pub(crate) fn facts(cluster_id: Uuid, query: DecisionQuery, prepared: &Prepared) -> Facts {
    let decision_id = (!query.dry_run).then(Uuid::now_v7);
    if let Some(id) = decision_id {
        super::observe::record_decision(id);
    }
    Facts {
        decision_id,
        dry_run: query.dry_run,
        cluster_id,
        policy_id: prepared.policy_id,
        skipped_units: prepared.skipped_units.clone(),
    }
}

/// A decision's entry in the decisions log: the answer as the log keeps
/// it ([`Logged`]: as returned, or a bounded summary with the answer kept
/// apart; for a placement over the held inventory, its summary form), and
/// the claims it made, with the request it was asked when it can be
/// replayed ([`kept_request`]). `None` for a dry run, which records
/// nothing. Every decision's entry is made here.
pub(crate) fn log_entry(
    facts: &Facts,
    kind: DecisionKind,
    vm_id: Option<String>,
    host_id: Option<String>,
    answer: Logged,
    claims: Vec<(String, String)>,
    request: Option<String>,
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
        request,
    })
}

/// The largest request body the log keeps for a replay. A request over
/// the held inventory is a few hundred bytes; one carrying thousands of
/// hints is still decided, but not kept (it is not replayable), so the
/// log's rows stay small without the request counting in its byte budget.
pub const MAX_KEPT_REQUEST_BYTES: usize = 64 * 1024;

/// What the log keeps of a schedule request over the held inventory, for
/// `replay`: the body as sent, when it is small enough.
fn kept_request(body: &[u8]) -> Option<String> {
    (body.len() <= MAX_KEPT_REQUEST_BYTES)
        .then(|| std::str::from_utf8(body).ok().map(str::to_owned))
        .flatten()
}

/// The placement a decision with these `facts` asks of the service: the
/// prepared policy with its overrides, and the decision's id (a fresh one
/// for a dry run, which the log never sees).
pub(crate) fn place_job(
    prepared: &Prepared,
    facts: &Facts,
    request: PlaceRequest,
    source: HostsSource,
) -> PlaceJob {
    PlaceJob {
        policy: prepared.policy.clone(),
        params: prepared.overrides.clone(),
        request,
        source,
        dry_run: facts.dry_run,
        decision_id: facts.decision_id.unwrap_or_else(Uuid::new_v4),
    }
}

/// Records a balancing round, which claims nothing. A schedule decision's
/// entry is recorded by `PlacementService::place_admitted` instead (over
/// the held inventory in the same batch as its claims, before its cluster
/// is unlocked).
pub(crate) async fn record(state: &AppState, entry: LoggedDecision) -> Result<(), ApiError> {
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
/// the cluster and records a claim per instance placed: the body may then
/// also carry `count`, `mode`, `exclude`, `instance_ids`,
/// `once_per_request`, `exhaustive` and `explain` (see
/// `/api/v1/clusters/{id}/inventory`), and the answer carries the
/// placement fields instead of `ranked` and `explain`.
///
/// Inline hosts may also come as a compact body (`multipart/form-data`:
/// the request as JSON in the part `request`, the hosts and their VMs as
/// Arrow IPC streams in the parts `hosts` and `vms`; see
/// docs/compact-body.md), decided and answered exactly as the same hosts
/// in JSON.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/schedule", tag = "decisions",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), DecisionQuery),
    request_body(content(
        (PlaceRequest = "application/json"),
        (CompactScheduleBody = "multipart/form-data"),
    )),
    responses(
        (status = 200, description = "The decision (possibly: no host fits)", body = ScheduleAnswer),
        (status = 400, description = "`malformed_json`, `invalid_field`, `invalid_value` (naming the field: a negative figure, zero vCPUs, a bad id, `count` outside 1-256; for a compact body, a part missing, repeated, unknown or of the wrong content type)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 409, description = "`no_inventory`: no hosts inline and none held", body = ErrorBody),
        (status = 422, description = "`invalid_snapshot`, `invalid_candidates` (naming the field), `filter_failed` (a fail-closed filter failed), `score_failed` (a fail-closed weight failed), `policy_needs_dry_run` (`policy` without `dry_run=true`); for a compact body, `invalid_snapshot` also for a part that is not an Arrow stream or a column unknown, missing or of the wrong type (naming it: `hosts.metrics.cpu_cores`)", body = ErrorBody),
        (status = 503, description = "`cluster_busy` (the cluster has too many decisions in progress, or its lock was not free in time), `decision_too_long` (the decision held it too long; nothing claimed), `overloaded` (a unit was starved of CPU by a busy machine); with `Retry-After`", body = ErrorBody),
    ))]
pub async fn schedule_vm(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Query(query): Query<DecisionQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let admission = admission(&state, cluster_id)?;
    let (request, source, body) = if is_multipart(request.headers()) {
        let (request, source) = read_compact(&admission, request).await?;
        (request, source, None)
    } else {
        let body = json_or_compact_body(request).await?;
        let mut request: PlaceRequest = parse_body(&admission, body.clone()).await?;
        let source = request.take_source().map_err(source_mismatch)?;
        (request, source, Some(body))
    };
    inputs::check_count(request.count).map_err(invalid_snapshot)?;
    inputs::check_vm(&request.vm, "vm").map_err(invalid_snapshot)?;
    inputs::check_instance_ids(&request.instance_ids).map_err(invalid_snapshot)?;
    let prepared = decision_policy(&state, cluster_id, query).await?;
    // The cluster exists: from here on the decision is counted.
    let attempt = SchedulingAttempt::new(cluster_id, started);
    let facts = facts(cluster_id, query, &prepared);
    let (form, kept) = match source {
        HostsSource::Inline(_) => (
            AnswerForm::Pick {
                detail: request.explain.unwrap_or(ExplainDetail::Full),
            },
            None,
        ),
        HostsSource::Held => (
            AnswerForm::Placement {
                mode: request.mode,
                detail: request.explain.unwrap_or_default(),
            },
            body.as_deref().and_then(kept_request),
        ),
    };
    drop(body);
    let job = place_job(&prepared, &facts, request, source);
    let text = place_and_answer(&state, &admission, job, facts, form, attempt, kept).await?;
    Ok(json_response(text))
}

/// Places `job` and answers it, recording the decision in the decisions
/// log with the claims it made; returns the answer's text. Every route
/// that places a VM goes through here.
///
/// The answer and the log entry are rendered by the placement's own task
/// right after the decision ([`PlacementService::place_admitted`]): over
/// the held inventory the cluster is still locked then, and the log entry
/// (the answer's summary form, small) is stored with the claims, in
/// decision order; a full explain asked for is rendered afterwards on the
/// blocking pool. Over inline hosts nothing is locked, and the answer,
/// which carries the full explain record of up to every host sent, is
/// logged as returned. The `attempt` is counted once the decision is
/// recorded (as an error if this fails first), with the `kept` request it
/// was asked if it is kept for replays.
///
/// [`PlacementService::place_admitted`]: crate::placement::PlacementService::place_admitted
async fn place_and_answer(
    state: &AppState,
    admission: &Admission,
    job: PlaceJob,
    facts: Facts,
    form: AnswerForm,
    attempt: SchedulingAttempt,
    kept: Option<String>,
) -> Result<String, ApiError> {
    let vm_id = job.request.vm.id.clone();
    let (answer_facts, answer_vm) = (facts.clone(), vm_id.clone());
    let (decided, answered) = state
        .placement()
        .place_admitted(
            facts.cluster_id,
            job,
            admission,
            move |decided| match render(&answer_facts, &answer_vm, decided, form, kept) {
                Ok((text, logged)) => (Ok(text), logged),
                Err(e) => (Err(e), None),
            },
        )
        .await
        .map_err(placement_error)?;
    let text = answered?;
    attempt.finish(if decided.outcome.complete {
        AttemptResult::Scheduled
    } else {
        AttemptResult::Unschedulable
    });
    match (text, form) {
        (Some(text), AnswerForm::Pick { .. })
        | (
            Some(text),
            AnswerForm::Placement {
                detail: ExplainDetail::Summary,
                ..
            },
        ) => Ok(text),
        _ => {
            blocking(admission, move || {
                to_json(&ScheduleAnswer::new(&facts, &vm_id, &decided, form)?)
            })
            .await
        }
    }
}

/// A decision's answer text as far as it is rendered before the cluster
/// is unlocked (the whole answer for a pick; the summary form, logged, for
/// a placement, none for a dry run), and its log entry.
fn render(
    facts: &Facts,
    vm_id: &str,
    decided: &Decided,
    form: AnswerForm,
    request: Option<String>,
) -> Result<(Option<String>, Option<LoggedDecision>), ApiError> {
    let entry = |logged: Logged| {
        let outcome = &decided.outcome;
        log_entry(
            facts,
            DecisionKind::Schedule,
            Some(vm_id.to_owned()),
            outcome.picks.first().and_then(|p| p.host_id.clone()),
            logged,
            outcome
                .claims
                .iter()
                .map(|c| (c.vm_id.clone(), c.host_id.clone()))
                .collect(),
            request,
        )
    };
    match form {
        AnswerForm::Pick { detail } => {
            let answer = ScheduleAnswer::new(facts, vm_id, decided, form)?;
            let text = to_json(&answer)?;
            let logged = match (answer.decision_id, detail) {
                (None, _) => None,
                // Already bounded: logged as returned.
                (Some(_), ExplainDetail::Summary) => Some(Logged::whole(text.clone())),
                (Some(_), ExplainDetail::Full) => Some(Logged::schedule(&text, || {
                    let summary = AnswerForm::Pick {
                        detail: ExplainDetail::Summary,
                    };
                    to_json(&ScheduleAnswer::new(facts, vm_id, decided, summary)?)
                })?),
            };
            Ok((Some(text), logged.and_then(entry)))
        }
        AnswerForm::Placement { mode, .. } => {
            let logged_form = AnswerForm::Placement {
                mode,
                detail: ExplainDetail::Summary,
            };
            let Some(_) = facts.decision_id else {
                return Ok((None, None));
            };
            let summary = to_json(&ScheduleAnswer::new(facts, vm_id, decided, logged_form)?)?;
            Ok((Some(summary.clone()), entry(Logged::whole(summary))))
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
///
/// Inline hosts may also come as a compact body, as for a schedule
/// request (`multipart/form-data`: the request as JSON in the part
/// `request`, the hosts and their VMs as Arrow IPC streams in the parts
/// `hosts` and `vms`; see docs/compact-body.md), balanced and answered
/// exactly as the same hosts in JSON.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/balance", tag = "decisions",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), DecisionQuery),
    request_body(content(
        (BalanceBody = "application/json"),
        (CompactBalanceBody = "multipart/form-data"),
    )),
    responses(
        (status = 200, description = "The proposal and where it leads", body = BalanceAnswer),
        (status = 400, description = "`malformed_json`, `invalid_field`, `invalid_value` (naming the field: a negative figure, zero vCPUs, a bad id, `count` outside 1-256; for a compact body, a part missing, repeated, unknown or of the wrong content type)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 409, description = "`no_inventory`: no hosts inline and none held", body = ErrorBody),
        (status = 422, description = "`no_balance_unit`, `invalid_snapshot`, `invalid_candidates`, `balance_failed`, `filter_failed`, `score_failed`, `policy_needs_dry_run`; for a compact body, `invalid_snapshot` also for a part that is not an Arrow stream or a column unknown, missing or of the wrong type (naming it)", body = ErrorBody),
        (status = 503, description = "`cluster_busy` (the cluster has too many decisions in progress, or, over the held inventory, its lock was not free in time), `overloaded` (a unit was starved of CPU by a busy machine); with `Retry-After`", body = ErrorBody),
    ))]
pub async fn balance_cluster(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Query(query): Query<DecisionQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let admission = admission(&state, cluster_id)?;
    let (body, source) = if is_multipart(request.headers()) {
        let (body, hosts) = read_compact_balance(&admission, request).await?;
        (body, HostsSource::Inline(hosts))
    } else {
        let body = json_or_compact_body(request).await?;
        let mut body: BalanceBody = parse_body(&admission, body).await?;
        let source = balance_source(&mut body)?;
        (body, source)
    };
    let prepared = decision_policy(&state, cluster_id, query).await?;
    let facts = facts(cluster_id, query, &prepared);
    let job = BalanceJob {
        policy: prepared.policy.clone(),
        params: prepared.overrides.clone(),
        candidates: body.candidates,
        source,
    };
    let balanced = state
        .placement()
        .balance_admitted(cluster_id, job, &admission)
        .await
        .map_err(placement_error)?;
    let text = answer_balance(&state, &admission, facts, balanced, None).await?;
    Ok(json_response(text))
}

/// Where a JSON balancing request's hosts come from: its own `hosts` (and
/// `vms`, taken out of it), or the inventory held for the cluster.
fn balance_source(body: &mut BalanceBody) -> Result<HostsSource, ApiError> {
    Ok(match body.hosts.take() {
        Some(hosts) => HostsSource::Inline(InlineHosts::Json {
            hosts,
            vms: body.vms.take().unwrap_or_default(),
        }),
        None if body.vms.is_some() => {
            return Err(ApiError::InvalidValue {
                field: "vms".to_owned(),
                message: "VMs come with their hosts: without `hosts`, the inventory held for \
                          the cluster (and its VMs) is used"
                    .to_owned(),
            });
        }
        None => HostsSource::Held,
    })
}

/// Renders a balancing round's answer and records it in the decisions log
/// (unless it is a dry run), returning the answer's text: for
/// `POST .../balance` and for the periodic balance (`crate::rebalance`),
/// which also names the operation the round queued.
pub(crate) async fn answer_balance(
    state: &AppState,
    admission: &Admission,
    facts: Facts,
    balanced: Balanced,
    operation_id: Option<Uuid>,
) -> Result<String, ApiError> {
    let log = facts.clone();
    let (vm_id, destination) = (balanced.vm_id.clone(), balanced.destination.clone());
    let (text, logged) = blocking(admission, move || {
        let mut answer = BalanceAnswer::new(
            facts,
            balanced.vm_id,
            balanced.destination,
            balanced.decision.explain,
        );
        answer.operation_id = operation_id;
        let text = to_json(&answer)?;
        let logged = match answer.decision_id {
            Some(_) => Some(Logged::balance(&answer, &text)?),
            None => None,
        };
        Ok((text, logged))
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
            None,
        )
    }) {
        record(state, entry).await?;
    }
    Ok(text)
}

/// Reads a decision's JSON body, as [`json_body`]; a body of another type
/// is told that the other choice is a compact body.
async fn json_or_compact_body(request: Request) -> Result<axum::body::Bytes, ApiError> {
    json_body(request).await.map_err(|e| match e {
        ApiError::UnsupportedMediaType { .. } => ApiError::UnsupportedMediaType {
            expected: "application/json, or multipart/form-data (a compact body)",
        },
        e => e,
    })
}

/// Reads a JSON body (checking its content type) without parsing it.
pub(crate) async fn json_body(request: Request) -> Result<axum::body::Bytes, ApiError> {
    if !is_json(request.headers()) {
        return Err(ApiError::UnsupportedMediaType {
            expected: "application/json",
        });
    }
    body_bytes(request, &()).await
}

/// What the log keeps of a placement Sandpiper makes on its own behalf:
/// the request an engine would have sent for it, so it replays the same.
fn own_request(vm: &crate::snapshot::VmSpec, candidates: Option<&[String]>) -> Option<String> {
    let text = serde_json::to_string(&serde_json::json!({ "vm": vm, "candidates": candidates }));
    text.ok().and_then(|text| kept_request(text.as_bytes()))
}

/// A placement Sandpiper makes on its own behalf (a pool member's start,
/// `crate::pools`): where the VM went, if anywhere, and the decision that
/// says why.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldPlacement {
    pub decision_id: Uuid,
    /// `None`: no host could take the VM.
    pub host_id: Option<String>,
    /// Why the VM was not placed, in one sentence.
    pub reason: Option<String>,
}

/// Places one VM over the cluster's held inventory with the cluster's
/// policy, claiming its host, and records the decision in the log exactly
/// as an engine's `POST .../schedule` over the held inventory would be
/// (same admission, same answer, same log entry): the one path of a
/// decision, whoever asks: the pools' starts, and the periodic balance's
/// re-check of a migration (`candidates`: its current host and the
/// destination).
pub async fn place_held(
    state: &AppState,
    cluster_id: Uuid,
    vm: crate::snapshot::VmSpec,
    candidates: Option<Vec<String>>,
) -> Result<HeldPlacement, ApiError> {
    let started = Instant::now();
    let admission = admission(state, cluster_id)?;
    inputs::check_vm(&vm, "vm").map_err(invalid_snapshot)?;
    let prepared = prepared(state, cluster_id).await?;
    let attempt = SchedulingAttempt::new(cluster_id, started);
    let facts = facts(cluster_id, DecisionQuery::default(), &prepared);
    let kept = own_request(&vm, candidates.as_deref());
    let request = PlaceRequest {
        vm,
        candidates,
        count: 1,
        ..PlaceRequest::default()
    };
    let job = place_job(&prepared, &facts, request, HostsSource::Held);
    let decision_id = job.decision_id;
    let form = AnswerForm::Placement {
        mode: crate::placement::Mode::AllOrNothing,
        detail: ExplainDetail::Summary,
    };
    let text = place_and_answer(state, &admission, job, facts, form, attempt, kept).await?;
    let answer: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| ApiError::Internal(format!("a decision's own answer is not JSON: {e}")))?;
    let text_of = |key: &str| answer[key].as_str().map(str::to_owned);
    Ok(HeldPlacement {
        decision_id,
        host_id: text_of("chosen_host"),
        reason: text_of("reason"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::VmSpec;

    #[test]
    fn a_placement_of_our_own_is_kept_as_a_request_that_reads_back() {
        let vm: VmSpec = serde_json::from_value(serde_json::json!({
            "id": "pool-7", "memory_mib": 2048, "vcpus": 2,
            "hardware": {"numa_cells": [{"shared_vcpus": [0, 1], "memory_mib": 2048}]},
        }))
        .expect("a VM");
        let candidates = ["h1".to_owned(), "h2".to_owned()];
        let kept = own_request(&vm, Some(&candidates)).expect("kept");
        let read: PlaceRequest = serde_json::from_str(&kept).expect("reads back");
        assert_eq!(read.vm, vm);
        assert_eq!(read.candidates.as_deref(), Some(&candidates[..]));
        let read: PlaceRequest =
            serde_json::from_str(&own_request(&vm, None).expect("kept")).expect("reads back");
        assert_eq!(read.candidates, None);
    }

    #[test]
    fn only_small_requests_are_kept() {
        assert_eq!(kept_request(b"{}"), Some("{}".to_owned()));
        assert_eq!(kept_request(&vec![b' '; MAX_KEPT_REQUEST_BYTES + 1]), None);
    }
}

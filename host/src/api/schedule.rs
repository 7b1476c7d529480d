//! The decisions engines ask for: `POST /api/v1/clusters/{id}/schedule`
//! (where should this VM run?) and `POST /api/v1/clusters/{id}/balance`
//! (which VM should move, and where?).
//!
//! The engine sends the VM and the hosts inline, in the snapshot format of
//! `crate::snapshot`, as oVirt's external scheduler receives them. Parsing
//! the snapshot and running the units are CPU work, so both run on the
//! blocking pool, never on the threads that accept requests. Each decision
//! is recorded in the cluster's decisions log unless `dry_run=true`.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::AppState;
use super::assemble::{assemble, declared_keys, from_registry, only_declared};
use super::clusters::load as load_cluster;
use super::error::{ApiError, ErrorBody};
use super::extract::{Path, Query, body_bytes, is_json, parse_json};
use crate::pipeline::{
    self, BalanceError, BalanceInput, ParamValues, Policy, ScheduleError, ScheduleRequest,
};
use crate::snapshot::{self, HintValue, Host, RunningVm, Snapshot, SnapshotError, VmSpec};
use crate::store::decisions::{DecisionKind, LoggedDecision};

/// A placement request.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    /// The VM to place (the snapshot format's VM: only `id` matters for
    /// the log; everything else has a default).
    pub vm: VmSpec,
    /// Every host of the cluster the VM could go to, in the snapshot format.
    #[serde(default)]
    pub hosts: Vec<Host>,
    /// The VMs running (or pending) on those hosts.
    #[serde(default)]
    pub vms: Vec<RunningVm>,
    /// Scheduler hints (Nova's `same_host`, ...): a string or a list each.
    #[serde(default)]
    pub hints: std::collections::BTreeMap<String, HintValue>,
    /// Host ids the VM may go to, in order of preference among equals;
    /// every host when absent.
    #[serde(default)]
    pub candidates: Option<Vec<String>>,
}

/// A balancing request. Without `hosts`, the decision is made over the
/// inventory Sandpiper holds for the cluster, with every live claim
/// counted as usage and its VM listed as a pending VM of its host (as a
/// schedule decision sees it); `vms` then must be absent too.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BalanceBody {
    #[serde(default)]
    pub hosts: Vec<Host>,
    #[serde(default)]
    pub vms: Vec<RunningVm>,
    /// Host ids VMs may move between; every host when absent.
    #[serde(default)]
    pub candidates: Option<Vec<String>>,
}

/// Whether to record the decision.
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DecisionQuery {
    /// `true`: decide, but record nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// A candidate and its total score.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct RankedHost {
    pub host: String,
    pub total: f64,
}

/// Where the VM should run, and why.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ScheduleAnswer {
    /// The recorded decision; `null` for a dry run.
    pub decision_id: Option<Uuid>,
    pub dry_run: bool,
    pub cluster_id: Uuid,
    pub policy_id: Uuid,
    pub vm_id: String,
    /// The winning host; `null` when every candidate was rejected (the
    /// explain record's filters say why).
    pub chosen_host: Option<String>,
    /// The surviving candidates, best first.
    pub ranked: Vec<RankedHost>,
    /// Disabled units of the policy that were left out.
    pub skipped_units: Vec<String>,
    /// Every filter's rejections with reasons, every score unit's scores,
    /// the totals and the tie-break.
    #[schema(value_type = Object)]
    pub explain: pipeline::Explain,
}

/// Which VM should move where, and why.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct BalanceAnswer {
    pub decision_id: Option<Uuid>,
    pub dry_run: bool,
    pub cluster_id: Uuid,
    pub policy_id: Uuid,
    /// `balanced`, `migrate`, `stay` or `nowhere`.
    pub outcome: String,
    /// The VM the balance unit proposed to move.
    pub vm_id: Option<String>,
    /// Where it should go; `null` unless `outcome` is `migrate`.
    pub destination: Option<String>,
    pub skipped_units: Vec<String>,
    /// What the balance unit proposed and how the policy decided.
    #[schema(value_type = Object)]
    pub explain: pipeline::BalanceExplain,
}

/// What a decision needs to know about the cluster, read from the store in
/// one go: its policy assembled from the loaded units, its parameter
/// overrides, and the disabled units left out. Decisions over held
/// inventories keep it between requests (`claims::PreparedCache`).
#[derive(Clone)]
pub struct Prepared {
    pub policy_id: Uuid,
    pub policy: Policy,
    pub overrides: ParamValues,
    pub skipped_units: Vec<String>,
}

async fn prepare(state: &AppState, cluster_id: Uuid) -> Result<Prepared, ApiError> {
    let mut conn = state.store().read().await?;
    let cluster = load_cluster(&mut conn, cluster_id).await?;
    let record = conn
        .policy(cluster.policy_id)
        .await?
        .ok_or_else(|| ApiError::Internal(format!("cluster {cluster_id} has no policy")))?;
    let disabled = conn.disabled_units().await?;
    let names = conn.unit_names().await?;
    drop(conn);
    let in_policy: HashSet<_> = record
        .filters
        .iter()
        .map(|f| f.unit_id)
        .chain(record.weights.iter().map(|w| w.unit_id))
        .chain(record.balance)
        .collect();
    let skip: HashSet<_> = disabled.intersection(&in_policy).copied().collect();
    let mut skipped_units: Vec<String> = skip
        .iter()
        .map(|id| names.get(id).cloned().unwrap_or_else(|| id.to_string()))
        .collect();
    skipped_units.sort();
    let lookup = from_registry(state.registry());
    let policy = assemble(&record, &lookup, &skip)?;
    let overrides = if skip.is_empty() {
        cluster.params
    } else {
        only_declared(&cluster.params, &declared_keys(&policy))
    };
    Ok(Prepared {
        policy_id: record.id,
        policy,
        overrides,
        skipped_units,
    })
}

fn invalid_snapshot(e: SnapshotError) -> ApiError {
    if let Some(refused) = ApiError::refused_value(&e) {
        return refused;
    }
    ApiError::Unprocessable {
        code: "invalid_snapshot",
        message: e.to_string(),
        details: json!({ "field": e.path }),
    }
}

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

/// Runs `work` on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::Internal(format!("decision task failed: {e}")))?
}

/// Records a decision under `id`, with `answer` (JSON) as returned.
async fn record(
    state: &AppState,
    id: Uuid,
    cluster_id: Uuid,
    kind: DecisionKind,
    vm_id: Option<String>,
    host_id: Option<String>,
    answer: String,
) -> Result<(), ApiError> {
    state
        .store()
        .log_decision(
            LoggedDecision {
                id,
                cluster_id,
                kind,
                vm_id,
                host_id,
                answer,
                claims: Vec::new(),
            },
            state.placement().config().retention,
        )
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// Serialises an answer once: the same text is stored and returned, with
/// the explain record's fields in their documented order.
fn to_json<T: Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(|e| ApiError::Internal(format!("encoding: {e}")))
}

/// A JSON response from already-serialised text.
fn json_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// What the log needs from an answer, next to its text.
struct Encoded {
    json: String,
    vm_id: Option<String>,
    host_id: Option<String>,
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
    request_body = ScheduleBody,
    responses(
        (status = 200, description = "The decision (possibly: no host fits)", body = ScheduleAnswer),
        (status = 400, description = "`malformed_json`, `invalid_field`, `invalid_value` (naming the field: a negative figure, zero vCPUs, a bad id, `count` outside 1-256)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 409, description = "`no_inventory`: no hosts inline and none held", body = ErrorBody),
        (status = 422, description = "`invalid_snapshot`, `invalid_candidates` (naming the field), `filter_failed` (a fail-closed filter failed)", body = ErrorBody),
        (status = 503, description = "`cluster_busy` (the cluster's lock was not free in time), `decision_too_long` (the decision held it too long; nothing claimed), `overloaded` (a unit was starved of CPU by a busy machine); with `Retry-After`", body = ErrorBody),
    ))]
pub async fn schedule_vm(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Query(query): Query<DecisionQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let bytes = json_body(request).await?;
    if !super::claims::has_inline_hosts(&bytes)? {
        // No hosts in the request: decide over the inventory Sandpiper
        // holds for the cluster, with claims (crate::placement), with the
        // cluster's policy as last prepared unless the configuration
        // changed since.
        let prepared = state
            .prepared()
            .get(cluster_id, prepare(&state, cluster_id))
            .await?;
        return super::claims::schedule_held(&state, cluster_id, query.dry_run, prepared, &bytes)
            .await;
    }
    let Prepared {
        policy_id,
        policy,
        overrides,
        skipped_units,
    } = prepare(&state, cluster_id).await?;
    let decision_id = (!query.dry_run).then(Uuid::new_v4);
    let encoded = blocking(move || {
        let body: ScheduleBody = parse_json(&bytes)?;
        let cluster = Snapshot {
            hosts: body.hosts,
            vms: body.vms,
        }
        .build_checked()
        .map_err(invalid_snapshot)?;
        let vm = body
            .vm
            .to_vm(&cluster.hosts, "vm")
            .map_err(invalid_snapshot)?;
        let candidates = body
            .candidates
            .map(|ids| cluster.hosts.resolve_all(&ids, "candidates"))
            .transpose()
            .map_err(invalid_snapshot)?;
        let inventory = Arc::new(cluster.inventory);
        let vm_id = vm.id.clone();
        let request = ScheduleRequest {
            vm,
            hints: snapshot::hint_pairs(&body.hints),
            candidates,
            params: overrides,
        };
        let decision = pipeline::schedule(&policy, &inventory, &request).map_err(schedule_error)?;
        let host_id = |index: u32| decision.explain.host_id(index);
        let answer = ScheduleAnswer {
            decision_id,
            dry_run: query.dry_run,
            cluster_id,
            policy_id,
            vm_id: vm_id.clone(),
            chosen_host: decision.chosen.map(host_id),
            ranked: decision
                .ranked
                .iter()
                .map(|r| RankedHost {
                    host: host_id(r.host),
                    total: r.total,
                })
                .collect(),
            skipped_units,
            explain: decision.explain.clone(),
        };
        Ok(Encoded {
            json: to_json(&answer)?,
            vm_id: Some(vm_id),
            host_id: answer.chosen_host,
        })
    })
    .await?;
    if let Some(id) = decision_id {
        let Encoded {
            json,
            vm_id,
            host_id,
        } = &encoded;
        record(
            &state,
            id,
            cluster_id,
            DecisionKind::Schedule,
            vm_id.clone(),
            host_id.clone(),
            json.clone(),
        )
        .await?;
    }
    Ok(json_response(encoded.json))
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
        (status = 422, description = "`no_balance_unit`, `invalid_snapshot`, `invalid_candidates`, `balance_failed`, `filter_failed`", body = ErrorBody),
        (status = 503, description = "`cluster_busy` (over the held inventory: its lock was not free in time), `overloaded` (a unit was starved of CPU by a busy machine); with `Retry-After`", body = ErrorBody),
    ))]
pub async fn balance_cluster(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
    Query(query): Query<DecisionQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    let bytes = json_body(request).await?;
    let Prepared {
        policy_id,
        policy,
        overrides,
        skipped_units,
    } = prepare(&state, cluster_id).await?;
    let decision_id = (!query.dry_run).then(Uuid::new_v4);
    // Without inline hosts: the held inventory with its claims, taken
    // under the cluster's lock (the decision itself claims nothing).
    let held = if super::claims::has_inline_hosts(&bytes)? {
        None
    } else {
        let body: BalanceBody = parse_json(&bytes)?;
        if !body.vms.is_empty() {
            return Err(ApiError::InvalidValue {
                field: "vms".to_owned(),
                message: "VMs come with their hosts: without `hosts`, the inventory held for \
                          the cluster (and its VMs) is used"
                    .to_owned(),
            });
        }
        let snapshot = state
            .placement()
            .held_snapshot(cluster_id, body.candidates)
            .await
            .map_err(|e| match e {
                crate::placement::PlacementError::Invalid(e)
                    if e.path.starts_with("candidates") =>
                {
                    invalid_candidates(e.to_string())
                }
                e => super::claims::placement_error(e),
            })?;
        Some(snapshot)
    };
    let encoded = blocking(move || {
        let (inventory, candidates) = match held {
            Some((inventory, candidates)) => (inventory, candidates),
            None => {
                let body: BalanceBody = parse_json(&bytes)?;
                let cluster = Snapshot {
                    hosts: body.hosts,
                    vms: body.vms,
                }
                .build_checked()
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
            params: overrides,
        };
        let decision = pipeline::balance(&policy, &inventory, &input).map_err(balance_error)?;
        let vm_id = decision.proposal.as_ref().map(|m| {
            inventory
                .vm_text(sandpiper_guest::model::VmText::Id)
                .get(m.vm as usize)
                .to_owned()
        });
        let destination = decision
            .destination
            .and_then(|h| decision.explain.schedule.as_ref().map(|s| s.host_id(h)));
        let answer = BalanceAnswer {
            decision_id,
            dry_run: query.dry_run,
            cluster_id,
            policy_id,
            outcome: decision.explain.outcome().to_owned(),
            vm_id: vm_id.clone(),
            destination: destination.clone(),
            skipped_units,
            explain: decision.explain,
        };
        Ok(Encoded {
            json: to_json(&answer)?,
            vm_id,
            host_id: destination,
        })
    })
    .await?;
    if let Some(id) = decision_id {
        let Encoded {
            json,
            vm_id,
            host_id,
        } = &encoded;
        record(
            &state,
            id,
            cluster_id,
            DecisionKind::Balance,
            vm_id.clone(),
            host_id.clone(),
            json.clone(),
        )
        .await?;
    }
    Ok(json_response(encoded.json))
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

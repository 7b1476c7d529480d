//! Scheduling over the inventory Sandpiper holds, and the claims it makes:
//!
//! * `POST /api/v1/clusters/{id}/schedule` without inline `hosts` decides
//!   over the cluster's held inventory (pushed through
//!   `/api/v1/clusters/{id}/inventory`) and records a claim per instance
//!   placed; the route itself is `schedule::schedule_vm`, which hands such
//!   requests to [`schedule_held`];
//! * `GET /api/v1/clusters/{id}/claims` lists the live claims;
//! * `POST /api/v1/clusters/{id}/claims/{vm_id}/confirm` says the VM
//!   started (and from which inventory generation the engine's reports of
//!   its host include it);
//! * `DELETE /api/v1/clusters/{id}/claims/{vm_id}` releases a claim (the VM
//!   did not start).
//!
//! Answers and log entries carry a bounded explain summary: the full
//! explain record of a decision over 10,000 hosts is megabytes, which
//! neither an engine at thousands of decisions a second nor the log wants;
//! `"explain": "full"` in the request returns it (it is not logged).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use super::clusters::load as load_cluster;
use super::error::{ApiError, ErrorBody};
use super::extract::{Json, Path, parse_json};
use super::schedule::{Prepared, RankedHost};
use crate::pipeline::{Combination, Explain, FailureRecord, Outcome};
use crate::placement::{
    Claim, ClaimError, ClaimState, InventoryError, LoggedDecision, Mode, PlaceError, PlaceJob,
    PlaceOutcome, PlaceRequest, PlacementError, Resources, Sample,
};
use crate::snapshot::{HintValue, VmSpec};
use crate::store::decisions::DecisionKind;

/// Reasons listed per filter in an explain summary, most hosts first; the
/// rest are counted. A memory filter's reasons carry each host's numbers,
/// so a window of 500 hosts can give 500 distinct reasons.
pub const SUMMARY_REASONS: usize = 8;

/// Host ids named per reason in an explain summary.
pub const SUMMARY_HOSTS_PER_REASON: usize = 5;

/// Best-ranked hosts listed in an explain summary.
pub const SUMMARY_RANKED: usize = 5;

/// A placement request over the held inventory.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeldScheduleBody {
    /// The VM to place, in the snapshot format; its `id` keys its claim.
    #[schema(value_type = Object)]
    pub vm: VmSpec,
    /// Scheduler hints (Nova's `same_host`, ...): a string or a list each.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub hints: std::collections::BTreeMap<String, HintValue>,
    /// Host ids the VM may go to (a whitelist), in order of preference
    /// among equals; every held host when absent.
    #[serde(default)]
    pub candidates: Option<Vec<String>>,
    /// Host ids the VM must not go to (a blacklist); unknown ids are ignored.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Instances to place (Nova's `min_count`/`max_count`), 1 to 256.
    #[serde(default = "one")]
    pub count: u32,
    /// One id per instance; default `vm.id` for one instance, else
    /// `vm.id-0`, `vm.id-1`, ...
    #[serde(default)]
    pub instance_ids: Vec<String>,
    /// `all_or_nothing` (the default) or `best_effort`.
    #[serde(default)]
    #[schema(value_type = String)]
    pub mode: Mode,
    /// Filters (unit names) that run for the first instance only.
    #[serde(default)]
    pub once_per_request: BTreeSet<String>,
    /// Consider every host instead of the rotating sample.
    #[serde(default)]
    pub exhaustive: bool,
    /// `summary` (the default) or `full`: the explain record returned.
    #[serde(default)]
    pub explain: ExplainDetail,
}

fn one() -> u32 {
    1
}

/// How much of each decision's explain record an answer carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExplainDetail {
    #[default]
    Summary,
    Full,
}

/// Where the instances go, and why.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct HeldScheduleAnswer {
    /// The recorded decision; `null` for a dry run.
    pub decision_id: Option<Uuid>,
    pub dry_run: bool,
    pub cluster_id: Uuid,
    pub policy_id: Uuid,
    pub vm_id: String,
    /// The first instance's host; `null` when it could not be placed.
    pub chosen_host: Option<String>,
    /// Every instance was placed.
    pub complete: bool,
    #[schema(value_type = String)]
    pub mode: Mode,
    /// Each instance tried, in order.
    pub instances: Vec<InstanceAnswer>,
    /// Instances not tried after one could not be placed.
    pub not_tried: Vec<String>,
    /// The claims recorded, one per instance placed (none for a dry run,
    /// or for an all-or-nothing request that did not place every one).
    pub claims: Vec<ClaimView>,
    /// Why not every instance was placed, in one sentence.
    pub reason: Option<String>,
    /// The rotating window the first pick considered, when sampled.
    #[schema(value_type = Option<Object>)]
    pub sample: Option<Sample>,
    /// How long the request waited for pending claims to resolve before
    /// its one retry (oVirt's delay and retry), milliseconds.
    pub waited_ms: Option<u64>,
    /// Disabled units of the policy that were left out.
    pub skipped_units: Vec<String>,
}

/// One instance's pick.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct InstanceAnswer {
    pub vm_id: String,
    /// `null` when every candidate was rejected.
    pub host: Option<String>,
    /// The explain summary (or the full record when asked for).
    #[schema(value_type = Object)]
    pub explain: Box<serde_json::value::RawValue>,
}

/// A claim as the API shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ClaimView {
    pub vm_id: String,
    pub host_id: String,
    /// `pending` or `confirmed`.
    pub state: &'static str,
    /// For a confirmed claim: the generation from which reports of its host
    /// include the VM.
    pub covered_from: Option<u64>,
    #[schema(value_type = Object)]
    pub resources: Resources,
    pub decision_id: Uuid,
    pub created_at: String,
    /// When an unconfirmed claim expires; `null` once confirmed.
    pub expires_at: Option<String>,
}

impl From<&Claim> for ClaimView {
    fn from(claim: &Claim) -> Self {
        let (state, covered_from, expires_at) = match claim.state {
            ClaimState::Pending => ("pending", None, Some(claim.expires_at.to_rfc3339())),
            ClaimState::Confirmed { covered_from } => ("confirmed", Some(covered_from), None),
        };
        ClaimView {
            vm_id: claim.vm_id.clone(),
            host_id: claim.host_id.clone(),
            state,
            covered_from,
            resources: claim.resources,
            decision_id: claim.decision_id,
            created_at: claim.created_at.to_rfc3339(),
            expires_at,
        }
    }
}

/// A bounded explain record.
#[derive(Clone, Debug, Serialize)]
pub struct ExplainSummary {
    pub combination: Combination,
    /// Candidates the pick considered.
    pub candidates: usize,
    /// When the hosts considered were a sample of the cluster: "considered
    /// W of N hosts (sampled window ...)".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub considered: Option<String>,
    pub filters: Vec<FilterSummary>,
    pub scores: Vec<ScoreSummary>,
    /// The best-ranked hosts.
    pub ranked: Vec<RankedHost>,
    /// `no_host`, `single_survivor` or `weighed`.
    pub outcome: &'static str,
    pub winner: Option<String>,
    /// Candidates whose total equals the winner's.
    pub tied_with: usize,
}

/// What one filter did, bounded.
#[derive(Clone, Debug, Serialize)]
pub struct FilterSummary {
    pub unit: String,
    pub input: usize,
    pub survivors: usize,
    /// The reasons rejecting the most hosts.
    pub rejected: Vec<ReasonSummary>,
    /// Further reasons not listed, and the hosts they rejected.
    pub other_reasons: usize,
    pub other_hosts: usize,
    pub failure: Option<FailureRecord>,
}

/// One rejection reason.
#[derive(Clone, Debug, Serialize)]
pub struct ReasonSummary {
    pub reason: String,
    pub hosts: usize,
    /// A few of the hosts it rejected.
    pub examples: Vec<String>,
}

/// What one score unit did.
#[derive(Clone, Debug, Serialize)]
pub struct ScoreSummary {
    pub unit: String,
    pub factor: u32,
    pub called: bool,
    pub failure: Option<FailureRecord>,
}

impl ExplainSummary {
    pub fn of(explain: &Explain, ranked: &[crate::pipeline::Ranked]) -> Self {
        let filters = explain
            .filters
            .iter()
            .map(|f| {
                let mut groups: Vec<_> = f.rejected.iter().collect();
                groups.sort_by_key(|g| std::cmp::Reverse(g.hosts.len()));
                let listed = groups.len().min(SUMMARY_REASONS);
                FilterSummary {
                    unit: f.unit.clone(),
                    input: f.input,
                    survivors: f.survivors,
                    rejected: groups[..listed]
                        .iter()
                        .map(|g| ReasonSummary {
                            reason: g.reason.clone(),
                            hosts: g.hosts.len(),
                            examples: g
                                .hosts
                                .iter()
                                .take(SUMMARY_HOSTS_PER_REASON)
                                .map(|&h| explain.host_id(h))
                                .collect(),
                        })
                        .collect(),
                    other_reasons: groups.len() - listed,
                    other_hosts: groups[listed..].iter().map(|g| g.hosts.len()).sum(),
                    failure: f.failure.clone(),
                }
            })
            .collect();
        let scores = explain
            .scores
            .iter()
            .map(|s| ScoreSummary {
                unit: s.unit.clone(),
                factor: s.factor,
                called: s.called,
                failure: s.failure.clone(),
            })
            .collect();
        let (outcome, winner, tied_with) = match &explain.outcome {
            Outcome::NoHost => ("no_host", None, 0),
            Outcome::SingleSurvivor { host } => ("single_survivor", Some(*host), 0),
            Outcome::Weighed { winner, tied_with } => ("weighed", Some(*winner), tied_with.len()),
        };
        ExplainSummary {
            combination: explain.combination,
            candidates: explain.candidates,
            considered: explain.considered.clone(),
            filters,
            scores,
            ranked: ranked
                .iter()
                .take(SUMMARY_RANKED)
                .map(|r| RankedHost {
                    host: explain.host_id(r.host),
                    total: r.total,
                })
                .collect(),
            outcome,
            winner: winner.map(|h| explain.host_id(h)),
            tied_with,
        }
    }
}

/// Why a pick found no host, in one sentence naming each filter's main
/// reasons.
fn refusal(vm_id: &str, explain: &Explain) -> String {
    let mut parts = Vec::new();
    for filter in &explain.filters {
        let rejected: usize = filter.rejected.iter().map(|r| r.hosts.len()).sum();
        if rejected == 0 {
            continue;
        }
        let mut groups: Vec<_> = filter.rejected.iter().collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.hosts.len()));
        let example = groups
            .first()
            .map(|g| format!(" (e.g. {}: {})", explain.host_id(g.hosts[0]), g.reason))
            .unwrap_or_default();
        parts.push(format!("{} rejected {rejected}{example}", filter.unit));
    }
    if explain.candidates == 0 {
        return format!("no host can take `{vm_id}`: there were no candidate hosts");
    }
    format!(
        "no host can take `{vm_id}`: of {} candidates, {}",
        explain.candidates,
        if parts.is_empty() {
            "none survived".to_owned()
        } else {
            parts.join("; ")
        }
    )
}

/// Facts a held schedule answer needs besides the outcome.
#[derive(Clone)]
struct AnswerFacts {
    decision_id: Option<Uuid>,
    dry_run: bool,
    cluster_id: Uuid,
    policy_id: Uuid,
    vm_id: String,
    mode: Mode,
    skipped_units: Vec<String>,
}

fn answer(
    facts: &AnswerFacts,
    outcome: &PlaceOutcome,
    waited: Option<Duration>,
    detail: ExplainDetail,
) -> Result<HeldScheduleAnswer, ApiError> {
    let mut instances = Vec::with_capacity(outcome.picks.len());
    for pick in &outcome.picks {
        let explain = match detail {
            ExplainDetail::Summary => to_value(&ExplainSummary::of(
                &pick.decision.explain,
                &pick.decision.ranked,
            ))?,
            ExplainDetail::Full => to_value(&pick.decision.explain)?,
        };
        instances.push(InstanceAnswer {
            vm_id: pick.vm_id.clone(),
            host: pick.host_id.clone(),
            explain,
        });
    }
    let reason = outcome
        .picks
        .iter()
        .find(|p| p.host_id.is_none())
        .map(|p| refusal(&p.vm_id, &p.decision.explain))
        .map(|sentence| match (facts.mode, outcome.claims.is_empty()) {
            (Mode::AllOrNothing, _) if outcome.picks.len() > 1 => {
                format!("{sentence}; all or nothing, so no instance was placed")
            }
            _ => sentence,
        });
    Ok(HeldScheduleAnswer {
        decision_id: facts.decision_id,
        dry_run: facts.dry_run,
        cluster_id: facts.cluster_id,
        policy_id: facts.policy_id,
        vm_id: facts.vm_id.clone(),
        chosen_host: outcome.picks.first().and_then(|p| p.host_id.clone()),
        complete: outcome.complete,
        mode: facts.mode,
        instances,
        not_tried: outcome.not_tried.clone(),
        claims: outcome.claims.iter().map(ClaimView::from).collect(),
        reason,
        sample: outcome.sample.clone(),
        waited_ms: waited.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
        skipped_units: facts.skipped_units.clone(),
    })
}

/// `value` encoded once, as the text the answer embeds: building a
/// `serde_json::Value` tree first would allocate every field of every
/// instance's explain record, with the cluster locked (the log entry is
/// built under the lock).
fn to_value<T: Serialize>(value: &T) -> Result<Box<serde_json::value::RawValue>, ApiError> {
    serde_json::value::to_raw_value(value).map_err(|e| ApiError::Internal(format!("encoding: {e}")))
}

/// Whether a schedule body carries its own hosts (the stateless form).
/// Only the presence of the `hosts` field is read.
pub fn has_inline_hosts(bytes: &[u8]) -> Result<bool, ApiError> {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        hosts: Option<serde::de::IgnoredAny>,
    }
    let probe: Probe = parse_json(bytes)?;
    Ok(probe.hosts.is_some())
}

/// Clusters' prepared policies, kept between decisions over held
/// inventories. Reading and assembling them takes about ten store queries
/// and compiling every parameter pattern, which at thousands of decisions
/// a second costs more than the decision itself.
///
/// Every change a prepared policy depends on (units, modules, policies,
/// clusters, their parameters) is made through an admin route, and every
/// admin write bumps the configuration epoch ([`track_config_changes`])
/// before its answer is sent; an entry is used only while the epoch it
/// was read at is still current, so a decision never runs a policy older
/// than the last change its caller could have seen.
#[derive(Default)]
pub struct PreparedCache {
    epoch: AtomicU64,
    entries: Mutex<HashMap<Uuid, (u64, Arc<Prepared>)>>,
}

impl PreparedCache {
    /// Forgets every entry: the configuration changed.
    pub fn invalidate(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The cluster's prepared policy, from the cache when nothing changed
    /// since it was read, else from `read`.
    pub async fn get(
        &self,
        cluster_id: Uuid,
        read: impl Future<Output = Result<Prepared, ApiError>>,
    ) -> Result<Arc<Prepared>, ApiError> {
        // The epoch is read first: a change racing with `read` leaves the
        // entry tagged with the older epoch, so it is read again next time.
        let epoch = self.epoch.load(Ordering::SeqCst);
        if let Some((at, prepared)) = self.lock().get(&cluster_id)
            && *at == epoch
        {
            return Ok(Arc::clone(prepared));
        }
        let prepared = Arc::new(read.await?);
        self.lock()
            .insert(cluster_id, (epoch, Arc::clone(&prepared)));
        Ok(prepared)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, (u64, Arc<Prepared>)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Middleware: after every admin route that changes something, the
/// prepared policies are stale.
pub async fn track_config_changes(
    State(state): State<AppState>,
    matched: Option<axum::extract::MatchedPath>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let changes = request.method() != axum::http::Method::GET
        && request.method() != axum::http::Method::HEAD
        && matched.is_some_and(|path| {
            super::access::access_for(request.method(), path.as_str())
                == Some(super::access::Access::Role(crate::auth::Role::Admin))
        });
    let response = next.run(request).await;
    if changes {
        state.prepared().invalidate();
    }
    response
}

/// Decides a schedule request without inline hosts over the cluster's
/// held inventory, recording a claim per instance placed and the decision
/// with its claims (unless `dry_run`).
pub async fn schedule_held(
    state: &AppState,
    cluster_id: Uuid,
    dry_run: bool,
    prepared: Arc<Prepared>,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let body: HeldScheduleBody = parse_json(bytes)?;
    crate::inputs::check_count(body.count).map_err(invalid)?;
    crate::inputs::check_vm(&body.vm, "vm").map_err(invalid)?;
    crate::inputs::check_instance_ids(&body.instance_ids).map_err(invalid)?;
    let prepared = Prepared::clone(&prepared);
    let decision_id = Uuid::new_v4();
    let facts = AnswerFacts {
        decision_id: (!dry_run).then_some(decision_id),
        dry_run,
        cluster_id,
        policy_id: prepared.policy_id,
        vm_id: body.vm.id.clone(),
        mode: body.mode,
        skipped_units: prepared.skipped_units,
    };
    let detail = body.explain;
    let log_facts = facts.clone();
    let log: crate::placement::LogFn = Box::new(move |outcome, waited| {
        let summary = answer(&log_facts, outcome, waited, ExplainDetail::Summary);
        let text = summary
            .as_ref()
            .ok()
            .and_then(|a| serde_json::to_string(a).ok())
            .unwrap_or_else(|| "{}".to_owned());
        LoggedDecision {
            id: decision_id,
            cluster_id,
            kind: DecisionKind::Schedule,
            vm_id: Some(log_facts.vm_id.clone()),
            host_id: outcome.picks.first().and_then(|p| p.host_id.clone()),
            answer: text,
            claims: outcome
                .claims
                .iter()
                .map(|c| (c.vm_id.clone(), c.host_id.clone()))
                .collect(),
        }
    });
    let job = PlaceJob {
        policy: prepared.policy,
        params: prepared.overrides,
        request: PlaceRequest {
            vm: body.vm,
            count: body.count,
            instance_ids: body.instance_ids,
            mode: body.mode,
            candidates: body.candidates,
            exclude: body.exclude,
            hints: body.hints,
            once_per_request: body.once_per_request,
            exhaustive: body.exhaustive,
        },
        dry_run,
        decision_id,
        log: Some(log),
    };
    let placed = state
        .placement()
        .place(cluster_id, job)
        .await
        .map_err(placement_error)?;
    let text = match (&placed.logged, detail) {
        // The log entry is the summary answer, already encoded.
        (Some(logged), ExplainDetail::Summary) => logged.answer.clone(),
        _ => {
            let facts = facts.clone();
            let encoded = tokio::task::spawn_blocking(move || {
                let answer = answer(&facts, &placed.outcome, placed.waited, detail)?;
                serde_json::to_string(&answer)
                    .map_err(|e| ApiError::Internal(format!("encoding: {e}")))
            })
            .await
            .map_err(|e| ApiError::Internal(format!("encoding task failed: {e}")))?;
            encoded?
        }
    };
    Ok(([(header::CONTENT_TYPE, "application/json")], text).into_response())
}

/// The API error for a placement failure.
pub fn placement_error(e: PlacementError) -> ApiError {
    let message = e.to_string();
    match e {
        PlacementError::Busy { waited, .. } => ApiError::Busy {
            code: "cluster_busy",
            message,
            details: json!({ "waited_ms": waited.as_millis() as u64 }),
            retry_after_secs: 1,
        },
        PlacementError::Place(PlaceError::HoldExceeded {
            placed,
            count,
            held,
        }) => ApiError::Busy {
            code: "decision_too_long",
            message,
            details: json!({ "placed": placed, "count": count, "held_ms": held.as_millis() as u64 }),
            retry_after_secs: 1,
        },
        PlacementError::Inventory(InventoryError::StaleSnapshot { given, held }) => {
            ApiError::Conflict {
                code: "stale_generation",
                message,
                details: json!({ "field": "generation", "given": given, "held": held }),
            }
        }
        PlacementError::Inventory(InventoryError::GenerationTooLarge { .. }) => {
            ApiError::Unprocessable {
                code: "invalid_snapshot",
                message,
                details: json!({ "field": "generation" }),
            }
        }
        PlacementError::Inventory(InventoryError::Invalid(e)) | PlacementError::Invalid(e) => {
            invalid(e)
        }
        PlacementError::Place(PlaceError::Invalid(e)) => {
            if e.path.starts_with("candidates") {
                ApiError::Unprocessable {
                    code: "invalid_candidates",
                    message,
                    details: json!({ "field": e.path }),
                }
            } else {
                invalid(e)
            }
        }
        PlacementError::Place(PlaceError::BadRequest(reason)) => ApiError::InvalidValue {
            field: "body".to_owned(),
            message: reason,
        },
        PlacementError::Place(PlaceError::Schedule { instance, error }) => match &*error {
            crate::pipeline::ScheduleError::Overloaded { unit, failed } => {
                ApiError::overloaded(unit, failed)
            }
            _ => ApiError::Unprocessable {
                code: "filter_failed",
                message,
                details: json!({ "instance": instance, "error": error.to_string() }),
            },
        },
        PlacementError::Place(PlaceError::Policy(e)) => ApiError::from(e),
        PlacementError::Place(PlaceError::Inventory(e)) => {
            ApiError::Internal(format!("held inventory: {e}"))
        }
        PlacementError::NoInventory { cluster_id } => ApiError::Conflict {
            code: "no_inventory",
            message,
            details: json!({ "cluster_id": cluster_id }),
        },
        PlacementError::Claim(ClaimError::NoClaim { vm_id }) => ApiError::NotFound {
            resource: "claim",
            id: vm_id,
        },
        PlacementError::Store(e) => ApiError::from(e),
        PlacementError::Persist(e) => ApiError::Internal(e.to_string()),
        PlacementError::Task(e) => ApiError::Internal(e),
    }
}

fn invalid(e: crate::snapshot::SnapshotError) -> ApiError {
    if let Some(refused) = ApiError::refused_value(&e) {
        return refused;
    }
    ApiError::Unprocessable {
        code: "invalid_snapshot",
        message: e.to_string(),
        details: json!({ "field": e.path }),
    }
}

/// The live claims.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ClaimList {
    pub claims: Vec<ClaimView>,
}

/// Which generation of the host's reports includes the started VM.
#[derive(Clone, Copy, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmBody {
    /// The first generation of the engine's reports of the host that
    /// counts the VM; default: the next report applied. Give it when
    /// reports may reach Sandpiper before the confirmation.
    #[serde(default)]
    pub covered_from: Option<u64>,
}

/// Lists a cluster's live claims, oldest first.
#[utoipa::path(get, path = "/api/v1/clusters/{id}/claims", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id")),
    responses(
        (status = 200, description = "The live claims", body = ClaimList),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn list_claims(
    State(state): State<AppState>,
    Path(cluster_id): Path<Uuid>,
) -> Result<axum::Json<ClaimList>, ApiError> {
    exists(&state, cluster_id).await?;
    let claims = state
        .placement()
        .claims(cluster_id)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(ClaimList {
        claims: claims.iter().map(ClaimView::from).collect(),
    }))
}

/// Confirms a claim: the VM started. The claim keeps counting until a
/// report of its host at or after `covered_from` arrives, and no longer
/// expires.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/claims/{vm_id}/confirm", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("vm_id" = String, Path, description = "The VM")),
    request_body = ConfirmBody,
    responses(
        (status = 200, description = "The claim, confirmed (or already covered by a report held)", body = ClaimView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster, or no claim for the VM (expired, released or covered)", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn confirm_claim(
    State(state): State<AppState>,
    Path((cluster_id, vm_id)): Path<(Uuid, String)>,
    Json(body): Json<ConfirmBody>,
) -> Result<axum::Json<ClaimView>, ApiError> {
    exists(&state, cluster_id).await?;
    let claim = state
        .placement()
        .confirm(cluster_id, vm_id, body.covered_from)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(ClaimView::from(&claim)))
}

/// Releases a claim: the VM did not start, its resources are free again.
#[utoipa::path(delete, path = "/api/v1/clusters/{id}/claims/{vm_id}", tag = "placement",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"), ("vm_id" = String, Path, description = "The VM")),
    responses(
        (status = 200, description = "The claim released", body = ClaimView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster, or no claim for the VM", body = ErrorBody),
        (status = 503, description = "`cluster_busy`", body = ErrorBody),
    ))]
pub async fn release_claim(
    State(state): State<AppState>,
    Path((cluster_id, vm_id)): Path<(Uuid, String)>,
) -> Result<axum::Json<ClaimView>, ApiError> {
    exists(&state, cluster_id).await?;
    let claim = state
        .placement()
        .release(cluster_id, vm_id)
        .await
        .map_err(placement_error)?;
    Ok(axum::Json(ClaimView::from(&claim)))
}

/// 404 unless the cluster exists.
pub async fn exists(state: &AppState, cluster_id: Uuid) -> Result<(), ApiError> {
    let mut conn = state.store().read().await?;
    load_cluster(&mut conn, cluster_id).await.map(|_| ())
}

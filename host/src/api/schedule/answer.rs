//! What a decision answers, as JSON. Every answer starts with the same
//! facts about the decision ([`Facts`]: its id, the cluster, the policy,
//! the VM). A schedule decision answers [`ScheduleAnswer`], rendered from
//! the placement's outcome; a balancing round answers [`BalanceAnswer`].

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

pub use super::summary::RankedHost;
use super::summary::{ExplainSummary, SUMMARY_RANKED, refusal};
use crate::api::claims::ClaimView;
use crate::api::error::ApiError;
use crate::pipeline;
use crate::placement::{Decided, ExplainDetail, Mode, PlaceOutcome, Sample};

/// What every answer says about the decision besides its outcome.
#[derive(Clone, Debug)]
pub struct Facts {
    /// `None` for a dry run.
    pub decision_id: Option<Uuid>,
    pub dry_run: bool,
    pub cluster_id: Uuid,
    pub policy_id: Uuid,
    pub skipped_units: Vec<String>,
}

/// Where the VM should run (and, over the held inventory, where every
/// instance went and what was claimed), and why: the one answer of a
/// schedule decision, rendered from the placement's outcome whichever
/// source its hosts came from.
///
/// The source shows in which fields are present: a decision over inline
/// hosts carries `ranked` and the `explain` record of its one pick (full
/// unless the request asks for `"explain": "summary"`: then the best
/// hosts, `survivors` and the explain summary); a placement over the held
/// inventory carries the placement fields (`complete` ... `waited_ms`,
/// where `null` means "none") with an explain record per instance.
/// Both forms are the published contract; which is sent follows from the
/// request (with or without `hosts`), never from server state.
// The placement fields the held form may send as `null` are
// `Option<Option<_>>`: absent inline, `null` or a value when held.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ScheduleAnswer<'a> {
    /// The recorded decision; `null` for a dry run.
    pub decision_id: Option<Uuid>,
    pub dry_run: bool,
    pub cluster_id: Uuid,
    pub policy_id: Uuid,
    pub vm_id: String,
    /// The winning host (over the held inventory, the first instance's);
    /// `null` when every candidate was rejected (the explain record's
    /// filters say why).
    pub chosen_host: Option<String>,
    /// Inline hosts only: the surviving candidates, best first (with a
    /// summary explain, the best few).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranked: Option<Vec<RankedHost>>,
    /// Inline hosts with a summary explain only: the surviving candidates
    /// in all, of which `ranked` lists the best.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub survivors: Option<usize>,
    /// Held inventory only: every instance was placed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
    /// Held inventory only: `all_or_nothing` or `best_effort`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub mode: Option<Mode>,
    /// Held inventory only: each instance tried, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<Vec<InstanceAnswer>>,
    /// Held inventory only: instances not tried after one could not be
    /// placed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_tried: Option<Vec<String>>,
    /// Held inventory only: the claims recorded, one per instance placed
    /// (none for a dry run, or for an all-or-nothing request that did not
    /// place every one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claims: Option<Vec<ClaimView>>,
    /// Held inventory only: why not every instance was placed, in one
    /// sentence; `null` when every one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub reason: Option<Option<String>>,
    /// Held inventory only: the rotating window the first pick
    /// considered; `null` when it considered every host.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub sample: Option<Option<Sample>>,
    /// Held inventory only: how long the request waited for pending
    /// claims to resolve before its one retry (oVirt's delay and retry),
    /// milliseconds; `null` when it did not wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>)]
    pub waited_ms: Option<Option<u64>>,
    /// Disabled units of the policy that were left out.
    pub skipped_units: Vec<String>,
    /// Units that failed and were left out of the decision (fail-open
    /// filters and weights; weights fail open unless their policy says
    /// otherwise), each once; empty when none failed. The decision still answered, so this is where a
    /// failing unit shows.
    pub degraded: Vec<pipeline::Degraded>,
    /// Inline hosts only: every filter's rejections with reasons, every
    /// score unit's scores, the totals and the tie-break; with a summary
    /// explain, the bounded summary a held placement's instance carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub explain: Option<PickExplain<'a>>,
}

/// The explain record of a pick over inline hosts, as the request asked.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum PickExplain<'a> {
    Full(&'a pipeline::Explain),
    Summary(Box<ExplainSummary>),
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
    /// For a VM with hardware needs: the cells, CPUs, pages and devices it
    /// takes on `host`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::hardware::claim::HardwareClaim>)]
    pub hardware: Option<std::sync::Arc<crate::hardware::claim::HardwareClaim>>,
}

/// Which form of [`ScheduleAnswer`] to render.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerForm {
    /// A decision over inline hosts: its one pick, with its explain record
    /// as `detail` asks (full unless the request says otherwise).
    Pick { detail: ExplainDetail },
    /// A placement over the held inventory, each instance's explain record
    /// as `detail` asks.
    Placement { mode: Mode, detail: ExplainDetail },
}

impl<'a> ScheduleAnswer<'a> {
    /// The answer to a placement, in `form`.
    pub fn new(
        facts: &Facts,
        vm_id: &str,
        decided: &'a Decided,
        form: AnswerForm,
    ) -> Result<Self, ApiError> {
        let outcome = &decided.outcome;
        let mut answer = ScheduleAnswer {
            decision_id: facts.decision_id,
            dry_run: facts.dry_run,
            cluster_id: facts.cluster_id,
            policy_id: facts.policy_id,
            vm_id: vm_id.to_owned(),
            chosen_host: outcome.picks.first().and_then(|p| p.host_id.clone()),
            ranked: None,
            survivors: None,
            complete: None,
            mode: None,
            instances: None,
            not_tried: None,
            claims: None,
            reason: None,
            sample: None,
            waited_ms: None,
            skipped_units: facts.skipped_units.clone(),
            degraded: Vec::new(),
            explain: None,
        };
        match form {
            AnswerForm::Pick { detail } => {
                let decision = outcome.picks.first().map(|p| &p.decision).ok_or_else(|| {
                    ApiError::Internal("a decision over inline hosts made no pick".to_owned())
                })?;
                let listed = match detail {
                    ExplainDetail::Full => decision.ranked.len(),
                    ExplainDetail::Summary => decision.ranked.len().min(SUMMARY_RANKED),
                };
                let ranked = decision.ranked[..listed]
                    .iter()
                    .map(|r| RankedHost {
                        host: decision.explain.host_id(r.host),
                        total: r.total,
                    })
                    .collect();
                answer.ranked = Some(ranked);
                answer.degraded = decision.explain.degraded();
                answer.explain = Some(match detail {
                    ExplainDetail::Full => PickExplain::Full(&decision.explain),
                    ExplainDetail::Summary => {
                        answer.survivors = Some(decision.ranked.len());
                        PickExplain::Summary(Box::new(ExplainSummary::of(
                            &decision.explain,
                            &decision.ranked,
                        )))
                    }
                });
            }
            AnswerForm::Placement { mode, detail } => {
                answer.complete = Some(outcome.complete);
                answer.mode = Some(mode);
                answer.instances = Some(instances(outcome, detail)?);
                answer.not_tried = Some(outcome.not_tried.clone());
                answer.claims = Some(outcome.claims.iter().map(ClaimView::from).collect());
                answer.reason = Some(reason(outcome, mode));
                answer.sample = Some(outcome.sample.clone());
                answer.waited_ms = Some(
                    decided
                        .waited
                        .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
                );
                answer.degraded = pipeline::merge_degraded(
                    outcome.picks.iter().map(|p| p.decision.explain.degraded()),
                );
            }
        }
        Ok(answer)
    }
}

/// Each instance's pick, with its explain record as `detail` asks.
fn instances(
    outcome: &PlaceOutcome,
    detail: ExplainDetail,
) -> Result<Vec<InstanceAnswer>, ApiError> {
    let mut instances = Vec::with_capacity(outcome.picks.len());
    for pick in &outcome.picks {
        let explain = match detail {
            ExplainDetail::Summary => to_raw(&ExplainSummary::of(
                &pick.decision.explain,
                &pick.decision.ranked,
            ))?,
            ExplainDetail::Full => to_raw(&pick.decision.explain)?,
        };
        instances.push(InstanceAnswer {
            vm_id: pick.vm_id.clone(),
            host: pick.host_id.clone(),
            explain,
            hardware: pick.hardware.clone(),
        });
    }
    Ok(instances)
}

/// Why not every instance was placed, in one sentence.
fn reason(outcome: &PlaceOutcome, mode: Mode) -> Option<String> {
    outcome
        .picks
        .iter()
        .find(|p| p.host_id.is_none())
        .map(|p| refusal(&p.vm_id, &p.decision.explain))
        .map(|sentence| match mode {
            Mode::AllOrNothing if outcome.picks.len() > 1 => {
                format!("{sentence}; all or nothing, so no instance was placed")
            }
            _ => sentence,
        })
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
    /// Units that failed and were left out of the decision (fail-open
    /// filters and weights; weights fail open unless their policy says
    /// otherwise), each once; empty when none failed. The decision still answered, so this is where a
    /// failing unit shows.
    pub degraded: Vec<pipeline::Degraded>,
    /// What the balance unit proposed and how the policy decided.
    #[schema(value_type = Object)]
    pub explain: pipeline::BalanceExplain,
    /// A periodic round that decided a migration: the `migrate` operation
    /// it queued (docs/operations.md). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<Uuid>,
}

impl BalanceAnswer {
    pub fn new(
        facts: Facts,
        vm_id: Option<String>,
        destination: Option<String>,
        explain: pipeline::BalanceExplain,
    ) -> Self {
        BalanceAnswer {
            decision_id: facts.decision_id,
            dry_run: facts.dry_run,
            cluster_id: facts.cluster_id,
            policy_id: facts.policy_id,
            outcome: explain.outcome().to_owned(),
            vm_id,
            destination,
            skipped_units: facts.skipped_units,
            degraded: explain.degraded(),
            explain,
            operation_id: None,
        }
    }
}

/// `value` encoded once, as the text the answer embeds: building a
/// `serde_json::Value` tree first would allocate every field of every
/// instance's explain record, with the cluster locked (the log entry is
/// built under the lock).
fn to_raw<T: Serialize>(value: &T) -> Result<Box<serde_json::value::RawValue>, ApiError> {
    serde_json::value::to_raw_value(value).map_err(|e| ApiError::Internal(format!("encoding: {e}")))
}

/// An answer encoded once: the same text is stored and returned, with the
/// explain record's fields in their documented order.
pub fn to_json<T: Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(|e| ApiError::Internal(format!("encoding: {e}")))
}

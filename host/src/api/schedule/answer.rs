//! What a decision answers, as JSON. Every answer starts with the same
//! facts about the decision ([`Facts`]: its id, the cluster, the policy,
//! the VM); what follows depends on where the hosts came from, because the
//! published contract has two shapes for the two sources:
//!
//! * inline hosts: [`ScheduleAnswer`], one pick with the full explain
//!   record;
//! * the held inventory: [`HeldScheduleAnswer`], every instance tried,
//!   the claims recorded, and a bounded explain summary per instance.
//!
//! A balancing round answers [`BalanceAnswer`] from either source.

use std::time::Duration;

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

pub use super::summary::RankedHost;
use super::summary::{ExplainSummary, refusal};
use crate::api::claims::ClaimView;
use crate::api::error::ApiError;
use crate::pipeline::{self, Decision};
use crate::placement::{ExplainDetail, Mode, PlaceOutcome, Sample};

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
    /// Units that failed and were left out of the decision (fail-open
    /// filters and weights; weights fail open unless their policy says
    /// otherwise), each once; empty when none failed. The decision still answered, so this is where a
    /// failing unit shows.
    pub degraded: Vec<pipeline::Degraded>,
    /// Every filter's rejections with reasons, every score unit's scores,
    /// the totals and the tie-break.
    #[schema(value_type = Object)]
    pub explain: pipeline::Explain,
}

impl ScheduleAnswer {
    /// The answer to a decision over inline hosts.
    pub fn new(facts: Facts, vm_id: String, decision: Decision) -> Self {
        let host_id = |index: u32| decision.explain.host_id(index);
        ScheduleAnswer {
            decision_id: facts.decision_id,
            dry_run: facts.dry_run,
            cluster_id: facts.cluster_id,
            policy_id: facts.policy_id,
            vm_id,
            chosen_host: decision.chosen.map(host_id),
            ranked: decision
                .ranked
                .iter()
                .map(|r| RankedHost {
                    host: host_id(r.host),
                    total: r.total,
                })
                .collect(),
            skipped_units: facts.skipped_units,
            degraded: decision.explain.degraded(),
            explain: decision.explain,
        }
    }
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
    /// Units that failed and were left out of the decision (fail-open
    /// filters and weights; weights fail open unless their policy says
    /// otherwise), each once; empty when none failed. The decision still answered, so this is where a
    /// failing unit shows.
    pub degraded: Vec<pipeline::Degraded>,
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

impl HeldScheduleAnswer {
    /// The answer to a placement over the held inventory, with each
    /// instance's explain record as `detail` asks.
    pub fn new(
        facts: &Facts,
        vm_id: &str,
        mode: Mode,
        outcome: &PlaceOutcome,
        waited: Option<Duration>,
        detail: ExplainDetail,
    ) -> Result<Self, ApiError> {
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
            });
        }
        let reason = outcome
            .picks
            .iter()
            .find(|p| p.host_id.is_none())
            .map(|p| refusal(&p.vm_id, &p.decision.explain))
            .map(|sentence| match mode {
                Mode::AllOrNothing if outcome.picks.len() > 1 => {
                    format!("{sentence}; all or nothing, so no instance was placed")
                }
                _ => sentence,
            });
        Ok(HeldScheduleAnswer {
            decision_id: facts.decision_id,
            dry_run: facts.dry_run,
            cluster_id: facts.cluster_id,
            policy_id: facts.policy_id,
            vm_id: vm_id.to_owned(),
            chosen_host: outcome.picks.first().and_then(|p| p.host_id.clone()),
            complete: outcome.complete,
            mode,
            instances,
            not_tried: outcome.not_tried.clone(),
            claims: outcome.claims.iter().map(ClaimView::from).collect(),
            reason,
            sample: outcome.sample.clone(),
            waited_ms: waited.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
            skipped_units: facts.skipped_units.clone(),
            degraded: pipeline::merge_degraded(
                outcome.picks.iter().map(|p| p.decision.explain.degraded()),
            ),
        })
    }
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

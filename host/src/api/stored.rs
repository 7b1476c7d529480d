//! What the decisions log keeps of a decision over inline hosts, bounded
//! whatever the request held (issue #11).
//!
//! An answer up to `store::decisions::MAX_ANSWER_BYTES` is logged as it was
//! returned. A larger one (an inline schedule over 100,000 hosts explains
//! itself in ~47 MB: every host's scores and rank) is logged as a summary —
//! the same answer with the explain summary of held decisions, the best
//! `SUMMARY_RANKED` hosts and the link to the full answer — and the full
//! answer is kept beside it in `decision_details`, under a byte budget of
//! its own, for `GET …/decisions/{id}?explain=full` while both are kept.

use serde::Serialize;
use uuid::Uuid;

use super::AppState;
use super::claims::{ExplainSummary, SUMMARY_RANKED};
use super::clusters::cluster_href;
use super::error::ApiError;
use super::schedule::{BalanceAnswer, RankedHost, ScheduleAnswer};
use crate::pipeline::{self, Degraded};
use crate::store::decisions::{
    self, DEFAULT_DETAILS_BUDGET_BYTES, DecisionRecord, MAX_ANSWER_BYTES, MAX_ID_COLUMN_BYTES,
};

/// What to log of one answer: the row's answer, and the full answer when
/// the row holds a summary of it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToLog {
    pub answer: String,
    pub full: Option<String>,
}

/// Where the full answer of a summarised decision is read.
pub fn full_href(cluster_id: Uuid, id: Uuid) -> String {
    format!("{}/decisions/{id}?explain=full", cluster_href(cluster_id))
}

/// `json` as it is, when it fits a row; else the summary `summarise`
/// builds, with `json` as the full answer.
pub fn to_log(
    json: &str,
    summarise: impl FnOnce() -> Result<String, ApiError>,
) -> Result<ToLog, ApiError> {
    if json.len() <= MAX_ANSWER_BYTES {
        return Ok(ToLog {
            answer: json.to_owned(),
            full: None,
        });
    }
    Ok(ToLog {
        answer: summarise()?,
        full: Some(json.to_owned()),
    })
}

/// A schedule answer with its explain record summarised.
#[derive(Serialize)]
struct ScheduleSummary<'a> {
    decision_id: Option<Uuid>,
    dry_run: bool,
    cluster_id: Uuid,
    policy_id: Uuid,
    vm_id: &'a str,
    chosen_host: Option<&'a str>,
    /// The best-ranked hosts only.
    ranked: &'a [RankedHost],
    /// How many hosts the full answer ranks.
    ranked_count: usize,
    skipped_units: &'a [String],
    degraded: &'a [Degraded],
    explain: ExplainSummary,
    /// `summary`: the full answer is at `full_answer` while it is kept.
    explain_detail: &'static str,
    full_answer: Option<String>,
}

/// The summary of a schedule answer too large for a row.
pub fn schedule_summary(
    answer: &ScheduleAnswer,
    ranked: &[pipeline::Ranked],
) -> Result<String, ApiError> {
    let summary = ScheduleSummary {
        decision_id: answer.decision_id,
        dry_run: answer.dry_run,
        cluster_id: answer.cluster_id,
        policy_id: answer.policy_id,
        vm_id: cut(&answer.vm_id),
        chosen_host: answer.chosen_host.as_deref().map(cut),
        ranked: &answer.ranked[..answer.ranked.len().min(SUMMARY_RANKED)],
        ranked_count: answer.ranked.len(),
        skipped_units: &answer.skipped_units,
        degraded: &answer.degraded,
        explain: ExplainSummary::of(&answer.explain, ranked),
        explain_detail: "summary",
        full_answer: answer
            .decision_id
            .map(|id| full_href(answer.cluster_id, id)),
    };
    encode(&summary)
}

/// A balance answer with the explain record of its decision over the
/// destinations summarised.
#[derive(Serialize)]
struct BalanceSummary<'a> {
    decision_id: Option<Uuid>,
    dry_run: bool,
    cluster_id: Uuid,
    policy_id: Uuid,
    outcome: &'a str,
    vm_id: Option<&'a str>,
    destination: Option<&'a str>,
    skipped_units: &'a [String],
    degraded: &'a [Degraded],
    explain: BalanceExplainSummary<'a>,
    explain_detail: &'static str,
    full_answer: Option<String>,
}

#[derive(Serialize)]
struct BalanceExplainSummary<'a> {
    unit: &'a str,
    schedule: Option<ExplainSummary>,
}

/// The summary of a balance answer too large for a row.
pub fn balance_summary(answer: &BalanceAnswer) -> Result<String, ApiError> {
    let summary = BalanceSummary {
        decision_id: answer.decision_id,
        dry_run: answer.dry_run,
        cluster_id: answer.cluster_id,
        policy_id: answer.policy_id,
        outcome: &answer.outcome,
        vm_id: answer.vm_id.as_deref().map(cut),
        destination: answer.destination.as_deref().map(cut),
        skipped_units: &answer.skipped_units,
        degraded: &answer.degraded,
        explain: BalanceExplainSummary {
            unit: &answer.explain.unit,
            schedule: answer
                .explain
                .schedule
                .as_ref()
                .map(|s| ExplainSummary::of(s, &[])),
        },
        explain_detail: "summary",
        full_answer: answer
            .decision_id
            .map(|id| full_href(answer.cluster_id, id)),
    };
    encode(&summary)
}

/// An id cut to what a row keeps of it (the store cuts the id columns the
/// same way), so that a huge id cannot make the summary huge.
fn cut(id: &str) -> &str {
    if id.len() <= MAX_ID_COLUMN_BYTES {
        return id;
    }
    let mut end = MAX_ID_COLUMN_BYTES;
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    &id[..end]
}

fn encode<T: Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(|e| ApiError::Internal(format!("encoding: {e}")))
}

/// Records a decision over inline hosts: its row (bounded by the store),
/// its full answer when the row holds a summary, and the log trimmed to
/// its count, its bytes and the full answers' budget.
pub async fn record(
    state: &AppState,
    decision: DecisionRecord,
    full: Option<String>,
) -> Result<(), ApiError> {
    let retention = state.placement().config().retention;
    let mut tx = state.store().write().await?;
    decisions::insert(&mut tx, &decision, state.limits().decisions_retained).await?;
    if let Some(full) = full
        && decisions::insert_detail(&mut tx, decision.id, &full).await?
    {
        decisions::trim_details(&mut tx, DEFAULT_DETAILS_BUDGET_BYTES).await?;
    }
    decisions::trim_bytes(&mut tx, decision.cluster_id, retention.max_bytes).await?;
    tx.commit().await?;
    Ok(())
}

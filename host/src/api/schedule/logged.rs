//! What the decisions log keeps of an answer ([`Logged`]): the answer as
//! returned when it is small, else, in the log's row, the same answer with
//! its explain record summarised ([`ExplainSummary`]) and its ranking cut
//! to the best hosts, and the answer as returned kept apart
//! (`crate::store::decisions`). A decision over 100,000 inline hosts
//! answers about 47 MB; logged whole, one row made listing the log return
//! 42 MB. The full answer stays available from
//! `GET /api/v1/clusters/{id}/decisions/{decision_id}/answer` while the
//! log's byte budget keeps it.

use serde::Serialize;
use uuid::Uuid;

use super::answer::{BalanceAnswer, RankedHost, to_json};
use super::summary::{ExplainSummary, SUMMARY_RANKED};
use crate::api::error::ApiError;
use crate::pipeline::{self, Explain};
use crate::unit::Usage;

/// Largest answer logged whole, bytes. The full answer of a decision over
/// a few dozen hosts fits (an inline answer is about 500 bytes per host
/// under the default policy: 10,063,757 bytes at 20,000 hosts, printed by
/// `tests/api/decisions_log.rs`); above it, a row holds the summary (about
/// 3 KiB), so a page of the default 50 decisions stays well under a
/// megabyte whatever was decided.
pub const LOGGED_WHOLE_BYTES: usize = 16 * 1024;

/// An answer as the decisions log keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged {
    /// The log row's answer: the answer as returned, or its summary.
    pub row: String,
    /// The answer as returned, when `row` is its summary.
    pub full: Option<String>,
}

impl Logged {
    /// An answer logged as it is: small, or already in its bounded form
    /// (a placement over the held inventory logs its summary form).
    pub fn whole(text: String) -> Logged {
        Logged {
            row: text,
            full: None,
        }
    }

    /// `text`, logged whole when it is at most [`LOGGED_WHOLE_BYTES`],
    /// else as the summary `summarize` encodes.
    fn bounded(
        text: &str,
        summarize: impl FnOnce() -> Result<String, ApiError>,
    ) -> Result<Logged, ApiError> {
        if text.len() <= LOGGED_WHOLE_BYTES {
            return Ok(Logged::whole(text.to_owned()));
        }
        Ok(Logged {
            row: summarize()?,
            full: Some(text.to_owned()),
        })
    }

    /// How the log keeps a full schedule answer over inline hosts,
    /// encoded as `text`: whole when small, else the summary form
    /// `summarize` encodes (the same answer asked with `"explain":
    /// "summary"`, so the log row and that answer have one home).
    pub fn schedule(
        text: &str,
        summarize: impl FnOnce() -> Result<String, ApiError>,
    ) -> Result<Logged, ApiError> {
        Logged::bounded(text, summarize)
    }

    /// How the log keeps a balance answer, encoded as `text`.
    pub fn balance(answer: &BalanceAnswer, text: &str) -> Result<Logged, ApiError> {
        Logged::bounded(text, || {
            let explain = &answer.explain;
            let schedule = explain.schedule.as_ref();
            to_json(&BalanceRow {
                decision_id: answer.decision_id,
                dry_run: answer.dry_run,
                cluster_id: answer.cluster_id,
                policy_id: answer.policy_id,
                outcome: &answer.outcome,
                vm_id: answer.vm_id.as_deref(),
                destination: answer.destination.as_deref(),
                skipped_units: &answer.skipped_units,
                degraded: &answer.degraded,
                explain: BalanceSummary {
                    unit: &explain.unit,
                    usage: &explain.usage,
                    destinations: explain.proposal.as_ref().map(|m| m.destinations.len()),
                    source: schedule.zip(explain.source).map(|(s, h)| s.host_id(h)),
                    schedule: schedule.map(|s| {
                        let mut summary = ExplainSummary::of(s, &[]);
                        summary.ranked = by_total(s);
                        summary
                    }),
                },
            })
        })
    }
}

/// A record's scored candidates, best first (ties in candidate order, as
/// the pipeline ranks them).
fn by_total(explain: &Explain) -> Vec<RankedHost> {
    let mut order: Vec<usize> = (0..explain.totals.len()).collect();
    order.sort_by(|&a, &b| explain.totals[b].total_cmp(&explain.totals[a]));
    order
        .into_iter()
        .take(SUMMARY_RANKED)
        .map(|i| RankedHost {
            host: explain.host_id(explain.scored[i]),
            total: explain.totals[i],
        })
        .collect()
}

/// A [`BalanceAnswer`] as its log row.
#[derive(Serialize)]
struct BalanceRow<'a> {
    decision_id: Option<Uuid>,
    dry_run: bool,
    cluster_id: Uuid,
    policy_id: Uuid,
    outcome: &'a str,
    vm_id: Option<&'a str>,
    destination: Option<&'a str>,
    skipped_units: &'a [String],
    degraded: &'a [pipeline::Degraded],
    explain: BalanceSummary<'a>,
}

/// A balance explain record, bounded: the proposal's destinations counted,
/// the decision over them summarised.
#[derive(Serialize)]
struct BalanceSummary<'a> {
    unit: &'a str,
    usage: &'a Usage,
    /// Destinations the balance unit proposed, when it proposed a move.
    destinations: Option<usize>,
    source: Option<String>,
    schedule: Option<ExplainSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_answer_is_logged_whole_a_large_one_summarised() {
        let small = Logged::bounded("{}", || unreachable!("small answers are not summarised"))
            .expect("logged");
        assert_eq!(small, Logged::whole("{}".to_owned()));
        let large = "x".repeat(LOGGED_WHOLE_BYTES + 1);
        let logged = Logged::bounded(&large, || Ok("{\"summary\":1}".to_owned())).expect("logged");
        assert_eq!(logged.row, "{\"summary\":1}");
        assert_eq!(logged.full.as_deref(), Some(large.as_str()));
    }
}

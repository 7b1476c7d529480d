//! The bounded explain record an answer over the held inventory carries
//! for each instance, and the one sentence that says why an instance found
//! no host.
//!
//! The full explain record of a decision over 10,000 hosts is megabytes,
//! which neither an engine at thousands of decisions a second nor the
//! decisions log wants; `"explain": "full"` in the request returns it (it
//! is not logged).

use serde::Serialize;
use utoipa::ToSchema;

use sandpiper_model::reason;

use crate::pipeline::{Combination, Explain, FailureRecord, Outcome};

/// A candidate and its total score.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct RankedHost {
    pub host: String,
    pub total: f64,
}

/// Reasons listed per filter in an explain summary, most hosts first; the
/// rest are counted. A memory filter's reasons carry each host's numbers,
/// so a window of 500 hosts can give 500 distinct reasons.
pub const SUMMARY_REASONS: usize = 8;

/// Host ids named per reason in an explain summary.
pub const SUMMARY_HOSTS_PER_REASON: usize = 5;

/// Best-ranked hosts listed in an explain summary.
pub const SUMMARY_RANKED: usize = 5;

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
    /// Why the filter was not called: it declared nothing to say about
    /// this request (`unit-info.applies-to`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Candidates whose verdict was reused from an earlier decision, not
    /// asked for (a `per-host` unit; the host and the request unchanged).
    #[serde(skip_serializing_if = "crate::pipeline::nothing_reused")]
    pub reused: usize,
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
    /// Why the unit was not called (see [`FilterSummary::skipped`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Candidates whose score was reused (see [`FilterSummary::reused`]).
    #[serde(skip_serializing_if = "crate::pipeline::nothing_reused")]
    pub reused: usize,
}

impl ExplainSummary {
    pub fn of(explain: &Explain, ranked: &[crate::pipeline::Ranked]) -> Self {
        let filters = explain
            .filters
            .iter()
            .map(|f| {
                // Grouped by sentence without writing one: only the listed
                // reasons are written.
                let mut groups = reason::sentences(&f.rejected);
                groups.sort_by_key(|g| std::cmp::Reverse(g.hosts.len()));
                let listed = groups.len().min(SUMMARY_REASONS);
                FilterSummary {
                    unit: f.unit.clone(),
                    input: f.input,
                    survivors: f.survivors,
                    rejected: groups[..listed]
                        .iter()
                        .map(|g| ReasonSummary {
                            reason: g.render(&f.rejected),
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
                    skipped: f.skipped.clone(),
                    reused: f.reused,
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
                skipped: s.skipped.clone(),
                reused: s.reused,
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
pub fn refusal(vm_id: &str, explain: &Explain) -> String {
    let mut parts = Vec::new();
    for filter in &explain.filters {
        let rejected: usize = filter.rejected.iter().map(|r| r.hosts.len()).sum();
        if rejected == 0 {
            continue;
        }
        // The sentence rejecting the most hosts, the first of a tie
        // (`min_by_key` keeps the first of equal keys).
        let groups = reason::sentences(&filter.rejected);
        let most = groups
            .iter()
            .min_by_key(|g| std::cmp::Reverse(g.hosts.len()))
            .filter(|g| !g.hosts.is_empty());
        let example = most
            .map(|g| {
                let sentence = g.render(&filter.rejected);
                format!(" (e.g. {}: {sentence})", explain.host_id(g.hosts[0]))
            })
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

//! Degraded decisions: a decision that went ahead although a unit failed
//! (a fail-open filter skipped, a fail-open weight, the default, left out
//! of the totals; a fail-closed one fails the request instead).
//! Such a decision answers 200, so the failure must be visible at the top
//! of the answer and in the decisions log, not only deep in the explain
//! record, and counted so that an operator sees a unit going bad.
//!
//! [`Explain::degraded`] lists a record's failed units; [`counts`] reads
//! the process-wide counters the pipeline bumps at every such failure (the
//! metrics endpoint planned in issue #15 is meant to export them).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use utoipa::ToSchema;

use super::explain::{BalanceExplain, Explain, FailureRecord};

/// A unit that failed in a decision that still answered.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
pub struct Degraded {
    /// The unit's name.
    pub unit: String,
    /// `filter` or `score`: a unit may fill both roles.
    pub role: &'static str,
    /// The failure's stable code (`out_of_fuel`, `deadline_exceeded`,
    /// `trap`, `invalid_output` (NaN, infinities, wrong length), ...), as
    /// in the explain record's `failure.code`.
    pub kind: &'static str,
}

impl Explain {
    /// The units that failed and were skipped, in the order they ran
    /// (filters, then weights); empty when nothing failed.
    pub fn degraded(&self) -> Vec<Degraded> {
        let filters = self
            .filters
            .iter()
            .filter_map(|f| f.failure.as_ref().map(|e| (f.unit.as_str(), "filter", e)));
        let scores = self
            .scores
            .iter()
            .filter_map(|s| s.failure.as_ref().map(|e| (s.unit.as_str(), "score", e)));
        filters
            .chain(scores)
            .map(|(unit, role, failure)| Degraded {
                unit: unit.to_owned(),
                role,
                kind: failure.code,
            })
            .collect()
    }
}

impl BalanceExplain {
    /// The units of the decision over the destinations that failed and
    /// were skipped (a failing balance unit fails the request instead).
    pub fn degraded(&self) -> Vec<Degraded> {
        self.schedule
            .as_ref()
            .map(Explain::degraded)
            .unwrap_or_default()
    }
}

/// Several records' failed units, each (unit, role, kind) once, sorted: a
/// multi-instance decision runs the same units once per instance.
pub fn merge(lists: impl IntoIterator<Item = Vec<Degraded>>) -> Vec<Degraded> {
    let mut all: Vec<Degraded> = lists.into_iter().flatten().collect();
    all.sort();
    all.dedup();
    all
}

/// Failure codes counted, in `UnitError::code` spelling; anything else is
/// counted as `other`, so a new code cannot go uncounted.
const KINDS: [&str; 9] = [
    "out_of_fuel",
    "deadline_exceeded",
    "memory_limit",
    "stack_overflow",
    "trap",
    "invalid_output",
    "not_exported",
    "instantiate",
    "other",
];

/// Roles counted.
const ROLES: [&str; 2] = ["filter", "score"];

/// Degraded unit calls since the process started, by role and kind.
static COUNTS: [[AtomicU64; KINDS.len()]; ROLES.len()] =
    [const { [const { AtomicU64::new(0) }; KINDS.len()] }; ROLES.len()];

/// Counts one skipped unit call. Called by the pipeline where it records
/// the failure.
pub(crate) fn count(role: &'static str, failure: &FailureRecord) {
    let role = ROLES.iter().position(|r| *r == role).unwrap_or(0);
    let kind = KINDS
        .iter()
        .position(|k| *k == failure.code)
        .unwrap_or(KINDS.len() - 1);
    COUNTS[role][kind].fetch_add(1, Ordering::Relaxed);
}

/// Every non-zero counter as (role, kind, count), for a metrics endpoint.
pub fn counts() -> Vec<(&'static str, &'static str, u64)> {
    let mut out = Vec::new();
    for (r, role) in ROLES.iter().enumerate() {
        for (k, kind) in KINDS.iter().enumerate() {
            let n = COUNTS[r][k].load(Ordering::Relaxed);
            if n > 0 {
                out.push((*role, *kind, n));
            }
        }
    }
    out
}

/// The counter of one (role, kind), for tests and metrics.
pub fn count_of(role: &str, kind: &str) -> u64 {
    let (Some(r), Some(k)) = (
        ROLES.iter().position(|x| *x == role),
        KINDS.iter().position(|x| *x == kind),
    ) else {
        return 0;
    };
    COUNTS[r][k].load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sandpiper_guest::Inventory;
    use sandpiper_guest::model::{Rejection, Request, Scores, UnitInfo};
    use sandpiper_guest::native::NativeUnit;

    use super::*;
    use crate::pipeline::{OnFailure, Policy, Position, ScheduleError, ScheduleRequest, schedule};
    use crate::snapshot::{Host, Snapshot};
    use crate::unit::Unit;

    fn nan(_: &Inventory, _: &Request, candidates: &[u32]) -> Scores {
        let mut values = vec![1.0; candidates.len()];
        values[0] = f64::NAN;
        Scores::new(values)
    }

    fn flat(_: &Inventory, _: &Request, candidates: &[u32]) -> Scores {
        Scores::new(vec![1.0; candidates.len()])
    }

    fn too_many(_: &Inventory, _: &Request, _: &[u32]) -> Vec<Rejection> {
        vec![Rejection {
            reason: "not a candidate".to_owned(),
            hosts: vec![u32::MAX],
        }]
    }

    fn unit(name: &str, score: fn(&Inventory, &Request, &[u32]) -> Scores) -> Arc<dyn Unit> {
        Arc::new(NativeUnit {
            info: UnitInfo::new(name, "test"),
            filter: Some(too_many),
            score: Some(score),
            balance: None,
        })
    }

    fn inventory() -> Arc<Inventory> {
        let hosts = ["a", "b", "c"]
            .iter()
            .map(|id| Host {
                id: (*id).to_owned(),
                ..Host::default()
            })
            .collect();
        let cluster = Snapshot {
            hosts,
            vms: Vec::new(),
        }
        .build()
        .expect("valid");
        Arc::new(cluster.inventory)
    }

    #[test]
    fn a_failing_fail_open_unit_is_listed_and_counted() {
        let before = count_of("score", "invalid_output");
        let filters_before = count_of("filter", "invalid_output");
        let policy = Policy::builder()
            .filter_with(unit("Broken", flat), Position::Middle, OnFailure::FailOpen)
            .score(unit("Nan", nan), 1)
            .score(unit("Fine", flat), 1)
            .build()
            .expect("valid");
        let decision =
            schedule(&policy, &inventory(), &ScheduleRequest::default()).expect("decides");
        assert!(decision.chosen.is_some());
        assert_eq!(
            decision.explain.degraded(),
            [
                Degraded {
                    unit: "Broken".to_owned(),
                    role: "filter",
                    kind: "invalid_output",
                },
                Degraded {
                    unit: "Nan".to_owned(),
                    role: "score",
                    kind: "invalid_output",
                },
            ]
        );
        // Other tests run in parallel and may count too: at least ours.
        assert!(count_of("score", "invalid_output") > before);
        assert!(count_of("filter", "invalid_output") > filters_before);
        assert!(
            counts()
                .iter()
                .any(|(r, k, _)| (*r, *k) == ("score", "invalid_output"))
        );
    }

    #[test]
    fn a_failing_fail_closed_weight_fails_the_decision_naming_it() {
        let policy = Policy::builder()
            .score_with(unit("Nan", nan), 1, OnFailure::FailClosed)
            .score(unit("Fine", flat), 1)
            .build()
            .expect("valid");
        let error = schedule(&policy, &inventory(), &ScheduleRequest::default())
            .expect_err("a fail-closed weight failed");
        let ScheduleError::ScoreFailed { unit: name, failed } = error else {
            panic!("not a weight's failure: {error}");
        };
        assert_eq!(name, "Nan");
        assert_eq!(failed.error.code(), "invalid_output");
        // The default fails open: the same unit is left out and listed.
        let open = Policy::builder()
            .score(unit("Nan", nan), 1)
            .score(unit("Fine", flat), 1)
            .build()
            .expect("valid");
        let decision = schedule(&open, &inventory(), &ScheduleRequest::default()).expect("decides");
        assert_eq!(decision.explain.degraded().len(), 1);
    }

    #[test]
    fn a_decision_where_nothing_failed_is_not_degraded() {
        let policy = Policy::builder()
            .score(unit("Fine", flat), 1)
            .build()
            .expect("valid");
        let decision =
            schedule(&policy, &inventory(), &ScheduleRequest::default()).expect("decides");
        assert!(decision.explain.degraded().is_empty());
        let twice = merge([decision.explain.degraded(), decision.explain.degraded()]);
        assert!(twice.is_empty());
    }
}

//! Degraded decisions: a decision that went ahead although a unit failed
//! (a fail-open filter skipped, a fail-open weight, the default, left out
//! of the totals; a fail-closed one fails the request instead).
//! Such a decision answers 200, so the failure must be visible at the top
//! of the answer and in the decisions log, not only deep in the explain
//! record, and counted so that an operator sees a unit going bad.
//!
//! [`Explain::degraded`] lists a record's failed units; [`observe`] counts
//! every decision's unit calls, failed and skipped ones included, in the
//! process metrics (`crate::metrics`, `GET /metrics`).

use serde::Serialize;
use utoipa::ToSchema;

use super::explain::{BalanceExplain, Explain, FailureRecord};
use crate::metrics;
use crate::unit::{Failed, Role, Usage};

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

/// Counts a decision's unit calls in the process metrics
/// (`crate::metrics`), once per decision, from its explain record: every
/// call's time and fuel, and a fail-open failure as a failed and skipped
/// call. Called by `schedule` for every pick that answered.
pub(crate) fn observe(explain: &Explain) {
    // A skipped filter was not called; a skipped score has no usage.
    for f in explain.filters.iter().filter(|f| f.skipped.is_none()) {
        observe_call(&f.unit, Role::Filter, &f.usage, f.failure.as_ref());
    }
    for s in &explain.scores {
        if let Some(usage) = &s.usage {
            observe_call(&s.unit, Role::Score, usage, s.failure.as_ref());
        }
    }
}

/// Counts a call that stopped its decision (a fail-closed unit failed, a
/// unit was starved of CPU, a balance unit failed): nothing was skipped.
pub(crate) fn observe_failed(unit: &str, role: Role, failed: &Failed) {
    metrics::unit_call(unit, role, &failed.usage);
    metrics::unit_failed(unit, role, failed.error.code(), false);
}

fn observe_call(unit: &str, role: Role, usage: &Usage, failure: Option<&FailureRecord>) {
    metrics::unit_call(unit, role, usage);
    if let Some(failure) = failure {
        metrics::unit_failed(unit, role, failure.code, true);
    }
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
        vec![Rejection::new("not a candidate", vec![u32::MAX])]
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
        // Counted once, as skipped calls of their unit and role.
        let text = crate::metrics::encode().expect("encodes");
        for line in [
            "sandpiper_unit_executions_skipped_total{unit=\"Broken\",role=\"filter\",kind=\"invalid_output\"}",
            "sandpiper_unit_executions_skipped_total{unit=\"Nan\",role=\"score\",kind=\"invalid_output\"}",
            "sandpiper_unit_execution_failures_total{unit=\"Nan\",role=\"score\",kind=\"invalid_output\"}",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
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

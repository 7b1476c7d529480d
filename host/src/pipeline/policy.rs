//! A scheduling policy: which units filter, which score and with what
//! weight, which one balances, how scores combine, and the policy's
//! parameter values. A `Policy` can only be made by `PolicyBuilder::build`,
//! which checks every rule, so a policy in hand is always runnable.

use std::fmt;
use std::sync::{Arc, OnceLock};

use super::params::{ParamError, ParamTable, ParamValues, SpecError, TableError};
use crate::unit::{Role, Unit};

/// Where a filter runs relative to the others (oVirt's position −1/0/+1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// Runs before every other filter; at most one per policy.
    First,
    /// Runs between first and last, in the order the filters were added.
    #[default]
    Middle,
    /// Runs after every other filter; at most one per policy.
    Last,
}

/// What a failing unit (trap, limit, invalid output) does to the decision,
/// chosen per filter and per weight. The default is a filter's
/// ([`OnFailure::FailClosed`]); a weight's is [`DEFAULT_WEIGHT_ON_FAILURE`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The decision fails: a constraint that cannot be checked is not met,
    /// and a preference the policy insists on is not silently dropped.
    #[default]
    FailClosed,
    /// The unit is skipped, as oVirt does with external filters and
    /// weights, and the failure is recorded in the explain record and the
    /// answer's `degraded` list.
    FailOpen,
}

/// What a failing weight does unless the policy says otherwise: fail open,
/// as oVirt treats weights and as every weight did before the choice
/// existed. A weight only orders hosts every filter accepted, so deciding
/// without it still places the VM somewhere it fits.
pub const DEFAULT_WEIGHT_ON_FAILURE: OnFailure = OnFailure::FailOpen;

/// How the score units' answers become one total per host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combination {
    /// oVirt's rank selector: only each unit's ordering counts.
    #[default]
    Rank,
    /// Nova's weigher: each unit's spread, mapped to [0, 1], counts.
    Normalised,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Position::First => "first",
            Position::Middle => "middle",
            Position::Last => "last",
        })
    }
}

/// A filter of a policy.
#[derive(Clone)]
pub struct FilterStep {
    pub unit: Arc<dyn Unit>,
    pub position: Position,
    pub on_failure: OnFailure,
    /// Runs for the first instance of a multi-instance request only (Nova's
    /// `run_filter_once_per_request`); the pipeline itself decides one
    /// instance at a time and ignores it, `placement` applies it.
    pub run_once: bool,
}

/// A score unit of a policy with its weight. A factor of 0 disables the
/// unit without removing it (oVirt); the pipeline then does not call it.
#[derive(Clone)]
pub struct ScoreStep {
    pub unit: Arc<dyn Unit>,
    pub factor: u32,
    /// What the unit's failure does to the decision.
    pub on_failure: OnFailure,
}

/// The factor a score unit gets when none is given (oVirt's REST default).
pub const DEFAULT_FACTOR: u32 = 1;

/// A policy breaks one of the composition rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("unit `{unit}` appears more than once in one role of the policy")]
    DuplicateUnit { unit: String },
    #[error("unit `{unit}` is used as a {role} but does not export the {role} interface")]
    NotExported { unit: String, role: Role },
    #[error("filter `{unit}` cannot also be first: `{first}` already is")]
    SecondFirst { unit: String, first: String },
    #[error("filter `{unit}` cannot also be last: `{last}` already is")]
    SecondLast { unit: String, last: String },
    #[error("unit `{unit}` cannot also balance: `{balance}` already does")]
    SecondBalance { unit: String, balance: String },
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Param(#[from] ParamError),
}

impl From<TableError> for PolicyError {
    fn from(e: TableError) -> Self {
        match e {
            TableError::Spec(e) => PolicyError::Spec(e),
            TableError::Param(e) => PolicyError::Param(e),
        }
    }
}

/// A checked policy. Filters are held in run order: the first filter, the
/// middle ones in the order they were added, then the last.
#[derive(Clone)]
pub struct Policy {
    filters: Vec<FilterStep>,
    scores: Vec<ScoreStep>,
    balance: Option<Arc<dyn Unit>>,
    combination: Combination,
    params: ParamTable,
    /// The policy the later instances of a multi-instance request run:
    /// this one without its `run_once` filters. Built by `placement` on
    /// first use and shared by every clone of this policy, so a cached
    /// policy compiles its parameter patterns for it once, not per request.
    without_run_once: Arc<OnceLock<Policy>>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |u: &Arc<dyn Unit>| u.info().name.clone();
        f.debug_struct("Policy")
            .field(
                "filters",
                &self
                    .filters
                    .iter()
                    .map(|s| name(&s.unit))
                    .collect::<Vec<_>>(),
            )
            .field(
                "scores",
                &self
                    .scores
                    .iter()
                    .map(|s| (name(&s.unit), s.factor))
                    .collect::<Vec<_>>(),
            )
            .field("balance", &self.balance.as_ref().map(name))
            .field("combination", &self.combination)
            .field("params", self.params.policy_values())
            .finish()
    }
}

impl Policy {
    /// Where the policy without its `run_once` filters is kept once built
    /// (see the field); shared by clones.
    pub(crate) fn without_run_once(&self) -> &OnceLock<Policy> {
        &self.without_run_once
    }

    /// Starts an empty policy (rank combination, no units, no values).
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::default()
    }

    /// The filters, in run order.
    pub fn filters(&self) -> &[FilterStep] {
        &self.filters
    }

    /// The score units, in the order they were added.
    pub fn scores(&self) -> &[ScoreStep] {
        &self.scores
    }

    /// The balance unit, if any.
    pub fn balance_unit(&self) -> Option<&Arc<dyn Unit>> {
        self.balance.as_ref()
    }

    pub fn combination(&self) -> Combination {
        self.combination
    }

    /// The policy's own parameter values.
    pub fn params(&self) -> &ParamValues {
        self.params.policy_values()
    }

    /// Every unit of the policy: the filters in run order, the score
    /// units, then the balance unit.
    pub fn units(&self) -> impl Iterator<Item = &Arc<dyn Unit>> {
        self.filters
            .iter()
            .map(|s| &s.unit)
            .chain(self.scores.iter().map(|s| &s.unit))
            .chain(self.balance.as_ref())
    }

    /// Whether a filter or score unit declares `per-host`: only then can a
    /// decision reuse kept answers (`schedule_reusing`), so only then is
    /// it worth stamping the hosts.
    pub fn has_per_host_units(&self) -> bool {
        self.filters
            .iter()
            .map(|s| &s.unit)
            .chain(self.scores.iter().map(|s| &s.unit))
            .any(|unit| unit.info().per_host)
    }

    /// Checks a cluster's overrides against the policy's units, so that a
    /// bad override is refused when it is set rather than at the next
    /// decision.
    pub fn check_overrides(&self, overrides: &ParamValues) -> Result<(), ParamError> {
        self.params.check(overrides)
    }

    pub(crate) fn param_table(&self) -> &ParamTable {
        &self.params
    }

    /// Parameter slot of filter `index` (slots follow the run order:
    /// filters, then score units, then the balance unit).
    pub(crate) fn filter_slot(&self, index: usize) -> usize {
        index
    }

    pub(crate) fn score_slot(&self, index: usize) -> usize {
        self.filters.len() + index
    }

    pub(crate) fn balance_slot(&self) -> usize {
        self.filters.len() + self.scores.len()
    }
}

/// The values of `values` whose keys one of `units` declares: what is left
/// of a policy's values or a cluster's overrides when some units are left
/// out (disabled units, once-per-request filters), since a value no unit
/// declares would fail the policy's checks.
pub fn only_declared<'a>(
    values: &ParamValues,
    units: impl IntoIterator<Item = &'a Arc<dyn Unit>>,
) -> ParamValues {
    let declared: std::collections::BTreeSet<&str> = units
        .into_iter()
        .flat_map(|u| u.info().params.iter().map(|p| p.name.as_str()))
        .collect();
    values
        .iter()
        .filter(|(k, _)| declared.contains(k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Collects a policy's parts; `build` checks them.
#[derive(Clone, Default)]
pub struct PolicyBuilder {
    filters: Vec<FilterStep>,
    scores: Vec<ScoreStep>,
    balance: Vec<Arc<dyn Unit>>,
    combination: Combination,
    params: ParamValues,
}

impl PolicyBuilder {
    /// Adds a fail-closed filter in the middle position.
    pub fn filter(self, unit: Arc<dyn Unit>) -> Self {
        self.filter_with(unit, Position::Middle, OnFailure::FailClosed)
    }

    /// Adds a filter at `position` with the given failure behaviour.
    pub fn filter_with(
        self,
        unit: Arc<dyn Unit>,
        position: Position,
        on_failure: OnFailure,
    ) -> Self {
        self.filter_step(unit, position, on_failure, false)
    }

    /// Adds a filter at `position` with the given failure behaviour, run
    /// once per multi-instance request when `run_once` (see
    /// [`FilterStep::run_once`]).
    pub fn filter_step(
        mut self,
        unit: Arc<dyn Unit>,
        position: Position,
        on_failure: OnFailure,
        run_once: bool,
    ) -> Self {
        self.filters.push(FilterStep {
            unit,
            position,
            on_failure,
            run_once,
        });
        self
    }

    /// Adds a score unit with weight `factor`, failing open
    /// ([`DEFAULT_WEIGHT_ON_FAILURE`]).
    pub fn score(self, unit: Arc<dyn Unit>, factor: u32) -> Self {
        self.score_with(unit, factor, DEFAULT_WEIGHT_ON_FAILURE)
    }

    /// Adds a score unit with weight `factor` and the given failure
    /// behaviour.
    pub fn score_with(mut self, unit: Arc<dyn Unit>, factor: u32, on_failure: OnFailure) -> Self {
        self.scores.push(ScoreStep {
            unit,
            factor,
            on_failure,
        });
        self
    }

    /// Sets the balance unit (a second one is an error at `build`).
    pub fn balance(mut self, unit: Arc<dyn Unit>) -> Self {
        self.balance.push(unit);
        self
    }

    pub fn combination(mut self, combination: Combination) -> Self {
        self.combination = combination;
        self
    }

    /// Sets the policy's value for parameter `key`.
    pub fn param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.insert(key.into(), value.into());
        self
    }

    /// Sets all of the policy's parameter values at once.
    pub fn params(mut self, params: ParamValues) -> Self {
        self.params = params;
        self
    }

    /// Checks the composition rules and the parameters and orders the
    /// filters.
    pub fn build(self) -> Result<Policy, PolicyError> {
        let PolicyBuilder {
            filters,
            scores,
            balance,
            combination,
            params,
        } = self;

        let roles = filters
            .iter()
            .map(|s| (&s.unit, Role::Filter))
            .chain(scores.iter().map(|s| (&s.unit, Role::Score)))
            .chain(balance.iter().map(|u| (u, Role::Balance)));
        // A unit fills each role at most once, but may fill several roles:
        // oVirt's `VmAffinityGroups` or `HA` is one unit used as a filter
        // and as a weight, `OptimalForEvenGuestDistribution` as a weight and
        // as the balancer (oVirt has two units of one name for each).
        let mut seen: Vec<(&str, Role)> = Vec::new();
        for (unit, role) in roles {
            let name = unit_name(unit);
            if !unit.exports().has(role) {
                return Err(PolicyError::NotExported {
                    unit: name.to_owned(),
                    role,
                });
            }
            if seen.contains(&(name, role)) {
                return Err(PolicyError::DuplicateUnit {
                    unit: name.to_owned(),
                });
            }
            seen.push((name, role));
        }

        let mut balance = balance.into_iter();
        let balance_unit = balance.next();
        if let (Some(first), Some(second)) = (&balance_unit, balance.next()) {
            return Err(PolicyError::SecondBalance {
                unit: unit_name(&second).to_owned(),
                balance: unit_name(first).to_owned(),
            });
        }

        let filters = order_filters(filters)?;

        let units = filters
            .iter()
            .map(|s| &s.unit)
            .chain(scores.iter().map(|s| &s.unit))
            .chain(balance_unit.iter())
            .map(|u| (unit_name(u), u.info().params.as_slice()));
        let params = ParamTable::new(units, params)?;

        Ok(Policy {
            filters,
            scores,
            balance: balance_unit,
            combination,
            params,
            without_run_once: Arc::default(),
        })
    }
}

fn unit_name(unit: &Arc<dyn Unit>) -> &str {
    &unit.info().name
}

/// Puts the first filter first and the last one last, keeping the order in
/// which the middle ones were added; refuses a second first or last.
fn order_filters(filters: Vec<FilterStep>) -> Result<Vec<FilterStep>, PolicyError> {
    let mut first: Option<FilterStep> = None;
    let mut last: Option<FilterStep> = None;
    let mut middle = Vec::with_capacity(filters.len());
    for step in filters {
        match step.position {
            Position::First => match &first {
                Some(existing) => {
                    return Err(PolicyError::SecondFirst {
                        unit: unit_name(&step.unit).to_owned(),
                        first: unit_name(&existing.unit).to_owned(),
                    });
                }
                None => first = Some(step),
            },
            Position::Last => match &last {
                Some(existing) => {
                    return Err(PolicyError::SecondLast {
                        unit: unit_name(&step.unit).to_owned(),
                        last: unit_name(&existing.unit).to_owned(),
                    });
                }
                None => last = Some(step),
            },
            Position::Middle => middle.push(step),
        }
    }
    Ok(first.into_iter().chain(middle).chain(last).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandpiper_guest::native::NativeUnit;
    use sandpiper_model::Inventory;
    use sandpiper_model::{Request, Scores, UnitInfo};

    fn no_rejections(_: &Inventory, _: &Request, _: &[u32]) -> Vec<sandpiper_model::Rejection> {
        Vec::new()
    }

    fn flat(_: &Inventory, _: &Request, candidates: &[u32]) -> Scores {
        Scores::new(vec![1.0; candidates.len()])
    }

    /// A unit exporting filter and score, like oVirt's `VmAffinityGroups`.
    fn filter_and_score() -> Arc<dyn Unit> {
        Arc::new(NativeUnit {
            info: UnitInfo::new("Both", "filters and scores"),
            filter: Some(no_rejections),
            score: Some(flat),
            balance: None,
        })
    }

    #[test]
    fn a_unit_may_fill_two_roles_but_each_only_once() {
        let unit = filter_and_score();
        let policy = Policy::builder()
            .filter(Arc::clone(&unit))
            .score(Arc::clone(&unit), 1)
            .build();
        assert!(policy.is_ok(), "filter and score: {:?}", policy.err());

        let twice = Policy::builder()
            .filter(Arc::clone(&unit))
            .filter(Arc::clone(&unit))
            .build();
        assert!(matches!(twice, Err(PolicyError::DuplicateUnit { unit }) if unit == "Both"));

        let scored_twice = Policy::builder()
            .score(Arc::clone(&unit), 1)
            .score(unit, 2)
            .build();
        assert!(matches!(
            scored_twice,
            Err(PolicyError::DuplicateUnit { .. })
        ));
    }
}

//! Unit cases: fixture files that pin down what one unit does, as data.
//!
//! A fixture is a cluster snapshot (the [`crate::snapshot`] format) plus a
//! list of cases; each case gives the VM, parameters, hints and candidates
//! of one call and what the unit must answer: the exact set of rejected
//! hosts (each with a substring of its reason), scores for some hosts, or
//! the balance unit's migration (`null` for none). Built-in units keep
//! theirs in `policies/<unit>/cases/*.json`; the test suite runs every case
//! natively and sandboxed and requires both to match and to agree, and
//! `sandpiper unit test` runs a fixture against an uploaded module.
//!
//! ```json
//! { "description": "...", "hosts": [...], "vms": [...],
//!   "cases": [ { "name": "...", "vm": {...}, "params": {"K": "v"},
//!                "hints": {"k": "v"}, "candidates": ["h1", "h2"],
//!                "expect": { "rejected": {"h2": "needs 4096 MiB"},
//!                            "scores": {"h1": 1.0},
//!                            "migration": {"vm": "vm1", "destinations": ["h2"]} } } ] }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use sandpiper_model::{BalanceRequest, Migration, Rejection, Request, Scores, VmText};
use sandpiper_model::{Inventory, reason};
use serde::{Deserialize, Deserializer, Serialize};

use crate::pipeline::{ParamValues, UnitParamsError, unit_params};
use crate::snapshot::{
    Cluster, Hints, Host, HostIndex, RunningVm, Snapshot, SnapshotError, VmSpec, hint_pairs,
};
use crate::unit::{CallResult, Called, Unit};

/// Largest relative difference at which an expected score still matches:
/// fixtures are written by hand with a few decimals, and the same unit
/// built for two targets must agree exactly anyway (checked separately).
pub const SCORE_TOLERANCE: f64 = 1e-9;

/// A fixture file: a snapshot and the cases to run over it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub hosts: Vec<Host>,
    #[serde(default)]
    pub vms: Vec<RunningVm>,
    pub cases: Vec<Case>,
}

/// One call of the unit and what it must answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    #[serde(default)]
    pub vm: VmSpec,
    #[serde(default)]
    pub params: ParamValues,
    #[serde(default)]
    pub hints: Hints,
    /// Host ids; every host of the snapshot when absent.
    #[serde(default)]
    pub candidates: Option<Vec<String>>,
    pub expect: Expect,
}

/// What the unit must answer; each part present calls the matching role.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Exactly the hosts the filter rejects, each with a substring of its
    /// reason.
    #[serde(default)]
    pub rejected: Option<BTreeMap<String, String>>,
    /// Scores of the listed hosts (others are not checked).
    #[serde(default)]
    pub scores: Option<BTreeMap<String, f64>>,
    /// The balance unit's proposal; `null` means none.
    #[serde(default, deserialize_with = "present")]
    pub migration: Option<Option<ExpectedMigration>>,
}

/// A proposal by ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedMigration {
    pub vm: String,
    pub destinations: Vec<String>,
}

/// Tells a present `null` (`Some(None)`) from an absent field (`None`).
fn present<'de, D, T>(de: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(de).map(Some)
}

/// A fixture or case that cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CaseError {
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("cases[{case}].params: {error}")]
    Params { case: usize, error: UnitParamsError },
}

/// A fixture with its snapshot built, ready to run.
pub struct Prepared {
    pub fixture: Fixture,
    pub inventory: Arc<Inventory>,
    pub hosts: HostIndex,
}

impl Fixture {
    /// Parses a fixture, naming the path of the first bad field on error.
    pub fn from_json(text: &str) -> Result<Self, SnapshotError> {
        crate::snapshot::from_json(text)
    }

    /// Builds the fixture's snapshot.
    pub fn prepare(self) -> Result<Prepared, CaseError> {
        let snapshot = Snapshot {
            hosts: self.hosts.clone(),
            vms: self.vms.clone(),
        };
        let Cluster { inventory, hosts } = crate::inputs::build_checked(&snapshot)?;
        Ok(Prepared {
            fixture: self,
            inventory: Arc::new(inventory),
            hosts: Arc::unwrap_or_clone(hosts),
        })
    }
}

/// What a unit answered to one case, for the parts the case expects.
#[derive(Debug)]
pub struct Answers {
    pub rejected: Option<CallResult<Vec<Rejection>>>,
    pub scores: Option<CallResult<Scores>>,
    pub migration: Option<CallResult<Option<Migration>>>,
    /// The candidates the unit was given, to read scores by host.
    pub candidates: Vec<u32>,
}

impl Prepared {
    /// Calls `unit` for case `index`, once per role the case expects.
    pub fn run(&self, unit: &dyn Unit, index: usize) -> Result<Answers, CaseError> {
        let case = &self.fixture.cases[index];
        let candidates = match &case.candidates {
            Some(ids) => self
                .hosts
                .resolve_all(ids, &format!("cases[{index}].candidates"))?,
            None => (0..self.hosts.len() as u32).collect(),
        };
        let info = unit.info();
        let params = unit_params(&info.name, &info.params, &case.params)
            .map_err(|error| CaseError::Params { case: index, error })?;
        let request = Request {
            vm: crate::inputs::to_vm_checked(&case.vm, &self.hosts, &format!("cases[{index}].vm"))?,
            params: params.clone(),
            hints: hint_pairs(&case.hints),
        };
        let expect = &case.expect;
        Ok(Answers {
            rejected: expect.rejected.as_ref().map(|_| {
                unit.filter(&self.inventory, &request, &candidates)
                    .map(|called| Called {
                        value: as_sentences(called.value),
                        usage: called.usage,
                        read: called.read,
                    })
            }),
            scores: expect
                .scores
                .as_ref()
                .map(|_| unit.score(&self.inventory, &request, &candidates)),
            migration: expect.migration.as_ref().map(|_| {
                unit.balance(
                    &self.inventory,
                    &BalanceRequest {
                        params,
                        candidates: candidates.clone(),
                    },
                )
            }),
            candidates,
        })
    }

    /// How `answers` differ from case `index`'s expectation, one line per
    /// difference; empty when they match.
    pub fn check(&self, index: usize, answers: &Answers) -> Vec<String> {
        let expect = &self.fixture.cases[index].expect;
        let mut diffs = Vec::new();
        if let (Some(expected), Some(answer)) = (&expect.rejected, &answers.rejected) {
            match answer {
                Err(failed) => diffs.push(format!("filter failed: {}", failed.error)),
                Ok(called) => {
                    // Already sentences (`run` writes templates out).
                    let got = self.reasons_by_id(&called.value);
                    for (host, want) in expected {
                        match got.get(host.as_str()) {
                            None => diffs.push(format!(
                                "rejected: {host} expected rejected (\"{want}\"), it survived"
                            )),
                            Some(reason) if !reason.contains(want.as_str()) => {
                                diffs.push(format!(
                                    "rejected: {host} reason \"{reason}\" does not contain \"{want}\""
                                ));
                            }
                            Some(_) => {}
                        }
                    }
                    for (host, reason) in &got {
                        if !expected.contains_key(*host) {
                            diffs.push(format!(
                                "rejected: {host} rejected (\"{reason}\") but not expected"
                            ));
                        }
                    }
                }
            }
        }
        if let (Some(expected), Some(answer)) = (&expect.scores, &answers.scores) {
            match answer {
                Err(failed) => diffs.push(format!("score failed: {}", failed.error)),
                Ok(called) => {
                    for (host, &want) in expected {
                        let got = self.hosts.index(host).and_then(|h| {
                            let i = answers.candidates.iter().position(|&c| c == h)?;
                            called.value.values.get(i).copied()
                        });
                        match got {
                            None => diffs.push(format!("scores: {host} is not a scored candidate")),
                            Some(got) if !close(got, want) => {
                                diffs.push(format!("scores: {host} expected {want}, got {got}"));
                            }
                            Some(_) => {}
                        }
                    }
                }
            }
        }
        if let (Some(expected), Some(answer)) = (&expect.migration, &answers.migration) {
            match answer {
                Err(failed) => diffs.push(format!("balance failed: {}", failed.error)),
                Ok(called) => {
                    let got = called.value.as_ref().map(|m| self.migration_by_id(m));
                    if got.as_ref() != expected.as_ref() {
                        diffs.push(format!(
                            "migration: expected {}, got {}",
                            describe(expected.as_ref()),
                            describe(got.as_ref())
                        ));
                    }
                }
            }
        }
        diffs
    }

    /// How two units' answers to the same case differ (a native build and a
    /// sandboxed build of one unit must answer identically); empty when
    /// they agree.
    pub fn compare(&self, a: &Answers, b: &Answers) -> Vec<String> {
        let mut diffs = Vec::new();
        if let Some((x, y)) = both_ok(&a.rejected, &b.rejected) {
            // Sentences (`run` writes templates out), so that differing
            // figures count too.
            let (x, y) = (self.reasons_by_id(&x.value), self.reasons_by_id(&y.value));
            if x != y {
                diffs.push(format!("rejections differ: {x:?} vs {y:?}"));
            }
        }
        if let Some((x, y)) = both_ok(&a.scores, &b.scores)
            && x.value != y.value
        {
            diffs.push(format!("scores differ: {:?} vs {:?}", x.value, y.value));
        }
        if let Some((x, y)) = both_ok(&a.migration, &b.migration)
            && x.value != y.value
        {
            diffs.push(format!("migrations differ: {:?} vs {:?}", x.value, y.value));
        }
        for (role, x, y) in [
            (
                "filter",
                a.rejected.as_ref().map(|r| r.is_ok()),
                b.rejected.as_ref().map(|r| r.is_ok()),
            ),
            (
                "score",
                a.scores.as_ref().map(|r| r.is_ok()),
                b.scores.as_ref().map(|r| r.is_ok()),
            ),
            (
                "balance",
                a.migration.as_ref().map(|r| r.is_ok()),
                b.migration.as_ref().map(|r| r.is_ok()),
            ),
        ] {
            if x != y {
                diffs.push(format!("{role}: one call failed and the other did not"));
            }
        }
        diffs
    }

    /// A host's id, or `<out of range>` for an index outside the snapshot
    /// (a unit's mistake, shown rather than hidden).
    pub fn host_id(&self, host: u32) -> &str {
        self.hosts.id(host).unwrap_or("<out of range>")
    }

    /// Rejected host id → reason.
    fn reasons_by_id<'a>(&'a self, rejections: &'a [Rejection]) -> BTreeMap<&'a str, &'a str> {
        rejections
            .iter()
            .flat_map(|r| {
                r.hosts
                    .iter()
                    .map(move |&h| (self.host_id(h), r.reason.as_str()))
            })
            .collect()
    }

    /// A proposal as the fixture writes one: by VM and host ids.
    pub fn migration_by_id(&self, migration: &Migration) -> ExpectedMigration {
        let vm = self
            .inventory
            .vm_text(VmText::Id)
            .get(migration.vm as usize)
            .to_owned();
        ExpectedMigration {
            vm: if vm.is_empty() {
                format!("#{}", migration.vm)
            } else {
                vm
            },
            destinations: migration
                .destinations
                .iter()
                .map(|&h| {
                    self.hosts
                        .id(h)
                        .map_or_else(|| format!("#{h}"), str::to_owned)
                })
                .collect(),
        }
    }
}

/// A filter's answer as a person reads it, which is what fixtures expect:
/// reasons sent as templates with figures written out
/// ([`reason::into_sentences`]). A group whose figures do not fit its
/// template keeps its text with the mismatch appended, so the case fails
/// visibly rather than the runner guessing.
fn as_sentences(mut rejections: Vec<Rejection>) -> Vec<Rejection> {
    for group in &mut rejections {
        if let Err(mismatch) = reason::check(&group.reason, group.hosts.len(), group.figures.len())
        {
            group.reason = format!("{} (figures do not fit: {mismatch})", group.reason);
            group.figures.clear();
        }
    }
    reason::into_sentences(rejections)
}

/// The two answers, when both calls succeeded.
fn both_ok<'a, T>(
    x: &'a Option<CallResult<T>>,
    y: &'a Option<CallResult<T>>,
) -> Option<(&'a Called<T>, &'a Called<T>)> {
    match (x, y) {
        (Some(Ok(x)), Some(Ok(y))) => Some((x, y)),
        _ => None,
    }
}

fn close(got: f64, want: f64) -> bool {
    got == want || (got - want).abs() <= SCORE_TOLERANCE * got.abs().max(want.abs())
}

fn describe(migration: Option<&ExpectedMigration>) -> String {
    match migration {
        None => "no migration".to_owned(),
        Some(m) => format!("{} to one of {:?}", m.vm, m.destinations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_with_inconsistent_hardware_is_refused_with_the_field() {
        let fixture = Fixture::from_json(
            r#"{"hosts": [{"id": "h", "hardware": {"numa_cells": [
                   {"node": 0, "cpus": [0], "dedicated_cpus": [1]}]}}],
                "cases": []}"#,
        )
        .expect("valid JSON");
        match fixture.prepare() {
            Err(CaseError::Snapshot(e)) => {
                assert_eq!(e.path, "hosts[0].hardware.numa_cells[0].dedicated_cpus[0]")
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("an inconsistent fixture was accepted"),
        }
    }
}

//! What ships inside the binary: the built-in units (every crate under
//! `policies/ovirt/` and `policies/nova/`, compiled to a component) and the
//! built-in policies (`policies/defaults/*.json`), which name their units by
//! name. The `sandpiper-builtins` crate lists both from the folder tree;
//! this module parses the policies.

use std::collections::BTreeMap;

use serde::Deserialize;
use uuid::Uuid;

use crate::pipeline::{Combination, DEFAULT_WEIGHT_ON_FAILURE, OnFailure, Position};

/// A unit shipped inside the binary; every one is in [`UNITS`], ordered by
/// package name. Every built-in policy file is in [`POLICY_FILES`] as (file
/// name, JSON text); parse one with [`BuiltinPolicy::parse`].
pub use sandpiper_builtins::{BuiltinUnit, POLICY_FILES, UNITS, unit};

/// One file of `policies/defaults/`: a policy as data, its units named by
/// the names they declare in `info()`. The server stores each one, locked,
/// at every start; its id is the file's (oVirt's GUIDs for oVirt's
/// policies, so engines that know them find them).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinPolicy {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    /// The policy clusters get when they name none (exactly one file says
    /// so); it only becomes the default when no policy is.
    pub default: bool,
    pub mode: Combination,
    pub filters: Vec<BuiltinFilter>,
    pub weights: Vec<BuiltinWeight>,
    pub balance: Option<String>,
    /// Parameter values (oVirt's policy properties), checked against the
    /// units' declared regexes when the policy is assembled.
    pub properties: BTreeMap<String, String>,
}

/// A filter slot of a built-in policy.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinFilter {
    pub unit: String,
    #[serde(default)]
    pub position: Position,
    /// Runs for the first instance of a multi-instance request only (Nova's
    /// `run_filter_once_per_request`); stored as `FilterLink::run_once`.
    #[serde(default)]
    pub run_once: bool,
}

/// A weight slot of a built-in policy.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinWeight {
    pub unit: String,
    pub factor: u32,
    /// What the weight's failure does to a decision; `fail_open` when
    /// absent (`pipeline::DEFAULT_WEIGHT_ON_FAILURE`).
    #[serde(default = "weight_on_failure")]
    pub on_failure: OnFailure,
}

fn weight_on_failure() -> OnFailure {
    DEFAULT_WEIGHT_ON_FAILURE
}

impl BuiltinPolicy {
    /// Parses a policy file; the error names the file and what is wrong.
    pub fn parse(file: &str, json: &str) -> Result<BuiltinPolicy, String> {
        serde_json::from_str(json).map_err(|e| format!("policies/defaults/{file}: {e}"))
    }

    /// Every built-in policy, parsed.
    pub fn all() -> Result<Vec<BuiltinPolicy>, String> {
        POLICY_FILES
            .iter()
            .map(|(file, json)| BuiltinPolicy::parse(file, json))
            .collect()
    }

    /// Every unit the policy names, in any role.
    pub fn unit_names(&self) -> impl Iterator<Item = &str> {
        self.filters
            .iter()
            .map(|f| f.unit.as_str())
            .chain(self.weights.iter().map(|w| w.unit.as_str()))
            .chain(self.balance.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_file_parses_and_one_is_the_default() {
        // That every file is embedded is `sandpiper-builtins`' test.
        assert!(!POLICY_FILES.is_empty());
        let policies = BuiltinPolicy::all().unwrap();
        let defaults: Vec<&str> = policies
            .iter()
            .filter(|p| p.default)
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(defaults, ["none"], "exactly one default policy, oVirt's");
    }

    #[test]
    fn every_builtin_unit_is_embedded_as_a_component() {
        assert!(!UNITS.is_empty());
        for unit in UNITS {
            assert!(
                wasmparser::Parser::is_component(unit.wasm),
                "{}",
                unit.package
            );
        }
    }
}

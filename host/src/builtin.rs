//! What ships inside the binary: the built-in units (every crate under
//! `policies/`, compiled to a component by `build.rs`) and the built-in
//! policies (`policies/defaults/*.json`), which name their units by name.

use std::collections::BTreeMap;

use serde::Deserialize;
use uuid::Uuid;

use crate::pipeline::{Combination, Position};

/// A unit shipped inside the binary.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinUnit {
    /// Its Cargo package, e.g. `sandpiper-policy-memory`.
    pub package: &'static str,
    /// Its directory under `policies/`, e.g. `memory`: stable across
    /// versions, so it can seed the unit's id.
    pub name: &'static str,
    /// The component.
    pub wasm: &'static [u8],
}

/// Every built-in unit, ordered by package name.
pub static UNITS: &[BuiltinUnit] = include!(concat!(env!("OUT_DIR"), "/builtin_units.rs"));

/// Every built-in policy file as (file name, JSON text), ordered by file
/// name. Parse one with [`BuiltinPolicy::parse`].
pub static POLICY_FILES: &[(&str, &str)] =
    include!(concat!(env!("OUT_DIR"), "/builtin_policies.rs"));

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
    /// What a failure of the unit does to a decision; fail-open (left out,
    /// the decision marked degraded) unless the file says otherwise.
    #[serde(default = "default_weight_on_failure")]
    pub on_failure: crate::pipeline::OnFailure,
}

fn default_weight_on_failure() -> crate::pipeline::OnFailure {
    crate::pipeline::DEFAULT_WEIGHT_ON_FAILURE
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
    fn every_policy_file_is_embedded_and_parses() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/defaults");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".json"))
            .collect();
        files.sort();
        let embedded: Vec<&str> = POLICY_FILES.iter().map(|(file, _)| *file).collect();
        assert_eq!(embedded, files);
        let policies = BuiltinPolicy::all().unwrap();
        let defaults: Vec<&str> = policies
            .iter()
            .filter(|p| p.default)
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(defaults, ["none"], "exactly one default policy, oVirt's");
    }

    #[test]
    fn every_policy_crate_is_embedded_as_a_component() {
        let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
        let mut dirs: Vec<String> = std::fs::read_dir(&policies)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                std::fs::read_to_string(path.join("Cargo.toml"))
                    .is_ok_and(|manifest| manifest.contains("name = \"sandpiper-policy-"))
            })
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        dirs.sort();
        let names: Vec<&str> = UNITS.iter().map(|unit| unit.name).collect();
        assert_eq!(names, dirs);
        for unit in UNITS {
            assert!(
                wasmparser::Parser::is_component(unit.wasm),
                "{}",
                unit.package
            );
        }
    }
}

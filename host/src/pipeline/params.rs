//! Unit parameters: which keys a policy accepts, whether a value is allowed,
//! and which value each unit receives.
//!
//! Every unit declares its parameters (`ParamSpec`: name, default, pattern)
//! in its `info()`. A key is known to a policy when at least one of the
//! policy's units declares it; several units may share a key (oVirt's
//! `HighUtilization` is read by a filter and a balancer), and a value must
//! then match every declaring unit's pattern. Patterns are matched against
//! the whole value, as Java's `String.matches` does in oVirt: the host wraps
//! each one as `^(?:pattern)$`.
//!
//! The value a unit receives for one of its keys is the cluster's override,
//! else the policy's value, else the unit's default; a unit receives exactly
//! the keys it declares, in the order it declares them.

use std::collections::BTreeMap;

use regex::{Regex, RegexBuilder};
use sandpiper_model::{KeyValue, ParamSpec};

/// Largest compiled size of one parameter pattern, in bytes. Patterns come
/// from units, which are untrusted; one MiB holds any sensible validation
/// pattern hundreds of times over, while regex's own default (10 MiB) would
/// let a hostile unit make every policy load allocate tens of MiB.
pub const PATTERN_SIZE_LIMIT_BYTES: usize = 1 << 20;

/// Parameter values by key, as a policy or a cluster sets them. Ordered so
/// that errors and explain records come out in a stable order.
pub type ParamValues = BTreeMap<String, String>;

/// A parameter key or value is not acceptable for a policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("unknown parameter `{key}`: no unit of the policy declares it")]
    UnknownKey { key: String },
    #[error(
        "parameter `{key}` = \"{value}\" does not match `{pattern}` (declared by unit `{unit}`)"
    )]
    BadValue {
        key: String,
        value: String,
        pattern: String,
        unit: String,
    },
}

/// A unit's parameter declaration is itself unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "unit `{unit}` declares parameter `{key}` with an invalid pattern `{pattern}`: {reason}"
    )]
    BadPattern {
        unit: String,
        key: String,
        pattern: String,
        reason: String,
    },
    #[error("unit `{unit}` declares parameter `{key}` twice")]
    DuplicateKey { unit: String, key: String },
    #[error(
        "unit `{unit}` declares parameter `{key}` with default \"{value}\", which does not match its own pattern `{pattern}`"
    )]
    BadDefault {
        unit: String,
        key: String,
        value: String,
        pattern: String,
    },
}

/// One declared parameter with its pattern compiled.
#[derive(Debug, Clone)]
struct Declared {
    name: String,
    default_value: String,
    pattern: String,
    whole: Regex,
}

/// The parameters of one unit of a policy.
#[derive(Debug, Clone)]
struct UnitParams {
    unit: String,
    declared: Vec<Declared>,
}

/// The parameters of every unit of a policy, addressed by the unit's slot
/// (its position in the policy), plus the policy's own values.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParamTable {
    units: Vec<UnitParams>,
    policy_values: ParamValues,
}

/// The parameters each unit of a policy receives for one call, by slot.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolved {
    per_unit: Vec<Vec<KeyValue>>,
}

impl Resolved {
    /// The parameters of the unit in `slot`.
    pub(crate) fn for_slot(&self, slot: usize) -> &[KeyValue] {
        self.per_unit.get(slot).map_or(&[], Vec::as_slice)
    }
}

impl ParamTable {
    /// Compiles the declarations of `units` (name and specs, in slot order)
    /// and checks the policy's own values against them.
    pub(crate) fn new<'a>(
        units: impl IntoIterator<Item = (&'a str, &'a [ParamSpec])>,
        policy_values: ParamValues,
    ) -> Result<Self, TableError> {
        let mut table = ParamTable {
            units: Vec::new(),
            policy_values: ParamValues::new(),
        };
        for (unit, specs) in units {
            table.units.push(compile_unit(unit, specs)?);
        }
        table.check(&policy_values)?;
        table.policy_values = policy_values;
        Ok(table)
    }

    /// Checks that every key of `values` is declared by some unit and that
    /// each value matches every declaring unit's pattern.
    pub(crate) fn check(&self, values: &ParamValues) -> Result<(), ParamError> {
        for (key, value) in values {
            let mut declared = false;
            for unit in &self.units {
                for param in unit.declared.iter().filter(|p| &p.name == key) {
                    declared = true;
                    if !param.whole.is_match(value) {
                        return Err(ParamError::BadValue {
                            key: key.clone(),
                            value: value.clone(),
                            pattern: param.pattern.clone(),
                            unit: unit.unit.clone(),
                        });
                    }
                }
            }
            if !declared {
                return Err(ParamError::UnknownKey { key: key.clone() });
            }
        }
        Ok(())
    }

    /// The parameters every unit receives, given the cluster's overrides
    /// (checked here: an override is as untrusted as a policy value).
    pub(crate) fn resolve(&self, overrides: &ParamValues) -> Result<Resolved, ParamError> {
        self.check(overrides)?;
        let per_unit = self
            .units
            .iter()
            .map(|unit| {
                unit.declared
                    .iter()
                    .map(|param| {
                        let value = overrides
                            .get(&param.name)
                            .or_else(|| self.policy_values.get(&param.name))
                            .unwrap_or(&param.default_value);
                        KeyValue::new(param.name.clone(), value.clone())
                    })
                    .collect()
            })
            .collect();
        Ok(Resolved { per_unit })
    }

    /// The policy's own values.
    pub(crate) fn policy_values(&self) -> &ParamValues {
        &self.policy_values
    }
}

/// The parameters one unit receives for `values` (keys it does not declare
/// are refused), as the pipeline would pass them: each declared key with
/// its value from `values`, else its default. For running a unit on its
/// own, as unit cases and `sandpiper unit test` do.
pub fn unit_params(
    unit: &str,
    specs: &[ParamSpec],
    values: &ParamValues,
) -> Result<Vec<KeyValue>, UnitParamsError> {
    let table = ParamTable::new([(unit, specs)], ParamValues::new()).map_err(|e| match e {
        TableError::Spec(e) => UnitParamsError::Spec(e),
        TableError::Param(e) => UnitParamsError::Param(e),
    })?;
    let resolved = table.resolve(values)?;
    Ok(resolved.for_slot(0).to_vec())
}

/// Why [`unit_params`] could not give a unit its parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitParamsError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Param(#[from] ParamError),
}

/// Either a unit's declaration or a policy value was unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TableError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Param(#[from] ParamError),
}

/// Checks a unit's parameter declarations as a policy will use them:
/// distinct names, patterns that compile (anchored, within
/// [`PATTERN_SIZE_LIMIT_BYTES`]) and defaults that match them. Upload
/// validation calls this, so a unit that loads is a unit every policy can
/// compile.
pub fn check_specs(unit: &str, specs: &[ParamSpec]) -> Result<(), SpecError> {
    compile_unit(unit, specs).map(drop)
}

fn compile_unit(unit: &str, specs: &[ParamSpec]) -> Result<UnitParams, SpecError> {
    let mut declared: Vec<Declared> = Vec::with_capacity(specs.len());
    for spec in specs {
        if declared.iter().any(|d| d.name == spec.name) {
            return Err(SpecError::DuplicateKey {
                unit: unit.to_owned(),
                key: spec.name.clone(),
            });
        }
        let whole = RegexBuilder::new(&format!("^(?:{})$", spec.pattern))
            .size_limit(PATTERN_SIZE_LIMIT_BYTES)
            .build()
            .map_err(|e| SpecError::BadPattern {
                unit: unit.to_owned(),
                key: spec.name.clone(),
                pattern: spec.pattern.clone(),
                reason: e.to_string(),
            })?;
        if !whole.is_match(&spec.default_value) {
            return Err(SpecError::BadDefault {
                unit: unit.to_owned(),
                key: spec.name.clone(),
                value: spec.default_value.clone(),
                pattern: spec.pattern.clone(),
            });
        }
        declared.push(Declared {
            name: spec.name.clone(),
            default_value: spec.default_value.clone(),
            pattern: spec.pattern.clone(),
            whole,
        });
    }
    Ok(UnitParams {
        unit: unit.to_owned(),
        declared,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, default_value: &str, pattern: &str) -> ParamSpec {
        ParamSpec {
            name: name.into(),
            description: String::new(),
            default_value: default_value.into(),
            pattern: pattern.into(),
        }
    }

    #[test]
    fn patterns_match_the_whole_value_like_java_matches() {
        // oVirt's ScaleDown pattern has no leading `^`: Java's matches()
        // still anchors it, and so must we.
        let specs = [spec("ScaleDown", "1", "(100|[1-9]|[1-9][0-9])$")];
        let table = ParamTable::new([("HaReservation", &specs[..])], ParamValues::new())
            .expect("valid declaration");
        let bad = ParamValues::from([("ScaleDown".to_owned(), "x5".to_owned())]);
        assert!(matches!(
            table.check(&bad),
            Err(ParamError::BadValue { .. })
        ));
        let good = ParamValues::from([("ScaleDown".to_owned(), "55".to_owned())]);
        assert_eq!(table.check(&good), Ok(()));
    }

    #[test]
    fn a_pattern_with_alternation_is_anchored_as_a_group() {
        // Without the group, `^a|b$` would accept "abc".
        let specs = [spec("K", "a", "a|b")];
        let table =
            ParamTable::new([("U", &specs[..])], ParamValues::new()).expect("valid declaration");
        let bad = ParamValues::from([("K".to_owned(), "abc".to_owned())]);
        assert!(matches!(
            table.check(&bad),
            Err(ParamError::BadValue { .. })
        ));
    }

    #[test]
    fn a_default_that_breaks_its_own_pattern_is_refused() {
        let specs = [spec("K", "abc", "[0-9]+")];
        let err = ParamTable::new([("U", &specs[..])], ParamValues::new()).unwrap_err();
        assert!(matches!(
            err,
            TableError::Spec(SpecError::BadDefault { .. })
        ));
    }
}

//! Typed access to a unit's parameters, so units never hand-parse strings.
//!
//! The host validates every value against the pattern the unit declared and
//! fills in the declared default before it calls the unit. A caller that
//! skipped that step (a test driving a unit natively, say) still gets the
//! declared default here: a value the request lacks is looked up in the
//! unit's own `info()`. So the only errors left are a unit's own mistakes — a
//! name it never declared, or a pattern that lets through text its getter
//! cannot parse — and the getters report them as [`ParamError`] instead of
//! guessing. Units decide what such a mistake means for their answer; the
//! built-in filters reject every candidate, naming the error, so that a
//! misconfigured unit fails closed and visibly.

use std::sync::OnceLock;

use crate::model::{KeyValue, UnitInfo};

/// A parameter could not be read as the type asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamError {
    /// Neither the request nor the unit's declaration has this parameter.
    Missing { name: String },
    /// The value does not parse as the type asked for.
    Invalid {
        name: String,
        value: String,
        expected: &'static str,
    },
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamError::Missing { name } => {
                write!(f, "parameter `{name}` is neither given nor declared")
            }
            ParamError::Invalid {
                name,
                value,
                expected,
            } => write!(f, "parameter `{name}` is {value:?}, not {expected}"),
        }
    }
}

impl std::error::Error for ParamError {}

/// Where declared defaults come from: the unit's `info()`, built at most once
/// per call and only when a value is missing from the request.
pub(crate) struct Defaults {
    info: fn() -> UnitInfo,
    built: OnceLock<UnitInfo>,
}

impl Defaults {
    pub(crate) fn new(info: fn() -> UnitInfo) -> Self {
        Defaults {
            info,
            built: OnceLock::new(),
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.built
            .get_or_init(self.info)
            .param(name)
            .map(|spec| spec.default_value.as_str())
    }
}

/// A unit's parameters for one call.
#[derive(Clone, Copy)]
pub struct Params<'a> {
    given: &'a [KeyValue],
    defaults: &'a Defaults,
}

impl<'a> Params<'a> {
    pub(crate) fn new(given: &'a [KeyValue], defaults: &'a Defaults) -> Self {
        Params { given, defaults }
    }

    /// The raw value: the request's, else the declared default.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.given
            .iter()
            .find(|kv| kv.key == name)
            .map(|kv| kv.value.as_str())
            .or_else(|| self.defaults.get(name))
    }

    /// The value as text.
    pub fn str(&self, name: &str) -> Result<&'a str, ParamError> {
        self.get(name).ok_or_else(|| ParamError::Missing {
            name: name.to_owned(),
        })
    }

    /// The value as a finite number (`NaN` and infinities are refused: no
    /// threshold or ratio means anything with them).
    pub fn f64(&self, name: &str) -> Result<f64, ParamError> {
        self.parse(name, "a finite number", |v| {
            v.trim().parse::<f64>().ok().filter(|x| x.is_finite())
        })
    }

    /// The value as an unsigned 32-bit integer.
    pub fn u32(&self, name: &str) -> Result<u32, ParamError> {
        self.parse(name, "an unsigned 32-bit integer", |v| {
            v.trim().parse().ok()
        })
    }

    /// The value as `true` or `false` (exactly those words, as oVirt's
    /// `^(true|false)$` patterns allow).
    pub fn bool(&self, name: &str) -> Result<bool, ParamError> {
        self.parse(name, "`true` or `false`", |v| match v.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        })
    }

    fn parse<T>(
        &self,
        name: &str,
        expected: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, ParamError> {
        let value = self.str(name)?;
        parse(value).ok_or_else(|| ParamError::Invalid {
            name: name.to_owned(),
            value: value.to_owned(),
            expected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ParamSpec;

    fn info() -> UnitInfo {
        UnitInfo::new("T", "test")
            .with_param(ParamSpec::new("Ratio", "", "1.5", ".*"))
            .with_param(ParamSpec::new("Count", "", "7", ".*"))
            .with_param(ParamSpec::new("On", "", "true", ".*"))
    }

    #[test]
    fn given_values_win_over_defaults() {
        let defaults = Defaults::new(info);
        let given = [KeyValue::new("Ratio", "2.5")];
        let params = Params::new(&given, &defaults);
        assert_eq!(params.f64("Ratio"), Ok(2.5));
        assert_eq!(params.u32("Count"), Ok(7));
        assert_eq!(params.bool("On"), Ok(true));
    }

    #[test]
    fn undeclared_and_unparsable_values_are_errors() {
        let defaults = Defaults::new(info);
        let given = [
            KeyValue::new("Count", "-1"),
            KeyValue::new("Ratio", "NaN"),
            KeyValue::new("On", "yes"),
        ];
        let params = Params::new(&given, &defaults);
        assert_eq!(
            params.str("Nope"),
            Err(ParamError::Missing {
                name: "Nope".into()
            })
        );
        assert!(matches!(
            params.u32("Count"),
            Err(ParamError::Invalid { .. })
        ));
        assert!(matches!(
            params.f64("Ratio"),
            Err(ParamError::Invalid { .. })
        ));
        assert!(matches!(params.bool("On"), Err(ParamError::Invalid { .. })));
    }
}

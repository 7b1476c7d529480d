//! Aggregate metadata as Nova's filters and weighers read it.
//!
//! Two readings, both from `nova/scheduler/filters/utils.py`:
//!
//! * **values of one key** (`aggregate_values_from_key`): the raw values
//!   the host's aggregates set for a key, one per aggregate. The numeric
//!   overrides (`max_io_ops_per_host`, `ram_allocation_ratio`, ...) take
//!   the **minimum** of them (`validate_num_values(..., based_on=min)`); if
//!   any value does not parse (Python's `int()` or `float()`), the
//!   configured value is used instead, as Nova does after its warning.
//! * **all metadata, comma split** (`aggregate_metadata_get_by_host`): for
//!   each key, the union over aggregates of its values split on commas and
//!   stripped. [`split`] is that splitting.
//!
//! In our snapshot the `aggregate-metadata` column holds every aggregate's
//! pairs, a key repeating once per aggregate that sets it.

use sandpiper_guest::collections::HashMap;

use sandpiper_guest::model::Labels;

use crate::python;

/// The values of a comma-separated metadata value, stripped, as Nova's
/// `x.strip() for x in v.split(',')` yields them (empty parts included).
pub fn split(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(python::strip)
}

/// How an override value is parsed: Python's `int()` or `float()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cast {
    Int,
    Float,
}

/// Where a host's effective setting came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Setting {
    /// No aggregate of the host sets the key: the configured value.
    Configured(f64),
    /// No aggregate sets the key, and the host reports its own value (a
    /// compute node's allocation ratio).
    Host(f64),
    /// The smallest value the host's aggregates set.
    Aggregate(f64),
    /// An aggregate value did not parse, so the configured value is used.
    Unparsable { value: f64, text: String },
}

impl Setting {
    /// The value to use.
    pub fn value(&self) -> f64 {
        match self {
            Setting::Configured(v) | Setting::Host(v) | Setting::Aggregate(v) => *v,
            Setting::Unparsable { value, .. } => *value,
        }
    }
}

/// A numeric setting that aggregates may override per host.
pub struct Override<'a> {
    labels: &'a Labels,
    key: Option<u32>,
    cast: Cast,
    /// Parsed value per value-string id (`None`: does not parse).
    parsed: HashMap<u32, Option<f64>>,
}

impl<'a> Override<'a> {
    /// The setting `key` of the `aggregate-metadata` column `labels`.
    pub fn new(labels: &'a Labels, key: &str, cast: Cast) -> Self {
        Override {
            labels,
            key: labels.id(key),
            cast,
            parsed: HashMap::default(),
        }
    }

    /// The setting for host `row`, `configured` being what applies where
    /// no aggregate sets one (returned as is).
    pub fn for_host(&mut self, row: u32, configured: Setting) -> Setting {
        let Some(key) = self.key else {
            return configured;
        };
        let mut min: Option<f64> = None;
        for id in self.labels.values_of(row as usize, key) {
            let cast = self.cast;
            let labels = self.labels;
            let parsed = *self.parsed.entry(id).or_insert_with(|| {
                let text = labels.string(id);
                match cast {
                    Cast::Int => python::int(text),
                    Cast::Float => python::float(text),
                }
            });
            match parsed {
                // Python's `min` keeps the first of equal values and never
                // prefers NaN to a number it has already seen.
                Some(v) => min = Some(min.map_or(v, |m| if v < m { v } else { m })),
                None => {
                    return Setting::Unparsable {
                        value: configured.value(),
                        text: self.labels.string(id).to_owned(),
                    };
                }
            }
        }
        match min {
            Some(v) => Setting::Aggregate(v),
            None => configured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> Labels {
        Labels::from_rows([
            vec![("max_io_ops_per_host", "12"), ("max_io_ops_per_host", "7")],
            vec![("max_io_ops_per_host", "7"), ("max_io_ops_per_host", "x")],
            vec![("other", "1")],
            vec![("max_io_ops_per_host", "1.5")],
        ])
    }

    /// Nova's `test_validate_num_values` and the aggregate filters' tests.
    #[test]
    fn overrides_take_the_minimum_and_fall_back_on_bad_values() {
        let labels = metadata();
        let eight = Setting::Configured(8.0);
        let mut setting = Override::new(&labels, "max_io_ops_per_host", Cast::Int);
        assert_eq!(setting.for_host(0, eight.clone()), Setting::Aggregate(7.0));
        assert!(matches!(
            setting.for_host(1, eight.clone()),
            Setting::Unparsable { value, .. } if value == 8.0
        ));
        assert_eq!(setting.for_host(2, eight.clone()), eight);
        assert!(
            matches!(
                setting.for_host(3, eight.clone()),
                Setting::Unparsable { .. }
            ),
            "int('1.5') fails"
        );
        let mut ratio = Override::new(&labels, "max_io_ops_per_host", Cast::Float);
        assert_eq!(ratio.for_host(3, eight), Setting::Aggregate(1.5));
        let mut absent = Override::new(&labels, "nope", Cast::Float);
        assert_eq!(absent.for_host(0, Setting::Host(2.0)).value(), 2.0);
    }

    #[test]
    fn splits_on_commas_and_strips() {
        assert_eq!(split(" a, b ,,c").collect::<Vec<_>>(), ["a", "b", "", "c"]);
    }
}

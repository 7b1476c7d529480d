//! Nova's `[metrics] weight_setting`: `name=ratio` pairs, comma separated,
//! read by both `MetricsFilter` (which metrics a host must report) and
//! `MetricsWeigher` (how to sum them).
//!
//! Parsed as Nova's `utils.parse_options(..., sep='=', converter=float)`
//! after oslo.config's list splitting: items are split on commas and
//! stripped; each is cut at its first `=`; an item without `=`, with an
//! empty name, or whose ratio Python's `float()` rejects is ignored (Nova
//! logs a warning). The name is kept as written, so `"kernel = 2"` names
//! the metric `"kernel "`, which no host reports.

use crate::python;

/// The usable pairs of a weight setting, in order, and the ignored items.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WeightSetting {
    pub pairs: Vec<(String, f64)>,
    pub ignored: Vec<String>,
}

impl WeightSetting {
    /// Parses `text` (`"cpu.idle=1, cpu.kernel=-2.5"`).
    pub fn parse(text: &str) -> Self {
        let mut setting = WeightSetting::default();
        let text = python::strip(text);
        let text = text.strip_suffix(',').unwrap_or(text);
        if text.is_empty() {
            return setting;
        }
        for item in text.split(',').map(python::strip) {
            let parsed = item
                .split_once('=')
                .and_then(|(name, ratio)| Some((name, python::float(ratio)?)))
                .filter(|(name, _)| !name.is_empty());
            match parsed {
                Some((name, ratio)) => setting.pairs.push((name.to_owned(), ratio)),
                None => setting.ignored.push(item.to_owned()),
            }
        }
        setting
    }

    /// The metric names, each once, in first-seen order.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for (name, _) in &self.pairs {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nova's `test_parse_setting` and `test_multiple_resource_*`.
    #[test]
    fn parses_as_nova_does() {
        let parse = |text: &str| WeightSetting::parse(text).pairs;
        let own = |pairs: &[(&str, f64)]| -> Vec<(String, f64)> {
            pairs.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect()
        };
        assert_eq!(parse("idle=1"), own(&[("idle", 1.0)]));
        assert_eq!(
            parse("idle=1, kernel=-2.1"),
            own(&[("idle", 1.0), ("kernel", -2.1)])
        );
        assert_eq!(parse("idle=a1, kernel=-2.1"), own(&[("kernel", -2.1)]));
        assert_eq!(parse("idle, kernel=-2.1"), own(&[("kernel", -2.1)]));
        assert_eq!(parse("=5, kernel=-2.1"), own(&[("kernel", -2.1)]));
        assert_eq!(
            parse("idle=0.0001, kernel = 2.0t"),
            own(&[("idle", 0.0001)])
        );
        assert_eq!(
            parse("idle=-2, idle=1"),
            own(&[("idle", -2.0), ("idle", 1.0)])
        );
        assert_eq!(parse(""), own(&[]));
        assert_eq!(parse("a=1,"), own(&[("a", 1.0)]));
        assert_eq!(WeightSetting::parse("a=1, b=2, a=3").names(), ["a", "b"]);
    }
}

//! `MetricsWeigher`: weighs hosts by a weighted sum of their metrics.
//!
//! Behaviour from Nova's `nova/scheduler/weights/metrics.py` (reference
//! notes §1.2): the raw weight is `Σ value × ratio` over the `name=ratio`
//! pairs of `metrics_weight_setting` (Nova's `[metrics] weight_setting`,
//! parsed as Nova does: see `sandpiper_nova_ops::weight_setting`). Higher
//! is better, no `minval`; Nova's `[metrics] weight_multiplier` (default
//! 1.0) is the policy factor, its sign the choice of ratios' signs.
//!
//! A host that does not report a weighed metric (with a non-zero ratio)
//! weighs `metrics_weight_of_unavailable` (default -10000.0), which puts it
//! last, as Nova does when `[metrics] required` is false.
//!
//! Data: the host's named metrics.
//!
//! Where we differ from Nova: with `metrics_required` true (Nova's
//! default) Nova raises and fails the whole request when a host lacks a
//! metric; a score unit cannot fail a request, so the host weighs
//! `metrics_weight_of_unavailable` there too. Put `MetricsFilter` in front,
//! as Nova's documentation advises, to drop such hosts instead. Nova also
//! skips the penalty when its multiplier is 0; our factor is not known to
//! the unit, and a factor of 0 disables the unit anyway.

use std::sync::Arc;

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::params::METRICS_WEIGHT_SETTING;
use sandpiper_nova_ops::weighers;
use sandpiper_nova_ops::weight_setting::WeightSetting;

/// Parameter: the weight of a host missing a weighed metric.
pub const WEIGHT_OF_UNAVAILABLE: &str = "metrics_weight_of_unavailable";
/// Parameter: Nova's `[metrics] required` (see the module doc).
pub const REQUIRED: &str = "metrics_required";

/// The `MetricsWeigher` score.
pub struct MetricsWeigher;

impl Unit for MetricsWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "MetricsWeigher",
            "Weighs hosts by the sum of their metrics times the ratios in \
             metrics_weight_setting; a host missing one weighs metrics_weight_of_unavailable \
             (Nova's MetricsWeigher).",
        )
        .with_score_order(ScoreOrder::HigherIsBetter)
        .with_param(METRICS_WEIGHT_SETTING.spec())
        .with_param(ParamSpec::new(
            WEIGHT_OF_UNAVAILABLE,
            "Weight of a host that does not report a weighed metric (Nova's [metrics] \
             weight_of_unavailable).",
            "-10000.0",
            "^-?[0-9]+(\\.[0-9]+)?$",
        ))
        .with_param(ParamSpec::new(
            REQUIRED,
            "Nova's [metrics] required; here a missing metric weighs \
             metrics_weight_of_unavailable either way (use MetricsFilter to drop such hosts).",
            "true",
            "^(true|false)$",
        ))
        .per_host()
    }
}

impl Score for MetricsWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let params = cx.params();
        let (Ok(setting), Ok(unavailable)) = (
            params.str(METRICS_WEIGHT_SETTING.name),
            params.f64(WEIGHT_OF_UNAVAILABLE),
        ) else {
            // A broken parameter leaves every host equal: no say.
            return Scores::new(vec![0.0; candidates.len()]);
        };
        let setting = WeightSetting::parse(setting);
        let hosts = cx.hosts();
        let columns: Vec<(Arc<Vec<f64>>, f64)> = setting
            .pairs
            .iter()
            .map(|(name, ratio)| (hosts.named_metric(name), *ratio))
            .collect();
        let values = candidates
            .iter()
            .map(|&host| {
                let row = host as usize;
                let mut sum = 0.0;
                for (column, ratio) in &columns {
                    match column.get(row).copied().filter(|v| !v.is_nan()) {
                        Some(value) => sum += value * ratio,
                        None if *ratio != 0.0 => return unavailable,
                        None => {}
                    }
                }
                sum
            })
            .collect();
        weighers::scores(values, None, false)
    }
}

sandpiper_guest::export_unit!(MetricsWeigher: score);

//! `MetricsFilter`: rejects hosts that do not report every metric the
//! metrics weigher weighs.
//!
//! Behaviour from Nova's `nova/scheduler/filters/metrics_filter.py`
//! (reference notes §1.1): the metric names of `[metrics] weight_setting`
//! must all be reported by the host, so that `MetricsWeigher` never meets
//! a missing one. An empty setting passes every host.
//!
//! Data: the `metrics_weight_setting` parameter (`name=ratio, ...`, parsed
//! as Nova parses it, see `sandpiper_nova_ops::weight_setting`; shared by
//! name with `MetricsWeigher`) and the host's named metrics (absent where a
//! host does not report one).

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::params::METRICS_WEIGHT_SETTING;
use sandpiper_nova_ops::weight_setting::WeightSetting;

/// The `MetricsFilter` filter.
pub struct MetricsFilter;

impl Unit for MetricsFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "MetricsFilter",
            "Rejects hosts that do not report every metric named in metrics_weight_setting \
             (Nova's MetricsFilter).",
        )
        .with_param(METRICS_WEIGHT_SETTING.spec())
        .per_host()
    }
}

impl Filter for MetricsFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let setting = match cx.params().str(METRICS_WEIGHT_SETTING.name) {
            Ok(text) => WeightSetting::parse(text),
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let hosts = cx.hosts();
        for name in setting.names() {
            let column = hosts.named_metric(name);
            let reason = rejections.reason(format!("does not report metric `{name}`"));
            for &host in candidates {
                let reported = column.get(host as usize).is_some_and(|v| !v.is_nan());
                if !reported {
                    rejections.reject_for(host, reason);
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(MetricsFilter: filter);

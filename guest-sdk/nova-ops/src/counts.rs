//! Nova's per-host count limits: `IoOpsFilter`, `NumInstancesFilter` and
//! their `Aggregate*` variants, written once for the four units.
//!
//! A host passes while its count is strictly below the maximum (Nova:
//! `num_io_ops < max_io_ops_per_host`, `num_instances <
//! max_instances_per_host`). The maximum is the unit's parameter; the
//! aggregate variants let the host's aggregates override it with metadata
//! of the same key, the smallest value winning, the parameter applying when
//! a value is not an integer (Python's `int()`: `"1.5"` is not one), as
//! `nova/scheduler/filters/{io_ops,num_instances}_filter.py` do. Columns:
//! `io-ops` and `vm-count`, pending placements included.

use sandpiper_guest::prelude::*;

use crate::aggregates::{Cast, Override, Setting};
use crate::params::{MAX_INSTANCES_PER_HOST, MAX_IO_OPS_PER_HOST, Param};

/// Which count a filter limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// Instances building, resizing or migrating (`io-ops`).
    IoOps,
    /// Instances on the host (`vm-count`).
    Instances,
}

impl Count {
    /// The maximum's parameter (and aggregate metadata key).
    pub fn param(self) -> Param {
        match self {
            Count::IoOps => MAX_IO_OPS_PER_HOST,
            Count::Instances => MAX_INSTANCES_PER_HOST,
        }
    }

    fn column(self) -> HostMetric {
        match self {
            Count::IoOps => HostMetric::IoOps,
            Count::Instances => HostMetric::VmCount,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Count::IoOps => "I/O operations",
            Count::Instances => "instances",
        }
    }
}

/// Nova's `passes = count < max`: false for missing data (NaN) too.
fn below(count: f64, max: f64) -> bool {
    count < max
}

/// Runs the limit `count` over `candidates`; with `per_aggregate` the
/// host's aggregates may lower or raise the maximum.
#[inline(always)]
pub fn filter(
    cx: &Context<'_>,
    candidates: &[u32],
    count: Count,
    per_aggregate: bool,
) -> Vec<Rejection> {
    let mut rejections = Rejections::new();
    let param = count.param();
    let configured = match cx.params().f64(param.name) {
        Ok(max) => max,
        Err(error) => {
            rejections.reject_all(candidates, error.to_string());
            return rejections.into_vec();
        }
    };
    let hosts = cx.hosts();
    let counts = hosts.metric(count.column());
    let mut overrides = per_aggregate.then(|| {
        Override::new(
            hosts.labels(HostLabels::AggregateMetadata),
            param.name,
            Cast::Int,
        )
    });
    let mut reasons: Vec<(Setting, Reason)> = Vec::new();
    for &host in candidates {
        let Some(&n) = counts.get(host as usize) else {
            continue;
        };
        // The maximum as a number; the `Setting` only for a rejected host,
        // or where aggregates may override it (as in `capacity::filter`).
        let (max, overridden) = match overrides.as_mut() {
            None => (configured, None),
            Some(overrides) => {
                let setting = overrides.for_host(host, Setting::Configured(configured));
                (setting.value(), Some(setting))
            }
        };
        if !below(n, max) {
            let setting = overridden.unwrap_or(Setting::Configured(configured));
            // One reason per distinct maximum and source, built once.
            let index = match reasons.iter().position(|(s, _)| *s == setting) {
                Some(index) => index,
                None => {
                    let source = match &setting {
                        Setting::Configured(_) | Setting::Host(_) => String::new(),
                        Setting::Aggregate(_) => " (set by an aggregate)".to_owned(),
                        Setting::Unparsable { text, .. } => {
                            format!(" (aggregate value {text:?} is not an integer)")
                        }
                    };
                    let text = format!(
                        "has {max} or more {}: {} is {max}{source}",
                        count.noun(),
                        param.name
                    );
                    reasons.push((setting, rejections.reason(text)));
                    reasons.len() - 1
                }
            };
            rejections.reject_for(host, reasons[index].1);
        }
    }
    rejections.into_vec()
}

//! `NumInstancesWeigher`: prefers hosts with fewer instances (Nova's
//! NumInstancesWeigher with a negative multiplier); `reverse` packs instead.
//!
//! Behaviour from Nova's `nova/scheduler/weights/num_instances.py` (reference
//! notes §1.2): the raw weight is the host's instance count (`vm-count`,
//! pending placements included). Scores are the raw weights, as
//! `sandpiper_nova_ops::weighers` explains; the pipeline's normalised mode maps
//! them onto [0, 1] as Nova's `normalize` does.
//!
//! Mapping: Nova's default `num_instances_weight_multiplier` is 0.0 (off); its
//! documented use is a negative multiplier to spread, which this unit is
//! (lower-is-better); a positive multiplier (pack) is `reverse = true`. Nova
//! sets no `minval`: the range is the candidates' own.
//!
//! Not carried over: Nova's per-aggregate override of the multiplier.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::params::REVERSE;
use sandpiper_nova_ops::weighers;

/// Nova's `minval` for this weigher.
const MINVAL: Option<f64> = None;

/// The `NumInstancesWeigher` score.
pub struct NumInstancesWeigher;

impl Unit for NumInstancesWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "NumInstancesWeigher",
            "Prefers hosts with fewer instances (Nova's NumInstancesWeigher with a negative \
             multiplier); `reverse` packs instead.",
        )
        .with_score_order(ScoreOrder::LowerIsBetter)
        .with_param(REVERSE.spec())
        .per_host()
    }
}

impl Score for NumInstancesWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let count = cx.hosts().metric(HostMetric::VmCount);
        weighers::by_host(cx, candidates, MINVAL, |row| {
            count.get(row).copied().unwrap_or(f64::NAN)
        })
    }
}

sandpiper_guest::export_unit!(NumInstancesWeigher: score);

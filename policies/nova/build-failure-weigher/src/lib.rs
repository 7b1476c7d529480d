//! `BuildFailureWeigher`: prefers hosts with fewer recent failed builds (Nova's
//! BuildFailureWeigher, whose multiplier is negated).
//!
//! Behaviour from Nova's `nova/scheduler/weights/compute.py` (reference notes
//! §1.2): the raw weight is the host's recent failed builds (`build-failures`,
//! Nova's `failed_builds`). Scores are the raw weights, as
//! `sandpiper_nova_ops::weighers` explains; the pipeline's normalised mode maps
//! them onto [0, 1] as Nova's `normalize` does.
//!
//! Mapping: Nova negates `build_failure_weight_multiplier` (default 1000000.0),
//! so the unit is lower-is-better and the policy factor is the multiplier
//! (1000000 in `nova_default`: one failure outweighs every other weigher, as in
//! Nova). Nova sets no `minval`: the range is the candidates' own.
//!
//! Not carried over: Nova's per-aggregate override of the multiplier.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::weighers;

/// Nova's `minval` for this weigher.
const MINVAL: Option<f64> = None;

/// The `BuildFailureWeigher` score.
pub struct BuildFailureWeigher;

impl Unit for BuildFailureWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "BuildFailureWeigher",
            "Prefers hosts with fewer recent failed builds (Nova's BuildFailureWeigher, whose \
             multiplier is negated).",
        )
        .with_score_order(ScoreOrder::LowerIsBetter)
        .per_host()
    }
}

impl Score for BuildFailureWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let failures = cx.hosts().metric(HostMetric::BuildFailures);
        let values = candidates
            .iter()
            .map(|&host| failures.get(host as usize).copied().unwrap_or(f64::NAN))
            .collect();
        weighers::scores(values, MINVAL, false)
    }
}

sandpiper_guest::export_unit!(BuildFailureWeigher: score);

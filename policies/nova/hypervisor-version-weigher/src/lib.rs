//! `HypervisorVersionWeigher`: prefers hosts with newer hypervisors (Nova's
//! HypervisorVersionWeigher); `reverse` prefers older ones.
//!
//! Behaviour from Nova's `nova/scheduler/weights/hypervisor_version.py`
//! (reference notes §1.2): the raw weight is the host's hypervisor version
//! (`hypervisor-version`, Nova's integer form; 0 when unknown). Scores are the
//! raw weights, as `sandpiper_nova_ops::weighers` explains; the pipeline's
//! normalised mode maps them onto [0, 1] as Nova's `normalize` does.
//!
//! Mapping: Nova's `hypervisor_version_weight_multiplier` (default 1.0) is the
//! policy factor; a negative multiplier is `reverse = true`. Nova sets no
//! `minval`: the range is the candidates' own.
//!
//! Not carried over: Nova's per-aggregate override of the multiplier.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::params::REVERSE;
use sandpiper_nova_ops::weighers;

/// Nova's `minval` for this weigher.
const MINVAL: Option<f64> = None;

/// The `HypervisorVersionWeigher` score.
pub struct HypervisorVersionWeigher;

impl Unit for HypervisorVersionWeigher {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "HypervisorVersionWeigher",
            "Prefers hosts with newer hypervisors (Nova's HypervisorVersionWeigher); \
             `reverse` prefers older ones.",
        )
        .with_score_order(ScoreOrder::HigherIsBetter)
        .with_param(REVERSE.spec())
        .per_host()
    }
}

impl Score for HypervisorVersionWeigher {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let versions = cx.hosts().metric(HostMetric::HypervisorVersion);
        weighers::by_host(cx, candidates, MINVAL, |row| {
            versions.get(row).copied().unwrap_or(0.0)
        })
    }
}

sandpiper_guest::export_unit!(HypervisorVersionWeigher: score);
